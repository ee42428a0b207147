"""Reading a run folder back: columns, numbers, summary checks, and agreement with the writer."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from kubeberth.api.errors import InputError
from kubeberth.report.output import summary_rows
from kubeberth.report.runs import load_run, read_columns, read_summary
from kubeberth.report.sections import run_report


def test_columns_text_and_numbers(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("name,value,empty\na,1.5,\nb,-2,\n")
    cols = read_columns(f, required=("name", "value"))
    assert cols.names == ("name", "value", "empty")
    assert len(cols) == 2
    assert "value" in cols and "other" not in cols
    assert cols.text("name") == ["a", "b"]
    assert cols.num("value").tolist() == [1.5, -2.0]
    assert np.isnan(cols.num("empty")).all()
    assert cols.num("value") is cols.num("value")  # converted once


def test_header_only_file_has_no_rows(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a,b\n")
    cols = read_columns(f)
    assert len(cols) == 0 and cols.num("a").size == 0


def test_not_a_number_names_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,2\n3,x\n")
    cols = read_columns(f)
    with pytest.raises(InputError) as err:
        cols.num("b")
    assert (err.value.source, err.value.line, err.value.field) == (str(f), 3, "b")
    assert cols.num("a").tolist() == [1.0, 3.0]


def test_missing_required_columns_listed(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("a\n1\n")
    with pytest.raises(InputError) as err:
        read_columns(f, required=("a", "b", "c"))
    assert "missing column(s) b, c" in str(err.value)
    assert err.value.line == 1


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_bytes(b"a\n\xff\xfe\n")
    with pytest.raises(InputError) as err:
        read_columns(f)
    assert "cannot read" in str(err.value) and str(f) in str(err.value)


def test_summary_booleans_are_not_integers(run_dir: Path, tmp_path: Path) -> None:
    data = json.loads((run_dir / "summary.json").read_text())
    data["pods"]["total"] = True
    f = tmp_path / "summary.json"
    f.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        read_summary(f)
    assert err.value.field == "pods.total"
    assert "is a JSON boolean" in str(err.value)


def test_summary_rows_same_in_memory_and_from_disk(run_dir: Path) -> None:
    """The terminal table (built from the summary in memory) and the HTML (from the sorted-key
    JSON) list the same rows in the same order."""
    on_disk = json.loads((run_dir / "summary.json").read_text())
    in_memory = dict(on_disk)
    in_memory["attempts"] = {"scheduled": 3, "unschedulable": 6, "error": 0}
    in_memory["allocationPct"] = {k: on_disk["allocationPct"][k]
                                  for k in ("cpu", "memory", "gpu")}
    assert summary_rows(in_memory) == summary_rows(on_disk)
    metrics = [m for m, _ in summary_rows(on_disk)]
    assert metrics.index("attempts scheduled") < metrics.index("attempts error")
    assert metrics.index("cpu allocated mean / peak (%)") < \
        metrics.index("gpu allocated mean / peak (%)")


def test_unknown_attempt_results_come_last_sorted() -> None:
    data = {"pods": {"total": 0, "scheduled": 0, "unscheduled": 0, "preemptions": 0},
            "attempts": {"zeta": 1, "scheduled": 2, "alpha": 3}, "waitSeconds": {"count": 0},
            "allocationPct": {}, "simulatedSeconds": 0}
    metrics = [m for m, _ in summary_rows(data)]
    assert metrics[4:7] == ["attempts scheduled", "attempts alpha", "attempts zeta"]


def test_report_ignores_global_matplotlib_settings(run_dir: Path) -> None:
    run = load_run(run_dir)
    before = run_report(run).render()
    with matplotlib.rc_context({"svg.hashsalt": None, "lines.linewidth": 5.0,
                                "axes.grid": False, "font.size": 20.0}):
        assert run_report(load_run(run_dir)).render() == before
    assert run_report(run).render() == before


def test_run_label_is_the_path_as_given(run_dir: Path) -> None:
    assert load_run(run_dir).label == str(run_dir)
