"""Write a replay's results to a folder and summarise them for the terminal.

Files are written byte-for-byte reproducibly (sorted keys where order is not meaningful, fixed
float formatting, ``\\n`` line endings) so that the same inputs and seed give identical output,
which the determinism tests compare directly.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from kubeberth.sim.admission import QUEUE_CSV_COLUMNS, QUEUE_SERIES_COLUMNS
from kubeberth.sim.engine import SimResult
from kubeberth.sim.metrics import SERIES_COLUMNS

SUMMARY_FILE = "summary.json"
SERIES_FILE = "timeseries.csv"
PODS_FILE = "pods.csv"
QUEUES_FILE = "queues.csv"
QUEUE_SERIES_FILE = "queue_timeseries.csv"


def summary(result: SimResult, meta: dict[str, Any]) -> dict[str, Any]:
    m = result.metrics
    bound = sum(1 for r in m.pods.values() if r.bound is not None or r.finished is not None)
    data = {
        "run": meta,
        "pods": {
            "total": len(m.pods),
            "scheduled": bound,
            "unscheduled": len(result.unscheduled),
            "ignored": len(result.ignored),
            "preemptions": m.preemptions,
        },
        "attempts": dict(m.attempts),
        "decisions": result.decisions,
        "waitSeconds": m.wait_percentiles(),
        "allocationPct": {
            "cpu": {"mean": m.mean("cpu_alloc_pct"), "peak": m.peak("cpu_alloc_pct")},
            "memory": {"mean": m.mean("memory_alloc_pct"), "peak": m.peak("memory_alloc_pct")},
            "gpu": {"mean": m.mean("gpu_alloc_pct"), "peak": m.peak("gpu_alloc_pct")},
        },
        "simulatedSeconds": result.end_time,
        "unscheduledPods": result.unscheduled,
        "pendingReasons": {key: m.pods[key].reason for key in result.unscheduled
                           if m.pods[key].reason},
        "unmodelledPlugins": result.unmodelled_plugins,
    }
    if result.admission is not None:
        data["admission"] = result.admission.summary
    return data


def _csv(rows: list[tuple[Any, ...]], header: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def write_outputs(result: SimResult, out: Path, meta: dict[str, Any]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    data = summary(result, meta)
    (out / SUMMARY_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (out / SERIES_FILE).write_text(_csv(result.metrics.rows, SERIES_COLUMNS))
    pods = [
        (r.key, r.arrival, "" if r.bound is None else r.bound, r.node, r.attempts,
         "" if r.wait is None else r.wait, "" if r.finished is None else r.finished,
         r.preempted)
        for r in result.metrics.pods.values()
    ]
    (out / PODS_FILE).write_text(_csv(pods, ("pod", "arrival", "bound", "node", "attempts",
                                             "wait_seconds", "finished", "preempted")))
    if result.admission is not None:
        (out / QUEUES_FILE).write_text(_csv(result.admission.rows, QUEUE_CSV_COLUMNS))
        (out / QUEUE_SERIES_FILE).write_text(_csv(result.admission.series, QUEUE_SERIES_COLUMNS))
    return data


def written_files(data: dict[str, Any]) -> str:
    """The files a run wrote, for the closing message."""
    files = [SUMMARY_FILE, SERIES_FILE, PODS_FILE]
    if "admission" in data:
        files += [QUEUES_FILE, QUEUE_SERIES_FILE]
    return ", ".join(files)


def summary_table(data: dict[str, Any]) -> Table:
    t = Table(title=f"kubeberth simulate: {data['run'].get('workload', '')}", show_lines=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    pods = data["pods"]
    t.add_row("pods", str(pods["total"]))
    t.add_row("scheduled", str(pods["scheduled"]))
    t.add_row("never scheduled", str(pods["unscheduled"]))
    t.add_row("preemptions", str(pods["preemptions"]))
    for k, v in data["attempts"].items():
        t.add_row(f"attempts {k}", str(v))
    waits = data["waitSeconds"]
    if waits.get("count"):
        for q in ("p50", "p95", "p99", "max"):
            t.add_row(f"wait {q} (s)", f"{waits[q]:.3f}")
    for res, v in data["allocationPct"].items():
        t.add_row(f"{res} allocated mean / peak (%)", f"{v['mean']:.2f} / {v['peak']:.2f}")
    t.add_row("simulated time (s)", f"{data['simulatedSeconds']:.0f}")
    return t


def queue_table(data: dict[str, Any]) -> Table | None:
    """Per-ClusterQueue and per-priority admission metrics (runs with Kueue objects only)."""
    adm = data.get("admission")
    if adm is None:
        return None
    t = Table(title=f"Kueue admission: {adm['cycles']} cycles, {adm['preemptions']} preemptions")
    for col in ("queue", "admitted", "pending", "preempted", "borrowed GPU-h", "gang t/o",
                "admit wait p50/p99 s", "bind wait p50/p99 s"):
        t.add_column(col, justify="left" if col == "queue" else "right")
    rows = [(name, s) for name, s in adm["clusterQueues"].items()]
    rows += [(f"priority {p}", s) for p, s in adm["priorities"].items()]
    for name, s in rows:
        t.add_row(name, f"{s['admitted']}/{s['workloads']}", str(s["pending"]),
                  str(s["preempted"]), f"{s['borrowedGpuHours']:.1f}", str(s["gangTimeouts"]),
                  _pair(s["waitAdmitSeconds"]), _pair(s["waitBindSeconds"]))
    return t


def _pair(w: dict[str, float]) -> str:
    if not w.get("count"):
        return "-"
    return f"{w['p50']:.0f}/{w['p99']:.0f}"
