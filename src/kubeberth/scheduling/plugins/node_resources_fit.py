"""NodeResourcesFit: does the pod fit the node's free resources, and how full would the node be.

Filter follows upstream ``fitsRequest``: the pod-slot check first, then cpu, memory,
ephemeral-storage and the scalar resources (extended, hugepages, ``kubernetes.io/``-prefixed),
each failing when the request exceeds allocatable minus requested. The node is
UnschedulableAndUnresolvable when some failing request exceeds the node's whole allocatable (no
preemption can help), else Unschedulable. Upstream walks the scalar resources in Go map order;
we list them sorted by name so reasons are reproducible. Score implements the three scoring
strategies over the non-zero requests (100m cpu / 200Mi memory for containers that state none),
in upstream's units (millicores, whole bytes and counts) so the integer formulas, rounding and
overflow match. The per-node loops of both are compiled kernels
(:mod:`~kubeberth.scheduling.plugins.resource_kernels`) reading the state's matrices by node
index; this module turns a pod into what they read (check columns, a score plan), once per pod
shape. The score plan is also used by
:mod:`~kubeberth.scheduling.plugins.balanced_allocation`. Pod-level resources, in-place resize
and DRA-backed extended resources are not modelled.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_extended_resource
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.placement import (
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
)
from kubeberth.scheduling.framework.status import SUCCESS, FilterResult, Status
from kubeberth.scheduling.plugins import resource_kernels as kernels
from kubeberth.scheduling.plugins.helper import (
    ResourceSpec,
    all_pass,
    args_int,
    args_list,
    args_mapping,
    args_str,
    is_scalar_resource,
    parse_resource_specs,
    reason_table,
    reason_table_from_bits,
    reject_unknown,
    validate_qualified_name,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.memo import ShapeMemo

NAME = "NodeResourcesFit"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
TOO_MANY_PODS = "Too many pods"

_ARG_FIELDS = ("ignoredResources", "ignoredResourceGroups", "scoringStrategy")
_STRATEGY_FIELDS = ("type", "resources", "requestedToCapacityRatio")
_FIXED_ORDER = (CPU, MEMORY, EPHEMERAL_STORAGE)


# ---- args ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    utilization: int
    score: int


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """``type``, the weighted resources it scores, and for RequestedToCapacityRatio the shape
    (scores 0..10 at utilizations 0..100)."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = (ResourceSpec(CPU), ResourceSpec(MEMORY))
    shape: tuple[UtilizationShapePoint, ...] | None = None


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NodeResourcesFitArgs:
        """Upstream v1 defaulting (LeastAllocated over cpu and memory, weight 0 means 1), then
        ``ValidateNodeResourcesFitArgs``."""
        raw = args_mapping(raw)
        reject_unknown(raw, _ARG_FIELDS, None)
        ignored = tuple(_str_items(raw, "ignoredResources"))
        groups = tuple(_str_items(raw, "ignoredResourceGroups"))
        strategy = ScoringStrategy()
        if raw.get("scoringStrategy") is not None:
            strategy = _parse_strategy(args_mapping(raw["scoringStrategy"], "scoringStrategy"))
        args = cls(ignored, groups, strategy)
        args.validate()
        return args

    def validate(self) -> None:
        for i, name in enumerate(self.ignored_resources):
            validate_qualified_name(name, f"ignoredResources[{i}]")
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                raise InputError(f"Invalid value: {group!r}: resource group name can't contain "
                                 "'/'", field=f"ignoredResourceGroups[{i}]",
                                 expected="a resource domain such as example.com")
            validate_qualified_name(group, f"ignoredResourceGroups[{i}]")
        s = self.scoring_strategy
        if s.type not in STRATEGIES:
            raise InputError(f"Unsupported value: {s.type!r}", field="scoringStrategy.type",
                             expected=" | ".join(STRATEGIES))
        for i, res in enumerate(s.resources):
            if res.weight <= 0 or res.weight > 100:
                raise InputError(f"Invalid value: {res.weight}: resource weight of {res.name} "
                                 "not in valid range (0, 100]",
                                 field=f"scoringStrategy.resources[{i}].weight",
                                 expected="an integer from 1 to 100")
        where = "scoringStrategy.requestedToCapacityRatio"
        if s.type == REQUESTED_TO_CAPACITY_RATIO:
            if s.shape is None:
                raise InputError("Required value: must be specified when type is "
                                 "RequestedToCapacityRatio", field=where,
                                 expected="requestedToCapacityRatio: {shape: [{utilization, "
                                 "score}, ...]}")
            _validate_shape(s.shape, f"{where}.shape")
        elif s.shape is not None:
            raise InputError("Forbidden: must be nil when type is not RequestedToCapacityRatio",
                             field=where, expected="no requestedToCapacityRatio for "
                             f"type {s.type}")


