"""PodGroupPodsCount: prefer the placement that fits more of the group's pods (KEP-5732).

ScorePlacement is the group's pods already bound or assumed plus the pods the placement takes;
counting the scheduled ones keeps small differences small. NormalizePlacementScore scales by
the largest count among the candidates (not by minCount, which would open gaps between
placements one pod apart): ``0 + score × 100 / max``, an error when every count is 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubeberth.scheduling.framework.placement import (
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import ClusterState, IntArray

NAME = "PodGroupPodsCount"


class PodGroupPodsCount(PlacementScorePlugin):
    name = NAME

    def score_placement(self, state: CycleState, group: PodGroupInfo,
                        assignments: PodGroupAssignments,
                        snap: ClusterState) -> tuple[int, Status]:
        return len(group.scheduled) + len(assignments.proposed), SUCCESS

    def normalize_placement_score(self, state: CycleState, group: PodGroupInfo,
                                  scores: IntArray) -> tuple[IntArray | None, Status]:
        most = int(scores.max()) if len(scores) else 0
        if most == 0:
            return None, Status(Code.ERROR, ("no pods from pod group are assigned to any of "
                                             "the candidate placements",))
        return MIN_NODE_SCORE + scores * (MAX_NODE_SCORE - MIN_NODE_SCORE) // most, SUCCESS


def new(args: Mapping[str, Any] | None, handle: Handle) -> PodGroupPodsCount:
    reject_args(NAME, args)
    return PodGroupPodsCount()
