"""What a replay measures: allocation over time, queue depth, attempts by result, pod waits.

Series are sampled on a fixed virtual-time grid (plus the last event) so a run's size does not
depend on how many events it had, and two policies' series line up sample for sample. Attempt
results use kube-scheduler's metric labels (``scheduled``, ``unschedulable``, ``error``). GPU
fragmentation is measured against the workload's own pod types (docs/gpu.md), with per-node
results cached until a node's pods change, so sampling stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubeberth.api.gpu import MILLI_PER_GPU
from kubeberth.api.resources import CPU, GPU, GPU_MILLI, MEMORY
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.fragmentation import DEFAULT_POPULARITY, NodeStatsCache, TargetWorkload

SERIES_COLUMNS = (
    "time", "cpu_alloc_pct", "memory_alloc_pct", "gpu_alloc_pct", "running_pods",
    "pending_active", "pending_backoff", "pending_unschedulable", "attempts_scheduled",
    "attempts_unschedulable", "attempts_error", "preemptions", "gpu_frag_pct",
    "free_8gpu_nodes",
)


@dataclass(slots=True)
class PodRecord:
    key: str
    arrival: float
    bound: float | None = None
    node: str = ""
    attempts: int = 0
    finished: float | None = None
    preempted: int = 0
    reason: str = ""  # why the last attempt did not place the pod (empty once bound)
    deleted: float | None = None  # when it was evicted or deleted (an owner may replace it)

    @property
    def wait(self) -> float | None:
        return None if self.bound is None else self.bound - self.arrival


def fragmentation_cache(pods: list[PodInfo]) -> NodeStatsCache | None:
    """Fragmentation against these pods' types (95 % most popular), or None without pods."""
    if not pods:
        return None
    return NodeStatsCache(TargetWorkload.from_pods(
        ((pi.non_zero.get(CPU, 0), pi.gpu) for pi in pods), DEFAULT_POPULARITY))


@dataclass(slots=True)
class Metrics:
    attempts: dict[str, int] = field(
        default_factory=lambda: {"scheduled": 0, "unschedulable": 0, "error": 0})
    preemptions: int = 0
    pods: dict[str, PodRecord] = field(default_factory=dict)
    rows: list[tuple[float, ...]] = field(default_factory=list)
    # Node slots left out of the allocation percentages (the spill node's advertised capacity
    # would dwarf the cluster's).
    exclude_nodes: list[int] = field(default_factory=list)
    frag: NodeStatsCache | None = None
    # The cluster-derived columns of the last sample and the state generation they describe:
    # between two samples the cluster often did not change, and these are the costly ones.
    _cluster_cols: tuple[int, tuple[float | int, ...]] | None = None

    def sample(self, now: float, snap: ClusterState, pending: tuple[int, int, int]) -> None:
        cached = self._cluster_cols
        if cached is None or cached[0] != snap.generation:
            cached = self._cluster_cols = (snap.generation, self._cluster_columns(snap))
        alloc_cpu, alloc_mem, alloc_gpu, running, frag_pct, whole = cached[1]
        self.rows.append((
            now, alloc_cpu, alloc_mem, alloc_gpu, running, *pending,
            self.attempts["scheduled"], self.attempts["unschedulable"],
            self.attempts["error"], self.preemptions, frag_pct, whole,
        ))

    def _cluster_columns(self, snap: ClusterState) -> tuple[float | int, ...]:
        ids = snap.node_ids()
        counted = ids[~np.isin(ids, self.exclude_nodes)] if self.exclude_nodes else ids
        alloc = snap.allocatable[counted].sum(axis=0)
        req = snap.requested[counted].sum(axis=0)

        def pct(resource: str) -> float:
            col = snap.resources.get(resource)
            if col is None or col >= len(alloc) or alloc[col] == 0:
                return 0.0
            return round(100.0 * float(req[col]) / float(alloc[col]), 4)

        running = int(snap.pod_count[ids].sum())
        gpus = snap.gpus
        gpu_pct = self._gpu_alloc_pct(snap, counted, alloc, req)
        total_gpu = int(gpus.count[ids].sum()) * 1000
        frag_pct = 0.0
        if self.frag is not None and total_gpu:
            c = snap.resources.get(CPU)
            left = snap.allocatable[ids, c] - snap.requested[ids, c] if c is not None \
                else np.zeros(len(ids), dtype=np.int64)
            weighted = int(self.frag.stats(gpus, ids, left)[2].sum())
            frag_pct = round(100.0 * weighted / self.frag.workload.total_weight / total_gpu, 4)
        whole = (gpus.count[ids] == 8) & (gpus.free[ids] == 1000).all(axis=1) \
            if gpus.width else np.zeros(len(ids), dtype=np.bool_)
        return (pct(CPU), pct(MEMORY), gpu_pct, running, frag_pct,
                int(np.count_nonzero(whole)))

    @staticmethod
    def _gpu_alloc_pct(snap: ClusterState, counted: IntArray, alloc: IntArray,
                       req: IntArray) -> float:
        """Allocated share of the GPUs, from the devices (whole-GPU and share pods alike, however
        the manifest asked); nodes whose GPUs are a pool count their milli-GPU requests."""
        gpus = snap.gpus
        pooled = np.isin(counted, list(snap.gpu_pooled)) if snap.gpu_pooled \
            else np.zeros(len(counted), dtype=np.bool_)
        devices = counted[~pooled]
        total = int(gpus.count[devices].sum()) * MILLI_PER_GPU
        used = total - int(gpus.free[devices].sum()) if gpus.width else 0
        if pooled.any():
            # A pool advertises nvidia.com/gpu and maybe the milli-GPU pool; a pod asks for
            # either or both, so per node the larger of the two is what is taken. Both are
            # compared in milli-GPU: nvidia.com/gpu's milli-units are milli-GPU already, the
            # pool's milli-units are a thousand per milli-GPU.
            rows = counted[pooled]
            pairs = [(c, per) for c, per in ((snap.resources.get(GPU), 1),
                                             (snap.resources.get(GPU_MILLI), MILLI_PER_GPU))
                     if c is not None and c < len(alloc)]
            if pairs:
                cols = np.array([c for c, _ in pairs], dtype=np.int64)
                per = np.array([p for _, p in pairs], dtype=np.int64)
                total += int((snap.allocatable[np.ix_(rows, cols)] // per).max(axis=1).sum())
                used += int((snap.requested[np.ix_(rows, cols)] // per).max(axis=1).sum())
        return round(100.0 * used / total, 4) if total else 0.0

    def wait_percentiles(self) -> dict[str, float]:
        waits = np.array([r.wait for r in self.pods.values() if r.wait is not None],
                         dtype=np.float64)
        if waits.size == 0:
            return {"count": 0}
        out: dict[str, float] = {"count": int(waits.size), "mean": round(float(waits.mean()), 6)}
        for q in (50, 90, 95, 99):
            out[f"p{q}"] = round(float(np.percentile(waits, q)), 6)
        out["max"] = round(float(waits.max()), 6)
        return out

    def peak(self, column: str) -> float:
        i = SERIES_COLUMNS.index(column)
        return max((row[i] for row in self.rows), default=0.0)

    def mean(self, column: str) -> float:
        i = SERIES_COLUMNS.index(column)
        if not self.rows:
            return 0.0
        return round(sum(row[i] for row in self.rows) / len(self.rows), 4)
