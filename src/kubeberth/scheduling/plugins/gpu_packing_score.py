"""GpuPackingScore: fill partly used GPUs first, then partly used nodes, then idle nodes.

The FGD paper's packing baseline, band by band (higher is better):

1. a share pod fits on a partly used device: ``100 − ⌊⌊100 · f / 1000⌋ / 10⌋`` (at least 50),
   ``f`` the free milli-GPU of the best-fitting device, so fuller devices win;
2. the pod needs fully free devices of a node that is already partly used:
   ``50 − n`` (at least 33), ``n`` the free devices it takes;
3. every device of the node is free: ``max(33 − n, n)``, ``n`` the node's devices.

CPU-only pods score 0 everywhere. Devices: best fit (GpuDevices' default), which is the device
band 1 scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.api.gpu import MILLI_PER_GPU, GpuDemand
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE
from kubeberth.scheduling.plugins.gpu_common import GpuPodScore
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import IntArray
from kubeberth.state.gpu import GpuDevices

NAME = "GpuPackingScore"


class GpuPackingScore(GpuPodScore):
    name = NAME

    def score_gpu(self, gpu: GpuDemand, gpus: GpuDevices, nodes: IntArray) -> IntArray:
        free = gpus.free[nodes]
        idle = np.count_nonzero(free == MILLI_PER_GPU, axis=1).astype(np.int64)
        all_idle = np.maximum(MAX_NODE_SCORE // 3 - idle, idle)
        whole = np.maximum(MAX_NODE_SCORE // 2 - gpu.count, MAX_NODE_SCORE // 3)
        if gpu.is_share:
            best = np.where(free >= gpu.milli, free, MILLI_PER_GPU + 1).min(axis=1)
            shared = np.maximum(MAX_NODE_SCORE - (best * 100 // MILLI_PER_GPU) // 10,
                                MAX_NODE_SCORE // 2)
            used = np.where(best < MILLI_PER_GPU, shared, whole)
        else:
            used = np.full(len(nodes), whole, dtype=np.int64)
        scores: IntArray = np.where(idle == gpus.count[nodes], all_idle, used).astype(np.int64)
        return scores


def new(args: Mapping[str, Any] | None, handle: Handle) -> GpuPackingScore:
    reject_args(NAME, args)
    return GpuPackingScore()
