"""GPU devices in the cluster state: each device's free milli-GPU, per node, as one int64 matrix.

A node-level GPU pool cannot tell a node with two half-used GPUs from one with a free GPU, and
that difference is exactly what GPU-sharing schedulers fight over (fragmentation). So the state
keeps ``free[node, device]`` (nodes × the largest device count seen; 1000 is a free device, 0 a
full or absent one), the device count and the GPU model of each node, how many GPU pods of each
kind a node hosts (``kinds[node, 0]`` share pods, ``kinds[node, j]`` pods holding j whole GPUs),
and on each bound pod the devices it holds. :class:`~kubeberth.state.cluster.ClusterState`
calls into this class whenever a node or a pod is added or removed, so accounting is exact
through assume, Reserve/Unreserve, binding, completion and preemption.

The device-choice helpers here are the policies' device choice inside one node (best fit,
worst fit, random); they never modify the state.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubeberth.api.gpu import MILLI_PER_GPU, GpuDemand

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class GpuDevices:
    """Per node slot: device count, model id and free milli-GPU of each device."""

    __slots__ = ("count", "free", "kinds", "model", "model_ids", "models", "stamp", "width")

    def __init__(self, capacity: int) -> None:
        self.width = 0  # largest device count of any node
        self.free = np.zeros((capacity, 0), dtype=np.int64)
        self.kinds = np.zeros((capacity, 1), dtype=np.int64)
        self.count = np.zeros(capacity, dtype=np.int64)
        self.model = np.full(capacity, -1, dtype=np.int64)
        # Bumped whenever a node's devices, CPU or pods change, so per-node caches know.
        self.stamp = np.zeros(capacity, dtype=np.int64)
        self.models: list[str] = []  # model id -> name
        self.model_ids: dict[str, int] = {}

    # ---- shape -------------------------------------------------------------------------------
    def grow_rows(self, capacity: int) -> None:
        old = self.free.shape[0]
        if capacity <= old:
            return
        free = np.zeros((capacity, self.width), dtype=np.int64)
        free[:old] = self.free
        kinds = np.zeros((capacity, self.width + 1), dtype=np.int64)
        kinds[:old] = self.kinds
        count = np.zeros(capacity, dtype=np.int64)
        count[:old] = self.count
        model = np.full(capacity, -1, dtype=np.int64)
        model[:old] = self.model
        stamp = np.zeros(capacity, dtype=np.int64)
        stamp[:old] = self.stamp
        self.free, self.kinds, self.count, self.model = free, kinds, count, model
        self.stamp = stamp

    def _widen(self, width: int) -> None:
        if width <= self.width:
            return
        rows = self.free.shape[0]
        free = np.zeros((rows, width), dtype=np.int64)
        free[:, : self.width] = self.free
        kinds = np.zeros((rows, width + 1), dtype=np.int64)
        kinds[:, : self.width + 1] = self.kinds
        self.free, self.kinds, self.width = free, kinds, width

    def model_id(self, name: str) -> int:
        """Id of a GPU model name, -1 for none (registering new names)."""
        if not name:
            return -1
        mid = self.model_ids.get(name)
        if mid is None:
            mid = len(self.models)
            self.models.append(name)
            self.model_ids[name] = mid
        return mid

    # ---- nodes -------------------------------------------------------------------------------
    def set_node(self, idx: int, count: int, model: str,
                 held: list[tuple[GpuDemand, tuple[int, ...]]]) -> None:
        """(Re)define a node's devices; ``held`` are the demands and devices of its pods."""
        self._widen(count)
        self.stamp[idx] += 1
        self.count[idx] = count
        self.model[idx] = self.model_id(model)
        row = self.free[idx]
        row[:] = 0
        row[:count] = MILLI_PER_GPU
        self.kinds[idx] = 0
        for demand, devices in held:
            for d in devices:
                if d < count:
                    row[d] -= demand.milli
            self._count_kind(idx, demand, devices, 1)
        np.maximum(row, 0, out=row)

    def clear_node(self, idx: int) -> None:
        self.stamp[idx] += 1
        self.count[idx] = 0
        self.model[idx] = -1
        self.free[idx] = 0
        self.kinds[idx] = 0

    # ---- pods --------------------------------------------------------------------------------
    def _count_kind(self, node: int, demand: GpuDemand, devices: tuple[int, ...],
                    sign: int) -> None:
        if not devices:
            return
        kind = 0 if demand.is_share else demand.count
        if kind < self.kinds.shape[1]:
            self.kinds[node, kind] += sign

    def valid(self, node: int, demand: GpuDemand, devices: tuple[int, ...]) -> bool:
        """Whether ``devices`` are distinct devices of the node with room for the demand."""
        if len(devices) != demand.count or len(set(devices)) != len(devices):
            return False
        count = int(self.count[node])
        return all(0 <= d < count and self.free[node, d] >= demand.milli for d in devices)

    def take(self, node: int, demand: GpuDemand, devices: tuple[int, ...]) -> None:
        if not self.valid(node, demand, devices):
            raise RuntimeError(f"devices {devices} of node slot {node} cannot hold "
                               f"{demand.count} × {demand.milli} milli-GPU")
        self.hold(node, demand, devices)

    def hold(self, node: int, demand: GpuDemand, devices: tuple[int, ...]) -> None:
        """:meth:`take` without the check, for devices known to be valid (just chosen from
        this node's free row, or checked by :meth:`valid`)."""
        row = self.free[node]
        milli = demand.milli
        for d in devices:
            row[d] -= milli
        self._count_kind(node, demand, devices, 1)

    def give_back(self, node: int, demand: GpuDemand, devices: tuple[int, ...]) -> None:
        count = int(self.count[node])
        for d in devices:
            if d < count:
                self.free[node, d] += demand.milli
        self._count_kind(node, demand, devices, -1)

    # ---- vectorised questions ----------------------------------------------------------------
    def fitting_devices(self, nodes: IntArray, milli: int) -> IntArray:
        """Per node, how many devices have at least ``milli`` free."""
        if self.width == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        counts: IntArray = np.count_nonzero(self.free[nodes] >= milli, axis=1).astype(np.int64)
        return counts

    def model_allowed(self, nodes: IntArray, spec: tuple[str, ...]) -> BoolArray:
        """Per node, whether its GPU model is in ``spec`` (any model with a GPU when empty)."""
        if not spec:
            return np.ones(len(nodes), dtype=np.bool_)
        ids = [self.model_ids[s] for s in spec if s in self.model_ids]
        return np.isin(self.model[nodes], np.array(ids, dtype=np.int64))


