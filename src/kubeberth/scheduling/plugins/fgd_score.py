"""FGDScore: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23).

Place each pod where it makes the cluster's GPU fragmentation grow least. A node's fragmentation
``F`` is the free milli-GPU that the *target workload* — a distribution of pod types — could
not use there (defined term by term in :mod:`kubeberth.state.fragmentation`). For each
candidate node FGD computes ``Δ = F(now) − F(with the pod)`` and scores
``⌊100 · sigmoid(Δ / 1000)⌋`` (Δ in milli-GPU, so one GPU's worth of fragmentation avoided
moves the score from 50 to 73), as the paper's artifact does; no NormalizeScore. For a share
pod each fitting device is tried and the node scores with its best device (lowest index on
ties); that device is recorded for GpuDevices' Reserve, which makes it the pod's device. Whole
GPUs are taken lowest index first, as by every policy.

The target workload comes from ``targetWorkload`` (pod types with weights; the fragmentation
experiment passes the trace's), reduced to the most popular types that make up
``popularityThreshold`` % of the pods (95 by default, the paper's setting). Without
``targetWorkload`` the plugin uses the pods it has scored so far, this one included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import MILLI_PER_GPU, parse_gpu_spec
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, ScorePlugin
from kubeberth.scheduling.plugins.gpu_common import cpu_left, pod_cpu, record_choice
from kubeberth.scheduling.plugins.helper import (
    args_int,
    args_list,
    args_mapping,
    args_str,
    reject_unknown,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.fragmentation import (
    DEFAULT_POPULARITY,
    NodeStatsCache,
    PodType,
    TargetWorkload,
    typical_pod_types,
)

NAME = "FGDScore"
_MEMO_LIMIT = 4096
_TYPE_FIELDS = ("cpuMilli", "gpuMilli", "gpuCount", "gpuSpec", "weight")


@dataclass(frozen=True, slots=True)
class FGDScoreArgs:
    target_workload: tuple[tuple[PodType, int], ...] = ()
    popularity_threshold: int = DEFAULT_POPULARITY

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> FGDScoreArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, ("targetWorkload", "popularityThreshold"), None)
        popularity = args_int(raw, "popularityThreshold", None, DEFAULT_POPULARITY)
        if not 0 < popularity <= 100:
            raise InputError(f"Invalid value: {popularity}", field="popularityThreshold",
                             expected="a percentage from 1 to 100")
        types: dict[PodType, int] = {}
        for i, item in enumerate(args_list(raw, "targetWorkload", None)):
            at = f"targetWorkload[{i}]"
            entry = args_mapping(item, at)
            reject_unknown(entry, _TYPE_FIELDS, at)
            cpu = args_int(entry, "cpuMilli", at)
            milli = args_int(entry, "gpuMilli", at)
            count = args_int(entry, "gpuCount", at, 1 if milli else 0)
            weight = args_int(entry, "weight", at, 1)
            if cpu < 0 or weight < 1 or count < 0 or not 0 <= milli <= MILLI_PER_GPU \
                    or (count > 1 and milli != MILLI_PER_GPU) or (count == 0) != (milli == 0):
                raise InputError(f"pod type {dict(entry)} is not a valid shape", field=at,
                                 expected="cpuMilli ≥ 0, weight ≥ 1, and gpuMilli 1..1000 with "
                                 "gpuCount 1 (or gpuMilli 1000 with any gpuCount), or both 0")
            spec = parse_gpu_spec(args_str(entry, "gpuSpec", at)) if count else ()
            t = PodType(cpu, milli, count, spec)
            types[t] = types.get(t, 0) + weight
        return cls(tuple(types.items()), popularity)


def sigmoid_score(delta: IntArray, scale: int) -> IntArray:
    """``⌊100 · sigmoid(delta / scale)⌋`` as int64."""
    with np.errstate(over="ignore"):
        s = MAX_NODE_SCORE / (1.0 + np.exp(-delta / scale))
    return np.floor(s).astype(np.int64)


class FGDScore(ScorePlugin):
    name = NAME

    def __init__(self, args: FGDScoreArgs) -> None:
        self.args = args
        self._cache: NodeStatsCache | None = None
        if args.target_workload:
            self._cache = NodeStatsCache(TargetWorkload(typical_pod_types(
                dict(args.target_workload), args.popularity_threshold)))
        self._fixed = self._cache is not None
        self._seen: dict[PodType, int] = {}
        # (pod shape, table shape) -> per node slot: stamp when scored, score, device.
        self._memo: dict[tuple[PodType, int, int, int],
                         tuple[IntArray, IntArray, IntArray]] = {}

    def cache(self, pod: PodInfo) -> NodeStatsCache:
        """Node stats against the fixed target workload, or against the pods seen so far with
        this one counted (a new workload, so a fresh cache)."""
        if self._fixed and self._cache is not None:
            return self._cache
        t = PodType.of(pod_cpu(pod), pod.gpu)
        self._seen[t] = self._seen.get(t, 0) + 1
        return NodeStatsCache(TargetWorkload(typical_pod_types(
            self._seen, self.args.popularity_threshold)))

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        cache = self.cache(pod)
        if not self._fixed:
            score, device = self._compute(cache, pod, snap, nodes)
        else:
            score, device = self._memoised(cache, pod, snap, nodes)
        if pod.gpu.is_share:
            record_choice(state, nodes, device)
        return score

    def _memoised(self, cache: NodeStatsCache, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> tuple[IntArray, IntArray]:
        """Scores per node slot are kept per pod shape and recomputed only for nodes whose state
        moved since (one pod changes one node), which is what makes FGD cheap on a trace whose
        pods come in a few dozen shapes."""
        gpus = snap.gpus
        key = (PodType.of(pod_cpu(pod), pod.gpu), len(gpus.models), gpus.width,
               gpus.free.shape[0])
        memo = self._memo.get(key)
        if memo is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            rows = gpus.free.shape[0]
            memo = self._memo[key] = (np.full(rows, -1, dtype=np.int64),
                                      np.zeros(rows, dtype=np.int64),
                                      np.zeros(rows, dtype=np.int64))
        stamps, scores, devices = memo
        stale = nodes[stamps[nodes] != gpus.stamp[nodes]]
        if len(stale):
            score, device = self._compute(cache, pod, snap, stale)
            scores[stale] = score
            devices[stale] = device
            stamps[stale] = gpus.stamp[stale]
        return scores[nodes], devices[nodes]

    @staticmethod
    def _compute(cache: NodeStatsCache, pod: PodInfo, snap: ClusterState,
                 nodes: IntArray) -> tuple[IntArray, IntArray]:
        """Scores of ``nodes`` and, for a share pod, the best device on each."""
        target = cache.workload
        gpus = snap.gpus
        gpu = pod.gpu
        cpu = pod_cpu(pod)
        left = cpu_left(snap, nodes)
        scale = target.total_weight * 1000
        cnt, use, before = cache.stats(gpus, nodes, left)
        if gpu.is_share:
            after = target.share_fragmentation(gpus, nodes, cnt, use, left - cpu, gpu.milli)
            per_device = sigmoid_score(before[:, None] - after, scale)
            per_device[gpus.free[nodes] < gpu.milli] = -1
            device = np.argmax(per_device, axis=1)
            best: IntArray = np.maximum(per_device[np.arange(len(nodes)), device], 0)
            return best, device
        taken = gpu.count * MILLI_PER_GPU
        after = target.weighted(target.table(gpus), gpus.model[nodes],
                                gpus.free[nodes].sum(axis=1) - taken,
                                np.maximum(cnt - gpu.count, 0), use - taken, left - cpu)
        return sigmoid_score(before - after, scale), np.zeros(len(nodes), dtype=np.int64)


def new(args: Mapping[str, Any] | None, handle: Handle) -> FGDScore:
    return FGDScore(FGDScoreArgs.parse(args))
