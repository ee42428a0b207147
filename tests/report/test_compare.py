"""`kubeberth report compare`: runs side by side, overlaid, deterministic."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .helpers import figures, invoke, section_titles


def compare(tmp_path: Path, *runs: Path) -> str:
    out = tmp_path / "compare.html"
    code, stdout, stderr = invoke("report", "compare", *map(str, runs), "-o", str(out))
    assert code == 0, stdout + stderr
    return out.read_text()


def test_compare_two_runs_has_every_section(run_dir: Path, other_run_dir: Path,
                                            tmp_path: Path) -> None:
    html = compare(tmp_path, run_dir, other_run_dir)
    assert section_titles(html) == [
        "Runs", "Summary", "CPU, memory and GPU allocation over time", "Pending pods over time",
        "Scheduling attempts by result", "Pod wait (creation to bind)",
        "Preemptions and evictions over time", "Pending reasons"]
    assert f"<title>kubeberth: {run_dir} vs {other_run_dir}</title>" in html


def test_compare_tables_have_one_column_per_run(run_dir: Path, other_run_dir: Path,
                                                tmp_path: Path) -> None:
    html = compare(tmp_path, run_dir, other_run_dir)
    header = f"<th>{run_dir}</th><th>{other_run_dir}</th>"
    assert html.count(header) == 5  # runs, summary, attempts, waits, pending reasons
    # the seeds differ and sit side by side
    assert "<tr><td>seed</td><td>0</td><td>7</td></tr>" in html
    # p99 wait: 59.4 s without bind latency, 63.38 s with 2 s of it
    assert '<tr><td>p99</td><td class="num">59.400</td><td class="num">63.380</td></tr>' in html
    assert '<td>scheduled</td><td class="num">3</td><td class="num">3</td>' in html


def test_compare_overlays_runs_in_each_figure(run_dir: Path, other_run_dir: Path,
                                              tmp_path: Path) -> None:
    svgs = figures(compare(tmp_path, run_dir, other_run_dir))
    assert len(svgs) == 5
    for svg in svgs:
        # every figure's legend names both runs (the first axes carries the legend)
        assert str(run_dir) in svg and str(other_run_dir) in svg
    assert "share waiting longer" in svgs[3]


def test_compare_pending_reasons_counts_per_run(run_dir: Path, other_run_dir: Path,
                                                tmp_path: Path) -> None:
    html = compare(tmp_path, run_dir, other_run_dir)
    reasons = html[html.index('<section id="pending-reasons">'):]
    row = re.search(r"<tr><td>0/1 nodes are available: 1 Insufficient cpu\.[^<]*</td>"
                    r'<td class="num">1</td><td class="num">1</td></tr>', reasons)
    assert row is not None


def test_compare_is_deterministic_and_order_matters(run_dir: Path, other_run_dir: Path,
                                                    tmp_path: Path) -> None:
    a = compare(tmp_path, run_dir, other_run_dir)
    b = compare(tmp_path, run_dir, other_run_dir)
    assert a == b
    c = compare(tmp_path, other_run_dir, run_dir)
    assert c != a
    assert c.index(f"<th>{other_run_dir}</th>") < c.index(f"<th>{run_dir}</th>")


def test_compare_three_runs(run_dir: Path, other_run_dir: Path, tmp_path: Path) -> None:
    third = tmp_path / "third"
    shutil.copytree(run_dir, third)
    html = compare(tmp_path, run_dir, other_run_dir, third)
    assert f"<th>{run_dir}</th><th>{other_run_dir}</th><th>{third}</th>" in html


def test_compare_default_output_is_compare_html(run_dir: Path, other_run_dir: Path,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = invoke("report", "compare", str(run_dir), str(other_run_dir))
    assert code == 0
    assert (tmp_path / "compare.html").is_file()
    assert "wrote compare.html" in out
