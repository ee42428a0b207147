"""BestFitScore: the FGD paper's BestFit baseline — the node left with the least free capacity.

What the node would have left after the pod, CPU and GPU weighted equally and normalised by
the largest node, ``S = ½ (cpu_left − cpu) / MAX_SPEC_CPU + ½ (gpu_left − gpu) / MAX_SPEC_GPU``
(``gpu_left`` the node's free milli-GPU over all devices, ``gpu`` the pod's devices ×
milli-GPU), gives the raw score ``⌊100 · (1 − S)⌋``, computed exactly as
``⌊(256000 − (cpu_left − cpu) − 16 · (gpu_left − gpu)) / 2560⌋``. NormalizeScore then stretches
the candidates' scores to 0..100 (lowest 0, highest 100), as the artifact does. Memory is not
scored. Devices: best fit (GpuDevices' default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import ScorePlugin
from kubeberth.scheduling.plugins.gpu_common import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    cpu_left,
    min_max_normalize,
    pod_cpu,
)
from kubeberth.scheduling.plugins.helper import reject_args, trunc_div
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "BestFitScore"
_SCALE = 2 * MAX_SPEC_CPU  # common denominator of the two halves
_GPU_FACTOR = MAX_SPEC_CPU // MAX_SPEC_GPU


class BestFitScore(ScorePlugin):
    name = NAME

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        rest = (cpu_left(snap, nodes) - pod_cpu(pod)) + _GPU_FACTOR * (
            snap.gpus.free[nodes].sum(axis=1) - pod.gpu.total_milli)
        return trunc_div(_SCALE - rest, _SCALE // 100)

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        return min_max_normalize(scores)


def new(args: Mapping[str, Any] | None, handle: Handle) -> BestFitScore:
    reject_args(NAME, args)
    return BestFitScore()
