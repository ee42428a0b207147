"""RandomScore: the FGD paper's Random baseline — one feasible node, drawn uniformly, scores 100.

PreScore draws the node with the scheduler's seeded generator (the artifact uses Go's global
``rand``), Score gives it MaxNodeScore and every other node 0. Pair it with GpuDevices
``deviceSelection: Random`` for the paper's Random policy (a random fitting device too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "RandomScore"
_KEY = "PreScore" + NAME


class RandomScore(PreScorePlugin, ScorePlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        state.write(_KEY, int(nodes[int(self.handle.rng.integers(len(nodes)))]))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        chosen = state.get(_KEY)
        if not isinstance(chosen, int):
            chosen = int(nodes[int(self.handle.rng.integers(len(nodes)))])
        return np.where(nodes == chosen, MAX_NODE_SCORE, 0).astype(np.int64)


def new(args: Mapping[str, Any] | None, handle: Handle) -> RandomScore:
    reject_args(NAME, args)
    return RandomScore(handle)
