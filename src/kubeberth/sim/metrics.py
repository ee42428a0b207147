"""What a replay measures: allocation over time, queue depth, attempts by result, pod waits.

Series are sampled on a fixed virtual-time grid (plus the last event) so a run's size does not
depend on how many events it had, and two policies' series line up sample for sample. Attempt
results use kube-scheduler's metric labels (``scheduled``, ``unschedulable``, ``error``). GPU
fragmentation is measured against the workload's own pod types (docs/gpu.md), with per-node
results cached until a node's pods change, so sampling stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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

GROUP_COLUMNS = ("group", "policy", "min_count", "pods", "bound", "created", "all_bound",
                 "wait_seconds", "cycles", "partial_placements", "placement",
                 "placement_score")


def percentiles(values: Iterable[float]) -> dict[str, float]:
    """count, mean, p50/p90/p95/p99 and max, rounded for byte-stable JSON; only the count
    when there is nothing to summarise."""
    arr = np.array(list(values), dtype=np.float64)
    if arr.size == 0:
        return {"count": 0}
    out: dict[str, float] = {"count": int(arr.size), "mean": round(float(arr.mean()), 6)}
    for q in (50, 90, 95, 99):
        out[f"p{q}"] = round(float(np.percentile(arr, q)), 6)
    out["max"] = round(float(arr.max()), 6)
    return out


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


@dataclass(slots=True)
class GroupRecord:
    """One native PodGroup over a run (docs/gangs.md, "In simulation"): its pods, its group
    cycles, and the chosen placements' total scores."""

    key: str
    policy: str
    min_count: int
    pods: list[str] = field(default_factory=list)
    cycles: int = 0
    scheduled_cycles: int = 0
    # Cycles that committed a gang placement holding fewer than minCount members (scheduled
    # before included): the all-or-nothing guarantee broken, so always 0 unless a bug.
    partial: int = 0
    scores: list[int] = field(default_factory=list)
    placement: str = ""

    def created(self, pods: dict[str, PodRecord]) -> float:
        """The group exists from its first pod's arrival (the simulator creates the PodGroup
        with its workload)."""
        return min(pods[k].arrival for k in self.pods)

    def all_bound(self, pods: dict[str, PodRecord]) -> float | None:
        """When the last of its pods was first bound; None while any never was."""
        times = [pods[k].bound for k in self.pods]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)


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
    groups: dict[str, GroupRecord] = field(default_factory=dict)
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
        return percentiles([r.wait for r in self.pods.values() if r.wait is not None])

    def group_summary(self) -> dict[str, Any]:
        """summary.json's ``podGroups``: group waits (creation to all members bound), partial
        placements, and the chosen placements' score distribution."""
        recs = list(self.groups.values())
        waits = [b - g.created(self.pods) for g in recs
                 if (b := g.all_bound(self.pods)) is not None]
        return {"total": len(recs), "allBound": len(waits),
                "cycles": sum(g.cycles for g in recs),
                "partialPlacements": sum(g.partial for g in recs),
                "waitSeconds": percentiles(waits),
                "placementScore": percentiles([float(s) for g in recs for s in g.scores])}

    def group_rows(self) -> list[tuple[Any, ...]]:
        """groups.csv, one row a group in first-arrival order (GROUP_COLUMNS)."""
        rows: list[tuple[Any, ...]] = []
        for g in sorted(self.groups.values(), key=lambda g: (g.created(self.pods), g.key)):
            bound = g.all_bound(self.pods)
            created = g.created(self.pods)
            rows.append((g.key, g.policy, g.min_count, len(g.pods),
                         sum(1 for k in g.pods if self.pods[k].bound is not None), created,
                         "" if bound is None else bound,
                         "" if bound is None else round(bound - created, 6), g.cycles,
                         g.partial, g.placement, "" if not g.scores else g.scores[-1]))
        return rows

    def peak(self, column: str) -> float:
        i = SERIES_COLUMNS.index(column)
        return max((row[i] for row in self.rows), default=0.0)

    def mean(self, column: str) -> float:
        i = SERIES_COLUMNS.index(column)
        if not self.rows:
            return 0.0
        return round(sum(row[i] for row in self.rows) / len(self.rows), 4)
