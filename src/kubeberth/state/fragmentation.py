"""GPU fragmentation against a target workload, vectorised over nodes (the FGD paper's measure).

Free GPU capacity is not all equal: 300 milli-GPU left on a device is useless to a workload whose
pods all ask for half a GPU. Weng et al. ("Beware of Fragmentation", USENIX ATC'23) measure a
node's fragmentation against the *target workload*: the distribution of pod types (CPU request,
milli-GPU per device, device count, accepted GPU models) the cluster expects. Terms used below:

* ``free[d]``: free milli-GPU of device d of the node; ``total`` = Σ_d free[d]; ``cpu_left`` the
  node's unrequested millicores.
* A pod type k *fits* the node (the paper's Q3 "satisfied" quadrant) when the node's GPU model is
  one k accepts, at least ``count_k`` devices have ``free[d] ≥ milli_k``, and
  ``cpu_left ≥ cpu_k``. Then the devices with ``free[d] < milli_k`` are fragments for k:
  ``frag_k = total − use_k`` with ``use_k = Σ_{d: free[d] ≥ milli_k} free[d]``.
* Otherwise (lacks GPU, lacks CPU, model not accepted, and for CPU-only types always) all of
  ``total`` is a fragment for k: ``frag_k = total``.
* The node's fragmentation is the expectation over the workload,
  ``F = Σ_k w_k · frag_k / Σ_k w_k`` (weights ``w_k`` are pod counts).

Everything is kept in exact integers as ``W · F`` (W = Σ_k w_k). Rewriting
``W · F = W · total − Σ_l use_l · H(model, l, cnt_l, cpu bucket)``, where ``l`` runs over the
distinct ``milli_k`` levels, ``cnt_l`` counts the devices with ``free ≥`` level l and ``H`` sums
the weights of the types at that level which the node's model, device count and CPU admit, turns
one node's fragmentation into a handful of table look-ups; a nodes × devices × levels array then
answers it for every candidate node, and for every (node, device) a share pod could take, at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import GpuDemand
from kubeberth.state.gpu import GpuDevices

IntArray = npt.NDArray[np.int64]

DEFAULT_POPULARITY = 95


@dataclass(frozen=True, slots=True, order=True)
class PodType:
    """A pod's shape as fragmentation sees it: millicores, milli-GPU per device, device count
    (0 for CPU-only pods) and accepted GPU models (empty: any)."""

    cpu_milli: int
    gpu_milli: int
    gpu_count: int
    spec: tuple[str, ...] = ()

    @classmethod
    def of(cls, cpu_milli: int, gpu: GpuDemand) -> PodType:
        return cls(cpu_milli, gpu.milli if gpu.count else 0, gpu.count, gpu.spec)


def typical_pod_types(counts: Mapping[PodType, int],
                      popularity: int = DEFAULT_POPULARITY) -> dict[PodType, int]:
    """The most frequent types that together make ``popularity`` % of all pods (the FGD
    artifact's typical pods: most frequent first, ties by the larger shape, added one at a time
    until the share is reached)."""
    if not 0 < popularity <= 100:
        raise InputError(f"popularity {popularity} is out of range", field="popularityThreshold",
                         expected="a percentage from 1 to 100")
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    chosen: dict[PodType, int] = {}
    cumulative = 0
    for pod_type, n in ranked:
        if cumulative * 100 >= popularity * total:
            break
        chosen[pod_type] = n
        cumulative += n
    return chosen


class TargetWorkload:
    """Pod types with integer weights, and the look-up tables of the module docstring."""

    def __init__(self, weights: Mapping[PodType, int]) -> None:
        self.weights = {t: int(w) for t, w in weights.items() if w > 0}
        if not self.weights:
            raise InputError("the target workload is empty", field="targetWorkload",
                             expected="at least one pod type with a positive weight")
        self.total_weight = sum(self.weights.values())
        gpu_types = [t for t in self.weights if t.gpu_count > 0]
        self.levels = np.array(sorted({t.gpu_milli for t in gpu_types}), dtype=np.int64)
        self.cpu_thresholds = np.array(sorted({t.cpu_milli for t in gpu_types}), dtype=np.int64)
        self._gpu_types = gpu_types
        self._tables: dict[tuple[int, int], IntArray] = {}

    @classmethod
    def from_pods(cls, pods: Iterable[tuple[int, GpuDemand]],
                  popularity: int = DEFAULT_POPULARITY) -> TargetWorkload:
        """From (millicores, GPU demand) of a trace's pods."""
        counts: dict[PodType, int] = {}
        for cpu, gpu in pods:
            t = PodType.of(cpu, gpu)
            counts[t] = counts.get(t, 0) + 1
        return cls(typical_pod_types(counts, popularity))

    def table(self, devices: GpuDevices) -> IntArray:
        """``H[model + 1, level, devices fitting, cpu bucket]``: the weight of the GPU types at
        that level that a node of that model admits with that many fitting devices and that CPU
        (bucket b: the first b CPU thresholds are met). Row 0 is for nodes without a model."""
        key = (len(devices.models), devices.width)
        table = self._tables.get(key)
        if table is not None:
            return table
        level_of = {int(m): i for i, m in enumerate(self.levels.tolist())}
        cpu_of = {int(c): i for i, c in enumerate(self.cpu_thresholds.tolist())}
        table = np.zeros((len(devices.models) + 1, len(self.levels), devices.width + 1,
                          len(self.cpu_thresholds) + 1), dtype=np.int64)
        for t in self._gpu_types:
            if t.gpu_count > devices.width:
                continue
            rows = [0] if not t.spec else []
            rows += [g + 1 for g, name in enumerate(devices.models)
                     if not t.spec or name in t.spec]
            table[rows, level_of[t.gpu_milli], t.gpu_count:, cpu_of[t.cpu_milli] + 1:] += \
                self.weights[t]
        self._tables = {key: table}
        return table

    # ---- vectorised fragmentation ------------------------------------------------------------
    def level_stats(self, free: IntArray) -> tuple[IntArray, IntArray]:
        """Per row of ``free`` (… × devices): devices at or above each level (``cnt``) and their
        free milli-GPU (``use``), shapes … × levels."""
        at = free[..., None] >= self.levels
        return np.count_nonzero(at, axis=-2).astype(np.int64), (free[..., None] * at).sum(axis=-2)

    def weighted(self, table: IntArray, model: IntArray, total: IntArray, cnt: IntArray,
                 use: IntArray, cpu_left: IntArray) -> IntArray:
        """``W · F`` for node states given by their model id, total free, level stats and CPU
        left (any matching leading shape; ``cnt``/``use`` carry a trailing levels axis)."""
        bucket = np.searchsorted(self.cpu_thresholds, cpu_left, side="right")
        h = _lookup(table, model, cnt, bucket)
        out: IntArray = self.total_weight * total - (use * h).sum(axis=-1)
        return out

    def node_fragmentation(self, devices: GpuDevices, nodes: IntArray,
                           cpu_left: IntArray) -> IntArray:
        """``W · F`` of each node in ``nodes`` as it is now."""
        free = devices.free[nodes]
        cnt, use = self.level_stats(free)
        return self.weighted(self.table(devices), devices.model[nodes], free.sum(axis=1), cnt,
                             use, cpu_left)

    def share_fragmentation(self, devices: GpuDevices, nodes: IntArray, cnt: IntArray,
                            use: IntArray, cpu_after: IntArray, milli: int) -> IntArray:
        """``W · F`` of each node after a share pod takes ``milli`` from each device in turn
        (nodes × devices), given the nodes' level stats now and their CPU left after the pod.
        Entries for devices with less than ``milli`` free are meaningless; callers mask them.

        Only one device changes, so per level ``l`` the node's terms are: the device stays at
        or above the level (``l < ka``: ``use_l − milli`` at the same device count), drops below
        it (``ka ≤ l < kf``: ``use_l − free`` with one device fewer), or was below it already
        (``l ≥ kf``: unchanged); ``kf``/``ka`` count the levels at or below the device's free
        milli-GPU before/after. Prefix sums over levels make that one gather per device."""
        free = devices.free[nodes]
        table = self.table(devices)
        n, levels = len(nodes), len(self.levels)
        bucket = np.searchsorted(self.cpu_thresholds, cpu_after, side="right")
        model = devices.model[nodes]
        h0 = _lookup(table, model, cnt, bucket)
        h1 = _lookup(table, model, np.maximum(cnt - 1, 0), bucket)

        def prefix(x: IntArray) -> IntArray:
            out = np.zeros((n, levels + 1), dtype=np.int64)
            np.cumsum(x, axis=1, out=out[:, 1:])
            return out

        cum_a, cum_p, cum_b, cum_q = prefix(use * h0), prefix(h0), prefix(use * h1), prefix(h1)
        kf = np.searchsorted(self.levels, free, side="right")
        ka = np.searchsorted(self.levels, free - milli, side="right")
        rows = np.arange(n)[:, None]
        kept = cum_a[rows, ka] - milli * cum_p[rows, ka]
        dropped = (cum_b[rows, kf] - cum_b[rows, ka]) - free * (cum_q[rows, kf] - cum_q[rows, ka])
        above = cum_a[:, levels][:, None] - cum_a[rows, kf]
        total = free.sum(axis=1)[:, None] - milli
        out: IntArray = self.total_weight * total - (kept + dropped + above)
        return out


