"""DotProductScore: Tetris-style alignment, the FGD paper's DotProd baseline.

The node's free vector ``(cpu_left / MAX_SPEC_CPU, gpu_left / MAX_SPEC_GPU)`` (``gpu_left`` the
free milli-GPU summed over its devices) is dotted with the pod's demand normalised the same way
``(cpu / MAX_SPEC_CPU, gpu / MAX_SPEC_GPU)`` (``gpu`` = devices × milli-GPU); the score is
``⌊100 · (1 − dot / 2)⌋``, so the node whose free capacity is least aligned with the demand —
the most packed one — wins. A node with less free CPU than the pod asks scores 0. This is the
artifact's ``merge`` dimension with ``max`` normalisation, in exact integers: with
``K = MAX_SPEC_CPU²`` and ``(MAX_SPEC_CPU / MAX_SPEC_GPU)² = 256``,
``score = ⌊100 · (2K − cpu_left · cpu − 256 · gpu_left · gpu) / 2K⌋``. The paper pairs it with
best-fit devices (GpuDevices' default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, ScorePlugin
from kubeberth.scheduling.plugins.gpu_common import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    clamp_score,
    cpu_left,
    pod_cpu,
)
from kubeberth.scheduling.plugins.helper import reject_args, trunc_div
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "DotProductScore"
_RATIO_SQUARED = (MAX_SPEC_CPU // MAX_SPEC_GPU) ** 2
_TWO_K = 2 * MAX_SPEC_CPU * MAX_SPEC_CPU


class DotProductScore(ScorePlugin):
    name = NAME

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        cpu = pod_cpu(pod)
        left = cpu_left(snap, nodes)
        gpu_left = snap.gpus.free[nodes].sum(axis=1)
        dot = left * cpu + _RATIO_SQUARED * gpu_left * pod.gpu.total_milli
        scores = trunc_div(MAX_NODE_SCORE * (_TWO_K - dot), _TWO_K)
        return np.where(left < cpu, 0, clamp_score(scores)).astype(np.int64)


def new(args: Mapping[str, Any] | None, handle: Handle) -> DotProductScore:
    reject_args(NAME, args)
    return DotProductScore()
