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

from kubeberth.report.spill_html import render_spill_html
from kubeberth.sim.admission import QUEUE_CSV_COLUMNS, QUEUE_SERIES_COLUMNS
from kubeberth.sim.engine import SimResult
from kubeberth.sim.metrics import GROUP_COLUMNS, SERIES_COLUMNS
from kubeberth.sim.spill import SPILL_COLUMNS, SpillHost

SUMMARY_FILE = "summary.json"
SERIES_FILE = "timeseries.csv"
PODS_FILE = "pods.csv"
EVICTIONS_FILE = "evictions.csv"
SPILL_FILE = "spill.csv"
SPILL_METRICS_FILE = "spill_metrics.prom"
SPILL_HTML_FILE = "spill.html"
EVICTION_COLUMNS = ("time", "pod", "node", "plugin", "reason", "allowed", "code", "message",
                    "pdb", "replacement")
REPORT_FILE = "report.html"
PODS_COLUMNS = ("pod", "arrival", "bound", "node", "attempts", "wait_seconds", "finished",
                "preempted")
QUEUES_FILE = "queues.csv"
QUEUE_SERIES_FILE = "queue_timeseries.csv"
GROUPS_FILE = "groups.csv"


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
        **_eviction_summary(result),
        **_spill_summary(result),
    }
    if result.admission is not None:
        data["admission"] = result.admission.summary
    if m.groups:
        data["podGroups"] = m.group_summary()
    return data


def _spill_host(result: SimResult) -> SpillHost | None:
    host = result.extras.get("spill")
    return host if isinstance(host, SpillHost) else None


def _spill_summary(result: SimResult) -> dict[str, Any]:
    host = _spill_host(result)
    return {} if host is None else {"spill": host.summary(result.end_time)}


def _eviction_summary(result: SimResult) -> dict[str, Any]:
    """``evictions`` in summary.json: requests, what the eviction API allowed and refused."""
    if not result.evictions and not result.replacements:
        return {}
    refused: dict[str, int] = {}
    for e in result.evictions:
        if not e.verdict.allowed:
            refused[str(e.verdict.code)] = refused.get(str(e.verdict.code), 0) + 1
    return {"evictions": {
        "requested": len(result.evictions),
        "evicted": sum(1 for e in result.evictions if e.verdict.allowed),
        "refusedByCode": dict(sorted(refused.items())),
        "replacementsCreated": result.replacements,
    }}


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
    if result.evictions:
        rows = [(e.time, e.pod, e.node, e.plugin, e.reason, int(e.verdict.allowed),
                 e.verdict.code, e.verdict.message, e.verdict.pdb, e.replacement)
                for e in result.evictions]
        (out / EVICTIONS_FILE).write_text(_csv(rows, EVICTION_COLUMNS))
    host = _spill_host(result)
    if host is not None:
        (out / SPILL_FILE).write_text(_csv(host.rows, SPILL_COLUMNS))
        (out / SPILL_METRICS_FILE).write_bytes(host.exposition())
        title = f"kubeberth spill: {meta.get('workload', '')}"
        (out / SPILL_HTML_FILE).write_text(
            render_spill_html(host.rows, result.evictions, data["spill"], title))
    (out / PODS_FILE).write_text(_csv(pods, PODS_COLUMNS))
    if result.metrics.groups:
        (out / GROUPS_FILE).write_text(_csv(result.metrics.group_rows(), GROUP_COLUMNS))
    if result.admission is not None:
        (out / QUEUES_FILE).write_text(_csv(result.admission.rows, QUEUE_CSV_COLUMNS))
        (out / QUEUE_SERIES_FILE).write_text(_csv(result.admission.series, QUEUE_SERIES_COLUMNS))
    return data


def _ordered(d: dict[str, Any], first: tuple[str, ...]) -> list[tuple[str, Any]]:
    """Items with the ``first`` keys in that order, then the rest sorted: the same order
    whether the dict was built in memory or read back from sorted-key JSON."""
    return [(k, d[k]) for k in first if k in d] + sorted(
        (k, v) for k, v in d.items() if k not in first)


def summary_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline metrics of a summary as (metric, value) text, shared by the terminal
    table and the HTML report so the two never disagree."""
    pods = data["pods"]
    rows = [("pods", str(pods["total"])), ("scheduled", str(pods["scheduled"])),
            ("never scheduled", str(pods["unscheduled"])),
            ("preemptions", str(pods["preemptions"]))]
    rows.extend((f"attempts {k}", str(v))
                for k, v in _ordered(data["attempts"], ("scheduled", "unschedulable", "error")))
    waits = data["waitSeconds"]
    if waits.get("count"):
        rows.extend((f"wait {q} (s)", f"{waits[q]:.3f}") for q in ("p50", "p95", "p99", "max"))
    rows.extend((f"{res} allocated mean / peak (%)", f"{v['mean']:.2f} / {v['peak']:.2f}")
                for res, v in _ordered(data["allocationPct"], ("cpu", "memory", "gpu")))
    rows.append(("simulated time (s)", f"{data['simulatedSeconds']:.0f}"))
    ev = data.get("evictions")
    if ev:
        rows.append(("evictions allowed / requested", f"{ev['evicted']} / {ev['requested']}"))
        rows.append(("replacement pods", str(ev["replacementsCreated"])))
    groups = data.get("podGroups")
    if groups:
        rows.append(("pod groups all bound / total", f"{groups['allBound']} / {groups['total']}"))
        if groups["waitSeconds"].get("count"):
            rows.append(("group wait p50 / max (s)", f"{groups['waitSeconds']['p50']:.3f} / "
                                                     f"{groups['waitSeconds']['max']:.3f}"))
        rows.append(("partial placements", str(groups["partialPlacements"])))
    spill = data.get("spill")
    if spill:
        rows.append(("pods spilled to VK", str(spill["podsSpilled"])))
        rows.append(("spill GPU-hours / cost", f"{spill['gpuHours']:.2f} / {spill['cost']:.2f}"))
        rows.append(("taint flips", str(spill["taintFlips"])))
        rows.append(("signal faults (ticks)", str(spill["faultTicks"])))
    return rows


def written_files(data: dict[str, Any]) -> str:
    """The files a run wrote, for the closing message."""
    files = [SUMMARY_FILE, SERIES_FILE, PODS_FILE]
    if "admission" in data:
        files += [QUEUES_FILE, QUEUE_SERIES_FILE]
    if "podGroups" in data:
        files.append(GROUPS_FILE)
    if data.get("evictions", {}).get("requested"):
        files.append(EVICTIONS_FILE)
    if "spill" in data:
        files += [SPILL_FILE, SPILL_METRICS_FILE, SPILL_HTML_FILE]
    return ", ".join(files)


def summary_table(data: dict[str, Any]) -> Table:
    t = Table(title=f"kubeberth simulate: {data['run'].get('workload', '')}", show_lines=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for metric, value in summary_rows(data):
        t.add_row(metric, value)
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
    rows += [(f"LocalQueue {name}", s) for name, s in adm["localQueues"].items()]
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
