"""What the GPU plugins share: the node view they score on and the device choice they hand on.

The FGD paper's policies (Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD) score a node
by its unrequested CPU and its devices' free milli-GPU, and normalise by the largest node shape
of the openb cluster (``MAX_SPEC_CPU`` 128 cores, ``MAX_SPEC_GPU`` 8 GPUs), as the FGD artifact
does. A score plugin that also decides *which devices* a pod takes on each node (FGD does) writes
that choice into the CycleState under :data:`DEVICE_CHOICE_KEY`; the GpuDevices plugin reads it
at Reserve and otherwise uses its own ``deviceSelection``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import numpy as np

from kubeberth.api.gpu import GpuDemand
from kubeberth.api.resources import CPU
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, ScorePlugin
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.gpu import GpuDevices

MAX_SPEC_CPU = 128_000  # millicores of the largest openb node
MAX_SPEC_GPU = 8_000  # milli-GPU of the largest openb node
DEVICE_CHOICE_KEY = "GpuDevices/choice"


class GpuPodScore(ScorePlugin):
    """A score only for GPU pods (GpuClustering, GpuPacking): CPU-only pods score 0 everywhere."""

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        if pod.gpu.count == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        return self.score_gpu(pod.gpu, snap.gpus, nodes)

    @abstractmethod
    def score_gpu(self, gpu: GpuDemand, gpus: GpuDevices, nodes: IntArray) -> IntArray:
        """Raw scores of ``nodes`` for a pod that requests ``gpu``."""


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """A share pod's device on each scored node (``device[i]`` for ``nodes[i]``)."""

    nodes: IntArray
    device: IntArray

    def on(self, node: int) -> int | None:
        hit = np.flatnonzero(self.nodes == node)
        return int(self.device[hit[0]]) if len(hit) else None


def record_choice(state: CycleState, nodes: IntArray, device: IntArray) -> None:
    state.write(DEVICE_CHOICE_KEY, DeviceChoice(nodes, device))


def cpu_left(snap: ClusterState, nodes: IntArray) -> IntArray:
    """Unrequested millicores of each node (what the artifact calls ``MilliCpuLeft``)."""
    c = snap.resources.get(CPU)
    if c is None:
        return np.zeros(len(nodes), dtype=np.int64)
    left: IntArray = snap.allocatable[nodes, c] - snap.requested[nodes, c]
    return left


def pod_cpu(pod: PodInfo) -> int:
    """The pod's millicores as the artifact counts them: the non-zero request (100m for a
    container that names no CPU request)."""
    return pod.non_zero.get(CPU, 0)


def clamp_score(scores: IntArray) -> IntArray:
    """Into [0, 100]: the artifact's formulas leave that range only on nodes larger than the
    largest openb node, where kube-scheduler would reject the plugin's score."""
    return np.clip(scores, 0, MAX_NODE_SCORE)


def min_max_normalize(scores: IntArray) -> IntArray:
    """The artifact's NormalizeScore: lowest → 0, highest → 100, linear in between (integer
    division); all 0 when every node scored the same."""
    if scores.size == 0:
        return scores
    low, high = int(scores.min()), int(scores.max())
    if high == low:
        return np.zeros_like(scores)
    return (scores - low) * MAX_NODE_SCORE // (high - low)
