"""Deterministic matplotlib figures: fixed rc, no timestamps, stable ids, compressed steps."""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from kubeberth.report.figures import (
    PALETTE,
    colour,
    figure,
    log_y,
    steps,
    svg_figure,
    time_unit,
)


def draw(values: list[float]) -> str:
    with figure(cols=2) as (fig, (left, right)):
        left.plot(values, label="a <b>")
        right.bar(["x", "y"], [1, 2])
        left.legend()
        return svg_figure(fig, "alt").svg


def test_same_data_same_bytes() -> None:
    assert draw([1, 2, 3]) == draw([1, 2, 3])
    assert draw([1, 2, 3]) != draw([1, 2, 4])


def test_svg_has_no_date_or_creator_and_text_stays_text() -> None:
    svg = draw([1, 2, 3])
    assert svg.startswith("<svg")
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    assert "a &lt;b&gt;" in svg  # label kept as (escaped) text, not glyph paths


def test_user_rc_does_not_leak_in_or_out() -> None:
    before = draw([1, 2, 3])
    with matplotlib.rc_context({"svg.hashsalt": "other", "svg.fonttype": "path",
                                "font.size": 20.0}):
        assert draw([1, 2, 3]) == before
    assert matplotlib.rcParams["svg.hashsalt"] != "kubeberth"


def test_figure_axes_are_flattened_row_major() -> None:
    with figure(rows=2, cols=3) as (_, axes):
        assert len(axes) == 6
        assert axes[1].get_subplotspec().colspan.start == 1
        assert axes[3].get_subplotspec().rowspan.start == 1


def test_log_y_labels_without_mathtext() -> None:
    with figure() as (fig, (ax,)):
        ax.bar([0, 1], [1, 1000])
        log_y(ax)
        svg = svg_figure(fig, "log").svg
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert labels[-4:] == ["1", "10", "100", "1000"]


@pytest.mark.parametrize(("span", "unit"), [
    (0.0, "seconds"), (119.0, "seconds"), (120.0, "minutes"), (7199.0, "minutes"),
    (7200.0, "hours"), (172800.0, "days"), (12902960.0, "days"),
])
def test_time_unit(span: float, unit: str) -> None:
    assert time_unit(span)[0] == unit


def test_steps_keeps_changes_and_ends() -> None:
    x = np.arange(8.0)
    a = np.array([0, 0, 0, 1, 1, 1, 0, 0], dtype=float)
    b = np.array([5, 5, 6, 6, 6, 6, 6, 6], dtype=float)
    sx, sa, sb = steps(x, a, b)
    assert sx.tolist() == [0, 2, 3, 6, 7]
    assert sa.tolist() == [0, 0, 1, 0, 0]
    assert sb.tolist() == [5, 6, 6, 6, 6]


def test_steps_short_series_unchanged() -> None:
    x = np.array([0.0, 1.0])
    sx, sy = steps(x, np.array([3.0, 3.0]))
    assert sx.tolist() == [0, 1] and sy.tolist() == [3, 3]


def test_colours_cycle() -> None:
    assert colour(0) == PALETTE[0]
    assert colour(len(PALETTE)) == PALETTE[0]
