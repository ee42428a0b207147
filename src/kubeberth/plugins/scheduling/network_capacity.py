"""NetworkCapacity: pods that need high-speed networking get a labelled node with a free slot.

Distributed training and inference pods that talk over RDMA/NVLink-class fabrics must land only
on nodes wired for it, and each such node has a limited number of network slots (NIC queues,
SR-IOV virtual functions). A pod states its need with the annotation
``kubeberth.io/network-slots: "N"``. Filter rejects, as UnschedulableAndUnresolvable, nodes
without the label ``nodeLabel`` (``kubeberth.io/network=high-speed`` by default: a hard
constraint, never a low score) and, as Unschedulable, nodes whose free slots are fewer than N.
A node's capacity is read from its annotation ``kubeberth.io/network-slots`` (the capacity
source; a Node update in a simulation changes it).

Slots in use are the slots of the pods the cluster state holds on the node, assumed pods
included, so a slot is reserved from the moment the scheduler assumes a pod. Reserve checks the
node once more with the pod counted (two pods racing for the last slot: the second is rejected
and requeued); giving a reservation back (Unreserve after a Permit rejection or timeout, a failed
bind) and a pod's completion remove the pod from the state, which frees its slots, so nothing
can leak. Per-node usage is cached until the node's pods change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.framework.cycle_state import CycleState
from kubeberth.framework.handle import Handle
from kubeberth.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubeberth.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.plugins.scheduling.helper import all_pass, args_mapping, args_str, reject_unknown
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NetworkCapacity"
SLOTS_ANNOTATION = "kubeberth.io/network-slots"
DEFAULT_LABEL = "kubeberth.io/network=high-speed"
REASON_LABEL = "node(s) didn't have high-speed networking"
REASON_SLOTS = "node(s) had no free network slot"


def slots_of(pod: Pod) -> int:
    """Network slots a pod needs (0 when it does not ask)."""
    raw = pod.metadata.annotations.get(SLOTS_ANNOTATION)
    if raw is None:
        return 0
    if not raw.strip().isdigit():
        raise InputError(f"pod {pod.key}: {SLOTS_ANNOTATION} is {raw!r}",
                         field=f"metadata.annotations[{SLOTS_ANNOTATION}]",
                         expected="a whole number of network slots such as 1")
    return int(raw)


@dataclass(frozen=True, slots=True)
class NetworkCapacityArgs:
    label_key: str = "kubeberth.io/network"
    label_value: str = "high-speed"

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NetworkCapacityArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, ("nodeLabel",), None)
        label = args_str(raw, "nodeLabel", None, DEFAULT_LABEL)
        key, eq, value = label.partition("=")
        if not key or not eq:
            raise InputError(f"Invalid value: {label!r}", field="nodeLabel",
                             expected="key=value, such as " + DEFAULT_LABEL)
        return cls(key, value)


class NetworkCapacity(PreFilterPlugin, FilterPlugin, ReservePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, args: NetworkCapacityArgs) -> None:
        self.args = args
        self._stamp = np.zeros(0, dtype=np.int64)
        self._used = np.zeros(0, dtype=np.int64)
        self._capacity = np.zeros(0, dtype=np.int64)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        """Pods that need no network slot skip the Filter."""
        if slots_of(pod.pod) == 0:
            return None, SKIP
        return None, SUCCESS

    def _refresh(self, snap: ClusterState, nodes: IntArray) -> None:
        """Used and total slots of ``nodes``, recomputed where the node's pods or the node
        changed (the state's per-node stamp)."""
        rows = snap.gpus.stamp.shape[0]
        if len(self._stamp) != rows:
            self._stamp = np.full(rows, -1, dtype=np.int64)
            self._used = np.zeros(rows, dtype=np.int64)
            self._capacity = np.zeros(rows, dtype=np.int64)
        stale = nodes[self._stamp[nodes] != snap.gpus.stamp[nodes]]
        for n in stale.tolist():
            node = snap.nodes[n]
            raw = node.metadata.annotations.get(SLOTS_ANNOTATION, "0")
            if not raw.strip().isdigit():
                raise InputError(f"node {node.metadata.name}: {SLOTS_ANNOTATION} is {raw!r}",
                                 field=f"metadata.annotations[{SLOTS_ANNOTATION}]",
                                 expected="a whole number of network slots such as 4")
            self._capacity[n] = int(raw)
            self._used[n] = sum(slots_of(p.pod) for p in snap.pods_on_node[n].values())
            self._stamp[n] = snap.gpus.stamp[n]

    def free_slots(self, snap: ClusterState, nodes: IntArray) -> IntArray:
        self._refresh(snap, nodes)
        free: IntArray = self._capacity[nodes] - self._used[nodes]
        return free

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        need = slots_of(pod.pod)
        if need == 0:
            return all_pass(len(nodes))
        labelled = snap.label_values(self.args.label_key)[nodes] == self.args.label_value
        reason = np.where(labelled, 0, 1).astype(np.int32)
        reason[labelled & (self.free_slots(snap, nodes) < need)] = 2
        if not reason.any():
            return all_pass(len(nodes))
        codes = np.where(reason == 1, np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                         np.int8(Code.UNSCHEDULABLE)).astype(np.int8)
        codes[reason == 0] = 0
        return FilterResult(codes, reason, [(), (REASON_LABEL,), (REASON_SLOTS,)])

    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        """The assumed pod already counts on the node: the node must not be over its slots."""
        if slots_of(pod.pod) == 0:
            return SUCCESS
        if self.free_slots(snap, np.array([node], dtype=np.int64))[0] < 0:
            return Status(Code.UNSCHEDULABLE, (REASON_SLOTS,))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> None:
        """Nothing to give back here: the scheduler forgets the assumed pod right after, and
        its slots are free from then on."""

    def events_to_register(self) -> list[ClusterEvent]:
        """Slots come free when a pod goes; nodes are added, relabelled or re-annotated."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "Update")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NetworkCapacity:
    return NetworkCapacity(NetworkCapacityArgs.parse(args))
