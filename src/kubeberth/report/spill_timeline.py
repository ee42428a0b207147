"""The spill section of a run report: the taint controller and the virtual-kubelet node on one
time axis, and its side-by-side form for ``report compare``.

Whether spill knobs are right shows only when the free-GPU signal, its average, the threshold,
the taint and the pods on the VK node are seen together with the evictions and the money. A run
with a spill node writes ``spill.csv`` (one row per controller tick), ``summary.json`` ``spill``
(flips, time in each state, GPU-hours, cost) and, when something was evicted,
``evictions.csv``; this module draws the section from those files. A run without a spill node
gets none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.report.figures import colour, figure, steps, svg_figure, time_panel, time_unit
from kubeberth.report.html import Block, Cell, Paragraph, Section, Table
from kubeberth.report.output import EVICTION_COLUMNS, EVICTIONS_FILE, SPILL_FILE, SUMMARY_FILE
from kubeberth.report.runs import Columns, Run
from kubeberth.sim.spill import SPILL_COLUMNS

TITLE = "Spill to the virtual-kubelet node"
TAINT_COLOUR = "#f6d6d6"
FACTS = (("podsSpilled", "pods spilled to the VK node"), ("gpuHours", "spill GPU-hours"),
         ("cost", "spill cost"), ("pricePerGpuHour", "price per GPU-hour"),
         ("taintFlips", "taint flips"), ("secondsTainted", "seconds tainted (low GPU usage)"),
         ("secondsUntainted", "seconds untainted"), ("faultTicks", "signal fault ticks"),
         ("podsLostInOutages", "pods lost in VK outages"),
         ("podsOnVirtualNodeAtEnd", "pods on the VK node at the end"))


def _spill(run: Run) -> Columns | None:
    if "spill" not in run.summary:
        return None
    table = run.table(SPILL_FILE, SPILL_COLUMNS)
    if table is None:
        return None
    for name in ("time", "free_gpus", "free_gpus_avg", "threshold", "tainted", "vk_pods",
                 "spill_gpu_hours", "spill_cost"):
        table.num(name)
    return table


def taint_periods(run: Run, end: float) -> list[tuple[float, float, str]]:
    """(start, end, "on"/"off") of the low-GPU-usage taint from ``summary.json`` flips."""
    flips = run.get("spill.flips", list)
    periods: list[tuple[float, float, str]] = []
    start, state = 0.0, "off"
    for i in range(len(flips)):
        at = float(run.get(f"spill.flips.{i}.time", (int, float)))
        what = run.get(f"spill.flips.{i}.taint", str)
        if what not in ("added", "removed"):
            raise InputError(f"is {what!r}", source=str(run.folder / SUMMARY_FILE),
                             field=f"spill.flips.{i}.taint", expected='"added" or "removed"')
        periods.append((start, at, state))
        start, state = at, "on" if what == "added" else "off"
    periods.append((start, max(end, start), state))
    return [p for p in periods if p[1] > p[0]]


def _evictions(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Times of allowed and refused evictions of pods on the VK node."""
    table = run.table(EVICTIONS_FILE, EVICTION_COLUMNS)
    if table is None or not len(table):
        return np.zeros(0), np.zeros(0)
    vk = run.get("spill.virtualNode", str)
    on_vk = np.array([n == vk for n in table.text("node")])
    allowed = table.num("allowed") > 0
    t = table.num("time")
    return t[on_vk & allowed], t[on_vk & ~allowed]


