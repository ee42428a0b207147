"""The pod-group extension points of kube-scheduler 1.37 (KEP-4671, KEP-5732): placement
generation, placement feasibility, placement scoring and pod-group PostFilter, and the
runners that call them for one profile.

A Placement is a named set of candidate nodes; the pod-group cycle
(:mod:`kubeberth.scheduling.pod_group_cycle`) schedules the group's pods inside each one and asks
these plugins which placements are feasible and which is best. Plugin sets are expanded from
``multiPoint`` as for the pod extension points, and the instances are the profile's own (one
NodeResourcesFit serves Filter, Score and ScorePlacement).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.config.workload_api import NativeGroup
from kubeberth.scheduling.config.types import MULTI_POINT, PLACEMENT_POINTS, Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import (
    MAX_NODE_SCORE,
    MAX_WEIGHT,
    MIN_NODE_SCORE,
    Plugin,
    PostFilterResult,
)
from kubeberth.scheduling.framework.runtime import UNMODELLED_PLUGINS, Framework
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


class PodGroupPostFilterPlugin(Plugin):
    @abstractmethod
    def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo,
                              snap: ClusterState) -> tuple[PostFilterResult | None, Status]:
        """Called when no placement fits: victims whose removal may let the group fit."""


POINT_KINDS: dict[str, type[Plugin]] = {
    "placementGenerate": PlacementGeneratePlugin,
    "placementFeasible": PlacementFeasiblePlugin,
    "placementScore": PlacementScorePlugin,
    "podGroupPostFilter": PodGroupPostFilterPlugin,
}


@dataclass(slots=True)
class PlacementScores:
    """Per feasible placement (in the order given): every plugin's raw, normalized and
    weighted score, and the totals."""

    per_plugin: dict[str, tuple[IntArray, IntArray, IntArray]]
    totals: IntArray


class PlacementFramework:
    """One profile's placement plugins, sharing instances with its pod :class:`Framework`."""

    def __init__(self, fw: Framework, profile: Profile) -> None:
        points = self._expand(fw, profile)
        self.generate: list[PlacementGeneratePlugin] = [
            p for p in (fw.plugin(n) for n, _ in points["placementGenerate"])
            if isinstance(p, PlacementGeneratePlugin)]
        self.feasible: list[PlacementFeasiblePlugin] = [
            p for p in (fw.plugin(n) for n, _ in points["placementFeasible"])
            if isinstance(p, PlacementFeasiblePlugin)]
        self.score: list[PlacementScorePlugin] = [
            p for p in (fw.plugin(n) for n, _ in points["placementScore"])
            if isinstance(p, PlacementScorePlugin)]
        self.post_filter: list[PodGroupPostFilterPlugin] = [
            p for p in (fw.plugin(n) for n, _ in points["podGroupPostFilter"])
            if isinstance(p, PodGroupPostFilterPlugin)]
        self.weights: dict[str, int] = {}
        for name, weight in points["placementScore"]:
            w = weight or 1
            if w < 0 or w > MAX_WEIGHT:
                raise InputError(f"placement score plugin {name!r} has weight {w}",
                                 field=f"profiles[{profile.index}].plugins.placementScore",
                                 expected=f"a weight between 1 and {MAX_WEIGHT}")
            self.weights[name] = w
        self.percentage_of_placements_to_score = profile.percentage_of_placements_to_score

    @staticmethod
    def _expand(fw: Framework, profile: Profile) -> dict[str, list[tuple[str, int]]]:
        """Upstream's multiPoint expansion for the placement points."""
        multi = profile.plugins.get(MULTI_POINT)
        multi_enabled = [(r.name, r.weight) for r in (multi.enabled if multi else [])]
        multi_names = {n for n, _ in multi_enabled}
        out: dict[str, list[tuple[str, int]]] = {}
        for point in PLACEMENT_POINTS:
            kind = POINT_KINDS[point]
            pset = profile.plugins.get(point)
            specific = [(r.name, r.weight) for r in (pset.enabled if pset else [])]
            disabled = set(pset.disabled if pset else [])
            specific_names = {n for n, _ in specific}
            for name, _ in specific:
                if not isinstance(fw.plugin(name), kind):
                    raise InputError(f"plugin {name!r} does not extend {point}",
                                     field=f"profiles[{profile.index}].plugins.{point}.enabled",
                                     expected=f"a plugin that implements {point}")
            chosen = [(n, w) for n, w in specific if n in multi_names]
            if "*" not in disabled:
                chosen += [(n, w) for n, w in multi_enabled
                           if n not in disabled and n not in specific_names
                           and n not in UNMODELLED_PLUGINS and isinstance(fw.plugin(n), kind)]
            chosen += [(n, w) for n, w in specific if n not in multi_names]
            seen: set[str] = set()
            for name, _ in chosen:
                if name in seen:
                    raise InputError(f"plugin {name!r} is enabled twice for {point}",
                                     field=f"profiles[{profile.index}].plugins.{point}",
                                     expected="each plugin at most once per extension point")
                seen.add(name)
            out[point] = chosen
        return out

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

    def run_post_filter(self, state: CycleState, group: PodGroupInfo,
                        snap: ClusterState) -> tuple[PostFilterResult | None, Status]:
        for p in self.post_filter:
            result, st = p.pod_group_post_filter(state, group, snap)
            if st.ok and result is not None:
                return result, st
            if st.code == Code.ERROR:
                return None, st.with_plugin(p.name)
        return None, Status(Code.UNSCHEDULABLE)


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
    "num_placements_to_score",
]
