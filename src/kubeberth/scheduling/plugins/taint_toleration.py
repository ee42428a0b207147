"""TaintToleration: keep pods off nodes whose taints they do not tolerate, prefer fewer taints.

Filter rejects a node (UnschedulableAndUnresolvable) that has a NoSchedule or NoExecute taint no
toleration of the pod tolerates, with upstream v1.37's reason "node(s) had untolerated taint(s)"
(upstream names the taint only in its log, so FitError histograms count all such nodes as one
reason). Score counts the PreferNoSchedule taints the pod's PreferNoSchedule (or effect-less)
tolerations do not tolerate; NormalizeScore reverses it so fewer such taints score higher. Both
work per distinct taint list (:meth:`ClusterState.taint_groups`), which real clusters have few
of, and spread the result to nodes with one gather; when no taint list has a taint of the
relevant effects (the usual case) they return at once. Toleration comparison operators (Gt/Lt,
alpha upstream) are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.objects import Taint, Toleration
from kubeberth.api.selectors import tolerated
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import (
    IdArray,
    all_pass,
    default_normalize_score,
    pre_score_state,
    reject_args,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "TaintToleration"
PRE_SCORE_KEY = "PreScore" + NAME

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def first_untolerated(taints: Sequence[Taint], tolerations: list[Toleration]) -> Taint | None:
    """Upstream ``FindMatchingUntoleratedTaint`` with the NoSchedule/NoExecute filter."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(tolerations, taint):
            return taint
    return None


REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_REASONS: list[tuple[str, ...]] = [(), (REASON_UNTOLERATED,)]


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """The pod's tolerations that can tolerate a PreferNoSchedule taint."""

    tolerations: list[Toleration]


def prefer_no_schedule_tolerations(pod: PodInfo) -> list[Toleration]:
    return [t for t in pod.pod.spec.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]


class _GroupIndex:
    """Which taint groups can matter at all, recomputed only when the snapshot regroups (a node
    change gives :meth:`ClusterState.taint_groups` a new list): most clusters have no
    NoSchedule/NoExecute or no PreferNoSchedule taints, and then the plugin needs no work per
    pod."""

    __slots__ = ("_groups", "hard", "prefer")

    def __init__(self) -> None:
        self._groups: list[tuple[Taint, ...]] | None = None
        self.hard: list[tuple[int, tuple[Taint, ...]]] = []
        self.prefer: list[tuple[int, tuple[Taint, ...]]] = []

    def update(self, groups: list[tuple[Taint, ...]]) -> None:
        if groups is self._groups:
            return
        self.hard = [(g, t) for g, t in enumerate(groups)
                     if any(x.effect in (NO_SCHEDULE, NO_EXECUTE) for x in t)]
        self.prefer = [(g, t) for g, t in enumerate(groups)
                       if any(x.effect == PREFER_NO_SCHEDULE for x in t)]
        self._groups = groups


_CONSTANT_SCORES: dict[tuple[int, int], IntArray] = {}
_CONSTANT_SCORES_LIMIT = 64


def _constant_scores(n: int, value: int) -> IntArray:
    """``n`` scores of ``value``, a read-only array shared between cycles of the same size (its
    content never changes, so sharing it cannot go stale)."""
    hit = _CONSTANT_SCORES.get((n, value))
    if hit is None:
        if len(_CONSTANT_SCORES) >= _CONSTANT_SCORES_LIMIT:
            _CONSTANT_SCORES.clear()
        hit = _CONSTANT_SCORES[n, value] = np.full(n, value, dtype=np.int64)
        hit.flags.writeable = False
    return hit


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = NAME
    # The reversed default normalisation of non-negative counts lies in 0..100.
    scores_in_range = True

    def __init__(self) -> None:
        self._index = _GroupIndex()

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        group_of, groups = snap.taint_groups()
        self._index.update(groups)
        if not self._index.hard:
            return all_pass(len(nodes))
        tolerations = pod.pod.spec.tolerations
        untolerated: IdArray | None = None  # per taint group: 1 when it rejects the pod
        for g, taints in self._index.hard:
            if first_untolerated(taints, tolerations) is not None:
                if untolerated is None:
                    untolerated = np.zeros(len(groups), dtype=np.int32)
                untolerated[g] = 1
        if untolerated is None:
            return all_pass(len(nodes))
        ids = untolerated.take(group_of.take(nodes))
        codes = np.where(ids > 0, np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                         np.int8(0)).astype(np.int8)
        return FilterResult(codes, ids, list(_REASONS))

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        state.write(PRE_SCORE_KEY, PreScoreState(prefer_no_schedule_tolerations(pod)))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        tolerations = pre_score_state(state, PRE_SCORE_KEY, PreScoreState,
                                      "failed to read").tolerations
        group_of, groups = snap.taint_groups()
        self._index.update(groups)
        if not self._index.prefer:
            return _constant_scores(len(nodes), 0)
        counts = np.zeros(len(groups), dtype=np.int64)
        for g, taints in self._index.prefer:
            counts[g] = sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE
                            and not tolerated(tolerations, t))
        return np.asarray(counts.take(group_of.take(nodes)), dtype=np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        if not self._index.prefer:
            # Score found no PreferNoSchedule taint anywhere: all zeros, which the reversed
            # normalisation turns into the maximum everywhere.
            return _constant_scores(len(scores), MAX_NODE_SCORE)
        return default_normalize_score(scores, reverse=True)

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, a node whose taints changed, or a toleration added to the pod."""
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeTaint"),
                ClusterEvent("Pod", "UpdatePodToleration")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> TaintToleration:
    reject_args(NAME, args)
    return TaintToleration()
