"""``out/spill.html``: the spill run on one timeline, as a self-contained page.

Whether the knobs are right shows only when the signal, its average, the threshold, the taint
and the pods on the VK node are seen together, with the evictions and the money. The page is
plain HTML with inline SVG written from the run's rows (no plotting library, no scripts), so
the same run gives the same bytes.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from kubeberth.sim.engine import EvictionRecord
from kubeberth.sim.spill import SPILL_COLUMNS

_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 900, 190, 60, 20, 24, 28


def _num(v: Any) -> float | None:
    return None if v == "" or v is None else float(v)


class _Panel:
    """One chart: x is time over the run, y from 0 to ``top``."""

    def __init__(self, title: str, t0: float, t1: float, top: float) -> None:
        self.title = title
        self.t0, self.t1 = t0, t1 if t1 > t0 else t0 + 1.0
        self.top = top if top > 0 else 1.0
        self.parts: list[str] = []

    def x(self, t: float) -> float:
        return _PAD_L + (t - self.t0) / (self.t1 - self.t0) * (_W - _PAD_L - _PAD_R)

    def y(self, v: float) -> float:
        return _PAD_T + (1 - v / self.top) * (_H - _PAD_T - _PAD_B)

    def band(self, start: float, end: float, color: str) -> None:
        x0, x1 = self.x(start), self.x(end)
        self.parts.append(f'<rect x="{x0:.1f}" y="{_PAD_T}" width="{max(x1 - x0, 0.5):.1f}" '
                          f'height="{_H - _PAD_T - _PAD_B}" fill="{color}"/>')

    def line(self, points: Sequence[tuple[float, float | None]], color: str, *,
             step: bool = False, dash: str = "") -> None:
        segs: list[list[str]] = [[]]
        prev: float | None = None
        for t, v in points:
            if v is None:
                segs.append([])
                prev = None
                continue
            if step and prev is not None:
                segs[-1].append(f"{self.x(t):.1f},{self.y(prev):.1f}")
            segs[-1].append(f"{self.x(t):.1f},{self.y(v):.1f}")
            prev = v
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        for seg in segs:
            if len(seg) > 1:
                self.parts.append(f'<polyline points="{" ".join(seg)}" fill="none" '
                                  f'stroke="{color}" stroke-width="1.5"{extra}/>')

    def marks(self, times: Sequence[float], color: str, label: str) -> None:
        for t in times:
            self.parts.append(f'<line x1="{self.x(t):.1f}" x2="{self.x(t):.1f}" y1="{_PAD_T}" '
                              f'y2="{_H - _PAD_B}" stroke="{color}" stroke-width="1">'
                              f"<title>{html.escape(label)} at {t:g}s</title></line>")

    def svg(self, legend: Sequence[tuple[str, str]]) -> str:
        axis = [f'<line x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{_H - _PAD_B}" y2="{_H - _PAD_B}" '
                'stroke="#444"/>',
                f'<line x1="{_PAD_L}" x2="{_PAD_L}" y1="{_PAD_T}" y2="{_H - _PAD_B}" '
                'stroke="#444"/>']
        for frac in (0.0, 0.5, 1.0):
            v = self.top * frac
            axis.append(f'<text x="{_PAD_L - 6}" y="{self.y(v) + 4:.1f}" text-anchor="end" '
                        f'font-size="11">{v:g}</text>')
            t = self.t0 + (self.t1 - self.t0) * frac
            axis.append(f'<text x="{self.x(t):.1f}" y="{_H - 8}" text-anchor="middle" '
                        f'font-size="11">{t:g}s</text>')
        x = _PAD_L
        for name, color in legend:
            axis.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{color}"/>'
                        f'<text x="{x + 14}" y="15" font-size="11">{html.escape(name)}</text>')
            x += 18 + 7 * len(name)
        return (f'<h2>{html.escape(self.title)}</h2><svg xmlns="http://www.w3.org/2000/svg" '
                f'width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}">'
                + "".join(self.parts + axis) + "</svg>")


def render_spill_html(rows: Sequence[tuple[Any, ...]], evictions: Sequence[EvictionRecord],
                      summary: dict[str, Any], title: str) -> str:
    """The page for one run: signal panel, VK panel, cost panel, and the summary numbers."""
    col = {name: i for i, name in enumerate(SPILL_COLUMNS)}
    times = [float(r[col["time"]]) for r in rows]
    t0, t1 = (times[0], times[-1]) if times else (0.0, 1.0)
    free = [(t, _num(r[col["free_gpus"]])) for t, r in zip(times, rows, strict=True)]
    avg = [(t, _num(r[col["free_gpus_avg"]])) for t, r in zip(times, rows, strict=True)]
    threshold = float(summary["controller"]["threshold"])
    top = max([threshold] + [v for _, v in free + avg if v is not None]) * 1.1

    signal = _Panel("Free in-cluster GPUs, moving average, threshold, taint", t0, t1, top)
    start: float | None = None
    for t, r in zip(times, rows, strict=True):
        on = bool(r[col["tainted"]])
        if on and start is None:
            start = t
        elif not on and start is not None:
            signal.band(start, t, "#f6d6d6")
            start = None
    if start is not None:
        signal.band(start, t1, "#f6d6d6")
    faults = [t for t, r in zip(times, rows, strict=True) if r[col["fault"]]]
    signal.marks(faults, "#999", "signal fault")
    signal.line([(t0, threshold), (t1, threshold)], "#c00", dash="6 4")
    signal.line(free, "#7aa6d6", step=True)
    signal.line(avg, "#1f4e8c")

    vk_top = max([float(r[col["vk_pods"]]) for r in rows] + [1.0]) * 1.1
    vk = _Panel("Pods on the virtual-kubelet node, evictions", t0, t1, vk_top)
    vk.marks([e.time for e in evictions if e.verdict.allowed], "#2a8c2a", "eviction")
    vk.marks([e.time for e in evictions if not e.verdict.allowed], "#e08a00", "refused eviction")
    vk.line([(t, float(r[col["vk_pods"]])) for t, r in zip(times, rows, strict=True)], "#6a3d9a",
            step=True)

    cost_top = max([float(r[col["spill_cost"]]) for r in rows] + [1.0]) * 1.1
    cost = _Panel("Spill cost (cumulative)", t0, t1, cost_top)
    cost.line([(t, float(r[col["spill_cost"]])) for t, r in zip(times, rows, strict=True)],
              "#b15928")

    facts = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(summary[k]))}</td></tr>"
        for k in ("podsSpilled", "gpuHours", "cost", "taintFlips", "secondsTainted",
                  "secondsUntainted", "faultTicks", "podsLostInOutages"))
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:20px}td{padding:2px 10px}"
        "h2{font-size:15px;margin:18px 0 4px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table>{facts}</table>"
        + signal.svg([("free GPUs", "#7aa6d6"), ("average", "#1f4e8c"), ("threshold", "#c00"),
                      ("low-gpu-usage taint on", "#f6d6d6"), ("signal fault", "#999")])
        + vk.svg([("pods on VK", "#6a3d9a"), ("eviction", "#2a8c2a"),
                  ("refused eviction", "#e08a00")])
        + cost.svg([("cost", "#b15928")])
        + "</body></html>\n"
    )
