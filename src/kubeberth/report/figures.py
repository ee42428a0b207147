"""matplotlib figures that render to the same SVG bytes every time.

matplotlib's SVG writer stamps a date, draws random ids for clip paths and markers, and reads
the user's matplotlibrc. :func:`figure` and :func:`svg_figure` draw under fixed settings
(matplotlib's defaults plus ours, never the user's rcParams; a fixed hash salt; no date or
creator; text kept as text), so a report is a pure function of its data. Figures are built with
the object API (``matplotlib.figure.Figure``), never pyplot: no global figure registry, no GUI
backend, nothing left open between reports.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter, NullLocator

from kubeberth.report.html import Figure

# Colour-blind-safe (Okabe-Ito), in a fixed order so run i has the same colour in every figure.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")

RC: dict[str, Any] = {
    "svg.hashsalt": "kubeberth",
    "svg.fonttype": "none",
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
    "path.simplify_threshold": 0.111111111111,
    "figure.dpi": 100.0,
    "savefig.bbox": None,
}

# Seconds per display unit, largest first; a series is shown in the largest unit that still
# leaves at least two of them on the axis.
TIME_UNITS = (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0), ("seconds", 1.0))


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def time_unit(span_seconds: float) -> tuple[str, float]:
    for name, seconds in TIME_UNITS:
        if span_seconds >= 2 * seconds:
            return name, seconds
    return "seconds", 1.0


@contextmanager
def figure(*, rows: int = 1, cols: int = 1, width: float = 9.0,
           height: float = 3.2) -> Iterator[tuple[MplFigure, list[Axes]]]:
    """A fresh figure with ``rows`` × ``cols`` axes (flattened, row-major) under our rc only."""
    # Reset to matplotlib's defaults first: a user's matplotlibrc or a global rcParams change
    # must not alter the bytes (``after_reset``); everything is restored on exit.
    with matplotlib.style.context(RC, after_reset=True):
        # Fixed margins instead of a layout engine: constrained layout measures every tick
        # label, which doubles the drawing time of a figure.
        fig = MplFigure(figsize=(width, height * rows))
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.45 / (height * rows) + 0.04,
                            top=1 - 0.3 / (height * rows), wspace=0.22, hspace=0.3)
        axes = fig.subplots(rows, cols, squeeze=False)
        yield fig, [ax for row in axes for ax in row]


def log_y(ax: Axes) -> None:
    """A log y axis labelled 1, 10, 100 in plain text (matplotlib's default formatter
    typesets every label with mathtext, which costs more than the rest of the figure)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def time_panel(ax: Axes, xlabel: str, ylabel: str | None = None,
               fontsize: float | None = None) -> None:
    """Finish a time-series panel in the house style: labels, y from 0, legend top left."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=fontsize)


def svg_figure(fig: MplFigure, alt: str, caption: str = "") -> Figure:
    """Render a figure (inside :func:`figure`'s context) to a deterministic SVG block."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return Figure(text[text.index("<svg"):], alt, caption)


def steps(x: np.ndarray, *ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Keep only the samples where some series changes (and the last one), for drawing with
    ``steps-post``: a long flat stretch costs one SVG vertex instead of hundreds, and the
    picture is the same."""
    if x.size <= 2:
        return (x, *ys)
    keep = np.zeros(x.size, dtype=bool)
    keep[0] = keep[-1] = True
    for y in ys:
        keep[1:] |= y[1:] != y[:-1]
    return (x[keep], *(y[keep] for y in ys))
