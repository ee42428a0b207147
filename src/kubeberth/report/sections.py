"""The sections of one run's HTML report, each a function of the run read back from disk.

A section function takes a :class:`~kubeberth.report.runs.Run` and returns a
:class:`~kubeberth.report.html.Section`, or None when the run has nothing for it (a later
feature's CSV is absent, say). :data:`RUN_SECTIONS` lists them in page order; a feature adds
its section by writing one such function in its own module and appending it there, exactly as
plugins are appended to ``MODULES`` (docs/reports.md walks through it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kubeberth.config.manifests import describe_not_modelled
from kubeberth.report.figures import colour, figure, log_y, steps, svg_figure, time_panel, time_unit
from kubeberth.report.html import Block, Details, Paragraph, Report, Section, Table
from kubeberth.report.output import EVICTION_COLUMNS, EVICTIONS_FILE, REPORT_FILE, summary_rows
from kubeberth.report.queues import queue_section
from kubeberth.report.runs import Run, load_run, write_html
from kubeberth.report.spill_timeline import spill_section

SectionFn = Callable[[Run], Section | None]

ALLOCATION = (("cpu_alloc_pct", "cpu"), ("memory_alloc_pct", "memory"),
              ("gpu_alloc_pct", "GPU"))
PENDING_COLUMNS = ("pending_active", "pending_backoff", "pending_unschedulable")
# kube-scheduler's attempt result labels, in the order upstream's metric documents them.
ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error")
# Counters of pods pushed off their node; a feature that adds one to timeseries.csv (the
# descheduler's evictions, say) is plotted here without further change.
DISRUPTION_COLUMNS = ("preemptions", "evictions")
WAIT_QUANTILES = ("p50", "p95", "p99")
MAX_EXAMPLES = 3


def time_axis(run: Run) -> tuple[np.ndarray, str]:
    """Sample times in the largest unit that suits the run's length, and the axis label."""
    t = run.series.num("time")
    name, seconds = time_unit(float(t[-1] - t[0]) if t.size else 0.0)
    return t / seconds, f"simulated time ({name})"


def per_interval(cumulative: np.ndarray) -> np.ndarray:
    """Counts per sample interval from a cumulative counter column."""
    return np.diff(cumulative, prepend=0.0)


def run_metadata(run: Run) -> Section:
    s = run.summary
    rows: list[tuple[str, str]] = [(str(k), str(v)) for k, v in s["run"].items()
                                   if k != "readNotModelled"]
    if s["run"].get("readNotModelled"):
        rows.append(("read but not modelled", describe_not_modelled(s["run"]["readNotModelled"])))
    rows.append(("simulated time (s)", f"{s['simulatedSeconds']:.0f}"))
    if "decisions" in s:
        rows.append(("scheduling cycles", str(s["decisions"])))
    if s.get("unmodelledPlugins"):
        rows.append(("unmodelled plugins (no effect)", ", ".join(s["unmodelledPlugins"])))
    t = run.series.num("time")
    if t.size > 1:
        rows.append(("time-series samples", f"{t.size} (every {t[1] - t[0]:g} s)"))
    return Section("Run", [
        Table(("input", "value"), rows),
        Paragraph("Built from summary.json, timeseries.csv and pods.csv in the run folder; "
                  "`kubeberth report render FOLDER` re-creates this page from them."),
    ])


def summary(run: Run) -> Section:
    return Section("Summary", [Table(("metric", "value"), summary_rows(run.summary))])


def allocation(run: Run) -> Section:
    x, xlabel = time_axis(run)
    with figure() as (fig, (ax,)):
        for i, (col, label) in enumerate(ALLOCATION):
            ax.plot(x, run.series.num(col), label=label, color=colour(i), linewidth=1.2)
        time_panel(ax, xlabel, "allocated (%)")
        fig_block = svg_figure(fig, "CPU, memory and GPU allocation over time")
    return Section("CPU, memory and GPU allocation over time", [
        fig_block,
        Paragraph("Requests of bound pods as a share of the allocatable capacity of all "
                  "nodes, sampled on a fixed virtual-time grid."),
    ])


