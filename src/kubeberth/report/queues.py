"""The Kueue section of a run report, and its side-by-side form for ``report compare``.

A run admitted through Kueue is judged per queue: who waited how long for quota, who borrowed
from the cohort and for how long, who was preempted and why. The simulator writes that as
``queues.csv`` (one row per ClusterQueue and per priority), ``queue_timeseries.csv`` (each
ClusterQueue's admitted and pending workloads, GPUs in use and borrowed, dominant share, on the
sampling grid) and ``summary.json`` ``admission`` (cycles, preemptions by reason). This module
turns those files, and only those, into a section; a run without them (no Kueue objects) gets
none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubeberth.report.figures import colour, figure, steps, svg_figure, time_panel, time_unit
from kubeberth.report.html import Block, Cell, Paragraph, Section, Table
from kubeberth.report.output import QUEUE_SERIES_FILE, QUEUES_FILE
from kubeberth.report.runs import Columns, Run
from kubeberth.sim.admission import QUEUE_CSV_COLUMNS, QUEUE_SERIES_COLUMNS

TITLE = "Kueue admission per queue"
# Fair sharing's share of a queue with weight 0 that borrows: larger than any real share.
INFINITE_SHARE = float(2**62)
PREEMPTION_REASONS = ("InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing",
                      "InCohortFairSharing")
WAIT_COLUMNS = ("wait_admit_p50", "wait_admit_p95", "wait_admit_p99", "wait_bind_p50",
                "wait_bind_p95", "wait_bind_p99")
SCOPES = {"clusterQueue": "ClusterQueue", "localQueue": "LocalQueue", "priority": "priority"}
COUNT_COLUMNS = ("workloads", "admitted", "pending", "preempted", "gang_timeouts")


def _tables(run: Run) -> tuple[Columns, Columns] | None:
    rows = run.table(QUEUES_FILE, QUEUE_CSV_COLUMNS)
    series = run.table(QUEUE_SERIES_FILE, QUEUE_SERIES_COLUMNS)
    if rows is None or series is None:
        return None
    for name in (*COUNT_COLUMNS, "borrowed_gpu_hours", *WAIT_COLUMNS):
        rows.num(name)
    for name in QUEUE_SERIES_COLUMNS[2:]:
        series.num(name)
    series.num("time")
    return rows, series


def _reasons(run: Run) -> dict[str, dict[str, int]]:
    """ClusterQueue -> preemption reason -> count, from ``summary.json``."""
    queues = run.get("admission.clusterQueues", dict)
    out: dict[str, dict[str, int]] = {}
    for name in sorted(queues):
        reasons = run.get(f"admission.clusterQueues.{name}.preemptionReasons", dict)
        for why in sorted(reasons):
            out.setdefault(name, {})[why] = run.get(
                f"admission.clusterQueues.{name}.preemptionReasons.{why}", int)
    return out


def _by_queue(series: Columns) -> dict[str, np.ndarray]:
    """Row indices of each ClusterQueue in the time series, queues sorted by name."""
    names = np.array(series.text("cluster_queue"))
    return {q: np.flatnonzero(names == q) for q in sorted(set(series.text("cluster_queue")))}


def _cell(v: float) -> Cell:
    if np.isnan(v):
        return "-"
    return int(v) if float(v).is_integer() else round(float(v), 3)


def queue_section(run: Run) -> Section | None:
    tables = _tables(run)
    if tables is None:
        return None
    rows, series = tables
    t = series.num("time")
    unit, seconds = time_unit(float(t.max() - t.min()) if t.size else 0.0)
    groups = _by_queue(series)
    share = series.num("dominant_share").copy()
    capped = bool(np.any(share >= INFINITE_SHARE))
    share[share >= INFINITE_SHARE] = np.nan
    blocks: list[Block] = []
    if groups:
        with figure(rows=3, height=2.3) as (fig, (pend, gpus, dom)):
            for i, (q, idx) in enumerate(groups.items()):
                x = t[idx] / seconds
                pend.plot(*steps(x, series.num("pending_workloads")[idx]), label=q,
                          drawstyle="steps-post", color=colour(i), linewidth=1.2)
                gpus.plot(*steps(x, series.num("gpu_usage")[idx]), drawstyle="steps-post",
                          color=colour(i), linewidth=1.2, label=f"{q} in use")
                borrowed = series.num("gpu_borrowed")[idx]
                if np.any(borrowed > 0):
                    gpus.plot(*steps(x, borrowed), drawstyle="steps-post", color=colour(i),
                              linewidth=1.0, linestyle="--", label=f"{q} borrowed")
                dom.plot(*steps(x, share[idx]), drawstyle="steps-post", color=colour(i),
                         linewidth=1.2, label=q)
            pend.set_ylabel("pending workloads")
            gpus.set_ylabel("GPUs")
            dom.set_ylabel("dominant share")
            for ax in (pend, gpus, dom):
                ax.set_ylim(bottom=0)
                ax.legend(loc="upper left", fontsize=7)
            dom.set_xlabel(f"simulated time ({unit})")
            blocks.append(svg_figure(fig, "Pending workloads, GPUs in use and borrowed, and "
                                          "dominant share per ClusterQueue over time"))
    header = ("scope", "name", "workloads", "admitted", "pending", "preempted",
              "borrowed GPU-h", "gang timeouts", "admit wait p50 / p95 / p99 (s)",
              "bind wait p50 / p95 / p99 (s)")
    table: list[list[Cell]] = []
    for i in range(len(rows)):
        waits = [_cell(rows.num(c)[i]) for c in WAIT_COLUMNS]
        table.append([
            SCOPES.get(rows.text("scope")[i], rows.text("scope")[i]),
            rows.text("name")[i],
            *(_cell(rows.num(c)[i]) for c in COUNT_COLUMNS[:4]),
            _cell(rows.num("borrowed_gpu_hours")[i]),
            _cell(rows.num("gang_timeouts")[i]),
            " / ".join(str(w) for w in waits[:3]), " / ".join(str(w) for w in waits[3:])])
    blocks.append(Table(header, table, caption="queues.csv: workloads per ClusterQueue, "
                                               "LocalQueue (namespace/name) and priority; "
                                               "waits from the Workload's creation"))
    reasons = _reasons(run)
    seen = [r for r in PREEMPTION_REASONS if any(r in v for v in reasons.values())]
    seen += sorted({r for v in reasons.values() for r in v} - set(seen))
    if seen:
        blocks.append(Table(("ClusterQueue (victims)", *seen),
                            [[q, *(v.get(r, 0) for r in seen)] for q, v in reasons.items()],
                            caption="preemptions by reason"))
    cycles = run.get("admission.cycles", int)
    preemptions = run.get("admission.preemptions", int)
    borrowed = run.get("admission.borrowedGpuHours", (int, float))
    note = (f"{cycles} admission cycles, {preemptions} preemptions, {borrowed:g} GPU-hours "
            "borrowed from cohorts. Dashed lines: GPUs a ClusterQueue uses beyond its nominal "
            "quota. Dominant share is Kueue fair sharing's measure (0 outside a cohort).")
    if capped:
        note += " Shares of weight-0 queues while borrowing (infinite) are left out."
    if not seen:
        note += " No workload was preempted."
    blocks.append(Paragraph(note))
    return Section(TITLE, blocks)


def _row(rows: Columns, scope: str, name: str) -> int | None:
    for i in range(len(rows)):
        if rows.text("scope")[i] == scope and rows.text("name")[i] == name:
            return i
    return None


def queues_compare(runs: Sequence[Run]) -> Section | None:
    """Per queue and priority, one column per run; pending workloads and borrowed GPUs of all
    ClusterQueues together over time, one line per run."""
    tables = [_tables(r) for r in runs]
    if all(t is None for t in tables):
        return None
    keys: list[tuple[str, str]] = []
    for t in tables:
        if t is not None:
            rows = t[0]
            keys.extend(k for k in zip(rows.text("scope"), rows.text("name"), strict=True)
                        if k not in keys)
    metrics = (("admitted / workloads", ("admitted", "workloads")), ("pending", ("pending",)),
               ("preempted", ("preempted",)), ("borrowed GPU-h", ("borrowed_gpu_hours",)),
               ("admit wait p95 (s)", ("wait_admit_p95",)),
               ("bind wait p95 (s)", ("wait_bind_p95",)))
    table: list[list[Cell]] = []
    for scope, name in keys:
        label = f"{SCOPES.get(scope, scope)} {name}"
        for metric, cols in metrics:
            cells: list[Cell] = []
            for t in tables:
                i = None if t is None else _row(t[0], scope, name)
                if t is None or i is None:
                    cells.append("")
                    continue
                cells.append(" / ".join(str(_cell(t[0].num(c)[i])) for c in cols))
            table.append([label, metric, *cells])
    reason_rows: list[list[Cell]] = []
    per_run = [_reasons(r) if t is not None else {} for r, t in zip(runs, tables, strict=True)]
    queue_names = sorted({q for rs in per_run for q in rs})
    for q in queue_names:
        reasons = sorted({w for rs in per_run for w in rs.get(q, {})})
        for why in reasons:
            reason_rows.append([q, why, *(rs.get(q, {}).get(why, 0) for rs in per_run)])
    blocks: list[Block] = []
    spans = [float(t[1].num("time").max() - t[1].num("time").min())
             for t in tables if t is not None and len(t[1])]
    unit, seconds = time_unit(max(spans, default=0.0))
    with figure(cols=2) as (fig, (pend, borrowed)):
        for i, t in enumerate(tables):
            if t is None or not len(t[1]):
                continue
            times = t[1].num("time")
            grid = np.unique(times)
            where = np.searchsorted(grid, times)
            for ax, col in ((pend, "pending_workloads"), (borrowed, "gpu_borrowed")):
                total = np.bincount(where, weights=t[1].num(col), minlength=grid.size)
                ax.plot(*steps(grid / seconds, total), drawstyle="steps-post",
                        color=colour(i), linewidth=1.2, label=runs[i].label)
        pend.set_ylabel("pending workloads (all ClusterQueues)")
        borrowed.set_ylabel("GPUs borrowed (all ClusterQueues)")
        for ax in (pend, borrowed):
            time_panel(ax, f"simulated time ({unit})", fontsize=7)
        blocks.append(svg_figure(fig, "Pending workloads and borrowed GPUs per run"))
    blocks.append(Table(("queue", "metric", *(r.label for r in runs)), table))
    if reason_rows:
        blocks.append(Table(("ClusterQueue (victims)", "reason", *(r.label for r in runs)),
                            reason_rows, caption="preemptions by reason"))
    missing = [r.label for r, t in zip(runs, tables, strict=True) if t is None]
    if missing:
        blocks.append(Paragraph("Without Kueue admission: " + ", ".join(missing) + "."))
    return Section(TITLE, blocks)
