"""FGD against small examples worked out by hand from the paper's definitions (Weng et al.,
"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
USENIX ATC'23), not from the implementation.

Definitions used (§3 of the paper): for a node and a pod type k of the target workload, the free
GPU capacity that k cannot use is a fragment. If k cannot run on the node at all (not enough
CPU, no GPU of a model it accepts, not enough devices with room, or k asks for no GPU) every free
milli-GPU is a fragment for k; otherwise the devices with less free than k asks per device are.
The node's fragmentation is the expectation over the workload, F = Σ_k p_k · frag_k, and FGD
scores a placement by how much it lowers F: Δ = F(before) − F(after), score
⌊100 · sigmoid(Δ / 1000)⌋ (Δ in milli-GPU), taking a share pod's best device.

The target workload of every example (weights are pod counts, W = 5):

====  ==========  ===============  =======
type  CPU (m)     GPU              weight
====  ==========  ===============  =======
A     1000        500m on 1 GPU    3
B     1000        2 whole GPUs     1
C     2000        none (CPU only)  1
====  ==========  ===============  =======
"""

from __future__ import annotations

import math

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.plugins import fgd_score
from kubeberth.scheduling.plugins.gpu_common import DEVICE_CHOICE_KEY, DeviceChoice
from kubeberth.state.fragmentation import PodType, TargetWorkload

from .plugin_builders import handle, run_score
from .test_gpu_plugins import cluster, gpu_node, gpu_pod, use

A = PodType(1000, 500, 1)
B = PodType(1000, 1000, 2)
C = PodType(2000, 0, 0)
WEIGHTS = {A: 3, B: 1, C: 1}
ARGS = {"targetWorkload": [
    {"cpuMilli": 1000, "gpuMilli": 500, "gpuCount": 1, "weight": 3},
    {"cpuMilli": 1000, "gpuMilli": 1000, "gpuCount": 2, "weight": 1},
    {"cpuMilli": 2000, "gpuMilli": 0, "gpuCount": 0, "weight": 1},
], "popularityThreshold": 100}


def weighted_fragmentation(free: list[int], cpu_left: int, model: str = "T4",
                           weights: dict[PodType, int] | None = None) -> int:
    """W · F of one 4-GPU node whose devices have ``free`` milli-GPU left, by the library."""
    snap = cluster(gpu_node("n", 4, model=model))
    use(snap, "n", free)
    workload = TargetWorkload(weights or WEIGHTS)
    got = workload.node_fragmentation(snap.gpus, np.array([0]), np.array([cpu_left]))
    return int(got[0])


def sigmoid_score(delta: float) -> int:
    return math.floor(100 / (1 + math.exp(-delta / 1000)))


def test_fragmentation_of_a_node_with_room() -> None:
    # free = [1000, 1000, 300, 0]: total 2300 milli-GPU, CPU plentiful.
    #   A (500m × 1): d0 and d1 have ≥ 500 → runs; fragments: d2's 300 → frag_A = 300
    #   B (1000m × 2): d0 and d1 are whole → runs; fragments: d2's 300 → frag_B = 300
    #   C (CPU only): all of it → frag_C = 2300
    # W · F = 3·300 + 1·300 + 1·2300 = 3500, so F = 3500 / 5 = 700 milli-GPU.
    assert weighted_fragmentation([1000, 1000, 300, 0], cpu_left=64000) == 3500


def test_fragmentation_when_cpu_runs_out() -> None:
    # The same devices with 500m CPU left: neither A nor B (1000m each) can run, so all 2300
    # is a fragment for every type: W · F = 5 · 2300 = 11500 (F = 2300, all free GPU).
    assert weighted_fragmentation([1000, 1000, 300, 0], cpu_left=500) == 11500
    # At exactly 1000m left A and B run again: back to 3500.
    assert weighted_fragmentation([1000, 1000, 300, 0], cpu_left=1000) == 3500


def test_fragmentation_when_the_model_is_not_accepted() -> None:
    # A accepts only V100s; the node has T4s: frag_A = 2300 while B and C are as before.
    # W · F = 3·2300 + 1·300 + 1·2300 = 9500.
    only_v100 = {PodType(1000, 500, 1, ("V100",)): 3, B: 1, C: 1}
    assert weighted_fragmentation([1000, 1000, 300, 0], 64000, weights=only_v100) == 9500
    assert weighted_fragmentation([1000, 1000, 300, 0], 64000, model="V100",
                                  weights=only_v100) == 3500


