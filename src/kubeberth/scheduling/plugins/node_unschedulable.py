"""NodeUnschedulable: keep pods off cordoned nodes (``spec.unschedulable``).

A cordoned node rejects the pod as UnschedulableAndUnresolvable unless the pod tolerates the
``node.kubernetes.io/unschedulable:NoSchedule`` taint, which is how DaemonSet pods still land on
cordoned nodes. The toleration check runs once per pod; the node check is one mask over the
cluster state's ``unschedulable`` column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.api.objects import Taint
from kubeberth.api.selectors import tolerated
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import ClusterEvent, EnqueueExtensions, FilterPlugin
from kubeberth.scheduling.framework.status import Code, FilterResult
from kubeberth.scheduling.plugins.helper import all_pass, reject_args
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        # One pass over the cordon flags of every slot beats gathering them per candidate,
        # and clusters rarely have cordoned nodes.
        if not np.count_nonzero(snap.unschedulable) or tolerated(pod.pod.spec.tolerations,
                                                       TAINT_NODE_UNSCHEDULABLE):
            return all_pass(len(nodes))
        return FilterResult.from_mask(snap.unschedulable.take(nodes),
                                      Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                      (ERR_REASON_UNSCHEDULABLE,))

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, an uncordoned node (upstream files spec.unschedulable under taint
        updates) or a toleration added to the pod."""
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeTaint"),
                ClusterEvent("Pod", "UpdatePodToleration")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeUnschedulable:
    reject_args(NAME, args)
    return NodeUnschedulable()
