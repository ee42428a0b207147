"""NodeName: a pod that names its node in ``spec.nodeName`` may only go there.

PreFilter narrows the cycle to that one node, as newest upstream does, and Filter rejects every
other node as UnschedulableAndUnresolvable so preemption never tries them. For pods without
``spec.nodeName`` PreFilter succeeds without narrowing and Filter passes every node, as
upstream v1.37 does (its Filter verdict shows on every node in ``explain``). (Pods a manifest
already binds are placed by the host, not scheduled; this plugin matters for pods that name a
node yet go through the scheduler.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import all_pass, reject_args
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        wanted = pod.pod.spec.node_name
        if not wanted:
            return None, SUCCESS
        return PreFilterResult({wanted}), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        wanted = pod.pod.spec.node_name
        if not wanted:
            return all_pass(len(nodes))
        fail = nodes != snap.node_index.get(wanted, -1)
        return FilterResult.from_mask(np.asarray(fail, dtype=np.bool_),
                                      Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))

    def events_to_register(self) -> list[ClusterEvent]:
        """Only the named node appearing can help."""
        return [ClusterEvent("Node", "Add")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeName:
    reject_args(NAME, args)
    return NodeName()
