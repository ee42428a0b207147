"""GpuClusteringScore: keep GPU pods of one kind together, the FGD paper's clustering baseline.

A GPU pod's kind is "share" (part of one GPU) or "N whole GPUs". A node scores in one of four
bands of 25, highest first: it hosts only pods of the pod's kind (75–100), pods of several kinds
including the pod's (50–75), no GPU pods at all (25–50), only other kinds (0–25); inside a band
the node with less free GPU scores higher, ``⌊25 · (MAX_SPEC_GPU − gpu_left) / MAX_SPEC_GPU⌋``
(``gpu_left`` the node's free milli-GPU over all devices). CPU-only pods score 0 everywhere.
Devices: best fit (GpuDevices' default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.api.gpu import GpuDemand
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE
from kubeberth.scheduling.plugins.gpu_common import MAX_SPEC_GPU, GpuPodScore, clamp_score
from kubeberth.scheduling.plugins.helper import reject_args, trunc_div
from kubeberth.state.cluster import IntArray
from kubeberth.state.gpu import GpuDevices

NAME = "GpuClusteringScore"
_BAND = MAX_NODE_SCORE // 4


class GpuClusteringScore(GpuPodScore):
    name = NAME

    def score_gpu(self, gpu: GpuDemand, gpus: GpuDevices, nodes: IntArray) -> IntArray:
        kinds = gpus.kinds[nodes]
        kind = 0 if gpu.is_share else gpu.count
        same = kinds[:, kind] > 0 if kind < kinds.shape[1] else np.zeros(len(nodes), np.bool_)
        distinct = np.count_nonzero(kinds, axis=1)
        band = np.where(same, np.where(distinct == 1, 3, 2), np.where(distinct == 0, 1, 0))
        inside = trunc_div(_BAND * (MAX_SPEC_GPU - gpus.free[nodes].sum(axis=1)), MAX_SPEC_GPU)
        return clamp_score(inside + band * _BAND)


def new(args: Mapping[str, Any] | None, handle: Handle) -> GpuClusteringScore:
    reject_args(NAME, args)
    return GpuClusteringScore()