def pending(run: Run) -> Section:
    x, xlabel = time_axis(run)
    ser = run.series
    layers = [ser.num(c) for c in PENDING_COLUMNS]
    with figure(rows=2, height=2.6) as (fig, (top, bottom)):
        top.plot(*steps(x, ser.num("running_pods")), drawstyle="steps-post", linewidth=1.2,
                 color="#333333")
        top.set_ylabel("running pods")
        top.set_ylim(bottom=0)
        sx, *sy = steps(x, *layers)
        bottom.stackplot(sx, *sy, labels=("activeQ", "backoffQ", "unschedulable"),
                         colors=[colour(i) for i in range(len(sy))], step="post", alpha=0.85)
        bottom.set_ylabel("pending pods")
        bottom.set_xlabel(xlabel)
        bottom.set_ylim(bottom=0)
        bottom.legend(loc="upper left")
        fig_block = svg_figure(fig, "Running and pending pods over time")
    total = np.sum(layers, axis=0)
    peak = int(total.max()) if total.size else 0
    return Section("Pending pods over time", [
        fig_block,
        Paragraph(f"Pending pods by scheduling-queue state (stacked); peak {peak} pending."),
    ])


def attempts(run: Run) -> Section:
    totals = run.summary["attempts"]
    results = [r for r in ATTEMPT_RESULTS if r in totals] + sorted(
        r for r in totals if r not in ATTEMPT_RESULTS)
    x, xlabel = time_axis(run)
    with figure() as (fig, (ax,)):
        for i, r in enumerate(ATTEMPT_RESULTS):
            ax.plot(*steps(x, per_interval(run.series.num(f"attempts_{r}"))), label=r,
                    color=colour(i), drawstyle="steps-post", linewidth=1.0)
        time_panel(ax, xlabel, "attempts per sample interval")
        fig_block = svg_figure(fig, "Scheduling attempts by result")
    return Section("Scheduling attempts by result", [
        fig_block,
        Table(("result", "attempts"), [(r, totals[r]) for r in results]),
    ])


def waits(run: Run) -> Section:
    stats = run.summary["waitSeconds"]
    w = run.pods.num("wait_seconds")
    w = w[~np.isnan(w)]
    if not stats.get("count") or w.size == 0:
        return Section("Pod wait (creation to bind)", [Paragraph("No pod was bound.")])
    hi = float(w.max())
    unit, seconds = time_unit(hi)
    with figure() as (fig, (ax,)):
        ax.hist(w / seconds, bins=50, range=(0.0, hi / seconds if hi > 0 else 1.0),
                color=colour(0))
        log_y(ax)
        for i, q in enumerate(WAIT_QUANTILES):
            if q in stats:
                ax.axvline(stats[q] / seconds, color=colour(i + 1), linestyle="--",
                           linewidth=1.0, label=f"{q} {stats[q]:g} s")
        ax.set_xlabel(f"wait ({unit})")
        ax.set_ylabel("pods (log scale)")
        ax.legend(loc="upper right")
        fig_block = svg_figure(fig, "Histogram of pod waits")
    keys = [k for k in ("count", "mean", "p50", "p90", "p95", "p99", "max") if k in stats]
    return Section("Pod wait (creation to bind)", [
        fig_block,
        Table(("statistic", "seconds"), [(k, stats[k]) for k in keys]),
        Paragraph("Wait is the time from a pod's creation to its (last) binding; pods never "
                  "bound are not counted."),
    ])


