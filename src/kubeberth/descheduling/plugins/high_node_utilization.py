"""HighNodeUtilization: empty underutilized nodes so their pods pack onto the others.

The bin-packing counterpart of LowNodeUtilization, meant to run with a scheduler that scores
MostAllocated: a node is underutilized when every thresholded resource is at or under
``thresholds``; every other schedulable node may receive pods, up to its full allocatable.
Underutilized nodes are drained from the least used while the receiving nodes have room in every
resource. ``evictionModes: [OnlyThresholdingResources]`` evicts only pods that request one of
the thresholded resources (useful with ``nvidia.com/gpu`` thresholds: CPU-only pods stay put).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, PluginSpec, PodView
from kubeberth.descheduling.plugins.low_node_utilization import (
    evictable_namespaces,
    validate_thresholds,
)
from kubeberth.descheduling.plugins.node_utilization import (
    MAX_PERCENTAGE,
    EvictionRun,
    NodeInfo,
    all_available,
    below,
    cap_to_threshold,
    node_usage,
    percentages,
    resource_names,
    show_percent,
    usage_weight,
)

NAME = "HighNodeUtilization"
POINTS = ("balance",)
ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"


@dataclass(frozen=True, slots=True)
class Args:
    thresholds: dict[str, float]
    number_of_nodes: int = 0
    excluded_namespaces: tuple[str, ...] = ()
    only_thresholding_resources: bool = False


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("thresholds", "numberOfNodes", "evictableNamespaces",
                           "metricsUtilization", "evictionModes"))
    if raw.get("metricsUtilization"):
        raise InputError("usage from metrics is not modelled by kubeberth",
                         field="metricsUtilization",
                         expected="no metricsUtilization (utilization is computed from requests)")
    modes = a.choices(raw, "evictionModes", (ONLY_THRESHOLDING_RESOURCES,),
                      "invalid eviction mode {!r}", ONLY_THRESHOLDING_RESOURCES)
    return Args(thresholds=validate_thresholds(a.percentages(raw, "thresholds"), "thresholds"),
                number_of_nodes=a.integer(raw, "numberOfNodes"),
                excluded_namespaces=evictable_namespaces(raw),
                only_thresholding_resources=bool(modes))


class HighNodeUtilization:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.threshold_names = list(args.thresholds)
        self.names = resource_names(args.thresholds)
        self.high = {name: MAX_PERCENTAGE for name in args.thresholds}

    def _requests_thresholded(self, pod: PodView) -> bool:
        spec = pod.pod.spec
        return any(name in c.resources.requests for name in self.threshold_names
                   for c in [*spec.containers, *spec.init_containers])

    def balance(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        low: list[NodeInfo] = []
        schedulable: list[NodeInfo] = []
        for n in nodes:
            name = n.metadata.name
            capacity = snapshot.allocatable(n)
            usage = node_usage(snapshot, n, self.names)
            pct = percentages(usage, capacity)
            info = NodeInfo(n, usage, snapshot.pods_on_node(name),
                            cap_to_threshold(capacity, self.high, self.names), pct)
            if below(pct, self.args.thresholds):
                low.append(info)
            elif not n.spec.unschedulable:
                schedulable.append(info)
        if not low or len(low) <= self.args.number_of_nodes or len(low) == len(nodes) \
                or not schedulable:
            return
        low.sort(key=usage_weight)

        def removable(p: PodView) -> bool:
            if evictor.filter(p) is not None:
                return False
            return not self.args.only_thresholding_resources or self._requests_thresholded(p)

        def reason(node: NodeInfo) -> str:
            return (f"node {node.name} is underutilized "
                    f"({show_percent(node.percent, self.threshold_names)}); its pods can pack "
                    f"onto {len(schedulable)} other node(s)")

        EvictionRun(NAME, evictor, self.names, removable,
                    frozenset(self.args.excluded_namespaces), all_available, None,
                    reason).run(low, schedulable)


SPEC = PluginSpec(NAME, POINTS, parse_args, HighNodeUtilization)
