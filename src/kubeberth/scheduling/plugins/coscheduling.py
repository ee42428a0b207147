"""Coscheduling: gang scheduling with PodGroups, as kubernetes-sigs/scheduler-plugins does it.

Without it, two 4-GPU training jobs on a 4-GPU cluster can each get half their pods placed and
both wait forever. A PodGroup (``scheduling.x-k8s.io/v1alpha1``) names how many members must run
together (``minMember``), optionally what the cluster must have free for them
(``minResources``) and how long its members may hold reservations (``scheduleTimeoutSeconds``);
pods join it with the ``scheduling.x-k8s.io/pod-group`` label. The extension points follow
upstream's ``pkg/coscheduling``:

- QueueSort: priority, then the PodGroup's creation time (a lone pod's first attempt), then the
  pod's ``namespace/name``, so a group's members leave the queue back to back;
- PreFilter: rejects (UnschedulableAndUnresolvable) a member of a group that failed recently
  (``podGroupBackoffSeconds``), that has fewer pods than ``minMember``, or whose
  ``minResources`` the cluster's free capacity cannot cover;
- PostFilter: when a member fits nowhere and the group is more than 10% short of ``minMember``,
  rejects its waiting siblings (their reservations are given back);
- Permit: Wait until ``minMember`` members are assumed or bound, then allow them all; the wait
  times out after ``scheduleTimeoutSeconds`` (else ``permitWaitingTimeSeconds``), and a waiting
  member asks for its siblings to be activated;
- Unreserve: when one member's reservation is given back (timeout, rejection, failed bind),
  every waiting sibling is rejected.

Deviation: upstream orders groups with equal creation timestamps by pod name; PodGroups here are
created at their ``kubeberth.io/arrival-seconds`` (default 0) and equal times keep manifest
order, as an API server creating them one by one would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import format_milli
from kubeberth.api.resources import PODS, resource_map
from kubeberth.api.scheduling_crds import POD_GROUP_LABEL, PodGroup
from kubeberth.scheduling.framework.cycle_state import (
    PODS_TO_ACTIVATE_KEY,
    CycleState,
    PodsToActivate,
)
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import args_int, args_mapping, reject_unknown
from kubeberth.state.cluster import ClusterState, PodInfo
from kubeberth.state.objects import pod_group_key

NAME = "Coscheduling"
_ARG_FIELDS = ("permitWaitingTimeSeconds", "podGroupBackoffSeconds")
NOT_FOUND = "PodGroup not found"


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """Upstream ``CoschedulingArgs`` with its v1 defaults (60 s wait, no group backoff)."""

    permit_waiting_time_seconds: int = 60
    pod_group_backoff_seconds: int = 0

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> CoschedulingArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, _ARG_FIELDS, None)
        wait = args_int(raw, "permitWaitingTimeSeconds", None, 60)
        backoff = args_int(raw, "podGroupBackoffSeconds", None, 0)
        if wait < 0:
            raise InputError(f"permitWaitingTimeSeconds is {wait}",
                             field="permitWaitingTimeSeconds",
                             expected="a non-negative number of seconds")
        if backoff < 0:
            raise InputError("PodGroupBackoffSeconds cannot be negative",
                             field="podGroupBackoffSeconds",
                             expected="a non-negative number of seconds")
        return cls(wait, backoff)


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, PermitPlugin,
                   ReservePlugin, EnqueueExtensions):
    """scheduler-plugins' Coscheduling plugin."""

    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        # Groups whose minResources check passed, and groups backing off: name -> expiry.
        self._permitted: dict[str, float] = {}
        self._backed_off: dict[str, float] = {}

    # ---- helpers ---------------------------------------------------------------------------
    def _group(self, pod: PodInfo, snap: ClusterState) -> tuple[str, PodGroup | None]:
        key = pod_group_key(pod)
        return key, snap.objects.pod_groups.get(key) if key else None

    def _live(self, cache: dict[str, float], key: str) -> bool:
        expiry = cache.get(key)
        if expiry is None:
            return False
        if self.handle.now() >= expiry:
            del cache[key]
            return False
        return True

    @staticmethod
    def assigned(key: str, snap: ClusterState, exclude: str = "") -> int:
        """Members assumed or bound on a node (upstream ``CalculateAssignedPods``)."""
        return sum(1 for k in snap.objects.members(key) if k in snap.pods and k != exclude)

    def _reject_waiting(self, pod: PodInfo, group: PodGroup, message: str) -> None:
        ns, name = pod.namespace, group.metadata.name
        for wp in self.handle.waiting_pods:
            other = wp.info
            if other.namespace == ns and other.labels.get(POD_GROUP_LABEL) == name:
                wp.reject(NAME, message)

    # ---- QueueSort -------------------------------------------------------------------------
    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float, int, str]:
        pi = qpi.info
        key = pod_group_key(pi)
        created = self.handle.snapshot.objects.pod_group_created.get(key) if key else None
        if created is None:
            first = qpi.initial_attempt_timestamp
            return (-pi.priority, qpi.timestamp if first is None else first, -1, pi.key)
        return (-pi.priority, created[0], created[1], pi.key)

    # ---- PreFilter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        key, pg = self._group(pod, snap)
        if pg is None:
            return None, SUCCESS
        if self._live(self._backed_off, key):
            return None, _unresolvable(f"podGroup {key} failed recently")
        pods = len(snap.objects.members(key))
        if pods < pg.spec.min_member:
            return None, _unresolvable(
                f"pre-filter pod {pod.name} cannot find enough sibling pods, current pods "
                f"number: {pods}, minMember of group: {pg.spec.min_member}")
        if pg.spec.min_resources is None or self._live(self._permitted, key):
            return None, SUCCESS
        gap = self._resource_gap(key, pg, snap)
        if gap:
            return None, _unresolvable("resource gap: map[" + " ".join(
                f"{name}:{format_milli(name, v)}" for name, v in sorted(gap.items())) + "]")
        self._permitted[key] = self.handle.now() + self.args.permit_waiting_time_seconds
        return None, SUCCESS

    def _resource_gap(self, key: str, pg: PodGroup, snap: ClusterState) -> dict[str, int]:
        """Upstream ``CheckClusterResource``: walk the nodes, taking each one's free capacity
        (the group's own pods counted as free) off ``minResources`` plus ``minMember`` pod
        slots; what is still positive after the last node is the gap."""
        need = resource_map(pg.spec.min_resources or {}, "spec.minResources")
        need[PODS] = pg.spec.min_member * 1000
        ids = snap.node_ids()
        own = [pi for k in snap.objects.members(key) if (pi := snap.pods.get(k)) is not None]
        gap: dict[str, int] = {}
        for name, want in need.items():
            if want <= 0:
                continue
            if name == PODS:
                free = (snap.max_pods[ids] - snap.pod_count[ids]) * 1000
                for pi in own:
                    free[np.searchsorted(ids, pi.node)] += 1000
            else:
                col = snap.resources.get(name)
                if col is None:
                    gap[name] = want
                    continue
                free = snap.allocatable[ids, col] - snap.requested[ids, col]
                for pi in own:
                    free[np.searchsorted(ids, pi.node)] += pi.requests.get(name, 0)
            remaining = want - np.cumsum(free)
            if not (remaining <= 0).any():
                gap[name] = int(remaining[-1]) if remaining.size else want
        return gap

    # ---- PostFilter ------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        key, pg = self._group(pod, snap)
        if pg is None:
            return PostFilterResult(), Status(Code.UNSCHEDULABLE, ("can not find pod group",))
        min_member = pg.spec.min_member
        assigned = self.assigned(key, snap)
        if assigned >= min_member:
            return PostFilterResult(), Status(Code.UNSCHEDULABLE)
        # Within 10% of the quorum, later members may still complete the group.
        if np.float32(min_member - assigned) / np.float32(min_member) <= np.float32(0.1):
            return PostFilterResult(), Status(Code.UNSCHEDULABLE)
        self._reject_waiting(pod, pg, "optimistic rejection in PostFilter")
        if self.args.pod_group_backoff_seconds > 0 and \
                len(snap.objects.members(key)) >= min_member:
            self._backed_off[key] = self.handle.now() + self.args.pod_group_backoff_seconds
        self._permitted.pop(key, None)
        return PostFilterResult(), Status(Code.UNSCHEDULABLE, (
            f"PodGroup {key} gets rejected due to Pod {pod.name} is unschedulable even after "
            "PostFilter",))

    # ---- Permit ----------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               node: int) -> tuple[Status, float]:
        key, pg = self._group(pod, snap)
        if not key:
            return SUCCESS, 0.0
        if pg is None:
            return Status(Code.UNSCHEDULABLE, (NOT_FOUND,)), 0.0
        # The snapshot already holds this pod (assumed before Permit); upstream's does not and
        # adds one, so the count is the same.
        if self.assigned(key, snap, exclude=pod.key) + 1 >= pg.spec.min_member:
            for wp in self.handle.waiting_pods:
                if pod_group_key(wp.info) == key:
                    wp.allow(NAME)
            return SUCCESS, 0.0
        timeout = pg.spec.schedule_timeout_seconds or self.args.permit_waiting_time_seconds
        siblings = [k for k in snap.objects.members(key) if k != pod.key]
        if siblings:
            want = state.get(PODS_TO_ACTIVATE_KEY)
            if not isinstance(want, PodsToActivate):
                want = PodsToActivate()
                state.write(PODS_TO_ACTIVATE_KEY, want)
            want.keys.update(siblings)
        return Status(Code.WAIT), float(timeout)

    # ---- Reserve ---------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  node: int) -> None:
        key, pg = self._group(pod, snap)
        if pg is None:
            return
        self._reject_waiting(pod, pg, "rejection in Unreserve")
        self._permitted.pop(key, None)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Add"), ClusterEvent("PodGroup", "Add"),
                ClusterEvent("PodGroup", "Update")]


def _unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


def new(args: Mapping[str, Any] | None, handle: Handle) -> Coscheduling:
    return Coscheduling(CoschedulingArgs.parse(args), handle)
