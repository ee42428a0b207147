"""The fragmentation experiment's HTML report: policies compared per trace, as the FGD paper does.

For each trace, two charts drawn with matplotlib and embedded as PNG: the GPU allocation rate
against the arrived GPU demand (mean over seeds, with a band from the lowest to the highest
seed), and bars of the GPUs left unallocated when the arrived demand reached 100 % and the
largest arrival of the grid (130 % by default), mean over seeds with the seed range as error
bars, plus the same numbers as a table. The page is rebuilt from the tidy CSV alone, and PNGs
are written without timestamps, so the same CSV gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

REPORT_FILE = "fragmentation.html"
_POLICY_ORDER = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")

Rows = Iterable[Mapping[str, str]]


def _policy_rank(name: str) -> tuple[int, str]:
    return (_POLICY_ORDER.index(name) if name in _POLICY_ORDER else len(_POLICY_ORDER), name)


def _png(fig: object) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})  # type: ignore[attr-defined]
    return base64.b64encode(buf.getvalue()).decode("ascii")


def unallocated_at(rows: Rows, arrived_pct: int) -> dict[tuple[str, str], list[float]]:
    """(trace, policy) → unallocated GPUs of each seed when arrival reached ``arrived_pct``."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if int(r["arrived_pct"]) == arrived_pct:
            out[(r["trace"], r["policy"])].append(float(r["unallocated_gpus"]))
    return out


def render(rows: list[dict[str, str]], path: Path) -> Path:
    """Write the report for the tidy CSV ``rows`` to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = sorted({r["trace"] for r in rows})
    top = max((int(r["arrived_pct"]) for r in rows), default=0)
    marks = [m for m in (100, top) if m <= top]
    marks = list(dict.fromkeys(marks))
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>kubeberth fragmentation experiment</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
             "text-align:right}</style></head><body>",
             "<h1>GPU fragmentation experiment</h1>",
             "<p>Policies compared as in Weng et al., USENIX ATC'23: pods never depart; "
             "allocation is the share of all GPUs allocated; unallocated GPUs are the idle GPUs "
             "when the arrived GPU demand reached the given share of the cluster's GPUs. "
             "Mean over seeds; bands and error bars span the seeds.</p>"]
    for trace in traces:
        sub = [r for r in rows if r["trace"] == trace]
        policies = sorted({r["policy"] for r in sub}, key=_policy_rank)
        seeds = sorted({int(r["seed"]) for r in sub})
        parts.append(f"<h2>{html.escape(trace)}</h2><p>seeds: "
                     f"{html.escape(', '.join(map(str, seeds)))}</p>")
        fig, ax = plt.subplots(figsize=(7, 4))
        for policy in policies:
            by_x: dict[int, list[float]] = defaultdict(list)
            for r in sub:
                if r["policy"] == policy:
                    by_x[int(r["arrived_pct"])].append(float(r["allocated_pct"]))
            xs = sorted(by_x)
            ys = np.array([np.mean(by_x[x]) for x in xs])
            lo = np.array([min(by_x[x]) for x in xs])
            hi = np.array([max(by_x[x]) for x in xs])
            (line,) = ax.plot(xs, ys, label=policy)
            ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
        ideal_x = [0, 100, top] if top > 100 else [0, top]
        ax.plot(ideal_x, [min(x, 100) for x in ideal_x], ls=":", color="gray", label="ideal")
        ax.set_xlabel("arrived GPU demand (% of cluster GPUs)")
        ax.set_ylabel("GPU allocation (%)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        parts.append(f"<img alt='allocation curves' src='data:image/png;base64,{_png(fig)}'>")
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 3.5))
        width = 0.8 / max(len(marks), 1)
        table = ["<table><tr><th>policy</th>"
                 + "".join(f"<th>unallocated GPUs at {m} %</th>" for m in marks) + "</tr>"]
        values = {m: unallocated_at(sub, m) for m in marks}
        for j, m in enumerate(marks):
            means: list[float] = []
            errs: list[list[float]] = [[], []]
            for policy in policies:
                v = values[m].get((trace, policy), [float("nan")])
                mean = float(np.mean(v))
                means.append(mean)
                errs[0].append(mean - min(v))
                errs[1].append(max(v) - mean)
            ax.bar(np.arange(len(policies)) + j * width, means, width, yerr=errs,
                   label=f"{m} % arrived")
        for policy in policies:
            cells = []
            for m in marks:
                seen = values[m].get((trace, policy))
                cells.append(f"<td>{np.mean(seen):.1f}</td>" if seen else "<td>–</td>")
            table.append(f"<tr><td>{html.escape(policy)}</td>{''.join(cells)}</tr>")
        table.append("</table>")
        ax.set_xticks(np.arange(len(policies)) + width * (len(marks) - 1) / 2, policies,
                      fontsize=8)
        ax.set_ylabel("unallocated GPUs")
        ax.legend(fontsize=8)
        fig.tight_layout()
        parts.append(f"<img alt='unallocated GPUs' src='data:image/png;base64,{_png(fig)}'>")
        plt.close(fig)
        parts.extend(table)
    parts.append("</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
