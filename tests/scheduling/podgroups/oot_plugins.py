"""Out-of-tree placement plugins for the tests: registered with ``--plugin module:attr`` like any
other scheduling plugin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.placement import (
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.state.cluster import ClusterState


class PreferRack(PlacementScorePlugin):
    """Scores 100 for the placement named in its args, 0 for the others."""

    NAME = name = "PreferRack"

    def __init__(self, wanted: str) -> None:
        self.wanted = wanted

    def score_placement(self, state: CycleState, group: PodGroupInfo,
                        assignments: PodGroupAssignments,
                        snap: ClusterState) -> tuple[int, Status]:
        return (100 if assignments.placement.name.endswith(self.wanted) else 0), SUCCESS

    @staticmethod
    def new(args: Mapping[str, Any] | None, handle: Handle) -> PreferRack:
        return PreferRack(str((args or {}).get("rack", "")))


class EvictBlockers(PodGroupPostFilterPlugin):
    """Names every bound pod labelled ``blocker`` as a victim."""

    NAME = name = "EvictBlockers"

    def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo, snap: ClusterState,
                              schedule: PodGroupSchedulingFunc
                              ) -> tuple[PodGroupPostFilterResult | None, Status]:
        victims = [p for p in snap.pods.values() if p.labels.get("blocker")]
        return PodGroupPostFilterResult(victims=victims), SUCCESS

    @staticmethod
    def new(args: Mapping[str, Any] | None, handle: Handle) -> EvictBlockers:
        return EvictBlockers()
