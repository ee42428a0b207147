"""The Kueue per-queue section and the spill timeline section of report.html, and their
side-by-side forms in ``report compare``: present exactly when the run wrote their files,
numbers taken from those files, byte-identical renders, damaged files named."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeberth.report.compare import compare_report
from kubeberth.report.html import Figure, Paragraph, Section, Table
from kubeberth.report.queues import TITLE as QUEUES
from kubeberth.report.queues import queue_section, queues_compare
from kubeberth.report.runs import load_run
from kubeberth.report.spill_timeline import TITLE as SPILL
from kubeberth.report.spill_timeline import spill_compare, spill_section

from .helpers import figures, invoke, section_titles


def tables(section: Section) -> list[Table]:
    return [b for b in section.blocks if isinstance(b, Table)]


def by_caption(section: Section, caption: str) -> Table:
    return next(t for t in tables(section) if t.caption.startswith(caption))


def test_sections_are_left_out_of_runs_without_kueue_or_spill(run_dir: Path) -> None:
    html = (run_dir / "report.html").read_text()
    assert QUEUES not in section_titles(html) and SPILL not in section_titles(html)
    run = load_run(run_dir)
    assert queue_section(run) is None and spill_section(run) is None
    assert queues_compare([run, run]) is None and spill_compare([run, run]) is None


def test_simulate_writes_both_sections_into_report_html(kueue_spill_dir: Path) -> None:
    html = (kueue_spill_dir / "report.html").read_text()
    titles = section_titles(html)
    assert titles[-2:] == [QUEUES, SPILL]
    # Each section has its own figure, after the eight built-in sections' figures.
    svgs = figures(html)
    assert any("dominant share" in s for s in svgs)
    assert any("moving average" in s and "threshold" in s for s in svgs)


def test_queue_table_matches_queues_csv(kueue_spill_dir: Path) -> None:
    section = queue_section(load_run(kueue_spill_dir))
    assert section is not None and isinstance(section.blocks[0], Figure)
    table = by_caption(section, "queues.csv")
    with (kueue_spill_dir / "queues.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(table.rows) == len(rows)
    shown = {(r[0], r[1]): r for r in table.rows}
    for r in rows:
        scope = {"clusterQueue": "ClusterQueue", "localQueue": "LocalQueue"}.get(
            r["scope"], r["scope"])
        row = shown[(scope, r["name"])]
        assert row[2:6] == [int(r[c]) for c in ("workloads", "admitted", "pending",
                                                 "preempted")]
        assert row[6] == pytest.approx(float(r["borrowed_gpu_hours"]), abs=1e-3)
    assert shown[("ClusterQueue", "inference-vk")][2:4] == [18, 18]
    assert shown[("ClusterQueue", "low-priority")][6] == 8
    assert shown[("LocalQueue", "serving/inference-vk")][2:4] == [18, 18]
    assert shown[("LocalQueue", "data/low-priority")][6] == 8
    assert shown[("priority", "1000")][2] == 18
    # No preemption in this run: no reason table, and the page says so.
    assert [t.caption for t in tables(section)] == [table.caption]
    text = " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))
    assert "No workload was preempted" in text and "8 GPU-hours borrowed" in text


def _preemption_run(tmp_path: Path) -> Path:
    """Two borrowing pods reclaimed by the owner's queue: two InCohortReclamation victims."""
    def cq(name: str, gpu: int, reclaim: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {"namespaceSelector": {}, "cohort": "all",
                         "preemption": {"reclaimWithinCohort": reclaim},
                         "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"],
                                             "flavors": [{"name": "f", "resources": [
                                                 {"name": "cpu", "nominalQuota": str(4 * gpu)},
                                                 {"name": "nvidia.com/gpu",
                                                  "nominalQuota": str(gpu)}]}]}]}}

    def pod(name: str, gpu: int, at: int, run: int, queue: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": queue},
                             "annotations": {"kubeberth.io/arrival-seconds": str(at),
                                             "kubeberth.io/duration-seconds": str(run)}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {
                    "cpu": "1", "nvidia.com/gpu": str(gpu)}}}]}}

    docs = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
             "metadata": {"name": "f"}},
            cq("owner", 4, "Any"), cq("borrower", 0, "Never"),
            *({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": q, "namespace": "default"},
               "spec": {"clusterQueue": c}} for q, c in (("qa", "owner"), ("qb", "borrower"))),
            pod("b-1", 2, 0, 1000, "qb"), pod("b-2", 2, 0, 1000, "qb"),
            pod("a-1", 4, 100, 500, "qa")]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4",
                                       "pods": "110"}}}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(node))
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump_all(docs))
    out = tmp_path / "out"
    code, stdout, stderr = invoke("simulate", "--cluster", str(tmp_path / "cluster.yaml"),
                                  "-w", str(tmp_path / "workload.yaml"), "-o", str(out), "-q")
    assert code == 0, stdout + stderr
    return out


