"""The pod-group extension points of kube-scheduler 1.37 (KEP-4671, KEP-5732): placement
generation, placement feasibility, placement scoring and pod-group PostFilter (KEP-5710), and
the runners that call them for one profile.

A Placement is a named set of candidate nodes; the pod-group cycle
(:mod:`kubeberth.scheduling.pod_group_cycle`) schedules the group's pods inside each one and asks
these plugins which placements are feasible and which is best. Plugin sets are expanded from
``multiPoint`` as for the pod extension points, and the instances are the profile's own (one
NodeResourcesFit serves Filter, Score and ScorePlacement).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeberth.config.workload_api import NativeGroup
from kubeberth.scheduling.config.types import Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, Plugin
from kubeberth.scheduling.framework.runtime import Framework, checked_weights, expand_points
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo


@dataclass(frozen=True, slots=True)
class Placement:
    """Candidate nodes (slots) for a pod group; ``name`` is for diagnostics."""

    name: str
    nodes: IntArray


@dataclass(slots=True)
class PodGroupInfo:
    """A pod group in its cycle: the group, its pods to place (in order) and its members
    already bound or assumed."""

    group: NativeGroup
    pods: list[PodInfo]
    scheduled: list[PodInfo] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PlacementProgress:
    """Pods of the group still to be evaluated in this placement, and pods placed (already
    scheduled ones included)."""

    remaining: int
    scheduled: int


@dataclass(slots=True)
class PodGroupAssignments:
    """What the cycle proposes in one placement: pod -> node slot."""

    placement: Placement
    proposed: list[tuple[PodInfo, int]]


class PlacementGeneratePlugin(Plugin):
    @abstractmethod
    def generate_placements(self, state: CycleState, group: PodGroupInfo, parent: Placement,
                            snap: ClusterState) -> tuple[list[Placement], Status]:
        """Candidate placements within ``parent`` (they may overlap); none means no fit."""


class PlacementFeasiblePlugin(Plugin):
    @abstractmethod
    def placement_feasible(self, state: CycleState, group: PodGroupInfo,
                           progress: PlacementProgress) -> Status:
        """Success: the group can be scheduled as it stands. Wait: not yet, more pods may
        make it. Unschedulable: it cannot be, whatever the remaining pods do."""


class PlacementScorePlugin(Plugin):
    @abstractmethod
    def score_placement(self, state: CycleState, group: PodGroupInfo,
                        assignments: PodGroupAssignments,
                        snap: ClusterState) -> tuple[int, Status]: ...

    def normalize_placement_score(self, state: CycleState, group: PodGroupInfo,
                                  scores: IntArray) -> tuple[IntArray | None, Status]:
        """Normalized scores, or None when the plugin has no NormalizePlacementScore."""
        return None, SUCCESS


@dataclass(slots=True)
class ProposedAssignment:
    """One pod of the group as the pod-group algorithm placed it (``node`` -1: nowhere), with
    the cycle state its PreFilter and Filter ran with: earlier pods of the group assumed and
    reserved, later ones unknown (KEP-5710's in-place reprieval reuses it)."""

    pod: PodInfo
    node: int
    state: CycleState


# Upstream's PodGroupSchedulingFunc: the pod-group algorithm (placements, feasibility, choice)
# on the snapshot as it stands, without any PostFilter; the snapshot is left as it was.
PodGroupSchedulingFunc = Callable[[], tuple[list[ProposedAssignment], Status]]


@dataclass(slots=True)
class PodGroupPostFilterResult:
    """What a podGroupPostFilter plugin found: pods to evict and, per pod of the group (key),
    the node it is nominated to."""

    victims: list[PodInfo] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)


class PodGroupPostFilterPlugin(Plugin):
    @abstractmethod
    def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo, snap: ClusterState,
                              schedule: PodGroupSchedulingFunc
                              ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """Called once when no placement fits the group: Success with victims whose removal
        lets it fit (``schedule`` re-runs the group's algorithm on the snapshot as the plugin
        leaves it, which it must restore), Unschedulable when it cannot help."""


POINT_KINDS: dict[str, type[Plugin]] = {
    "placementGenerate": PlacementGeneratePlugin,
    "placementFeasible": PlacementFeasiblePlugin,
    "placementScore": PlacementScorePlugin,
    "podGroupPostFilter": PodGroupPostFilterPlugin,
}


def _plugins(fw: Framework, enabled: list[tuple[str, int]]) -> list[Any]:
    """The instances named; :func:`expand_points` checked that each implements its point."""
    return [fw.plugin(n) for n, _ in enabled]


@dataclass(slots=True)
class PlacementScores:
    """Per feasible placement (in the order given): every plugin's raw, normalized and
    weighted score, and the totals."""

    per_plugin: dict[str, tuple[IntArray, IntArray, IntArray]]
    totals: IntArray