def test_fgd_prefers_the_device_that_strands_nothing() -> None:
    """A 500m pod on free = [1000, 600, 0, 0] (total 1600).

    Before: A runs (d0, d1 ≥ 500) with no fragment; B needs two whole GPUs, has one → 1600;
    C → 1600. W · F = 3·0 + 1600 + 1600 = 3200.

    On d0 → [500, 600, 0, 0], total 1100: A runs, no fragment; B, C → 1100 each.
    W · F = 2200, Δ = 1000.
    On d1 → [1000, 100, 0, 0], total 1100: A runs, d1's 100 is a fragment → 3·100 = 300;
    B, C → 1100 each. W · F = 2500, Δ = 700.

    Best is d0 (Δ = 1000 in W · F, i.e. 200 milli-GPU of F): score
    ⌊100 · sigmoid(1000 / 5000)⌋ = ⌊54.98⌋ = 54. Best-fit would have picked d1 instead.
    """
    assert weighted_fragmentation([1000, 600, 0, 0], 64000) == 3200
    assert weighted_fragmentation([500, 600, 0, 0], 63000) == 2200
    assert weighted_fragmentation([1000, 100, 0, 0], 63000) == 2500
    snap = cluster(gpu_node("n", 4))
    use(snap, "n", [1000, 600, 0, 0])
    plugin = fgd_score.new(ARGS, handle(snap))
    state = CycleState()
    assert run_score(plugin, gpu_pod("p", milli=500), snap, state) == \
        {"n": sigmoid_score(1000 / 5)} == {"n": 54}
    choice = state.get(DEVICE_CHOICE_KEY)
    assert isinstance(choice, DeviceChoice) and choice.on(0) == 0


def test_fgd_scores_a_whole_gpu_pod_and_ranks_nodes() -> None:
    """A 1-GPU pod; node x has free [1000, 600, 0, 0], node y [1000, 1000, 1000, 1000].

    x: before 3200 (above). The pod takes d0 → [0, 600, 0, 0], total 600: A runs on d1, no
    fragment; B, C → 600. W · F = 1200, Δ = 2000 → ⌊100 · sigmoid(0.4)⌋ = ⌊59.87⌋ = 59.
    y: before, total 4000, everything runs and nothing is a fragment but C's 4000 → 4000.
    After → [0, 1000, 1000, 1000], total 3000: A, B run, no fragment; C → 3000. W · F = 3000,
    Δ = 1000 → ⌊100 · sigmoid(0.2)⌋ = 54. FGD puts the pod on x.
    """
    snap = cluster(gpu_node("x", 4), gpu_node("y", 4))
    use(snap, "x", [1000, 600, 0, 0])
    assert weighted_fragmentation([1000, 1000, 1000, 1000], 64000) == 4000
    assert weighted_fragmentation([0, 600, 0, 0], 63000) == 1200
    assert weighted_fragmentation([0, 1000, 1000, 1000], 63000) == 3000
    plugin = fgd_score.new(ARGS, handle(snap))
    scores = run_score(plugin, gpu_pod("p", whole=1), snap)
    assert scores == {"x": sigmoid_score(2000 / 5), "y": sigmoid_score(1000 / 5)}
    assert scores == {"x": 59, "y": 54}


def test_a_node_without_room_for_the_share_scores_zero() -> None:
    """Node z: free [300, 0, 0, 0] cannot take a 500m pod: its score is 0 (no device), while
    node w, all free, scores by its Δ. w: before, C's 4000 → 4000. The pod on d0 →
    [500, 1000, 1000, 1000], total 3500: A runs, no fragment; B runs (three whole GPUs), its
    fragment is d0's 500; C → 3500. W · F = 500 + 3500 = 4000, Δ = 0 → score 50."""
    snap = cluster(gpu_node("z", 4), gpu_node("w", 4))
    use(snap, "z", [300, 0, 0, 0])
    assert weighted_fragmentation([500, 1000, 1000, 1000], 63000) == 4000
    plugin = fgd_score.new(ARGS, handle(snap))
    assert run_score(plugin, gpu_pod("p", milli=500), snap) == {"z": 0, "w": 50}
