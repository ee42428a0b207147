"""NodeResourcesBalancedAllocation: favour nodes whose resource usage the pod makes more even.

Each resource's utilization (requested / allocatable, capped at 1) is taken with and without the
pod; the balance of a set of utilizations is ``int((1 - std) * 100)``, where std is half the
difference for two resources and the population standard deviation for more. As in the newest
upstream (kubernetes PR #135573) the score is the change in balance mapped onto 50..100:
``50 + (50 + balance_with - balance_without) / 2`` (integer division), so an unchanged balance
scores 75. Scores use actual requests, not the scoring defaults, and best-effort pods (no request
for any configured resource) skip the plugin. Float arithmetic runs in upstream's units and in
upstream's order so the truncations land on the same integers; the per-node loop is a compiled
kernel (:mod:`~kubeberth.scheduling.plugins.resource_kernels`) reading the state's matrices by
node index. Older upstream releases scored only the balance with the pod; that variant is not
offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import PreScorePlugin, ScorePlugin
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Status
from kubeberth.scheduling.plugins.helper import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    args_list,
    args_mapping,
    parse_resource_specs,
    reject_unknown,
)
from kubeberth.scheduling.plugins.node_resources_fit import pod_score_requests, score_plan
from kubeberth.scheduling.plugins.resource_kernels import PlanCache, balanced_scores
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_KEY = "PreScore" + NAME


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


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    name = NAME
    # Balances lie in 50..100 (a deviation of fractions in [0, 1] is at most 0.5), so a change
    # scores 50 + (50 + change) / 2 in 50..100.
    scores_in_range = True

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self.args = args
        # Per pod shape (its requests) and state columns: the score kernel's plan.
        self._plans: PlanCache[tuple[int, ...], IntArray] = PlanCache()

    def _plan(self, requests: tuple[int, ...], snap: ClusterState) -> IntArray:
        plan = self._plans.get(snap, requests)
        if plan is None:
            plan = self._plans.put(requests, score_plan(snap, self.args.resources, requests,
                                                        use_requested=True))
        return plan

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        requests = pod_score_requests(pod, self.args.resources, use_requested=True)
        if not any(requests):
            # Best-effort pods would all pile onto one node (kubernetes issue #129138).
            return SKIP
        # The plan itself is the state (shared by pods of this shape; kernels never write it).
        state.write(PRE_SCORE_KEY, self._plan(requests, snap))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        plan = s if isinstance(s, np.ndarray) else self._plan(
            pod_score_requests(pod, self.args.resources, use_requested=True), snap)
        scores = np.empty(len(nodes), dtype=np.int64)
        balanced_scores(snap.allocatable_units, snap.requested_units, nodes, plan, scores)
        return scores


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs.parse(args))