class PlacementFramework:
    """One profile's placement plugins, sharing instances with its pod :class:`Framework`."""

    def __init__(self, fw: Framework, profile: Profile) -> None:
        points = expand_points(profile, POINT_KINDS, fw.plugin, None)
        self.generate: list[PlacementGeneratePlugin] = _plugins(fw, points["placementGenerate"])
        self.feasible: list[PlacementFeasiblePlugin] = _plugins(fw, points["placementFeasible"])
        self.score: list[PlacementScorePlugin] = _plugins(fw, points["placementScore"])
        self.post_filter: list[PodGroupPostFilterPlugin] = _plugins(
            fw, points["podGroupPostFilter"])
        self.weights = checked_weights(points["placementScore"], profile, "placementScore",
                                       "placement score")
        self.percentage_of_placements_to_score = profile.percentage_of_placements_to_score

    # ---- runners ---------------------------------------------------------------------------
    def run_generate(self, state: CycleState, group: PodGroupInfo, parent: Placement,
                     snap: ClusterState) -> tuple[list[Placement], Status]:
        """Each generator on its own; several generators' placements are merged into their
        non-empty intersections (KEP-5732 beta). No generator: the parent placement."""
        merged: list[Placement] | None = None
        for p in self.generate:
            found, st = p.generate_placements(state, group, parent, snap)
            if not st.ok:
                return [], st.with_plugin(p.name)
            if merged is None:
                merged = found
                continue
            merged = [Placement(f"{a.name}/{b.name}" if a.name and b.name else a.name or b.name,
                                common)
                      for a in merged for b in found
                      if len(common := np.intersect1d(a.nodes, b.nodes, assume_unique=True))]
        return (merged if merged is not None else [parent]), SUCCESS

    def run_feasible(self, state: CycleState, group: PodGroupInfo,
                     progress: PlacementProgress) -> Status:
        """The first non-success verdict (Error and Unschedulable stop the placement; Wait
        goes on), else Success."""
        verdict = SUCCESS
        for p in self.feasible:
            st = p.placement_feasible(state, group, progress)
            if st.code in (Code.ERROR, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                return st.with_plugin(p.name)
            if st.code == Code.WAIT and verdict.ok:
                verdict = st.with_plugin(p.name)
        return verdict

    def run_score(self, state: CycleState, group: PodGroupInfo,
                  assignments: list[PodGroupAssignments],
                  snap: ClusterState) -> tuple[PlacementScores, Status]:
        n = len(assignments)
        totals = np.zeros(n, dtype=np.int64)
        per_plugin: dict[str, tuple[IntArray, IntArray, IntArray]] = {}
        for p in self.score:
            raw = np.zeros(n, dtype=np.int64)
            for i, a in enumerate(assignments):
                value, st = p.score_placement(state, group, a, snap)
                if not st.ok:
                    return PlacementScores(per_plugin, totals), st.with_plugin(p.name)
                raw[i] = value
            norm, st = p.normalize_placement_score(state, group, raw.copy())
            if not st.ok:
                return PlacementScores(per_plugin, totals), st.with_plugin(p.name)
            if norm is None:
                norm = raw
            bad = np.flatnonzero((norm < MIN_NODE_SCORE) | (norm > MAX_NODE_SCORE))
            if len(bad):
                msg = (f"plugin {p.name!r} returns an invalid placement score "
                       f"{int(norm[bad[0]])}, it should in the range of "
                       f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
                return PlacementScores(per_plugin, totals), Status(Code.ERROR, (msg,), p.name)
            weighted = norm * self.weights[p.name]
            totals += weighted
            per_plugin[p.name] = (raw, norm, weighted)
        return PlacementScores(per_plugin, totals), SUCCESS

    def run_post_filter(self, state: CycleState, group: PodGroupInfo, snap: ClusterState,
                        schedule: PodGroupSchedulingFunc
                        ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """Upstream's RunPodGroupPostFilterPlugins: in configuration order, the first Success
        or UnschedulableAndUnresolvable ends the run; Unschedulable reasons are collected (the
        first such plugin is the rejector) and returned when no plugin succeeds; anything else
        is an Error naming the plugin. No plugin: Unschedulable without a reason."""
        reasons: list[str] = []
        rejector = ""
        for p in self.post_filter:
            result, st = p.pod_group_post_filter(state, group, snap, schedule)
            if st.ok:
                return result, st.with_plugin(p.name)
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return result, st.with_plugin(p.name)
            if st.code == Code.UNSCHEDULABLE:
                reasons.extend(st.reasons)
                rejector = rejector or p.name
                continue
            msg = f"error in {p.name!r} PodGroupPostFilter plugins: {st.message()}"
            return None, Status(Code.ERROR, (msg,), p.name)
        return None, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)


def num_placements_to_score(percentage: int | None, placements: int, total_nodes: int) -> int:
    """How many feasible placements are looked for before scoring (KEP-5732 beta): the given
    percentage of the placements, else an adaptive one falling from 100% for small clusters
    to 10% at 5000 nodes across the placements, never under 5%; at least one."""
    if percentage is None or percentage <= 0:
        percentage = max(5, 100 - total_nodes * 90 // 5000)
    if percentage >= 100:
        return placements
    return max(1, placements * percentage // 100)


__all__ = [
    "POINT_KINDS",
    "Placement",
    "PlacementFeasiblePlugin",
    "PlacementFramework",
    "PlacementGeneratePlugin",
    "PlacementProgress",
    "PlacementScorePlugin",
    "PlacementScores",
    "PodGroupAssignments",
    "PodGroupInfo",
    "PodGroupPostFilterPlugin",
    "PodGroupPostFilterResult",
    "PodGroupSchedulingFunc",
    "ProposedAssignment",
    "num_placements_to_score",
]
