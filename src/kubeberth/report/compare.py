"""Runs side by side: one page that overlays several runs' time series and tables.

Policies are compared on the same workload, so every figure puts the runs on one set of axes,
each run in the same colour throughout, and every table has one column per run. Runs are read
from their folders (:func:`~kubeberth.report.runs.load_run`), labelled by the path as given, in
the order given. Sections follow the run report's pattern: functions of the list of runs in
:data:`COMPARE_SECTIONS`, returning a section or None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.report.figures import colour, figure, log_y, steps, svg_figure, time_unit
from kubeberth.report.html import Block, Cell, Paragraph, Report, Section, Table
from kubeberth.report.output import summary_rows
from kubeberth.report.queues import queues_compare
from kubeberth.report.runs import Run, load_run, write_html
from kubeberth.report.sections import (
    ALLOCATION,
    ATTEMPT_RESULTS,
    DISRUPTION_COLUMNS,
    PENDING_COLUMNS,
    generic_reason,
)
from kubeberth.report.spill_timeline import spill_compare

CompareFn = Callable[[Sequence[Run]], Section | None]



def common_time_axis(runs: Sequence[Run]) -> tuple[list[np.ndarray], str]:
    """Each run's sample times in one unit chosen for the longest run."""
    times = [r.series.num("time") for r in runs]
    span = max((float(t[-1] - t[0]) for t in times if t.size), default=0.0)
    name, seconds = time_unit(span)
    return [t / seconds for t in times], f"simulated time ({name})"


def runs_table(runs: Sequence[Run]) -> Section:
    keys: list[str] = []
    for r in runs:
        keys.extend(k for k in r.summary["run"] if k not in keys)
    rows: list[list[Cell]] = [[k, *(str(r.summary["run"].get(k, "")) for r in runs)]
                              for k in keys]
    rows.append(["simulated time (s)", *(f"{r.summary['simulatedSeconds']:.0f}" for r in runs)])
    return Section("Runs", [Table(("input", *(r.label for r in runs)), rows)])


def summary(runs: Sequence[Run]) -> Section:
    per_run = [dict(summary_rows(r.summary)) for r in runs]
    metrics: list[str] = []
    for values in per_run:
        metrics.extend(m for m in values if m not in metrics)
    table: list[list[Cell]] = [[m, *(values.get(m, "") for values in per_run)]
                               for m in metrics]
    return Section("Summary", [Table(("metric", *(r.label for r in runs)), table)])


def allocation(runs: Sequence[Run]) -> Section:
    xs, xlabel = common_time_axis(runs)
    with figure(rows=len(ALLOCATION), height=2.4) as (fig, axes):
        for ax, (col, name) in zip(axes, ALLOCATION, strict=True):
            for i, (run, x) in enumerate(zip(runs, xs, strict=True)):
                ax.plot(x, run.series.num(col), color=colour(i), label=run.label, linewidth=1.1)
            ax.set_ylabel(f"{name} (%)")
            ax.set_ylim(bottom=0)
        axes[0].legend(loc="upper left")
        axes[-1].set_xlabel(xlabel)
        block = svg_figure(fig, "CPU, memory and GPU allocation over time, per run")
    return Section("CPU, memory and GPU allocation over time", [
        block, Paragraph("Requests of bound pods ÷ allocatable capacity, per resource.")])


def pods_over_time(runs: Sequence[Run]) -> Section:
    xs, xlabel = common_time_axis(runs)
    with figure(rows=2, height=2.6) as (fig, (top, bottom)):
        for i, (run, x) in enumerate(zip(runs, xs, strict=True)):
            pending = sum((run.series.num(c) for c in PENDING_COLUMNS), np.zeros(x.size))
            top.plot(*steps(x, pending), color=colour(i), label=run.label,
                     drawstyle="steps-post", linewidth=1.1)
            bottom.plot(*steps(x, run.series.num("running_pods")), color=colour(i),
                        drawstyle="steps-post", linewidth=1.1)
        top.set_ylabel("pending pods")
        bottom.set_ylabel("running pods")
        bottom.set_xlabel(xlabel)
        for ax in (top, bottom):
            ax.set_ylim(bottom=0)
        top.legend(loc="upper left")
        block = svg_figure(fig, "Pending and running pods over time, per run")
    return Section("Pending pods over time", [
        block, Paragraph("Pending counts every pod in activeQ, backoffQ and the "
                         "unschedulable pool.")])


def attempts(runs: Sequence[Run]) -> Section:
    results = list(ATTEMPT_RESULTS)
    for r in runs:
        results.extend(k for k in sorted(r.summary["attempts"]) if k not in results)
    width = 0.8 / len(runs)
    with figure() as (fig, (ax,)):
        base = np.arange(len(results), dtype=np.float64)
        for i, run in enumerate(runs):
            counts = [run.summary["attempts"].get(k, 0) for k in results]
            ax.bar(base + (i - (len(runs) - 1) / 2) * width, counts, width=width,
                   color=colour(i), label=run.label)
        ax.set_xticks(base, results)
        ax.set_ylabel("attempts")
        ax.legend(loc="upper right")
        block = svg_figure(fig, "Scheduling attempts by result, per run")
    rows: list[list[Cell]] = [[k, *(r.summary["attempts"].get(k, 0) for r in runs)]
                              for k in results]
    return Section("Scheduling attempts by result", [
        block, Table(("result", *(r.label for r in runs)), rows)])


