"""NodeResourcesFit: does the pod fit the node's free resources, and how full would the node be.

Filter follows upstream ``fitsRequest``: the pod-slot check first, then cpu, memory,
ephemeral-storage and the scalar resources (extended, hugepages, ``kubernetes.io/``-prefixed),
each failing when the request exceeds allocatable minus requested. The node is
UnschedulableAndUnresolvable when some failing request exceeds the node's whole allocatable (no
preemption can help), else Unschedulable. Upstream walks the scalar resources in Go map order;
we list them sorted by name so reasons are reproducible. Score implements the three scoring
strategies over the non-zero requests (100m cpu / 200Mi memory for containers that state none),
in upstream's units (millicores, whole bytes and counts) so the integer formulas, rounding and
overflow match. The gathered score inputs are also used by
:mod:`~kubeberth.plugins.scheduling.balanced_allocation`. Both Filter and Score gather the
candidates' rows once and then work one resource at a time on contiguous arrays; the masks for
nodes lacking a scored resource are only built when some candidate does lack one. Pod-level
resources, in-place resize and DRA-backed extended resources are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_extended_resource
from kubeberth.framework.cycle_state import CycleState
from kubeberth.framework.handle import Handle
from kubeberth.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.framework.status import SUCCESS, Code, CodeArray, FilterResult, IdArray, Status
from kubeberth.plugins.scheduling.helper import (
    BrokenLinearFunction,
    FunctionShapePoint,
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
from kubeberth.state.cluster import BoolArray, ClusterState, IntArray, PodInfo

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
def _scale(name: str) -> int:
    """Milli-units per upstream unit: cpu is read in millicores, everything else whole."""
    return 1 if name == CPU else 1000


def pod_score_requests(pod: PodInfo, resources: Sequence[ResourceSpec],
                       use_requested: bool) -> tuple[int, ...]:
    """Upstream ``calculatePodResourceRequestList`` in upstream units: the non-zero requests
    (scoring defaults for containers without cpu/memory) unless ``use_requested``."""
    source = pod.requests if use_requested else pod.non_zero
    return tuple(source.get(r.name, 0) // _scale(r.name) for r in resources)


@dataclass(frozen=True, slots=True)
class ScoreInputs:
    """The resources upstream ``calculateResourceAllocatableRequest`` would score for this pod,
    in upstream units, over the candidate nodes: their positions in the plugin's resource list,
    the nodes' allocatable and what the nodes' pods request without this pod (scored resources
    × nodes, read-only) and the pod's own requests (a column, so it broadcasts)."""

    index: tuple[int, ...]
    alloc: IntArray
    used: IntArray
    pod: IntArray

    @property
    def dense(self) -> bool:
        """Whether every candidate has every scored resource (non-zero allocatable), so no
        per-node skipping is needed: the scorers then drop their masks."""
        return bool(self.index) and int(np.count_nonzero(self.alloc)) == self.alloc.size

    def matrices(self, n: int, num_resources: int) -> tuple[IntArray, IntArray]:
        """Nodes × resources matrices of allocatable (0 where a resource is not scored) and of
        requests with the pod, the form the masked scorers take."""
        alloc = np.zeros((n, num_resources), dtype=np.int64)
        requested = np.zeros((n, num_resources), dtype=np.int64)
        if self.index:
            index = list(self.index)
            alloc[:, index] = self.alloc.T
            requested[:, index] = (self.used + self.pod).T
        return alloc, requested


def score_inputs(snap: ClusterState, nodes: IntArray, resources: Sequence[ResourceSpec],
                 pod_requests: Sequence[int], use_requested: bool) -> ScoreInputs:
    """Gather what the scorers read. Left out are the resources whose allocatable upstream reads
    as 0 on every node: a scalar resource the pod does not request, a resource upstream does
    not score (``pods``, unprefixed names) and a resource no node has. A node lacking a scored
    resource has allocatable 0 there, which the masked scorers skip per node. The columns come
    from :meth:`ClusterState.units`, already in upstream units and gathered once per cycle for
    every score plugin that reads them."""
    width = snap.allocatable.shape[1]
    index: list[int] = []
    rows: list[int] = []
    # Upstream scores cpu and memory by their non-zero requests unless told otherwise.
    non_zero: list[bool] = []
    for j, res in enumerate(resources):
        name = res.name
        scalar = is_scalar_resource(name)
        if (scalar and pod_requests[j] == 0) or (not scalar and name not in _FIXED_ORDER):
            continue
        c = snap.resources.get(name)
        if c is None or c >= width:
            continue
        index.append(j)
        rows.append(c)
        non_zero.append(name in (CPU, MEMORY) and not use_requested)
    pod = np.array([pod_requests[j] for j in index], dtype=np.int64).reshape(len(index), 1)
    if not index:
        empty = np.zeros((0, len(nodes)), dtype=np.int64)
        return ScoreInputs((), empty, empty, pod)
    alloc = snap.units("allocatable", tuple(rows), nodes)
    if all(non_zero):
        used = snap.units("non_zero", tuple(rows), nodes)
    elif not any(non_zero):
        used = snap.units("requested", tuple(rows), nodes)
    else:
        used = np.concatenate([snap.units("non_zero" if nz else "requested", (c,), nodes)
                               for c, nz in zip(rows, non_zero, strict=True)])
    return ScoreInputs(tuple(index), alloc, used, pod)


