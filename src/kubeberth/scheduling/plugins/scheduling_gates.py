"""SchedulingGates: a pod with ``spec.schedulingGates`` does not enter the active queue.

PreEnqueue answers UnschedulableAndUnresolvable while any gate remains, with upstream's message
listing the gate names in Go's ``%v`` form (``[a b]``); the queue parks the pod until an update
removes the last gate. Removing gates is someone else's job (a controller, the trace, the user).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    PreEnqueuePlugin,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import PodInfo

NAME = "SchedulingGates"


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gates = pod.pod.spec.scheduling_gates
        if not gates:
            return SUCCESS
        names = " ".join(g.name for g in gates)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      ("waiting for scheduling gates: [" + names + "]",))

    def events_to_register(self) -> list[ClusterEvent]:
        """Only the pod losing its last gate lets it in."""
        return [ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> SchedulingGates:
    reject_args(NAME, args)
    return SchedulingGates()
