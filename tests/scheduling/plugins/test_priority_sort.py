"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.interface import QueuedPodInfo
from kubeberth.scheduling.plugins import priority_sort
from kubeberth.scheduling.plugins.priority_sort import PrioritySort

from .plugin_builders import handle, make_pod


def plugin() -> PrioritySort:
    return priority_sort.new(None, handle())


def queued(name: str, priority: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(make_pod(name, priority=priority), timestamp=timestamp)


def test_higher_priority_first_then_older() -> None:
    pods = [queued("low-old", 0, 1.0), queued("high-new", 100, 5.0),
            queued("high-old", 100, 2.0), queued("neg", -5, 0.0)]
    order = [q.info.name for q in sorted(pods, key=plugin().sort_key)]
    assert order == ["high-old", "high-new", "low-old", "neg"]


@given(st.lists(st.tuples(st.integers(-10, 10), st.floats(0, 100)), min_size=2, max_size=2))
def test_key_order_is_upstream_less(pair: list[tuple[int, float]]) -> None:
    (p1, t1), (p2, t2) = pair
    a, b = queued("a", p1, t1), queued("b", p2, t2)
    less = p1 > p2 or (p1 == p2 and t1 < t2)
    assert (plugin().sort_key(a) < plugin().sort_key(b)) is less


def test_no_args() -> None:
    with pytest.raises(InputError):
        priority_sort.new({"order": "fifo"}, handle())
    assert priority_sort.new({}, handle()).name == "PrioritySort"
