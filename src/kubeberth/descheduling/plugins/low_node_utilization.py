"""LowNodeUtilization: move pods off overutilized nodes while underutilized nodes can take them.

A node is underutilized when every thresholded resource is at or under ``thresholds`` (and the node
is schedulable), overutilized when some resource is over ``targetThresholds``. With
``useDeviationThresholds`` both are deviations from the mean utilization of the nodes (clamped to
0..100). Nothing happens unless there are more underutilized nodes than ``numberOfNodes``, not
every node is underutilized, and some node is overutilized. Overutilized nodes are drained from
the most used (cpu millicores plus every other resource's whole units, as upstream sums them),
each until it drops under its target or the underutilized nodes' room (allocatable capped at the
target threshold, minus usage) runs out; ``evictionLimits.node`` caps evictions per node.
``evictableNamespaces.exclude`` keeps namespaces' pods in place (their usage still counts).

Usage is always the pods' requests; upstream's metrics-server and Prometheus usage sources are not
modelled, so ``metricsUtilization`` is rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec
from kubeberth.descheduling.plugins.node_utilization import (
    EvictionRun,
    NodeInfo,
    Percentages,
    Usage,
    UtilizationPlugin,
    above,
    average,
    below,
    cap_to_threshold,
    deviate,
    evictable_namespaces,
    node_usage,
    percentages,
    reject_metrics_utilization,
    show_percent,
    usage_weight,
    validate_thresholds,
)

NAME = "LowNodeUtilization"
POINTS = ("balance",)


@dataclass(frozen=True, slots=True)
class Args:
    thresholds: dict[str, float]
    target_thresholds: dict[str, float]
    use_deviation_thresholds: bool = False
    number_of_nodes: int = 0
    excluded_namespaces: tuple[str, ...] = ()
    node_eviction_limit: int | None = None


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("thresholds", "targetThresholds", "useDeviationThresholds",
                           "numberOfNodes", "evictableNamespaces", "metricsUtilization",
                           "evictionLimits"))
    reject_metrics_utilization(raw)
    deviation = a.boolean(raw, "useDeviationThresholds")
    low = validate_thresholds(a.percentages(raw, "thresholds"), "thresholds")
    high = validate_thresholds(a.percentages(raw, "targetThresholds"), "targetThresholds")
    if set(low) != set(high):
        raise InputError("thresholds and targetThresholds configured different resources",
                         field="targetThresholds",
                         expected="the same resources in thresholds and targetThresholds")
    if not deviation:
        for name, pct in low.items():
            if pct > high[name]:
                raise InputError(f"thresholds' {name} percentage is greater than "
                                 "targetThresholds'", field=f"thresholds.{name}",
                                 expected=f"at most targetThresholds.{name} ({high[name]:g})")
    number = a.integer(raw, "numberOfNodes")
    limits = raw.get("evictionLimits")
    node_limit = None
    if limits is not None:
        if not isinstance(limits, Mapping):
            raise InputError("evictionLimits is not a mapping", field="evictionLimits",
                             expected="evictionLimits: {node: <count>}")
        a.reject_unknown(limits, ("node",), "evictionLimits")
        try:
            node_limit = a.uint(limits, "node")
        except InputError as err:
            raise err.at(field="evictionLimits") from None
    return Args(thresholds=low, target_thresholds=high, use_deviation_thresholds=deviation,
                number_of_nodes=number, excluded_namespaces=evictable_namespaces(raw),
                node_eviction_limit=node_limit)


class LowNodeUtilization(UtilizationPlugin[Args]):
    def balance(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        args = self.args
        usages = {n.metadata.name: node_usage(snapshot, n, self.names) for n in nodes}
        capacity = {n.metadata.name: snapshot.allocatable(n) for n in nodes}
        percent = {name: percentages(u, capacity[name]) for name, u in usages.items()}
        if args.use_deviation_thresholds:
            limited = {name: {k: v for k, v in p.items() if k in args.thresholds}
                       for name, p in percent.items()}
            avg = average(list(limited.values()))
            low_t = deviate(avg, args.thresholds, -1.0)
            high_t = deviate(avg, args.target_thresholds, 1.0)
            classify_by: dict[str, Percentages] = limited
        else:
            low_t, high_t = args.thresholds, args.target_thresholds
            classify_by = percent
        low: list[NodeInfo] = []
        high: list[NodeInfo] = []
        for n in nodes:
            name = n.metadata.name
            info = NodeInfo(n, usages[name], snapshot.pods_on_node(name),
                            cap_to_threshold(capacity[name], high_t, self.names), percent[name])
            if not n.spec.unschedulable and below(classify_by[name], low_t):
                low.append(info)
            elif above(classify_by[name], high_t):
                high.append(info)
        if not low or len(low) <= args.number_of_nodes or len(low) == len(nodes) or not high:
            return
        high.sort(key=usage_weight, reverse=True)

        def keep_going(node: NodeInfo, available: Usage) -> bool:
            over = any(node.available[k] < v for k, v in node.usage.items())
            return over and all(v > 0 for v in available.values())

        def reason(node: NodeInfo) -> str:
            return (f"node {node.name} is over its target utilization "
                    f"({show_percent(node.percent, self.threshold_names)}); {len(low)} "
                    "underutilized node(s) can take its pods")

        EvictionRun(NAME, evictor, self.names, lambda p: evictor.filter(p) is None,
                    frozenset(args.excluded_namespaces), keep_going, args.node_eviction_limit,
                    reason).run(high, low)


SPEC = PluginSpec(NAME, POINTS, parse_args, LowNodeUtilization)
