"""The run report that `kubeberth simulate` writes: every section, its content, determinism,
and re-rendering from the files alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubeberth.report.output import REPORT_FILE

from .helpers import figures, invoke, section_titles, simulate

SECTIONS = [
    "Run",
    "Summary",
    "CPU, memory and GPU allocation over time",
    "Pending pods over time",
    "Scheduling attempts by result",
    "Pod wait (creation to bind)",
    "Preemptions and evictions over time",
    "Pending reasons",
]


def test_simulate_writes_report_with_every_section(run_dir: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    assert section_titles(html) == SECTIONS
    # a table of contents links every section
    anchors = re.findall(r'<section id="([^"]+)">', html)
    assert len(anchors) == len(SECTIONS) == len(set(anchors))
    for a in anchors:
        assert f'href="#{a}"' in html


def test_report_is_self_contained(run_dir: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    assert html.startswith("<!DOCTYPE html>")
    for needle in ("<script", "<link", 'src="http', "url(http", "@import"):
        assert needle not in html
    svgs = figures(html)
    assert len(svgs) == 5  # allocation, pods, attempts, waits, preemptions
    for svg in svgs:
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert "<dc:date>" not in svg  # no render timestamp
        assert "<image" not in svg or "data:" in svg


def test_run_section_names_inputs_and_seed(run_dir: Path, inputs: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    run = html[html.index('<section id="run">'):html.index('<section id="summary">')]
    assert "<td>seed</td><td>0</td>" in run
    assert "<td>nodes</td><td>1</td>" in run
    assert "workload on cluster" in run
    assert "<td>config</td><td>default</td>" in run
    assert "simulated time (s)</td><td>160</td>" in run


def test_summary_table_matches_summary_json(run_dir: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    data = json.loads((run_dir / "summary.json").read_text())
    summary = html[html.index('<section id="summary">'):]
    summary = summary[:summary.index("</section>")]
    assert f"<td>pods</td><td>{data['pods']['total']}</td>" in summary
    assert "<td>never scheduled</td><td>1</td>" in summary
    assert "<td>preemptions</td><td>1</td>" in summary
    assert "<td>wait p99 (s)</td><td>59.400</td>" in summary
    # attempts in kube-scheduler's label order, even though summary.json sorts its keys
    order = [summary.index(f"attempts {r}") for r in ("scheduled", "unschedulable", "error")]
    assert order == sorted(order)


def test_figures_show_the_series(run_dir: Path) -> None:
    alloc, pods, attempts, waits, disruptions = figures((run_dir / REPORT_FILE).read_text())
    for label in ("cpu", "memory", "GPU", "allocated (%)"):
        assert label in alloc
    for label in ("running pods", "pending pods", "activeQ", "backoffQ", "unschedulable"):
        assert label in pods
    for label in ("attempts per sample interval", "scheduled", "unschedulable", "error"):
        assert label in attempts
    # the percentiles from summary.json are marked on the histogram
    for label in ("p50 30 s", "p95 57 s", "p99 59.4 s", "wait (seconds)"):
        assert label in waits
    assert "preemptions" in disruptions and "cumulative" in disruptions


def test_wait_table_and_preempted_pods(run_dir: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    assert "<td>p95</td><td class=\"num\">57.000</td>" in html
    assert "1 pods preempted at least once" in html
    assert "<td>default/low</td><td class=\"num\">1</td>" in html


def test_pending_reasons_grouped(run_dir: Path) -> None:
    html = (run_dir / REPORT_FILE).read_text()
    reasons = html[html.index('<section id="pending-reasons">'):]
    assert "1 pods were never scheduled" in reasons
    assert "0/1 nodes are available: 1 Insufficient cpu." in reasons
    assert "<td>default/huge</td>" in reasons


def test_same_inputs_give_byte_identical_report(inputs: Path, run_dir: Path,
                                                tmp_path: Path) -> None:
    again = simulate(inputs, tmp_path / "elsewhere")
    assert (again / REPORT_FILE).read_bytes() == (run_dir / REPORT_FILE).read_bytes()


def test_another_seed_and_latency_change_the_report(run_dir: Path, other_run_dir: Path) -> None:
    assert (run_dir / REPORT_FILE).read_bytes() != (other_run_dir / REPORT_FILE).read_bytes()


def test_render_from_disk_reproduces_simulate_report(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copied"
    shutil.copytree(run_dir, copy)
    (copy / REPORT_FILE).unlink()
    code, out, err = invoke("report", "render", str(copy))
    assert code == 0, out + err
    assert f"wrote {copy / REPORT_FILE}" in out
    assert (copy / REPORT_FILE).read_bytes() == (run_dir / REPORT_FILE).read_bytes()


def test_render_to_another_file(run_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    code, _, _ = invoke("report", "render", str(run_dir), "-o", str(target))
    assert code == 0
    assert target.read_bytes() == (run_dir / REPORT_FILE).read_bytes()


def test_render_follows_edited_files(run_dir: Path, tmp_path: Path) -> None:
    """The report is built only from the files: change one and the page follows."""
    copy = tmp_path / "edited"
    shutil.copytree(run_dir, copy)
    data = json.loads((copy / "summary.json").read_text())
    data["run"]["seed"] = 4242
    data["pendingReasons"]["default/huge"] = "a reason written by hand"
    (copy / "summary.json").write_text(json.dumps(data))
    assert invoke("report", "render", str(copy))[0] == 0
    html = (copy / REPORT_FILE).read_text()
    assert "<td>seed</td><td>4242</td>" in html
    assert "a reason written by hand" in html


def test_simulate_prints_report_path(inputs: Path, tmp_path: Path) -> None:
    code, out, _ = invoke("simulate", "--cluster", str(inputs / "cluster.yaml"), "--workload",
                          str(inputs / "workload.yaml"), "-o", str(tmp_path / "o"), "-q")
    assert code == 0
    assert "report.html" in out
    assert (tmp_path / "o" / REPORT_FILE).is_file()


def test_report_without_a_command_shows_help() -> None:
    _, out, _ = invoke("report")
    assert "render" in out and "compare" in out


def test_render_relative_folder(run_dir: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(run_dir, tmp_path / "rel")
    monkeypatch.chdir(tmp_path)
    code, out, _ = invoke("report", "render", "rel", "-o", "page.html")
    assert code == 0 and "wrote page.html" in out
    assert (tmp_path / "page.html").read_bytes() == (run_dir / REPORT_FILE).read_bytes()


def test_simulate_into_a_new_nested_folder(inputs: Path, tmp_path: Path) -> None:
    out = simulate(inputs, tmp_path / "a" / "b" / "c")
    assert section_titles((out / REPORT_FILE).read_text()) == SECTIONS


def test_identical_in_a_fresh_process_with_a_user_matplotlibrc(run_dir: Path,
                                                                 tmp_path: Path) -> None:
    """Another interpreter (another string-hash seed, so other set orders) with a user
    matplotlibrc writes the same bytes as the in-process simulate did."""
    rc = tmp_path / "matplotlibrc"
    rc.write_text("lines.linewidth: 4\nfont.size: 22\naxes.grid: False\n")
    target = tmp_path / "page.html"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "MATPLOTLIBRC": str(rc)}
    subprocess.run([sys.executable, "-m", "kubeberth", "report", "render", str(run_dir),
                    "-o", str(target)], check=True, env=env, capture_output=True)
    assert target.read_bytes() == (run_dir / REPORT_FILE).read_bytes()