def _str_items(raw: Mapping[str, Any], key: str) -> list[str]:
    items = args_list(raw, key, None)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InputError(f"{item!r} is not a string", field=f"{key}[{i}]",
                             expected="a resource name")
    return items


def _parse_strategy(raw: Mapping[str, Any]) -> ScoringStrategy:
    where = "scoringStrategy"
    reject_unknown(raw, _STRATEGY_FIELDS, where)
    kind = args_str(raw, "type", where)
    resources = parse_resource_specs(args_list(raw, "resources", where), f"{where}.resources")
    shape: tuple[UtilizationShapePoint, ...] | None = None
    if raw.get("requestedToCapacityRatio") is not None:
        at = f"{where}.requestedToCapacityRatio"
        rtcr = args_mapping(raw["requestedToCapacityRatio"], at)
        reject_unknown(rtcr, ("shape",), at)
        points = []
        for i, item in enumerate(args_list(rtcr, "shape", at)):
            p_at = f"{at}.shape[{i}]"
            point = args_mapping(item, p_at)
            reject_unknown(point, ("utilization", "score"), p_at)
            points.append(UtilizationShapePoint(args_int(point, "utilization", p_at),
                                                args_int(point, "score", p_at)))
        shape = tuple(points)
    return ScoringStrategy(kind, resources, shape)


def _validate_shape(shape: Sequence[UtilizationShapePoint], where: str) -> None:
    """Upstream ``validateFunctionShape``: at least one point, utilizations strictly increasing
    within 0..100, scores within 0..10."""
    if not shape:
        raise InputError("Required value: at least one point must be specified", field=where,
                         expected="a list of {utilization, score} points")
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            raise InputError(f"Invalid value: {shape[i].utilization}: values must be sorted in "
                             "increasing order", field=f"{where}[{i}].utilization",
                             expected="strictly increasing utilizations")
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            raise InputError(f"Invalid value: {point.utilization}: not in valid range [0, 100]",
                             field=f"{where}[{i}].utilization",
                             expected="an integer from 0 to 100")
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise InputError(f"Invalid value: {point.score}: not in valid range [0, 10]",
                             field=f"{where}[{i}].score", expected="an integer from 0 to 10")