def spill_section(run: Run) -> Section | None:
    spill = _spill(run)
    if spill is None:
        return None
    t = spill.num("time")
    end = max(float(t.max()) if t.size else 0.0, float(run.summary["simulatedSeconds"]))
    unit, seconds = time_unit(end - (float(t.min()) if t.size else 0.0))
    x = t / seconds
    periods = taint_periods(run, end)
    allowed, refused = _evictions(run)
    blocks: list[Block] = []
    with figure(rows=3, height=2.3) as (fig, (sig, vk, money)):
        for start, stop, state in periods:
            if state == "on":
                sig.axvspan(start / seconds, stop / seconds, color=TAINT_COLOUR, linewidth=0)
        sig.plot(*steps(x, spill.num("free_gpus")), drawstyle="steps-post", color=colour(5),
                 linewidth=1.0, label="free in-cluster GPUs")
        sig.plot(x, spill.num("free_gpus_avg"), color=colour(0), linewidth=1.4,
                 label="moving average")
        sig.plot(*steps(x, spill.num("threshold")), drawstyle="steps-post", color=colour(3),
                 linestyle="--", linewidth=1.0, label="threshold")
        faults = x[np.array([bool(f) for f in spill.text("fault")], dtype=bool)]
        if faults.size:
            sig.plot(faults, np.zeros(faults.size), "x", color="#777777", label="signal fault")
        sig.set_ylabel("GPUs")
        vk.plot(*steps(x, spill.num("vk_pods")), drawstyle="steps-post", color=colour(4),
                linewidth=1.2, label="pods on the VK node")
        for times, c, label in ((allowed, colour(2), "eviction"),
                                (refused, colour(1), "refused eviction")):
            for j, at in enumerate(times):
                vk.axvline(at / seconds, color=c, linewidth=0.8,
                           label=label if j == 0 else None)
        vk.set_ylabel("pods")
        money.plot(*steps(x, spill.num("spill_cost")), drawstyle="steps-post", color=colour(3),
                   linewidth=1.2, label="spill cost (cumulative)")
        money.plot(*steps(x, spill.num("spill_gpu_hours")), drawstyle="steps-post",
                   color=colour(0), linewidth=1.0, linestyle="--",
                   label="spill GPU-hours (cumulative)")
        money.set_xlabel(f"simulated time ({unit})")
        for ax in (sig, vk, money):
            ax.set_ylim(bottom=0)
            ax.legend(loc="upper left", fontsize=7)
        blocks.append(svg_figure(fig, "Free-GPU signal, average, threshold and taint; pods "
                                      "on the VK node and evictions; spill GPU-hours and cost"))
    facts: list[list[Cell]] = []
    for key, label in FACTS:
        if key in run.summary["spill"]:
            facts.append([label, run.get(f"spill.{key}", (int, float))])
    controller = run.get("spill.controller", dict)
    facts.extend([f"controller {k}", str(controller[k])] for k in sorted(controller))
    blocks.append(Table(("spill", "value"), facts))
    blocks.append(Table(("from (s)", "to (s)", "low-gpu-usage taint", "seconds"),
                        [[round(a, 3), round(b, 3), state, round(b - a, 3)]
                         for a, b, state in periods],
                        caption="taint on/off periods"))
    blocks.append(Paragraph(
        "Shaded: the vk.node.com/low-gpu-usage taint is on (no new pod may use the VK node). "
        f"{allowed.size} evictions from the VK node, {refused.size} refused. Built from "
        "spill.csv (one row per controller tick), summary.json spill and evictions.csv; "
        "spill.html shows the same run on its own page."))
    return Section(TITLE, blocks)


def spill_compare(runs: Sequence[Run]) -> Section | None:
    """The spill numbers with one column per run, and each run's averaged signal and pods on
    the VK node on one time axis."""
    tables = [_spill(r) for r in runs]
    if all(t is None for t in tables):
        return None
    rows: list[list[Cell]] = []
    for key, label in FACTS:
        rows.append([label, *("" if t is None or key not in r.summary["spill"]
                              else r.get(f"spill.{key}", (int, float))
                              for r, t in zip(runs, tables, strict=True))])
    spans = [float(t.num("time").max()) for t in tables if t is not None and len(t)]
    unit, seconds = time_unit(max(spans, default=0.0))
    with figure(cols=2) as (fig, (sig, vk)):
        for i, t in enumerate(tables):
            if t is None:
                continue
            x = t.num("time") / seconds
            sig.plot(x, t.num("free_gpus_avg"), color=colour(i), linewidth=1.2,
                     label=runs[i].label)
            vk.plot(*steps(x, t.num("vk_pods")), drawstyle="steps-post", color=colour(i),
                    linewidth=1.2, label=runs[i].label)
        sig.set_ylabel("free in-cluster GPUs (average)")
        vk.set_ylabel("pods on the VK node")
        for ax in (sig, vk):
            time_panel(ax, f"simulated time ({unit})", fontsize=7)
        fig_block = svg_figure(fig, "Averaged free-GPU signal and pods on the VK node per run")
    return Section(TITLE, [fig_block, Table(("spill", *(r.label for r in runs)), rows)])
