"""Section functions on hand-written run folders, and adding a section the way a feature would."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kubeberth.report.compare import COMPARE_SECTIONS, compare_report
from kubeberth.report.compare import waits as compare_waits
from kubeberth.report.html import Paragraph, Section, Table
from kubeberth.report.output import EVICTION_COLUMNS, EVICTIONS_FILE, PODS_COLUMNS
from kubeberth.report.runs import Run, load_run
from kubeberth.report.sections import (
    RUN_SECTIONS,
    SectionFn,
    disruptions,
    generic_reason,
    pending_reasons,
    run_report,
    time_axis,
    waits,
)
from kubeberth.sim.metrics import SERIES_COLUMNS

from .helpers import figures, section_titles


def summary(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "run": {"workload": "w", "seed": 1, "nodes": 2, "config": "default",
                "kubeberth": "0"},
        "pods": {"total": 2, "scheduled": 0, "unscheduled": 2, "ignored": 0, "preemptions": 0},
        "attempts": {"scheduled": 0, "unschedulable": 4, "error": 0},
        "decisions": 4,
        "waitSeconds": {"count": 0},
        "allocationPct": {r: {"mean": 0.0, "peak": 0.0} for r in ("cpu", "memory", "gpu")},
        "simulatedSeconds": 20.0,
        "unscheduledPods": ["ns/a", "ns/b"],
        "pendingReasons": {},
        "unmodelledPlugins": [],
    }
    data.update(over)
    return data


def write_run(folder: Path, data: dict[str, Any], extra_series: dict[str, list[float]] | None
              = None, pods: list[list[Any]] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(data))
    cols = list(SERIES_COLUMNS) + list(extra_series or {})
    with (folder / "timeseries.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for i in range(3):
            row: list[Any] = [i * 10.0] + [0] * (len(SERIES_COLUMNS) - 1)
            row.extend(v[i] for v in (extra_series or {}).values())
            w.writerow(row)
    with (folder / "pods.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(PODS_COLUMNS)
        w.writerows(pods or [["ns/a", 0.0, "", "", 2, "", "", 0],
                             ["ns/b", 1.0, "", "", 2, "", "", 0]])
    return folder


def test_no_bound_pod(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    section = waits(run)
    assert [b.html() for b in section.blocks] == ["<p>No pod was bound.</p>"]


def test_unscheduled_without_reasons(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    assert "2 pods were never scheduled; no reason was recorded." in \
        pending_reasons(run).blocks[0].html()


def test_every_pod_scheduled(tmp_path: Path) -> None:
    data = summary(pods={"total": 0, "scheduled": 0, "unscheduled": 0, "ignored": 0,
                         "preemptions": 0})
    run = load_run(write_run(tmp_path / "r", data, pods=[]))
    assert pending_reasons(run).blocks[0].html() == "<p>Every pod was scheduled.</p>"


def test_reasons_group_pods_that_differ_only_by_name(tmp_path: Path) -> None:
    data = summary(pendingReasons={
        "ns/a": "PodGroup ns/g rejected: Pod a is unschedulable",
        "ns/b": "PodGroup ns/g rejected: Pod b is unschedulable",
    })
    run = load_run(write_run(tmp_path / "r", data))
    table = pending_reasons(run).blocks[1]
    assert isinstance(table, Table)
    assert list(table.rows) == [("PodGroup ns/g rejected: Pod <pod> is unschedulable", 2,
                                 "ns/a, ns/b")]


@pytest.mark.parametrize(("pod", "reason", "expected"), [
    ("default/a", "Pod a failed; default/a; ns/a; data", "Pod <pod> failed; <pod>; ns/a; data"),
    ("default/w-1", "w-1 and w-10", "<pod> and w-10"),
    ("default/", "unchanged", "unchanged"),
])
def test_generic_reason(pod: str, reason: str, expected: str) -> None:
    assert generic_reason(pod, reason) == expected


def test_an_evictions_column_is_plotted_without_code_changes(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary(), {"evictions": [0, 2, 5]}))
    section = disruptions(run)
    html = "".join(b.html() for b in section.blocks)
    assert "<td>evictions</td><td class=\"num\">5</td>" in html
    (svg,) = figures(html)
    assert "evictions" in svg


def test_descheduler_evictions_are_counted_as_the_summary_counts_them(tmp_path: Path) -> None:
    """evictions.csv (the descheduler's, spill's and Kueue's evictions) feeds the section: its
    totals are summary.json's ``evictions.evicted`` and the refused rest."""
    folder = write_run(tmp_path / "r", summary(evictions={"requested": 3, "evicted": 2}))
    with (folder / EVICTIONS_FILE).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(EVICTION_COLUMNS)
        for t, allowed in ((5.0, 1), (12.0, 0), (25.0, 1)):  # the last after the last sample
            w.writerow([t, "ns/a", "n", "RemovePodsViolatingNodeTaints", "r", allowed, 0 if
                        allowed else 429, "", "", ""])
    html = "".join(b.html() for b in disruptions(load_run(folder)).blocks)
    assert '<td>evictions</td><td class="num">2</td>' in html
    assert '<td>evictions refused</td><td class="num">1</td>' in html
    (svg,) = figures(html)
    assert "evictions" in svg


def test_no_disruption_no_figure(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    html = "".join(b.html() for b in disruptions(run).blocks)
    assert figures(html) == []
    assert "No pod was preempted." in html


def test_time_axis_unit_follows_run_length(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    x, label = time_axis(run)
    assert label == "simulated time (seconds)" and x.tolist() == [0, 10, 20]


def queue_waits(run: Run) -> Section | None:
    """What a Kueue feature's section looks like: it reads its own CSV when present."""
    queues = run.table("feature.csv", required=("queue", "wait_p99"))
    if queues is None:
        return None
    rows = list(zip(queues.text("queue"), queues.num("wait_p99").tolist(), strict=True))
    return Section("Queues", [Table(("queue", "p99 wait (s)"), rows)])


def test_a_feature_adds_a_section(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r", summary())
    (folder / "feature.csv").write_text("queue,wait_p99\ntraining,12.5\ninference,0.25\n")
    html = run_report(load_run(folder), [*RUN_SECTIONS, queue_waits]).render()
    assert section_titles(html)[-1] == "Queues"
    assert '<td>training</td><td class="num">12.500</td>' in html


def test_a_section_returning_none_is_left_out(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    html = run_report(run, [*RUN_SECTIONS, queue_waits]).render()
    assert "Queues" not in html
    assert section_titles(html) == section_titles(run_report(run).render())


def test_compare_takes_sections_too(tmp_path: Path) -> None:
    a = load_run(write_run(tmp_path / "a", summary()))
    b = load_run(write_run(tmp_path / "b", summary(simulatedSeconds=30.0)))

    def note(runs: Any) -> Section:
        return Section("Note", [Paragraph(f"{len(runs)} runs")])

    html = compare_report([a, b], [*COMPARE_SECTIONS, note]).render()
    assert section_titles(html)[-1] == "Note" and "<p>2 runs</p>" in html


def test_run_table_is_cached_and_missing_is_none(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", summary()))
    assert run.table("absent.csv") is None
    (run.folder / "x.csv").write_text("a\n1\n")
    first = run.table("x.csv")
    assert first is not None and first.num("a").tolist() == [1.0]
    assert run.table("x.csv") is first


def test_section_functions_are_listed_once() -> None:
    fns: list[SectionFn] = RUN_SECTIONS
    assert len({f.__name__ for f in fns}) == len(fns)


def test_compare_without_waiting_pods(tmp_path: Path) -> None:
    bound = [["ns/a", 0.0, 0.0, "n", 1, 0.0, "", 0]]
    data = summary(waitSeconds={"count": 1, "mean": 0.0, "p50": 0.0, "p90": 0.0, "p95": 0.0,
                                "p99": 0.0, "max": 0.0})
    a = load_run(write_run(tmp_path / "a", data, pods=bound))
    b = load_run(write_run(tmp_path / "b", summary()))
    section = compare_waits([a, b])
    html = "".join(blk.html() for blk in section.blocks)
    assert "No bound pod waited in any run." in html and figures(html) == []
    assert '<tr><td>count</td><td class="num">1</td><td class="num">0</td></tr>' in html
    assert '<tr><td>max</td><td class="num">0.000</td><td></td></tr>' in html


def test_compare_waits_tail(tmp_path: Path) -> None:
    pods = [["ns/a", 0.0, 0.0, "n", 1, 0.0, "", 0], ["ns/b", 0.0, 30.0, "n", 1, 30.0, "", 0]]
    a = load_run(write_run(tmp_path / "a", summary(), pods=pods))
    b = load_run(write_run(tmp_path / "b", summary()))
    (svg,) = figures("".join(blk.html() for blk in compare_waits([a, b]).blocks))
    assert "share waiting longer" in svg and "wait (seconds)" in svg
    assert str(tmp_path / "a") in svg


def test_per_interval_from_cumulative() -> None:
    from kubeberth.report.sections import per_interval

    assert per_interval(np.array([0.0, 2.0, 2.0, 5.0])).tolist() == [0, 2, 0, 3]
    assert per_interval(np.array([], dtype=np.float64)).size == 0


def test_common_time_axis_uses_the_longest_run(tmp_path: Path) -> None:
    from kubeberth.report.compare import common_time_axis

    short = load_run(write_run(tmp_path / "short", summary()))
    long = write_run(tmp_path / "long", summary())
    lines = (long / "timeseries.csv").read_text().splitlines()
    lines[-1] = "172800" + lines[-1][lines[-1].index(","):]
    (long / "timeseries.csv").write_text("\n".join(lines) + "\n")
    xs, label = common_time_axis([short, load_run(long)])
    assert label == "simulated time (days)"
    assert xs[1].tolist() == [0, 10 / 86400, 2]
    assert xs[0].tolist() == [0, 10 / 86400, 20 / 86400]


def test_run_metadata_rows(tmp_path: Path) -> None:
    from kubeberth.report.sections import run_metadata

    data = summary(unmodelledPlugins=["VolumeBinding", "NodePorts"])
    del data["decisions"]
    table = run_metadata(load_run(write_run(tmp_path / "r", data))).blocks[0]
    assert isinstance(table, Table)
    rows = dict(table.rows)
    assert rows["seed"] == "1" and rows["workload"] == "w"
    assert rows["unmodelled plugins (no effect)"] == "VolumeBinding, NodePorts"
    assert rows["time-series samples"] == "3 (every 10 s)"
    assert "scheduling cycles" not in rows


def test_preempted_pods_listed_most_first(tmp_path: Path) -> None:
    pods = [["ns/a", 0.0, 5.0, "n", 3, 5.0, "", 1], ["ns/b", 0.0, 9.0, "n", 4, 9.0, "", 2],
            ["ns/c", 0.0, 1.0, "n", 1, 1.0, "", 0]]
    run = load_run(write_run(tmp_path / "r", summary(), {}, pods))
    details = disruptions(run).blocks[-1]
    html = details.html()
    assert "2 pods preempted at least once" in html
    assert html.index("ns/b") < html.index("ns/a") and "ns/c" not in html


def test_report_title_and_subtitle(tmp_path: Path) -> None:
    html = run_report(load_run(write_run(tmp_path / "r", summary()))).render()
    assert "<h1>kubeberth simulate: w</h1>" in html
    assert '<p class="subtitle">kubeberth 0</p>' in html
