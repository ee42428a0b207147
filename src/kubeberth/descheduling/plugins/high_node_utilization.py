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

from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, PluginSpec, PodView
from kubeberth.descheduling.plugins import node_utilization as nu

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
    nu.reject_metrics_utilization(raw)
    modes = a.choices(raw, "evictionModes", (ONLY_THRESHOLDING_RESOURCES,),
                      "invalid eviction mode {!r}", ONLY_THRESHOLDING_RESOURCES)
    return Args(thresholds=nu.validate_thresholds(a.percentages(raw, "thresholds"), "thresholds"),
                number_of_nodes=a.integer(raw, "numberOfNodes"),
                excluded_namespaces=nu.evictable_namespaces(raw),
                only_thresholding_resources=bool(modes))


class HighNodeUtilization(nu.UtilizationPlugin[Args]):
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        super().__init__(args, handle)
        self.high = {name: nu.MAX_PERCENTAGE for name in args.thresholds}

    def _requests_thresholded(self, pod: PodView) -> bool:
        spec = pod.pod.spec
        return any(name in c.resources.requests for name in self.threshold_names
                   for c in [*spec.containers, *spec.init_containers])

    def balance(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        low: list[nu.NodeInfo] = []
        schedulable: list[nu.NodeInfo] = []
        for n in nodes:
            name = n.metadata.name
            capacity = snapshot.allocatable(n)
            usage = nu.node_usage(snapshot, n, self.names)
            pct = nu.percentages(usage, capacity)
            info = nu.NodeInfo(n, usage, snapshot.pods_on_node(name),
                               nu.cap_to_threshold(capacity, self.high, self.names), pct)
            if nu.below(pct, self.args.thresholds):
                low.append(info)
            elif not n.spec.unschedulable:
                schedulable.append(info)
        if not low or len(low) <= self.args.number_of_nodes or len(low) == len(nodes) \
                or not schedulable:
            return
        low.sort(key=nu.usage_weight)

        def removable(p: PodView) -> bool:
            if evictor.filter(p) is not None:
                return False
            return not self.args.only_thresholding_resources or self._requests_thresholded(p)

        def reason(node: nu.NodeInfo) -> str:
            return (f"node {node.name} is underutilized "
                    f"({nu.show_percent(node.percent, self.threshold_names)}); its pods can pack "
                    f"onto {len(schedulable)} other node(s)")

        nu.EvictionRun(NAME, evictor, self.names, removable,
                       frozenset(self.args.excluded_namespaces), nu.all_available, None,
                       reason).run(low, schedulable)


SPEC = PluginSpec(NAME, POINTS, parse_args, HighNodeUtilization)