def _eviction_counts(run: Run) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Evictions (the descheduler's, spill's, Kueue's) from evictions.csv: cumulative allowed
    evictions at each sample, and the totals summary.json's ``evictions`` counts."""
    table = run.table(EVICTIONS_FILE, EVICTION_COLUMNS)
    if table is None or not len(table) or "evictions" in run.series:
        return {}, {}
    allowed = table.num("allowed") > 0
    times = np.sort(table.num("time")[allowed])
    cumulative = np.searchsorted(times, run.series.num("time"), side="right").astype(float)
    totals = {"evictions": int(allowed.sum())}
    if refused := int((~allowed).sum()):
        totals["evictions refused"] = refused
    return {"evictions": cumulative}, totals


def disruptions(run: Run) -> Section:
    """Every pod pushed off its node: preemptions and evictions, counted as summary.json counts
    them (the totals come from the events, not from the last sample)."""
    series = {c: run.series.num(c) for c in DISRUPTION_COLUMNS if c in run.series}
    totals = {c: int(np.nan_to_num(v)[-1]) if len(run.series) else 0 for c, v in series.items()}
    evicted, eviction_totals = _eviction_counts(run)
    series.update(evicted)
    totals.update(eviction_totals)
    x, xlabel = time_axis(run)
    blocks: list[Block] = []
    if any(totals.values()):
        with figure(cols=2) as (fig, (left, right)):
            for i, (c, cum) in enumerate(series.items()):
                left.plot(*steps(x, cum), label=c, drawstyle="steps-post", color=colour(i + 3))
                right.plot(*steps(x, per_interval(cum)), label=c, drawstyle="steps-post",
                           color=colour(i + 3), linewidth=1.0)
            left.set_ylabel("cumulative")
            right.set_ylabel("per sample interval")
            for ax in (left, right):
                time_panel(ax, xlabel)
            blocks.append(svg_figure(fig, "Preemptions and evictions over time"))
    blocks.append(Table(("counter", "total"), list(totals.items())))
    preempted = run.pods.num("preempted")
    order = sorted(((-int(n), pod) for pod, n in zip(run.pods.text("pod"), preempted,
                                                    strict=True) if n > 0))
    if order:
        blocks.append(Details(f"{len(order)} pods preempted at least once", (
            Table(("pod", "times preempted"), [(pod, -n) for n, pod in order]),)))
    else:
        blocks.append(Paragraph("No pod was preempted."))
    return Section("Preemptions and evictions over time", blocks)


def generic_reason(pod: str, reason: str) -> str:
    """The reason with the pod's own name replaced by ``<pod>``, so messages that differ
    only in naming their pod (a gang member's, say) fall into one group."""
    name = pod.rpartition("/")[2]
    if not name:
        return reason
    whole = rf"(?<![\w./-])(?:{re.escape(pod)}|{re.escape(name)})(?![\w.-])"
    return re.sub(whole, "<pod>", reason)


def pending_reasons(run: Run) -> Section:
    reasons: dict[str, str] = run.summary["pendingReasons"]
    unscheduled = run.summary["pods"]["unscheduled"]
    if not reasons:
        text = "Every pod was scheduled." if unscheduled == 0 else \
            f"{unscheduled} pods were never scheduled; no reason was recorded."
        return Section("Pending reasons", [Paragraph(text)])
    by_reason: dict[str, list[str]] = {}
    for pod, reason in reasons.items():
        by_reason.setdefault(generic_reason(pod, reason), []).append(pod)
    counts = Counter({r: len(p) for r, p in by_reason.items()})
    ranked = sorted(counts, key=lambda r: (-counts[r], r))
    rows = [(r, counts[r], ", ".join(sorted(by_reason[r])[:MAX_EXAMPLES])) for r in ranked]
    return Section("Pending reasons", [
        Paragraph(f"{unscheduled} pods were never scheduled; why each one's last attempt "
                  "failed (the scheduler's message), grouped by message with the pod's own "
                  "name shown as <pod>."),
        Table(("reason", "pods", "for example"), rows),
        Details("every never-scheduled pod", (
            Table(("pod", "reason"), sorted(reasons.items())),)),
    ])


RUN_SECTIONS: list[SectionFn] = [
    run_metadata,
    summary,
    allocation,
    pending,
    attempts,
    waits,
    disruptions,
    pending_reasons,
    queue_section,
    spill_section,
]


def run_report(run: Run, sections: list[SectionFn] | None = None) -> Report:
    workload = run.summary["run"].get("workload", "")
    report = Report(f"kubeberth simulate: {workload}".rstrip(": "),
                    f"kubeberth {run.summary['run'].get('kubeberth', '')}".strip())
    for fn in RUN_SECTIONS if sections is None else sections:
        section = fn(run)
        if section is not None:
            report.extend([section])
    return report


def write_run_report(folder: Path, out: Path | None = None) -> Path:
    """Read a run folder and write its report (default ``FOLDER/report.html``)."""
    path = folder / REPORT_FILE if out is None else out
    return write_html(path, run_report(load_run(folder)).render())
