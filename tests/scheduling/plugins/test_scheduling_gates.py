"""SchedulingGates: gated pods stay out of the active queue with upstream's message."""

from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.interface import ClusterEvent
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import scheduling_gates
from kubeberth.scheduling.plugins.scheduling_gates import SchedulingGates

from .plugin_builders import handle, make_pod


def plugin() -> SchedulingGates:
    return scheduling_gates.new(None, handle())


def test_ungated_pod_is_admitted() -> None:
    assert plugin().pre_enqueue(make_pod("p")).ok


def test_gated_pod_waits_with_gate_names() -> None:
    st_ = plugin().pre_enqueue(make_pod("p", gates=["example.com/quota", "tas"]))
    assert st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st_.reasons == ("waiting for scheduling gates: [example.com/quota tas]",)


def test_removing_the_gates_is_the_event() -> None:
    events = plugin().events_to_register()
    assert events == [ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")]
    assert ClusterEvent("Pod", "Update").matches(events[0])


def test_no_args() -> None:
    with pytest.raises(InputError):
        scheduling_gates.new({"gates": []}, handle())
