"""DynamicResources: pods' ResourceClaims allocated from ResourceSlices, as upstream's plugin.

PreEnqueue holds a pod until every claim (or the template its claim is generated from) exists.
PreFilter resolves the claims; a pod without claims skips the plugin. Filter asks, node by node,
whether the claims already allocated may be used there and whether the others can all be
allocated from the node's devices with upstream's structured allocator
(:class:`kubeberth.state.dra.Allocator`); a failing node names the claim and request that could
not be satisfied and why. Reserve commits the allocation found for the chosen node and
reserves every claim for the pod (a claim is allocated once and shared by reference);
Unreserve gives both back, and a claim no pod reserves any more is freed. The allocation is
kept in ``ClusterState.dra`` and reported by ``explain``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeberth.api.dra import ResourceClaim
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    FilterPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import all_pass, args_mapping, reject_unknown
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.dra import Allocation, Allocator, DeviceResult, allocation_fits

NAME = "DynamicResources"
_STATE_KEY = "PreFilter" + NAME
REASON_ELSEWHERE = "resourceclaim not available on the node"


@dataclass(slots=True)
class _CycleData:
    """The pod's claims (key, claim) and, per node slot, the devices Filter found for the
    unallocated ones; Reserve records which claims it allocated."""

    claims: list[tuple[str, ResourceClaim]]
    found: dict[int, dict[str, list[DeviceResult]]] = field(default_factory=dict)
    allocations: dict[int, dict[str, Allocation]] = field(default_factory=dict)

    def clone(self) -> _CycleData:
        return self


class DynamicResources(PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, PostFilterPlugin,
                       ReservePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.pod.spec.resource_claims:
            return SUCCESS
        for _, _, claim, missing in self.handle.snapshot.dra.pod_claims(pod.pod):
            if claim is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (missing,))
        return SUCCESS

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not pod.pod.spec.resource_claims:
            # Upstream writes its (empty) state before skipping; PostFilter reads it.
            state.write(_STATE_KEY, _CycleData([]))
            return None, SKIP
        dra = snap.dra
        claims: list[tuple[str, ResourceClaim]] = []
        for _, key, claim, missing in dra.pod_claims(pod.pod):
            if claim is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (missing,))
            if key not in dra.allocations:
                missing_class = _missing_class(dra.classes, claim)
                if missing_class:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (missing_class,))
            if all(key != k for k, _ in claims):
                claims.append((key, claim))
        state.write(_STATE_KEY, _CycleData(claims))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        data = state.get(_STATE_KEY)
        if not isinstance(data, _CycleData):
            # Upstream's PreFilter skips the Filter of a pod without claims; without it (a
            # profile that disables the PreFilter) the Filter's read fails.
            return FilterResult.error(len(nodes), "not found")
        dra = snap.dra
        codes = np.zeros(len(nodes), dtype=np.int8)
        ids = np.zeros(len(nodes), dtype=np.int32)
        table: list[tuple[str, ...]] = [()]
        index: dict[str, int] = {}

        def fail(i: int, code: Code, reason: str) -> None:
            codes[i] = code
            if reason not in index:
                index[reason] = len(table)
                table.append((reason,))
            ids[i] = index[reason]

        for i, slot in enumerate(nodes.tolist()):
            name = snap.node_names[slot]
            labels = snap.labels[slot]
            pending: list[tuple[str, ResourceClaim]] = []
            elsewhere = False
            for key, claim in data.claims:
                alloc = dra.allocations.get(key)
                if alloc is None:
                    pending.append((key, claim))
                elif not allocation_fits(alloc, name, labels):
                    elsewhere = True
                    break
            if elsewhere:
                fail(i, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_ELSEWHERE)
                continue
            if not pending:
                continue
            alloc_run = Allocator(dra, name, labels, pending)
            found = alloc_run.run()
            if isinstance(found, str):
                fail(i, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"cannot allocate all claims: {found}")
                continue
            data.found[slot] = found
            data.allocations[slot] = {key: alloc_run.allocation(found.get(key, []))
                                      for key, _ in pending}
        if not codes.any():
            return all_pass(len(nodes))
        return FilterResult(codes, ids, table)

    def post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        """Upstream's PostFilter frees a claim of a pod that fits nowhere, which is not modelled
        (the pod keeps its claims): it passes on to the next PostFilter. Without its PreFilter
        state (a profile that disables the PreFilter) upstream's read fails, and that Error
        ends PostFilter (no preemption is tried)."""
        if not isinstance(state.get(_STATE_KEY), _CycleData):
            return None, Status(Code.ERROR, ("not found",))
        return None, Status(Code.UNSCHEDULABLE)

    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        data = state.get(_STATE_KEY)
        if not isinstance(data, _CycleData):
            return SUCCESS
        dra = snap.dra
        planned = data.allocations.get(node, {})
        for key, _ in data.claims:
            if key in dra.allocations:
                continue
            alloc = planned.get(key)
            if alloc is None:
                return Status(Code.UNSCHEDULABLE,
                              (f"claim {key} has no allocation on the node",))
            dra.commit(key, alloc)
        for key, _ in data.claims:
            dra.reserve(key, pod.key)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> None:
        data = state.get(_STATE_KEY)
        if not isinstance(data, _CycleData):
            return
        for key, _ in data.claims:
            snap.dra.unreserve(key, pod.key)

    def events_to_register(self) -> list[ClusterEvent]:
        """Devices come free when a pod (and its claims) goes; nodes arrive or change."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("ResourceClaim", "*"),
                ClusterEvent("ResourceSlice", "*"), ClusterEvent("DeviceClass", "*")]


def _missing_class(classes: Mapping[str, Any], claim: ResourceClaim) -> str:
    """Upstream's PreFilter verdict for a request naming a DeviceClass that does not exist."""
    for req in claim.spec.devices.requests:
        wanted = [(req.name, req.exactly.device_class_name)] if req.exactly is not None else \
            [(f"{req.name}/{sub.name}", sub.device_class_name) for sub in req.first_available]
        for name, cls in wanted:
            if cls not in classes:
                return f"request {name}: device class {cls} does not exist"
    return ""


def new(args: Mapping[str, Any] | None, handle: Handle) -> DynamicResources:
    reject_unknown(args_mapping(args), ("filterTimeout", "bindingTimeout"), None)
    return DynamicResources(handle)