def waits(runs: Sequence[Run]) -> Section:
    keys = ("count", "mean", "p50", "p90", "p95", "p99", "max")
    rows: list[list[Cell]] = [[k, *(r.summary["waitSeconds"].get(k) for r in runs)]
                              for k in keys]
    blocks: list[Block] = [Table(("statistic (s)", *(r.label for r in runs)), rows)]
    waited = [(i, r, w[~np.isnan(w) & (w > 0)], int((~np.isnan(w)).sum()))
              for i, r, w in ((i, r, r.pods.num("wait_seconds")) for i, r in enumerate(runs))]
    if not any(w.size for _, _, w, _ in waited):
        return Section("Pod wait (creation to bind)", [
            Paragraph("No bound pod waited in any run."), *blocks])
    unit, seconds = time_unit(max(float(w.max()) for _, _, w, _ in waited if w.size))
    with figure() as (fig, (ax,)):
        for i, run, w, bound in waited:
            if w.size:
                values, counts = np.unique(w, return_counts=True)
                longer = (w.size - np.cumsum(counts)) / bound
                ax.plot(np.r_[0.0, values / seconds], np.r_[w.size / bound, longer],
                        color=colour(i), label=run.label, drawstyle="steps-post",
                        linewidth=1.1)
        ax.set_xlabel(f"wait ({unit})")
        ax.set_ylabel("share waiting longer")
        log_y(ax)
        # whole decades from one pod's share up to all pods, so the axis always has labels
        most = max(bound for _, _, w, bound in waited if w.size)
        ax.set_ylim(10.0 ** math.floor(math.log10(1.0 / most)), 1.0)
        ax.legend(loc="upper right")
        blocks.insert(0, svg_figure(fig, "Share of pods waiting longer than x, per run"))
    blocks.append(Paragraph("The curve of each run is the share of its bound pods that "
                            "waited longer than the time on the x axis (log scale: the tail "
                            "is what differs between policies)."))
    return Section("Pod wait (creation to bind)", blocks)


def disruptions(runs: Sequence[Run]) -> Section:
    cols = [c for c in DISRUPTION_COLUMNS if any(c in r.series for r in runs)]
    xs, xlabel = common_time_axis(runs)
    with figure(rows=len(cols), height=2.4) as (fig, axes):
        for ax, col in zip(axes, cols, strict=True):
            for i, (run, x) in enumerate(zip(runs, xs, strict=True)):
                if col in run.series:
                    ax.plot(*steps(x, run.series.num(col)), color=colour(i), label=run.label,
                            drawstyle="steps-post", linewidth=1.1)
            ax.set_ylabel(f"{col} (cumulative)")
            ax.set_ylim(bottom=0)
        axes[0].legend(loc="upper left")
        axes[-1].set_xlabel(xlabel)
        block = svg_figure(fig, "Preemptions and evictions over time, per run")
    return Section("Preemptions and evictions over time", [block])


def pending_reasons(runs: Sequence[Run]) -> Section:
    counts: list[dict[str, int]] = []
    for r in runs:
        c: dict[str, int] = {}
        for pod, reason in r.summary["pendingReasons"].items():
            key = generic_reason(pod, reason)
            c[key] = c.get(key, 0) + 1
        counts.append(c)
    reasons = sorted({k for c in counts for k in c},
                     key=lambda k: (-sum(c.get(k, 0) for c in counts), k))
    if not reasons:
        return Section("Pending reasons", [Paragraph("No run has a never-scheduled pod.")])
    rows: list[list[Cell]] = [[k, *(c.get(k, 0) for c in counts)] for k in reasons]
    return Section("Pending reasons", [
        Paragraph("Never-scheduled pods per reason (the scheduler's message for the last "
                  "failed attempt, with the pod's own name shown as <pod>)."),
        Table(("reason", *(r.label for r in runs)), rows)])


COMPARE_SECTIONS: list[CompareFn] = [
    runs_table,
    summary,
    allocation,
    pods_over_time,
    attempts,
    waits,
    disruptions,
    pending_reasons,
    queues_compare,
    spill_compare,
]


def compare_report(runs: Sequence[Run], sections: list[CompareFn] | None = None) -> Report:
    report = Report("kubeberth: " + " vs ".join(r.label for r in runs),
                    f"{len(runs)} runs side by side")
    for fn in COMPARE_SECTIONS if sections is None else sections:
        section = fn(runs)
        if section is not None:
            report.extend([section])
    return report


def write_compare_report(folders: Sequence[Path], out: Path) -> Path:
    if len(folders) < 2:
        raise InputError(f"{len(folders)} run folder given", field="RUNS",
                         expected="two or more folders written by `kubeberth simulate -o`")
    seen: set[Path] = set()
    for f in folders:
        if f in seen:
            raise InputError("given twice", source=str(f), expected="each run folder once")
        seen.add(f)
    runs = [load_run(f) for f in folders]
    return write_html(out, compare_report(runs).render())
