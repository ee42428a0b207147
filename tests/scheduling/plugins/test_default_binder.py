"""DefaultBinder: always takes the binding; the host records it."""

from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.plugins import default_binder

from .plugin_builders import cluster, handle, make_node, make_pod


def test_bind_answers_success_without_touching_the_state() -> None:
    snap = cluster(make_node("a"))
    pod = make_pod("p")
    generation = snap.generation
    st_ = default_binder.new(None, handle(snap)).bind(CycleState(), pod, snap, 0)
    assert st_.ok
    assert snap.generation == generation and pod.node == -1


def test_no_args() -> None:
    with pytest.raises(InputError):
        default_binder.new({"async": True}, handle())
