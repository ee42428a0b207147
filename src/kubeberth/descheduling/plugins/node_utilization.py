"""What LowNodeUtilization and HighNodeUtilization share: usage, thresholds, the eviction loop.

Utilization is the sum of the requests of a node's pods that are not Succeeded or Failed (the
descheduler's "requested" usage client), with ``pods`` as their count, for cpu, memory, pods and
every resource the thresholds name (extended resources such as ``nvidia.com/gpu`` included).
Usage becomes a percentage of the node's allocatable as upstream computes it: float64
``used / capacity * 100`` on millicores for cpu and whole units for everything else; a node that
does not advertise a resource has no percentage for it. The capacity an underutilized node can
take is its allocatable capped at the high threshold, truncated as upstream's
``int64(threshold * 0.01 * capacity)``. All quantities stay int64 milli-units, as in the cluster
state.

The eviction loop is upstream's ``evictPodsFromSourceNodes``: source nodes in order, each node's
evictable pods from lowest priority (then BestEffort, Burstable, Guaranteed), a pod only if it
tolerates the taints of some destination node, and the node's and the destinations' remaining
capacity updated after each eviction until the stop condition says enough.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.api.resources import CPU, MEMORY, PODS
from kubeberth.api.selectors import tolerated
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import (
    DeschedulerHandle,
    EvictError,
    Evictor,
    PodView,
    Snapshot,
)
from kubeberth.descheduling.helpers import sort_by_priority_low_to_high

MIN_PERCENTAGE = 0.0
MAX_PERCENTAGE = 100.0
BASIC = (CPU, MEMORY, PODS)

Usage = dict[str, int]  # resource -> milli-units
Percentages = dict[str, float]


@dataclass(slots=True)
class NodeInfo:
    node: Node
    usage: Usage
    pods: list[PodView]
    available: Usage
    percent: Percentages

    @property
    def name(self) -> str:
        return self.node.metadata.name


def resource_names(thresholds: Mapping[str, float]) -> list[str]:
    """Threshold resources plus cpu, memory and pods, each once."""
    names = list(BASIC)
    for name in thresholds:
        if name not in names:
            names.append(name)
    return names


class ThresholdArgs(Protocol):
    @property
    def thresholds(self) -> dict[str, float]: ...


ThresholdArgsT = TypeVar("ThresholdArgsT", bound=ThresholdArgs)


class UtilizationPlugin(Generic[ThresholdArgsT]):
    """Args, handle and the resources measured (the thresholded ones, plus cpu, memory, pods)."""

    def __init__(self, args: ThresholdArgsT, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.threshold_names = list(args.thresholds)
        self.names = resource_names(args.thresholds)


# ---- args both plugins read ---------------------------------------------------------------------
def reject_metrics_utilization(raw: Mapping[str, Any]) -> None:
    if raw.get("metricsUtilization"):
        raise InputError("usage from metrics is not modelled by kubeberth",
                         field="metricsUtilization",
                         expected="no metricsUtilization (utilization is computed from requests)")


def validate_thresholds(thresholds: Mapping[str, float] | None, field: str) -> dict[str, float]:
    """Upstream ``validateThresholds``: at least one resource, each within 0..100."""
    if not thresholds:
        raise InputError("no resource threshold is configured", field=field,
                         expected="percentages per resource, such as {cpu: 20, memory: 20}")
    for name, pct in thresholds.items():
        if not MIN_PERCENTAGE <= pct <= MAX_PERCENTAGE:
            raise InputError(f"{name} threshold not in [0, 100] range", field=f"{field}.{name}",
                             expected="a percentage between 0 and 100")
    return dict(thresholds)


def evictable_namespaces(raw: Mapping[str, Any]) -> tuple[str, ...]:
    ns = a.namespaces(raw, "evictableNamespaces")
    if ns.include:
        raise InputError("only Exclude namespaces can be set, inclusion is not supported",
                         field="evictableNamespaces.include",
                         expected="evictableNamespaces.exclude only")
    return ns.exclude


def node_usage(snapshot: Snapshot, node: Node, names: Sequence[str]) -> Usage:
    """Upstream ``NodeUtilization`` over the node's non-terminal pods."""
    pods = snapshot.pods_on_node(node.metadata.name)
    usage = {name: 0 for name in names}
    usage[PODS] = 1000 * len(pods)
    for p in pods:
        for name in names:
            if name != PODS:
                usage[name] += p.requests.get(name, 0)
    return usage


def _whole(name: str, milli: int) -> int:
    """A quantity as upstream reads it: MilliValue for cpu, Value for everything else."""
    return milli if name == CPU else milli // 1000


def percentages(usage: Usage, capacity: Mapping[str, int]) -> Percentages:
    out: Percentages = {}
    for name, used in usage.items():
        if name not in capacity:
            continue
        cap = _whole(name, capacity[name])
        out[name] = _whole(name, used) / cap * 100 if cap > 0 else 0.0
    return out


