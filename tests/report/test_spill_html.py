"""The spill timeline page from synthetic rows: taint bands, fault and eviction marks."""

from __future__ import annotations

import re
from typing import Any

from kubeberth.report.spill_html import render_spill_html
from kubeberth.sim.engine import EvictionRecord
from kubeberth.state.disruption import EvictionVerdict

SUMMARY: dict[str, Any] = {
    "podsSpilled": 2, "gpuHours": 1.5, "cost": 3.75, "taintFlips": 2, "secondsTainted": 60.0,
    "secondsUntainted": 60.0, "faultTicks": 1, "podsLostInOutages": 0,
    "controller": {"threshold": 4.0},
}


def row(t: float, free: float | str, avg: float | str, tainted: int, fault: str = "",
        vk: int = 0, cost: float = 0.0) -> tuple[Any, ...]:
    return (t, free, avg, 4.0, tainted, fault, vk, float(vk), 0.0, cost)


ROWS = [row(0, 8, 8, 0), row(30, 8, 8, 1, vk=2, cost=1.0), row(60, "", 8, 1, "down", 2, 2.0),
        row(90, 0, 4, 0, vk=1, cost=3.0), row(120, 0, 2, 0, cost=3.75)]


def test_page_structure_and_numbers() -> None:
    page = render_spill_html(ROWS, [], SUMMARY, "run <1>")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert "run &lt;1&gt;" in page and "<1>" not in page  # escaped
    assert page.count("<svg") == 3
    assert "<td>gpuHours</td><td>1.5</td>" in page


def test_taint_band_spans_the_tainted_ticks() -> None:
    page = render_spill_html(ROWS, [], SUMMARY, "t")
    bands = re.findall(r'<rect x="([\d.]+)" y="24" width="([\d.]+)" height="138" '
                       r'fill="#f6d6d6"/>', page)
    assert len(bands) == 1
    x, width = map(float, bands[0])
    # 30 s to 90 s of a 120 s run across an 820-pixel plot starting at x=60.
    assert abs(x - (60 + 820 * 30 / 120)) < 0.1 and abs(width - 820 * 60 / 120) < 0.1


def test_fault_tick_breaks_the_signal_line_and_is_marked() -> None:
    page = render_spill_html(ROWS, [], SUMMARY, "t")
    assert "<title>signal fault at 60s</title>" in page
    free_lines = re.findall(r'<polyline points="[^"]*" fill="none" stroke="#7aa6d6"', page)
    assert len(free_lines) == 2  # before and after the missing sample


def test_evictions_are_marked_by_outcome() -> None:
    ok = EvictionRecord(45.0, "ns/a", "vk", "P", "r", EvictionVerdict(True, 200))
    no = EvictionRecord(50.0, "ns/b", "vk", "P", "r", EvictionVerdict(False, 429, "budget"))
    page = render_spill_html(ROWS, [ok, no], SUMMARY, "t")
    assert "<title>eviction at 45s</title>" in page
    assert "<title>refused eviction at 50s</title>" in page


def test_same_input_same_bytes() -> None:
    page = render_spill_html(ROWS, [], SUMMARY, "t")
    assert page == render_spill_html(ROWS, [], SUMMARY, "t")
    # The page is the spill timeline of these rows, not an empty shell that is trivially stable.
    assert page.count("<svg") == 3 and "<td>cost</td><td>3.75</td>" in page
    assert page != render_spill_html(ROWS[:-1], [], SUMMARY, "t")


def test_single_row_run_renders() -> None:
    page = render_spill_html([row(0, 1, 1, 1)], [], SUMMARY, "t")
    assert page.count("<svg") == 3