# ---- resource allocation (shared with BalancedAllocation) --------------------------------------
def pod_score_requests(pod: PodInfo, resources: Sequence[ResourceSpec],
                       use_requested: bool) -> tuple[int, ...]:
    """Upstream ``calculatePodResourceRequestList`` in upstream units (millicores, whole units):
    the non-zero requests (scoring defaults for containers without cpu/memory) unless
    ``use_requested``."""
    source = pod.requests if use_requested else pod.non_zero
    return tuple([source.get(r.name, 0) // (1 if r.name == CPU else 1000) for r in resources])


def score_plan(snap: ClusterState, resources: Sequence[ResourceSpec],
               pod_requests: Sequence[int], use_requested: bool) -> IntArray:
    """The plan the score kernels of :mod:`~kubeberth.scheduling.plugins.resource_kernels`
    read: per scored resource its state column, the pod's request, its weight and whether the
    nodes' usage is their non-zero requests. Left out are the resources whose allocatable
    upstream ``calculateResourceAllocatableRequest`` reads as 0 on every node: a scalar
    resource the pod does not request, a resource upstream does not score (``pods``,
    unprefixed names) and a resource no node has. A node lacking a scored resource has
    allocatable 0 there, which the kernels skip per node."""
    width = snap.allocatable.shape[1]
    rows: list[tuple[int, int, int, int]] = []
    for res, request in zip(resources, pod_requests, strict=True):
        name = res.name
        scalar = is_scalar_resource(name)
        if (scalar and request == 0) or (not scalar and name not in _FIXED_ORDER):
            continue
        c = snap.resources.get(name)
        if c is None or c >= width:
            continue
        # Upstream scores cpu and memory by their non-zero requests unless told otherwise.
        rows.append((c, request, res.weight, int(name in (CPU, MEMORY) and not use_requested)))
    plan = np.zeros((kernels.PLAN_ROWS, len(rows)), dtype=np.int64)
    for j, row in enumerate(rows):
        plan[:, j] = row
    return plan


# ---- plugin ----------------------------------------------------------------------------------
class PreFilterState(NamedTuple):
    """The resources Filter checks (request > 0, not ignored), in upstream's order, their
    requests in milli-units, and the reason label of each check; label 0 is the pod-slot
    check."""

    names: tuple[str, ...]
    requests: tuple[int, ...]
    labels: tuple[str, ...]


_SHAPE_CACHE_LIMIT = 1024
# Failed checks are kept as bits of one int64 per node, so up to 63 checks.
_MAX_BITS = 63
_UNMEETABLE = np.iinfo(np.int64).max
_NO_ROWS = np.zeros((0, 0), dtype=np.bool_)
_NO_SHAPE = np.zeros((2, 1), dtype=np.int64)


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin,
                       PlacementScorePlugin, EnqueueExtensions):
    name = NAME
    # Least/MostAllocated shares and the validated shape (0..10 × 10) lie in 0..100.
    scores_in_range = True

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self.args = args
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._resources = strategy.resources
        self._strategy = kernels.LEAST
        self._shape = _NO_SHAPE
        if strategy.type == MOST_ALLOCATED:
            self._strategy = kernels.MOST
        elif strategy.type == REQUESTED_TO_CAPACITY_RATIO and strategy.shape is not None:
            self._strategy = kernels.RATIO
            factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self._shape = np.array([[p.utilization for p in strategy.shape],
                                    [p.score * factor for p in strategy.shape]], dtype=np.int64)
        # A pod's requests (name, amount pairs in the map's order) -> what Filter checks. Pods
        # share a handful of such shapes; a PreFilterState is immutable, so one serves them all.
        self._pre_filter_states: ShapeMemo[tuple[tuple[str, int], ...], PreFilterState] = \
            ShapeMemo(_SHAPE_CACHE_LIMIT)
        # Per pod shape and state columns: Filter's columns and requests, Score's plan.
        self._checks: kernels.PlanCache[PreFilterState, tuple[IntArray, IntArray]] = \
            kernels.PlanCache()
        self._plans: kernels.PlanCache[tuple[int, ...], IntArray] = kernels.PlanCache()

    # ---- filter ----
    def _ignored_resource(self, name: str) -> bool:
        if not is_extended_resource(name):
            return False
        return name in self._ignored or name.split("/", 1)[0] in self._ignored_groups

    def compute_pre_filter_state(self, pod: PodInfo) -> PreFilterState:
        reqs = pod.requests
        key = tuple(reqs.items())
        hit = self._pre_filter_states.get(key)
        if hit is None:
            hit = self._pre_filter_states.put(key, self._checks_for(reqs))
        return hit

    def _checks_for(self, reqs: Mapping[str, int]) -> PreFilterState:
        """The positive requests Filter checks, in upstream's order (cpu, memory,
        ephemeral-storage, then scalar resources by name, ignored ones left out)."""
        order = [name for name in _FIXED_ORDER if reqs.get(name, 0) > 0]
        order += [name for name in sorted(reqs) if name not in _FIXED_ORDER and reqs[name] > 0
                  and is_scalar_resource(name) and not self._ignored_resource(name)]
        return PreFilterState(tuple(order), tuple(reqs[name] for name in order),
                              (TOO_MANY_PODS, *("Insufficient " + n for n in order)))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_KEY, self.compute_pre_filter_state(pod))
        return None, SUCCESS

    def _filter_columns(self, s: PreFilterState, snap: ClusterState) -> tuple[IntArray, IntArray]:
        """State column and request of each check after the pod-slot one. A resource no node
        has reads column 0 against a request nothing can meet, so it fails everywhere and
        unresolvably, as upstream's zero allocatable does."""
        hit = self._checks.get(snap, s)
        if hit is None:
            width = snap.allocatable.shape[1]
            columns: list[int] = []
            requests: list[int] = []
            for name, request in zip(s.names, s.requests, strict=True):
                c = snap.resources.get(name)
                if c is None or c >= width:
                    c, request = 0, _UNMEETABLE
                columns.append(c)
                requests.append(request)
            hit = self._checks.put(s, (np.array(columns, dtype=np.int64),
                                       np.array(requests, dtype=np.int64)))
        return hit

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        s = state.get(PRE_FILTER_KEY)
        if not isinstance(s, PreFilterState):
            return FilterResult.error(len(nodes), f'error reading "{PRE_FILTER_KEY}" from '
                                      "cycleState: not found")
        columns, requests = self._filter_columns(s, snap)
        checks = 1 + len(columns)
        # Past 63 checks the bits cannot hold them all: the kernel then records each verdict.
        failed = _NO_ROWS if checks <= _MAX_BITS else np.zeros((checks, len(nodes)), np.bool_)
        n = len(nodes)
        every = snap.every_node(nodes)
        ids = kernels.every_node_ids(n) if every else nodes
        bits = np.empty(n, dtype=np.int64)
        codes = np.empty(n, dtype=np.int8)
        failures = kernels.fit_filter(
            snap.free, snap.allocatable, snap.pod_count, snap.max_pods, ids, every, columns,
            requests, failed, bits, codes)
        if not failures:
            return all_pass(n)
        # The reason table only if someone reads it.
        if checks > _MAX_BITS:
            return FilterResult(codes, explain=lambda: reason_table(failed.T, s.labels))
        return FilterResult(codes, explain=lambda: reason_table_from_bits(bits, s.labels))

    # ---- score ----
    def _plan(self, pod: PodInfo, snap: ClusterState) -> IntArray:
        requests = pod_score_requests(pod, self._resources, use_requested=False)
        plan = self._plans.get(snap, requests)
        if plan is None:
            plan = self._plans.put(requests, score_plan(snap, self._resources, requests,
                                                        use_requested=False))
        return plan

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        # The plan itself is the state (shared by pods of this shape; kernels never write it).
        state.write(PRE_SCORE_KEY, self._plan(pod, snap))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        plan = s if isinstance(s, np.ndarray) else self._plan(pod, snap)
        scores = np.empty(len(nodes), dtype=np.int64)
        kernels.share_scores(snap.allocatable_units, snap.requested_units, snap.non_zero_units,
                             nodes, plan, self._strategy, self._shape, scores)
        return scores

    # ---- placement score (pod-group cycle) ----
    def score_placement(self, state: CycleState, group: PodGroupInfo,
                        assignments: PodGroupAssignments,
                        snap: ClusterState) -> tuple[int, Status]:
        """How full the whole placement would be with the group's proposed pods on it:
        MostAllocated over the sums of the placement nodes' allocatable and non-zero requests
        (whatever the configured strategy), with the scoring strategy's resources and weights,
        as upstream's placement bin packing does."""
        resources = self._resources
        wanted = [0] * len(resources)
        for pod, _node in assignments.proposed:
            for i, v in enumerate(pod_score_requests(pod, resources, use_requested=False)):
                wanted[i] += v
        nodes = assignments.placement.nodes
        width = snap.allocatable_units.shape[1]
        total = weights = 0
        for res, want in zip(resources, wanted, strict=True):
            name = res.name
            scalar = is_scalar_resource(name)
            c = snap.resources.get(name)
            if (scalar and want == 0) or (not scalar and name not in _FIXED_ORDER) \
                    or c is None or c >= width:
                continue
            allocatable = int(snap.allocatable_units[nodes, c].sum())
            if allocatable == 0:
                continue
            used = snap.non_zero_units if name in (CPU, MEMORY) else snap.requested_units
            requested = min(want + int(used[nodes, c].sum()), allocatable)
            total += requested * MAX_NODE_SCORE // allocatable * res.weight
            weights += res.weight
        return (total // weights if weights else 0), SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        """A deleted or scaled-down pod frees resources; a new node or a larger allocatable
        adds them."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Pod", "UpdatePodScaleDown"),
                ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeAllocatable")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(NodeResourcesFitArgs.parse(args))