def test_preemptions_by_reason_come_from_summary_json(tmp_path: Path) -> None:
    out = _preemption_run(tmp_path)
    section = queue_section(load_run(out))
    assert section is not None
    reasons = by_caption(section, "preemptions by reason")
    assert reasons.header == ("ClusterQueue (victims)", "InCohortReclamation")
    assert [list(r) for r in reasons.rows] == [["borrower", 2]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["admission"]["clusterQueues"]["borrower"]["preemptionReasons"] == {
        "InCohortReclamation": 2}
    html = (out / "report.html").read_text()
    assert QUEUES in section_titles(html) and SPILL not in section_titles(html)


def test_spill_section_matches_spill_files(kueue_spill_dir: Path) -> None:
    section = spill_section(load_run(kueue_spill_dir))
    assert section is not None and isinstance(section.blocks[0], Figure)
    summary = json.loads((kueue_spill_dir / "summary.json").read_text())["spill"]
    facts = {r[0]: r[1] for r in tables(section)[0].rows}
    assert facts["pods spilled to the VK node"] == summary["podsSpilled"] == 4
    assert facts["spill GPU-hours"] == summary["gpuHours"]
    assert facts["spill cost"] == summary["cost"]
    assert facts["taint flips"] == 4
    assert facts["controller threshold"] == "4.0"
    periods = [list(r) for r in by_caption(section, "taint on/off periods").rows]
    assert periods == [[0.0, 300.0, "off", 300.0], [300.0, 990.0, "on", 690.0],
                       [990.0, 5280.0, "off", 4290.0], [5280.0, 6030.0, "on", 750.0],
                       [6030.0, 9000.0, "off", 2970.0]]
    on = sum(r[3] for r in periods if r[2] == "on")
    assert on == summary["secondsTainted"]
    text = " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))
    assert "4 evictions from the VK node, 0 refused" in text


def test_render_is_byte_identical_and_equals_simulate(kueue_spill_dir: Path,
                                                      tmp_path: Path) -> None:
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    for out in (first, second):
        code, stdout, stderr = invoke("report", "render", str(kueue_spill_dir), "-o", str(out))
        assert code == 0, stdout + stderr
    assert first.read_bytes() == second.read_bytes() == \
        (kueue_spill_dir / "report.html").read_bytes()


def test_compare_puts_queues_and_spill_side_by_side(kueue_spill_dir: Path,
                                                    run_dir: Path) -> None:
    runs = [load_run(kueue_spill_dir), load_run(run_dir)]
    page = compare_report(runs)
    titles = [s.title for s in page.sections]
    assert titles[-2:] == [QUEUES, SPILL]
    queues = page.sections[-2]
    table = next(t for t in tables(queues) if t.header[0] == "queue")
    assert table.header == ("queue", "metric", str(kueue_spill_dir), str(run_dir))
    row = next(r for r in table.rows if r[0] == "ClusterQueue inference-vk"
               and r[1] == "admitted / workloads")
    assert list(row[2:]) == ["18 / 18", ""]
    assert any(isinstance(b, Paragraph) and str(run_dir) in b.text for b in queues.blocks)
    spill = page.sections[-1]
    facts = {r[0]: list(r[1:]) for r in tables(spill)[0].rows}
    assert facts["pods spilled to the VK node"] == [4, ""]


def test_compare_command_writes_the_sections(kueue_spill_dir: Path, run_dir: Path,
                                             tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    code, stdout, stderr = invoke("report", "compare", str(kueue_spill_dir), str(run_dir),
                                  "-o", str(out))
    assert code == 0, stdout + stderr
    assert section_titles(out.read_text())[-2:] == [QUEUES, SPILL]


def _damaged(src: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(src, copy)
    return copy


def test_bad_flip_in_summary_names_the_field(kueue_spill_dir: Path, tmp_path: Path) -> None:
    folder = _damaged(kueue_spill_dir, tmp_path)
    data = json.loads((folder / "summary.json").read_text())
    data["spill"]["flips"][1]["taint"] = "sideways"
    (folder / "summary.json").write_text(json.dumps(data))
    code, stdout, stderr = invoke("report", "render", str(folder), "-o", str(tmp_path / "x"))
    text = " ".join((stdout + stderr).split())
    assert code == 2 and "Traceback" not in text
    assert "spill.flips.1.taint" in text and '"added" or "removed"' in text


def test_bad_queue_cell_names_line_and_column(kueue_spill_dir: Path, tmp_path: Path) -> None:
    folder = _damaged(kueue_spill_dir, tmp_path)
    lines = (folder / "queues.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[3] = "many"  # admitted
    lines[1] = ",".join(cells)
    (folder / "queues.csv").write_text("\n".join(lines) + "\n")
    code, stdout, stderr = invoke("report", "render", str(folder), "-o", str(tmp_path / "x"))
    text = " ".join((stdout + stderr).split())
    assert code == 2 and "Traceback" not in text
    assert f"{folder / 'queues.csv'}:2" in text and "'many' is not a number" in text


def test_missing_admission_summary_is_named(kueue_spill_dir: Path, tmp_path: Path) -> None:
    folder = _damaged(kueue_spill_dir, tmp_path)
    data = json.loads((folder / "summary.json").read_text())
    del data["admission"]["cycles"]
    (folder / "summary.json").write_text(json.dumps(data))
    code, stdout, stderr = invoke("report", "render", str(folder), "-o", str(tmp_path / "x"))
    text = " ".join((stdout + stderr).split())
    assert code == 2 and "admission.cycles" in text and "is missing" in text