def _weighted(scores: IntArray, include: BoolArray, weights: IntArray) -> tuple[IntArray, IntArray]:
    w = np.where(include, weights, 0)
    return (scores * w).sum(axis=1), w.sum(axis=1)


def least_allocated(alloc: IntArray, requested: IntArray, weights: IntArray) -> IntArray:
    """Free share of each resource × 100, weighted mean (integer division); over-committed
    resources score 0."""
    valid = alloc != 0
    safe = np.where(valid, alloc, 1)
    per = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
    total, weight_sum = _weighted(per, valid, weights)
    return np.where(weight_sum == 0, 0, total // np.maximum(weight_sum, 1))


def most_allocated(alloc: IntArray, requested: IntArray, weights: IntArray) -> IntArray:
    """Used share of each resource × 100 (requested capped at allocatable), weighted mean."""
    valid = alloc != 0
    safe = np.where(valid, alloc, 1)
    per = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
    total, weight_sum = _weighted(per, valid, weights)
    return np.where(weight_sum == 0, 0, total // np.maximum(weight_sum, 1))


def requested_to_capacity_ratio(alloc: IntArray, requested: IntArray, weights: IntArray,
                                shape: BrokenLinearFunction) -> IntArray:
    """The shape applied to utilization (100 when over-committed), weighted mean rounded half
    away from zero; resources scoring 0 leave both the sum and the weight sum, as upstream."""
    valid = alloc != 0
    safe = np.where(valid, alloc, 1)
    util = np.where(requested > alloc, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
    per = shape(util)
    total, weight_sum = _weighted(per, valid & (per > 0), weights)
    # math.Round(a / b) for non-negative a and small positive b, in exact integers.
    rounded = (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1)
    return np.where(weight_sum == 0, 0, rounded)


def _dense_share(inputs: ScoreInputs, weights: IntArray, most: bool) -> IntArray:
    """Least/MostAllocated when every candidate has every scored resource: the masked scorers'
    integer formulas for all scored resources at once, with a constant weight sum."""
    w = weights.take(inputs.index)
    # With equal weights sum(s * w) / (k * w) is sum(s) / k: they cancel exactly.
    equal = bool(np.count_nonzero(w == w[0]) == len(w))
    per = inputs.used + inputs.pod
    if most:
        np.minimum(per, inputs.alloc, out=per)
    else:
        # Over-committed scores 0: clipping the free amount at 0 gives exactly that.
        np.subtract(inputs.alloc, per, out=per)
        np.maximum(per, 0, out=per)
    per *= MAX_NODE_SCORE
    per //= inputs.alloc
    if equal:
        weight_sum = len(w)
    else:
        per *= w.reshape(len(w), 1)
        weight_sum = int(w.sum())
    total: IntArray = per[0] if len(per) == 1 else np.add.reduce(per, axis=0)
    if weight_sum != 1:
        total //= weight_sum
    return total


# ---- plugin ----------------------------------------------------------------------------------
class PreFilterState(NamedTuple):
    """The resources Filter checks (request > 0, not ignored), in upstream's order, their
    requests in milli-units, and the reason label of each check; label 0 is the pod-slot
    check."""

    names: tuple[str, ...]
    requests: tuple[int, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PreScoreState:
    pod_requests: tuple[int, ...]


_ORDER_CACHE_LIMIT = 1024
# Columns of ``1 << j``: a node's failed checks become one integer, in the narrowest type that
# holds them (narrow integers keep the per-node work cheap).
_MAX_BITS = 63
_UNMEETABLE = np.iinfo(np.int64).max
_SHIFTS = np.left_shift(1, np.arange(_MAX_BITS, dtype=np.int64)).reshape(_MAX_BITS, 1)
_WEIGHTS_8 = _SHIFTS[:8].astype(np.uint8)
_WEIGHTS_16 = _SHIFTS[:16].astype(np.uint16)


def _bit_weights(m: int) -> npt.NDArray[np.integer[Any]]:
    if m <= 8:
        return _WEIGHTS_8[:m]
    return _WEIGHTS_16[:m] if m <= 16 else _SHIFTS[:m]


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin,
                       EnqueueExtensions):
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self.args = args
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._resources = strategy.resources
        self._weights = np.array([r.weight for r in strategy.resources], dtype=np.int64)
        self._most = strategy.type == MOST_ALLOCATED
        self._shape: BrokenLinearFunction | None = None
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO and strategy.shape is not None:
            factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self._shape = BrokenLinearFunction(
                [FunctionShapePoint(p.utilization, p.score * factor) for p in strategy.shape])
        # Resource names of a request map (in its order) -> the names Filter checks, in
        # upstream's order. Pods share a handful of such shapes.
        self._orders: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}

    # ---- filter ----
    def _ignored_resource(self, name: str) -> bool:
        if not is_extended_resource(name):
            return False
        return name in self._ignored or name.split("/", 1)[0] in self._ignored_groups

    def _check_order(self, names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The checked names for requests with these names (all positive), and their labels."""
        hit = self._orders.get(names)
        if hit is None:
            order = [name for name in _FIXED_ORDER if name in names]
            order += [name for name in sorted(names) if name not in _FIXED_ORDER
                      and is_scalar_resource(name) and not self._ignored_resource(name)]
            hit = (tuple(order), (TOO_MANY_PODS, *("Insufficient " + n for n in order)))
            if len(self._orders) >= _ORDER_CACHE_LIMIT:
                self._orders.clear()
            self._orders[names] = hit
        return hit

    def compute_pre_filter_state(self, pod: PodInfo) -> PreFilterState:
        reqs = pod.requests
        names, labels = self._check_order(tuple(reqs))
        requests = tuple(reqs[name] for name in names)
        if not requests or min(requests) > 0:
            return PreFilterState(names, requests, labels)
        kept = [(name, r) for name, r in zip(names, requests, strict=True) if r > 0]
        return PreFilterState(tuple(n for n, _ in kept), tuple(r for _, r in kept),
                              (TOO_MANY_PODS, *("Insufficient " + n for n, _ in kept)))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_KEY, self.compute_pre_filter_state(pod))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        s = state.get(PRE_FILTER_KEY)
        if not isinstance(s, PreFilterState):
            s = self.compute_pre_filter_state(pod)
        # One check per requested resource, each over one contiguous column. A resource no
        # node has reads column 0 against a request nothing can meet, so it fails everywhere
        # and unresolvably, as upstream's zero allocatable does.
        width = snap.allocatable.shape[1]
        n = len(nodes)
        # Row 0: the pod-slot check; row j: check j.
        failed = np.empty((1 + len(s.names), n), dtype=np.bool_)
        np.greater_equal(snap.per_node(snap.pod_count, nodes), snap.per_node(snap.max_pods, nodes),
                         out=failed[0])
        checks: list[tuple[int, int]] = []
        free = snap.free
        for j, (name, request) in enumerate(zip(s.names, s.requests, strict=True), start=1):
            c = snap.resources.get(name)
            if c is None or c >= width:
                c, request = 0, _UNMEETABLE
            np.less(snap.per_node(free[:, c], nodes), request, out=failed[j])
            checks.append((c, request))
        any_failed: BoolArray = np.logical_or.reduce(failed, axis=0)
        if not np.logical_or.reduce(any_failed):
            return all_pass(n)
        # Codes now; the reason table only if someone reads it. A failed request larger than
        # the node's whole allocatable is unresolvable (a failure there is implied: the free
        # amount never exceeds allocatable), so the code is 2 per failed node plus 1 per
        # unresolvable one.
        unresolvable = np.zeros(n, dtype=np.bool_)
        for c, request in checks:
            unresolvable |= snap.per_node(snap.allocatable[:, c], nodes) < request
        codes: CodeArray = any_failed.view(np.int8) * np.int8(Code.UNSCHEDULABLE)
        codes += unresolvable.view(np.int8)
        return FilterResult(codes, explain=lambda: self._reasons(s, failed))

    @staticmethod
    def _reasons(s: PreFilterState, failed: BoolArray) -> tuple[IdArray, list[tuple[str, ...]]]:
        """Reason ids and table: bit j of a node's pattern is row j of ``failed``, so each
        combination of failed checks becomes one reason tuple."""
        if len(failed) > _MAX_BITS:
            return reason_table(failed.T, s.labels)
        weights = _bit_weights(len(failed))
        bits = np.bitwise_or.reduce(failed.view(np.uint8) * weights, axis=0)
        return reason_table_from_bits(bits, s.labels)

    # ---- score ----
    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        state.write(PRE_SCORE_KEY, PreScoreState(
            pod_score_requests(pod, self._resources, use_requested=False)))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        requests = s.pod_requests if isinstance(s, PreScoreState) else \
            pod_score_requests(pod, self._resources, use_requested=False)
        inputs = score_inputs(snap, nodes, self._resources, requests, use_requested=False)
        if self._shape is None and inputs.dense:
            return _dense_share(inputs, self._weights, self._most)
        alloc, requested = inputs.matrices(len(nodes), len(self._resources))
        if self._shape is not None:
            return requested_to_capacity_ratio(alloc, requested, self._weights, self._shape)
        if self._most:
            return most_allocated(alloc, requested, self._weights)
        return least_allocated(alloc, requested, self._weights)

    def events_to_register(self) -> list[ClusterEvent]:
        """A deleted or scaled-down pod frees resources; a new node or a larger allocatable
        adds them."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Pod", "UpdatePodScaleDown"),
                ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeAllocatable")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(NodeResourcesFitArgs.parse(args))
