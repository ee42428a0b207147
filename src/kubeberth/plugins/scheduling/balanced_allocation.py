"""NodeResourcesBalancedAllocation: favour nodes whose resource usage the pod makes more even.

Each resource's utilization (requested / allocatable, capped at 1) is taken with and without the
pod; the balance of a set of utilizations is ``int((1 - std) * 100)``, where std is half the
difference for two resources and the population standard deviation for more. As in the newest
upstream (kubernetes PR #135573) the score is the change in balance mapped onto 50..100:
``50 + (50 + balance_with - balance_without) / 2`` (integer division), so an unchanged balance
scores 75. Scores use actual requests, not the scoring defaults, and best-effort pods (no request
for any configured resource) skip the plugin. Float arithmetic runs in upstream's units and in
upstream's order so the truncations land on the same integers; the common case, two resources
that every candidate has, computes both balances at once without per-node masks. Older upstream
releases scored only the balance with the pod; that variant is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.framework.cycle_state import CycleState
from kubeberth.framework.handle import Handle
from kubeberth.framework.interface import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from kubeberth.framework.status import SKIP, SUCCESS, Status
from kubeberth.plugins.scheduling.helper import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    args_list,
    args_mapping,
    parse_resource_specs,
    reject_unknown,
    trunc_div,
)
from kubeberth.plugins.scheduling.node_resources_fit import (
    ScoreInputs,
    pod_score_requests,
    score_inputs,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_KEY = "PreScore" + NAME

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NodeResourcesBalancedAllocationArgs:
        """Upstream v1 defaulting (cpu and memory; weight 0 means 1), then
        ``ValidateNodeResourcesBalancedAllocationArgs``."""
        raw = args_mapping(raw)
        reject_unknown(raw, ("resources",), None)
        args = cls(parse_resource_specs(args_list(raw, "resources", None), "resources"))
        args.validate()
        return args

    def validate(self) -> None:
        seen: set[str] = set()
        for i, res in enumerate(self.resources):
            if res.name in seen:
                raise InputError(f"Duplicate value: {res.name!r}", field=f"resources[{i}].name",
                                 expected="each resource at most once")
            seen.add(res.name)
            if res.weight != 1:
                raise InputError(f"Invalid value: {res.weight}: must be 1",
                                 field=f"resources[{i}].weight",
                                 expected="weight 1 (or omitted)")


@dataclass(frozen=True, slots=True)
class PreScoreState:
    pod_requests: tuple[int, ...]


def _std(fractions: FloatArray, valid: npt.NDArray[np.bool_]) -> FloatArray:
    """Per row, upstream's deviation of the valid fractions: |f0 - f1| / 2 for two, population
    standard deviation for more, 0 otherwise. Sums run column by column as upstream's loop does
    (adding an exact 0.0 for a skipped resource leaves every partial sum unchanged)."""
    count = valid.sum(axis=1)
    # |f0 - f1| equals max - min exactly: IEEE subtraction rounds symmetrically.
    two = (np.where(valid, fractions, -np.inf).max(axis=1)
           - np.where(valid, fractions, np.inf).min(axis=1)) / 2
    if fractions.shape[1] <= 2:
        return np.where(count == 2, two, 0.0)
    f = np.where(valid, fractions, 0.0)
    total = f[:, 0].copy()
    for j in range(1, f.shape[1]):
        total += f[:, j]
    mean = total / np.maximum(count, 1)
    d = f - mean[:, None]
    sq = np.where(valid, d * d, 0.0)
    squares = sq[:, 0].copy()
    for j in range(1, sq.shape[1]):
        squares += sq[:, j]
    std = np.where(count > 2, np.sqrt(squares / np.maximum(count, 1)), 0.0)
    return np.where(count == 2, two, std)


def balance(alloc: IntArray, requested: IntArray) -> IntArray:
    """``int64((1 - std) * 100)`` per node over the resources with non-zero allocatable."""
    valid = alloc != 0
    safe = np.where(valid, alloc, 1).astype(np.float64)
    fractions = np.minimum(requested.astype(np.float64) / safe, 1.0)
    std = _std(fractions, valid)
    return ((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


_HALF = MAX_NODE_SCORE // 2
# Score for each change of balance (with the pod minus without), ``50 + (50 + change) / 2`` in
# Go's truncating division. Balances lie in 0..100, so changes in -100..100; negative changes
# sit at the end of the table, where numpy's negative indices find them.
_SCORE_OF_CHANGE = np.array(
    [_HALF + int((_HALF + d) / 2) for d in range(MAX_NODE_SCORE + 1)]
    + [_HALF + int((_HALF + d) / 2) for d in range(-MAX_NODE_SCORE, 0)], dtype=np.int64)


def _two_resource_balances(inputs: ScoreInputs) -> IntArray:
    """Balances without (row 0) and with (row 1) the pod when every candidate has both scored
    resources: upstream's two-fraction case, |f0 - f1| / 2, for both rows at once."""
    used = inputs.used
    requested = np.empty((2, 2, used.shape[1]), dtype=np.int64)  # resource, without/with, node
    requested[:, 0] = used
    np.add(used, inputs.pod, out=requested[:, 1])
    # float64(requested) / float64(allocatable), capped at 1, as upstream.
    fractions = requested / inputs.alloc[:, None]
    np.minimum(fractions, 1.0, out=fractions)
    std: FloatArray = fractions[0] - fractions[1]
    np.abs(std, out=std)
    std *= 0.5  # exact, like upstream's division by 2
    np.subtract(1.0, std, out=std)
    std *= float(MAX_NODE_SCORE)
    return std.astype(np.int64)


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    name = NAME

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self.args = args

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        requests = pod_score_requests(pod, self.args.resources, use_requested=True)
        if not any(requests):
            # Best-effort pods would all pile onto one node (kubernetes issue #129138).
            return SKIP
        state.write(PRE_SCORE_KEY, PreScoreState(requests))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        requests = s.pod_requests if isinstance(s, PreScoreState) else \
            pod_score_requests(pod, self.args.resources, use_requested=True)
        resources = self.args.resources
        inputs = score_inputs(snap, nodes, resources, requests, use_requested=True)
        if len(inputs.index) == 2 and inputs.dense:
            balances = _two_resource_balances(inputs)
            change = balances[1] - balances[0]
            scores: IntArray = _SCORE_OF_CHANGE.take(change)
            return scores
        alloc, with_pod = inputs.matrices(len(nodes), len(resources))
        without_pod = with_pod - np.array(requests, dtype=np.int64)
        change = _HALF + balance(alloc, with_pod) - balance(alloc, without_pod)
        return _HALF + trunc_div(change, 2)


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs.parse(args))