def _lookup(table: IntArray, model: IntArray, cnt: IntArray, bucket: IntArray) -> IntArray:
    """``table[model + 1, l, cnt[..., l], bucket]`` for every level l, as one flat take (a
    four-array fancy index costs several times more)."""
    _, levels, counts, buckets = table.shape
    base = ((model + 1)[..., None] * levels + np.arange(levels)) * counts
    flat: IntArray = table.ravel().take((base + cnt) * buckets + bucket[..., None])
    return flat


class NodeStatsCache:
    """Each node slot's level stats and ``W · F``, recomputed only for nodes whose state moved
    (:attr:`GpuDevices.stamp`) since they were last asked for; one pod changes one node."""

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        self._key: tuple[int, int, int] = (-1, -1, -1)
        self._stamp = np.zeros(0, dtype=np.int64)
        self._cnt = np.zeros((0, 0), dtype=np.int64)
        self._use = np.zeros((0, 0), dtype=np.int64)
        self._frag = np.zeros(0, dtype=np.int64)

    def stats(self, devices: GpuDevices, nodes: IntArray,
              cpu_left: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(cnt, use, W · F) of ``nodes`` now; ``cpu_left`` is aligned with ``nodes``."""
        rows = devices.free.shape[0]
        key = (len(devices.models), devices.width, rows)
        if key != self._key:
            levels = len(self.workload.levels)
            self._key = key
            self._stamp = np.full(rows, -1, dtype=np.int64)
            self._cnt = np.zeros((rows, levels), dtype=np.int64)
            self._use = np.zeros((rows, levels), dtype=np.int64)
            self._frag = np.zeros(rows, dtype=np.int64)
        stale = np.flatnonzero(self._stamp[nodes] != devices.stamp[nodes])
        if len(stale):
            ids = nodes[stale]
            free = devices.free[ids]
            cnt, use = self.workload.level_stats(free)
            self._cnt[ids] = cnt
            self._use[ids] = use
            self._frag[ids] = self.workload.weighted(
                self.workload.table(devices), devices.model[ids], free.sum(axis=1), cnt, use,
                cpu_left[stale])
            self._stamp[ids] = devices.stamp[ids]
        return self._cnt[nodes], self._use[nodes], self._frag[nodes]


@dataclass(frozen=True, slots=True)
class Fragmentation:
    """Cluster-wide: free milli-GPU the target workload cannot use, and the totals it is a
    share of."""

    fragmented_milli: float
    idle_milli: int
    total_milli: int

    @property
    def pct_of_total(self) -> float:
        return 100.0 * self.fragmented_milli / self.total_milli if self.total_milli else 0.0

    @property
    def pct_of_idle(self) -> float:
        return 100.0 * self.fragmented_milli / self.idle_milli if self.idle_milli else 0.0


def cluster_fragmentation(workload: TargetWorkload, devices: GpuDevices, nodes: IntArray,
                          cpu_left: IntArray) -> Fragmentation:
    """Σ over ``nodes`` of their fragmentation, with the idle and total GPU capacity."""
    weighted = int(workload.node_fragmentation(devices, nodes, cpu_left).sum())
    return Fragmentation(weighted / workload.total_weight, int(devices.free[nodes].sum()),
                         int(devices.count[nodes].sum()) * 1000)