# ---- device choice inside one node --------------------------------------------------------------
# A node has at most a few dozen devices, so these walk a plain list: fewer steps than the
# handful of numpy calls (each a few microseconds) the same choice would take.
def whole_devices(free: IntArray, count: int) -> tuple[int, ...]:
    """The first ``count`` fully free devices by index (every policy takes whole GPUs this way,
    as the FGD artifact's ``AllocateExclusiveGpuId``); empty when there are not enough."""
    idle = [d for d, f in enumerate(free.tolist()) if f == MILLI_PER_GPU]
    if len(idle) < count:
        return ()
    return tuple(idle[:count])


def best_fit_devices(free: IntArray, demand: GpuDemand) -> tuple[int, ...]:
    """Share pods: the fitting device with the least free milli-GPU (lowest index on ties);
    whole-GPU pods: :func:`whole_devices`."""
    if not demand.is_share:
        return whole_devices(free, demand.count)
    best, least = -1, 0
    milli = demand.milli
    for d, f in enumerate(free.tolist()):
        if f >= milli and (best < 0 or f < least):
            best, least = d, f
    return () if best < 0 else (best,)


def worst_fit_devices(free: IntArray, demand: GpuDemand) -> tuple[int, ...]:
    """Share pods: the fitting device with the most free milli-GPU (lowest index on ties)."""
    if not demand.is_share:
        return whole_devices(free, demand.count)
    best, most = -1, 0
    milli = demand.milli
    for d, f in enumerate(free.tolist()):
        if f >= milli and (best < 0 or f > most):
            best, most = d, f
    return () if best < 0 else (best,)


def random_devices(free: IntArray, demand: GpuDemand,
                   rng: np.random.Generator) -> tuple[int, ...]:
    """Share pods: a fitting device drawn uniformly with the seeded generator."""
    if not demand.is_share:
        return whole_devices(free, demand.count)
    milli = demand.milli
    fits = [d for d, f in enumerate(free.tolist()) if f >= milli]
    if not fits:
        return ()
    return (fits[int(rng.integers(len(fits)))],)
