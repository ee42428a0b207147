"""A run folder that is missing, not a run, or damaged: exit 2, one paragraph naming the path
(and the line, column or field), no traceback, no report written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubeberth.api.errors import InputError
from kubeberth.report.runs import load_run

from .helpers import invoke


def damaged(run_dir: Path, tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(run_dir, copy)
    (copy / "report.html").unlink()
    edit(copy)
    return copy


def expect_error(args: list[str], *needles: str) -> None:
    code, out, err = invoke(*args)
    assert code == 2, out + err
    assert "Traceback" not in out + err
    text = " ".join(err.split())  # undo terminal wrapping
    for needle in needles:
        assert needle in text, text


def test_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    expect_error(["report", "render", str(missing)], str(missing), "no such folder",
                 "kubeberth simulate -o")
    assert not missing.exists()


def test_a_file_is_not_a_run_folder(tmp_path: Path) -> None:
    f = tmp_path / "file.txt"
    f.write_text("x")
    expect_error(["report", "render", str(f)], str(f), "not a folder")


def test_empty_folder_names_the_missing_file(tmp_path: Path) -> None:
    expect_error(["report", "render", str(tmp_path)], str(tmp_path), "summary.json is missing")
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize("name", ["timeseries.csv", "pods.csv"])
def test_missing_csv(run_dir: Path, tmp_path: Path, name: str) -> None:
    folder = damaged(run_dir, tmp_path, lambda d: (d / name).unlink())
    expect_error(["report", "render", str(folder)], str(folder), f"{name} is missing")
    assert not (folder / "report.html").exists()


def test_invalid_json_names_the_line(run_dir: Path, tmp_path: Path) -> None:
    folder = damaged(run_dir, tmp_path,
                     lambda d: (d / "summary.json").write_text('{\n  "run": {},\n  oops\n}\n'))
    expect_error(["report", "render", str(folder)], f"{folder / 'summary.json'}:3",
                 "invalid JSON")


def test_json_that_is_not_an_object(run_dir: Path, tmp_path: Path) -> None:
    folder = damaged(run_dir, tmp_path, lambda d: (d / "summary.json").write_text("[1, 2]\n"))
    expect_error(["report", "render", str(folder)], "summary.json", "not a JSON object")


def _edit_summary(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        data = json.loads((d / "summary.json").read_text())
        change(data)
        (d / "summary.json").write_text(json.dumps(data))
    return edit


@pytest.mark.parametrize(("change", "field", "expected"), [
    (lambda d: d.pop("pendingReasons"), "pendingReasons", "a JSON object"),
    (lambda d: d["pods"].pop("total"), "pods.total", "a JSON integer"),
    (lambda d: d.update(simulatedSeconds="long"), "simulatedSeconds", "a JSON integer or number"),
    (lambda d: d["attempts"].update(scheduled=1.5), "attempts.scheduled", "a JSON integer"),
    (lambda d: d["waitSeconds"].update(p99=None), "waitSeconds.p99", "number"),
    (lambda d: d["allocationPct"]["gpu"].pop("peak"), "allocationPct.gpu.peak", "number"),
    (lambda d: d["pendingReasons"].update({"default/huge": 3}), "pendingReasons.default/huge",
     "a JSON string"),
])
def test_summary_fields_checked(run_dir: Path, tmp_path: Path,
                                change: Callable[[dict[str, Any]], None], field: str,
                                expected: str) -> None:
    folder = damaged(run_dir, tmp_path, _edit_summary(change))
    expect_error(["report", "render", str(folder)], "summary.json", f"field {field}", expected)


def test_missing_series_column(run_dir: Path, tmp_path: Path) -> None:
    def edit(d: Path) -> None:
        text = (d / "timeseries.csv").read_text()
        (d / "timeseries.csv").write_text(text.replace("gpu_alloc_pct", "gpu_pct", 1))
    folder = damaged(run_dir, tmp_path, edit)
    expect_error(["report", "render", str(folder)], f"{folder / 'timeseries.csv'}:1",
                 "missing column(s) gpu_alloc_pct")


def test_non_numeric_cell_names_line_and_column(run_dir: Path, tmp_path: Path) -> None:
    def edit(d: Path) -> None:
        lines = (d / "pods.csv").read_text().splitlines()
        cells = lines[2].split(",")
        cells[1] = "soon"  # arrival
        lines[2] = ",".join(cells)
        (d / "pods.csv").write_text("\n".join(lines) + "\n")
    folder = damaged(run_dir, tmp_path, edit)
    expect_error(["report", "render", str(folder)], f"{folder / 'pods.csv'}:3",
                 "field arrival", "'soon' is not a number")


def test_ragged_row(run_dir: Path, tmp_path: Path) -> None:
    def edit(d: Path) -> None:
        with (d / "timeseries.csv").open("a") as fh:
            fh.write("1,2,3\n")
    folder = damaged(run_dir, tmp_path, edit)
    n = len((folder / "timeseries.csv").read_text().splitlines())
    expect_error(["report", "render", str(folder)], f"timeseries.csv:{n}", "3 cells")


def test_empty_csv(run_dir: Path, tmp_path: Path) -> None:
    folder = damaged(run_dir, tmp_path, lambda d: (d / "pods.csv").write_text(""))
    expect_error(["report", "render", str(folder)], "pods.csv", "empty file")


def test_compare_names_the_bad_folder(run_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "policy-b"
    out = tmp_path / "c.html"
    expect_error(["report", "compare", str(run_dir), str(missing), "-o", str(out)],
                 str(missing), "no such folder")
    assert not out.exists()


def test_compare_needs_two_runs(run_dir: Path, tmp_path: Path) -> None:
    expect_error(["report", "compare", str(run_dir), "-o", str(tmp_path / "c.html")],
                 "1 run folder given", "two or more")


def test_compare_refuses_a_folder_twice(run_dir: Path, tmp_path: Path) -> None:
    expect_error(["report", "compare", str(run_dir), str(run_dir), "-o",
                  str(tmp_path / "c.html")], str(run_dir), "given twice")


def test_compare_without_arguments_is_a_usage_error() -> None:
    code, _, _ = invoke("report", "compare")
    assert code == 2


def test_unwritable_output(run_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "r.html"
    expect_error(["report", "render", str(run_dir), "-o", str(target)], str(target),
                 "cannot write")


def test_load_run_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_run(tmp_path / "x")
    assert err.value.source == str(tmp_path / "x")