def below(usage: Percentages, threshold: Mapping[str, float]) -> bool:
    """Every thresholded resource at or under its threshold (missing usage counts as 0)."""
    return all(not pct < usage.get(name, 0.0) for name, pct in threshold.items())


def above(usage: Percentages, threshold: Mapping[str, float]) -> bool:
    """Some thresholded resource over its threshold."""
    return any(pct < usage.get(name, 0.0) for name, pct in threshold.items())


def average(usages: Sequence[Percentages]) -> Percentages:
    """Per resource, the mean over the nodes that have a percentage for it."""
    total: Percentages = {}
    count: dict[str, int] = {}
    for u in usages:
        for name, pct in u.items():
            total[name] = total.get(name, 0.0) + pct
            count[name] = count.get(name, 0) + 1
    return {name: total[name] / count[name] for name in total}


def deviate(avg: Percentages, span: Mapping[str, float], sign: float) -> Percentages:
    """``avg + sign × span`` per resource of ``avg``, clamped to [0, 100]."""
    return {name: min(max(pct + sign * span.get(name, 0.0), MIN_PERCENTAGE), MAX_PERCENTAGE)
            for name, pct in avg.items()}


def cap_to_threshold(capacity: Mapping[str, int], threshold: Mapping[str, float],
                     names: Sequence[str]) -> Usage:
    """Upstream ``capNodeCapacitiesToThreshold`` in milli-units."""
    out: Usage = {}
    for name in names:
        if name not in capacity:
            out[name] = 0
        elif name not in threshold:
            out[name] = capacity[name]
        elif name == CPU:
            out[name] = int(threshold[name] * 0.01 * capacity[name])
        else:
            out[name] = int(threshold[name] * 0.01 * (capacity[name] // 1000)) * 1000
    return out


def usage_weight(info: NodeInfo) -> int:
    """Upstream ``sortNodesByUsage`` key: cpu millicores plus every other resource's Value."""
    return sum(_whole(name, v) for name, v in info.usage.items())


def show_percent(percent: Percentages, names: Sequence[str]) -> str:
    shown = [f"{name} {round(percent[name])}%" for name in names if name in percent]
    return ", ".join(shown) if shown else "no thresholded resources"


def tolerates_some_destination(pod: PodView, destinations: Sequence[NodeInfo]) -> bool:
    """Upstream ``PodToleratesTaints``: the pod tolerates every taint of at least one
    destination, which also needs at least as many tolerations as that node has taints."""
    tolerations = pod.pod.spec.tolerations
    for d in destinations:
        taints = d.node.spec.taints
        if len(tolerations) >= len(taints) and all(tolerated(tolerations, t) for t in taints):
            return True
    return False


ContinueCond = Callable[[NodeInfo, Usage], bool]


@dataclass(slots=True)
class EvictionRun:
    """One call of upstream ``evictPodsFromSourceNodes``."""

    plugin: str
    evictor: Evictor
    names: Sequence[str]
    removable: Callable[[PodView], bool]
    excluded_namespaces: frozenset[str]
    continue_cond: ContinueCond
    per_node_limit: int | None
    reason: Callable[[NodeInfo], str]

    def run(self, sources: Sequence[NodeInfo], destinations: Sequence[NodeInfo]) -> None:
        available: Usage = {name: 0 for name in self.names}
        for d in destinations:
            for name in self.names:
                available[name] += d.available[name] - d.usage[name]
        for source in sources:
            removable = [p for p in source.pods if self.removable(p)]
            if not removable:
                continue
            err = self._evict_from(source, sort_by_priority_low_to_high(removable), available,
                                   destinations)
            if err is EvictError.TOTAL_LIMIT:
                return

    def _evict_from(self, source: NodeInfo, pods: list[PodView], available: Usage,
                    destinations: Sequence[NodeInfo]) -> EvictError | None:
        if not self.continue_cond(source, available):
            return None
        evicted = 0
        reason = self.reason(source)
        for pod in pods:
            if self.per_node_limit is not None and evicted >= self.per_node_limit:
                break
            if not tolerates_some_destination(pod, destinations):
                continue
            if pod.namespace in self.excluded_namespaces:
                continue
            why = self.evictor.pre_eviction_filter(pod)
            if why is not None:
                self.evictor.refuse(pod, self.plugin, reason, why)
                continue
            err = self.evictor.evict(pod, self.plugin, reason)
            if err in (EvictError.NODE_LIMIT, EvictError.TOTAL_LIMIT):
                return err
            if err is not None:
                continue
            evicted += 1
            for name in self.names:
                used = 1000 if name == PODS else pod.requests.get(name, 0)
                source.usage[name] -= used
                available[name] -= used
            if not self.continue_cond(source, available):
                break
        return None


def all_available(_node: NodeInfo, available: Usage) -> bool:
    """Keep going while every destination resource still has room."""
    return all(v > 0 for v in available.values())
