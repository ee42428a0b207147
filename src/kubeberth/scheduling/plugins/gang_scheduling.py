"""GangScheduling: Kubernetes 1.37's native gang scheduling for scheduling.k8s.io PodGroups
(KEP-4671, KEP-5832).

- PreEnqueue: a pod of a PodGroup that does not exist is UnschedulableAndUnresolvable; a pod of
  a group with fewer than ``minCount`` existing pods waits (Unschedulable) until enough exist.
- PlacementFeasible: in the pod-group cycle, Unschedulable once the placed plus remaining pods
  cannot reach ``minCount`` (the cycle stops early), Wait while fewer than ``minCount`` are
  placed, Success from then on. A Basic group counts as ``minCount`` 1.
- Permit: allows a member once ``minCount`` members are assumed or bound (the pod-group cycle
  reserves them all before Permit, so a gang passes at once) and lets waiting siblings go;
  otherwise Wait, timing out after 300 s (docs/gangs.md).

Pods joining no native PodGroup pass every point untouched, so the plugin sits in the default
profile without changing pod-by-pod decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    PermitPlugin,
    PreEnqueuePlugin,
)
from kubeberth.scheduling.framework.placement import (
    PlacementFeasiblePlugin,
    PlacementProgress,
    PodGroupInfo,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import ClusterState, PodInfo

NAME = "GangScheduling"
PERMIT_WAITING_SECONDS = 300


class GangScheduling(PreEnqueuePlugin, PermitPlugin, PlacementFeasiblePlugin,
                     EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle, permit_waiting_seconds: int) -> None:
        self.handle = handle
        self.permit_waiting_seconds = permit_waiting_seconds

    def pre_enqueue(self, pod: PodInfo) -> Status:
        objects = self.handle.snapshot.objects
        key = objects.native_group_name(pod)
        if not key:
            return SUCCESS
        group = objects.native_group(pod)
        if group is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                          (f'waiting for pod group "{key}" to be created',))
        count = len(objects.native_members(key))
        if count < group.min_count:
            return Status(Code.UNSCHEDULABLE,
                          (f'waiting for minCount pods of pod group "{key}" to appear: '
                           f"{count} of {group.min_count}",))
        return SUCCESS

    def placement_feasible(self, state: CycleState, group: PodGroupInfo,
                           progress: PlacementProgress) -> Status:
        need = group.group.min_count
        if progress.remaining + progress.scheduled < need:
            return Status(Code.UNSCHEDULABLE,
                          (f"minCount ({need}) cannot be satisfied: {progress.scheduled} "
                           f"scheduled, {progress.remaining} remaining",))
        if progress.scheduled < need:
            return Status(Code.WAIT,
                          (f"minCount ({need}) is not yet satisfied: {progress.scheduled} "
                           f"scheduled, {progress.remaining} remaining",))
        return SUCCESS

    def permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               node: int) -> tuple[Status, float]:
        objects = snap.objects
        group = objects.native_group(pod)
        if group is None or not group.gang:
            return SUCCESS, 0.0
        members = objects.native_members(group.key)
        placed = sum(1 for m in members.values() if m.node >= 0)
        if placed < group.min_count:
            return Status(Code.WAIT, (f'waiting for pod group "{group.key}" to reach minCount',
                                      )), float(self.permit_waiting_seconds)
        for key in members:
            waiting = self.handle.waiting_pods.get(key)
            if waiting is not None:
                waiting.allow(NAME)
        return SUCCESS, 0.0

    def events_to_register(self) -> list[ClusterEvent]:
        """A new PodGroup or a new pod may complete a group."""
        return [ClusterEvent("PodGroup", "Add"), ClusterEvent("Pod", "Add")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> GangScheduling:
    reject_args(NAME, args)
    return GangScheduling(handle, PERMIT_WAITING_SECONDS)
