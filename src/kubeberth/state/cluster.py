"""Cluster state as struct-of-arrays, the snapshot every policy reads.

kube-scheduler keeps a ``NodeInfo`` per node and loops over them; we keep one int64 matrix of
nodes × resources for allocatable, one for requested and one for the non-zero requested used in
scoring, so Filter and Score become a handful of numpy operations over all nodes. Resource columns
are discovered as manifests mention them (cpu, memory, ephemeral-storage and any extended
resource); every quantity is an int64 in milli-units (see :mod:`kubeberth.api.quantity`).
Derived matrices are kept alongside and updated by the same calls that change their sources, so
they are never stale: the free amount (allocatable minus requested) that Filter compares, and
the three matrices in upstream's units (millicores for cpu, whole units for everything else)
that Score reads, so no plugin converts units per cycle. Binding a pod is one compiled call for
those rows (see :mod:`kubeberth.state.jit`), and the state counts bound pods per priority and
those with pod (anti-)affinity, so plugins can tell in O(1) that no pod could matter to them.

Node indices never change: a removed node is masked out (``present``), so index-keyed caches and
traces stay valid and iteration order is the insertion order, which makes runs reproducible.
The state is not thread-safe; simulator and live adapters apply decisions one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import NO_GPU, GpuDemand, gpu_demand, node_gpu_count, node_gpu_model
from kubeberth.api.objects import (
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodHolder,
    PriorityClass,
    Taint,
    class_priority,
)
from kubeberth.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    GPU,
    GPU_MILLI,
    MEMORY,
    node_allocatable,
    pod_non_zero_requests,
    pod_requests,
)
from kubeberth.state.dra import DraState
from kubeberth.state.gpu import GpuDevices, best_fit_devices
from kubeberth.state.jit import kernel
from kubeberth.state.memo import ShapeMemo
from kubeberth.state.objects import SchedulingObjects

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)
# The node × resource matrices, sources first, then those derived from them.
_MATRICES = ("allocatable", "requested", "non_zero_requested", "free", "allocatable_units",
             "requested_units", "non_zero_units")
_INITIAL_NODES = 64
# Distinct request maps whose vectors ResourceIndex keeps (a bound on a long run's memory).
_MAX_SHAPES = 4096
# Real GPU servers have at most a few dozen devices; more is a pool (a virtual node).
MAX_MODELLED_DEVICES = 64


class ResourceIndex:
    """Resource name → column. Grows as new resource names appear; ``version`` tells caches."""

    __slots__ = ("_cols", "_vectors", "names", "version")

    def __init__(self, names: Iterable[str] = _BASE_RESOURCES) -> None:
        self.names: list[str] = []
        self._cols: dict[str, int] = {}
        # Pods come in few shapes: one read-only vector per request map and column layout.
        self._vectors: ShapeMemo[tuple[tuple[str, int], ...], IntArray] = ShapeMemo(_MAX_SHAPES)
        self.version = 0
        for name in names:
            self.add(name)

    def add(self, name: str) -> int:
        col = self._cols.get(name)
        if col is None:
            col = len(self.names)
            self.names.append(name)
            self._cols[name] = col
            self.version += 1
            self._vectors.clear()
        return col

    def get(self, name: str) -> int | None:
        return self._cols.get(name)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def known_vector(self, values: dict[str, int]) -> IntArray | None:
        """:meth:`vector` when this map's vector is kept for the current columns, else None."""
        return self._vectors.get(tuple(values.items()))

    def vector(self, values: dict[str, int]) -> IntArray:
        """``values`` as a vector in column order (read-only: equal maps share one)."""
        key = tuple(values.items())
        vec = self._vectors.get(key)
        if vec is None:
            vec = np.zeros(len(self.names), dtype=np.int64)
            for name, v in key:
                vec[self._cols[name]] = v
            vec.flags.writeable = False
            self._vectors.put(key, vec)
        return vec


@dataclass(slots=True, eq=False)
class PodInfo(PodHolder):
    """A pod with what the scheduler derives from it once: requests, priority, identity.

    ``node`` is the node index while the pod is bound or assumed on one, else -1; ``gpu`` is its
    GPU demand and ``gpu_devices`` the devices it holds there (see :mod:`kubeberth.state.gpu`).
    """

    pod: Pod
    key: str
    priority: int
    requests: dict[str, int]
    non_zero: dict[str, int]
    seq: int = 0
    node: int = -1
    start_time: float = 0.0
    arrival: float = 0.0
    gpu: GpuDemand = NO_GPU
    gpu_devices: tuple[int, ...] = ()
    # Assumed on its node with its devices still to be chosen (by a Reserve plugin, else by
    # :meth:`ClusterState.place_gpu_devices`'s fallback at the end of Reserve).
    gpu_pending: bool = False
    # What ClusterState counted for this pod when it was added (see ``add_pod``), so removal
    # takes back exactly that even if the pod object was replaced meanwhile.
    _counted_priority: int = 0
    _counted_pod_affinity: bool = False
    _vec_version: int = -1
    _req: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _nz: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def vectors(self, index: ResourceIndex) -> tuple[IntArray, IntArray]:
        """Request and non-zero request vectors in the index's current column order."""
        if self._vec_version != index.version:
            # A shape seen before has all its columns already (the memo empties when one is
            # added), so only a new shape needs the columns checked.
            req = index.known_vector(self.requests)
            nz = index.known_vector(self.non_zero)
            if req is None or nz is None:
                for name in self.requests:
                    index.add(name)
                for name in self.non_zero:
                    index.add(name)
                req = index.vector(self.requests)
                nz = index.vector(self.non_zero)
            self._req, self._nz = req, nz
            self._vec_version = index.version
        return self._req, self._nz


@kernel
def _account(requested: IntArray, non_zero: IntArray, free: IntArray, requested_units: IntArray,
             non_zero_units: IntArray, allocatable: IntArray, scale: IntArray, node: int,
             req: IntArray, nz: IntArray, sign: int) -> None:
    """Add (``sign`` 1) or remove (-1) a pod's requests on row ``node`` and bring the row's
    derived entries up to date: one compiled call instead of five numpy calls per bind."""
    for c in range(req.shape[0]):
        requested[node, c] += sign * req[c]
        non_zero[node, c] += sign * nz[c]
    for c in range(requested.shape[1]):
        used = requested[node, c]
        free[node, c] = allocatable[node, c] - used
        requested_units[node, c] = used // scale[c]
        non_zero_units[node, c] = non_zero[node, c] // scale[c]


def _unit_scales(names: list[str]) -> IntArray:
    """Milli-units per upstream unit for each column: cpu is read in millicores, every other
    resource in whole units (bytes, counts)."""
    return np.array([1 if name == CPU else 1000 for name in names], dtype=np.int64)


def resolve_priority(pod: Pod, classes: dict[str, PriorityClass]) -> int:
    """Priority as the Priority admission plugin sets it: explicit value, else the named class,
    else the global default class, else 0."""
    if pod.spec.priority is not None:
        return pod.spec.priority
    name = pod.spec.priority_class_name
    value = class_priority(name, classes)
    if value is None:
        raise InputError(f"pod {pod.key}: no PriorityClass with name {name} was found",
                         field="spec.priorityClassName",
                         expected="the name of a PriorityClass in the manifests")
    return value


def make_pod_info(pod: Pod, classes: dict[str, PriorityClass] | None = None,
                  seq: int = 0) -> PodInfo:
    if not pod.metadata.namespace:
        pod.metadata.namespace = "default"
    requests = pod_requests(pod)
    return PodInfo(
        pod=pod,
        key=pod.key,
        priority=resolve_priority(pod, classes or {}),
        requests=requests,
        non_zero=pod_non_zero_requests(pod),
        seq=seq,
        gpu=gpu_demand(pod, requests),
    )


class ClusterState:
    """Nodes × resources matrices plus the pods bound (or assumed) on each node."""

    def __init__(self) -> None:
        self.resources = ResourceIndex()
        self.node_names: list[str] = []
        self.node_index: dict[str, int] = {}
        self.nodes: list[Node] = []
        self.labels: list[dict[str, str]] = []
        self.taints: list[list[Taint]] = []
        cap = _INITIAL_NODES
        r = len(self.resources)
        # Column-major: plugins read one resource over many nodes far more often than one
        # node's whole row, and a column is then a contiguous array.
        self.allocatable = np.zeros((cap, r), dtype=np.int64, order="F")
        self.requested = np.zeros((cap, r), dtype=np.int64, order="F")
        self.non_zero_requested = np.zeros((cap, r), dtype=np.int64, order="F")
        # Derived, row by row, wherever a source row changes: allocatable - requested, and
        # the three sources in upstream units (each column floor-divided by ``unit_scale``).
        self.free = np.zeros((cap, r), dtype=np.int64, order="F")
        self.allocatable_units = np.zeros((cap, r), dtype=np.int64, order="F")
        self.requested_units = np.zeros((cap, r), dtype=np.int64, order="F")
        self.non_zero_units = np.zeros((cap, r), dtype=np.int64, order="F")
        self.unit_scale = _unit_scales(self.resources.names)
        self.pod_count = np.zeros(cap, dtype=np.int64)
        self.max_pods = np.zeros(cap, dtype=np.int64)
        self.unschedulable = np.zeros(cap, dtype=np.bool_)
        self.ready = np.zeros(cap, dtype=np.bool_)
        self.present = np.zeros(cap, dtype=np.bool_)
        self.gpus = GpuDevices(cap)
        # GPU pods bound where no device could hold them (a profile without GpuDevices).
        self.gpu_unplaced = 0
        # Node slots whose GPUs are a pool, not devices (more than MAX_MODELLED_DEVICES).
        self.gpu_pooled: set[int] = set()
        self.pods_on_node: list[dict[str, PodInfo]] = []
        self.pods: dict[str, PodInfo] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.pdbs: list[PodDisruptionBudget] = []
        # PodGroups, ElasticQuotas, Volcano Queues and every existing pod (see state/objects.py).
        self.objects = SchedulingObjects()
        self.dra = DraState()  # DRA objects, claim allocations and device usage
        # ConfigMaps policies read as configuration sources ("namespace/name" -> data), with a
        # counter bumped on every change so their caches know (see set_config_map).
        self.config_maps: dict[str, Mapping[str, str]] = {}
        self.config_maps_version = 0
        self.generation = 0
        # Bound pods per priority, and how many bound pods carry pod (anti-)affinity: plugins
        # ask "is there any?" in O(1) instead of walking every pod.
        self.priority_counts: dict[int, int] = {}
        self.pod_affinity_pods = 0
        self._label_cache: dict[str, npt.NDArray[np.object_]] = {}
        self._taint_groups: tuple[IntArray, list[tuple[Taint, ...]]] | None = None
        self._node_ids: IntArray | None = None

    # ---- sizes and views -------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Number of node slots, including removed ones (use ``present`` to mask)."""
        return len(self.node_names)

    def node_ids(self) -> IntArray:
        """Indices of the nodes that exist now, in insertion order (cached until the node set
        changes; callers must not modify the array)."""
        if self._node_ids is None:
            ids = np.flatnonzero(self.present[: self.num_nodes]).astype(np.int64)
            ids.flags.writeable = False
            self._node_ids = ids
        return self._node_ids

    def every_node(self, nodes: IntArray) -> bool:
        """Whether ``nodes`` is :meth:`node_ids` itself and covers every slot from 0, so a
        per-node array can be read as its first ``len(nodes)`` entries instead of gathered."""
        return nodes is self._node_ids and len(nodes) == len(self.node_names)

    def per_node(self, values: IntArray, nodes: IntArray) -> IntArray:
        """``values[nodes]`` (rows of a matrix, entries of a vector), without a gather when
        ``nodes`` are every node."""
        if self.every_node(nodes):
            return values[: len(nodes)]
        gathered: IntArray = values.take(nodes, axis=0)
        return gathered

    def col(self, resource: str) -> int:
        """Column of a resource, adding it (as a zero column) when first seen."""
        c = self.resources.get(resource)
        if c is None:
            c = self.resources.add(resource)
            self._grow_columns()
        return c

    def _grow_columns(self) -> None:
        r = len(self.resources)
        for attr in _MATRICES:
            arr: IntArray = getattr(self, attr)
            if arr.shape[1] < r:
                grown = np.zeros((arr.shape[0], r), dtype=np.int64, order="F")
                grown[:, : arr.shape[1]] = arr
                setattr(self, attr, grown)
        self.unit_scale = _unit_scales(self.resources.names)

    def _derive_requested(self, node: int) -> None:
        """Bring the derived matrices' row ``node`` up to date after its requests changed."""
        scale = self.unit_scale
        np.subtract(self.allocatable[node], self.requested[node], out=self.free[node])
        np.floor_divide(self.requested[node], scale, out=self.requested_units[node])
        np.floor_divide(self.non_zero_requested[node], scale, out=self.non_zero_units[node])

    def _grow_rows(self, need: int) -> None:
        cap = self.allocatable.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for attr in _MATRICES:
            arr = getattr(self, attr)
            grown = np.zeros((new_cap, arr.shape[1]), dtype=np.int64, order="F")
            grown[:cap] = arr
            setattr(self, attr, grown)
        for attr in ("pod_count", "max_pods", "unschedulable", "ready", "present"):
            arr1 = getattr(self, attr)
            grown1 = np.zeros(new_cap, dtype=arr1.dtype)
            grown1[:cap] = arr1
            setattr(self, attr, grown1)
        self.gpus.grow_rows(new_cap)

    def pod_vectors(self, pi: PodInfo) -> tuple[IntArray, IntArray]:
        before = len(self.resources)
        req, nz = pi.vectors(self.resources)
        if len(self.resources) != before:
            self._grow_columns()
        return req, nz

    # ---- nodes -----------------------------------------------------------------------------
    def add_node(self, node: Node) -> int:
        name = node.metadata.name
        if not name:
            raise InputError("a Node has no metadata.name", field="metadata.name",
                             expected="a non-empty node name")
        if name in self.node_index and self.present[self.node_index[name]]:
            raise InputError(f"node {name!r} is defined twice", field="metadata.name",
                             expected="unique node names")
        alloc = node_allocatable(node)
        idx = self.node_index.get(name)
        if idx is None:
            idx = len(self.node_names)
            self._grow_rows(idx + 1)
            self.node_names.append(name)
            self.node_index[name] = idx
            self.nodes.append(node)
            self.labels.append({})
            self.taints.append([])
            self.pods_on_node.append({})
        self._set_node(idx, node, alloc)
        self.present[idx] = True
        self._node_ids = None
        return idx

    def _set_node(self, idx: int, node: Node, alloc: dict[str, int]) -> None:
        if alloc.get(GPU) and GPU_MILLI not in alloc:
            # The share pool of a node that advertises only whole GPUs: its devices can hold
            # share pods (GpuDevices decides which), so NodeResourcesFit must not refuse them.
            alloc = {**alloc, GPU_MILLI: alloc[GPU] * 1000}
        for name in alloc:
            self.col(name)
        self.allocatable[idx, :] = 0
        for name, v in alloc.items():
            if name == "pods":
                continue
            self.allocatable[idx, self.resources.get(name)] = v
        self.max_pods[idx] = alloc.get("pods", 110_000) // 1000
        np.floor_divide(self.allocatable[idx], self.unit_scale, out=self.allocatable_units[idx])
        self._derive_requested(idx)
        self.nodes[idx] = node
        self.labels[idx] = {**node.metadata.labels, "kubernetes.io/hostname":
                            node.metadata.labels.get("kubernetes.io/hostname",
                                                     node.metadata.name)}
        self.taints[idx] = list(node.spec.taints)
        self.unschedulable[idx] = node.spec.unschedulable
        self.ready[idx] = node.ready
        count = node_gpu_count(alloc)
        if count > MAX_MODELLED_DEVICES:
            # A virtual node advertising a pool (a virtual kubelet's thousands of GPUs) has no
            # devices to fragment; modelling it would widen the device matrix for every node.
            self.gpu_pooled.add(idx)
            count = 0
        else:
            self.gpu_pooled.discard(idx)
        self.gpus.set_node(idx, count, node_gpu_model(node),
                           [(p.gpu, p.gpu_devices) for p in self.pods_on_node[idx].values()])
        self._label_cache.clear()
        self._taint_groups = None
        self.generation += 1

    def update_node(self, node: Node) -> int:
        idx = self.node_index.get(node.metadata.name)
        if idx is None or not self.present[idx]:
            return self.add_node(node)
        self._set_node(idx, node, node_allocatable(node))
        return idx

    def remove_node(self, name: str) -> list[PodInfo]:
        """Remove a node; returns the pods that were on it (now unbound)."""
        idx = self.node_index[name]
        orphans = list(self.pods_on_node[idx].values())
        for pi in orphans:
            self.remove_pod(pi)
        self.present[idx] = False
        self.gpus.clear_node(idx)
        self.gpu_pooled.discard(idx)
        self._node_ids = None
        self._label_cache.clear()
        self._taint_groups = None
        self.generation += 1
        return orphans

    def label_values(self, key: str) -> npt.NDArray[np.object_]:
        """Per node slot, the value of label ``key`` (None where absent). Cached until a node
        changes, so label-driven filters are one vectorised comparison."""
        arr = self._label_cache.get(key)
        if arr is None:
            arr = np.array([lbl.get(key) for lbl in self.labels], dtype=object)
            self._label_cache[key] = arr
        return arr

    def taint_groups(self) -> tuple[IntArray, list[tuple[Taint, ...]]]:
        """Nodes grouped by identical taint lists: (group id per node slot, taints per group).
        Real clusters have few distinct taint sets, so toleration checks run per group."""
        if self._taint_groups is None:
            ids = np.zeros(self.num_nodes, dtype=np.int64)
            groups: dict[tuple[tuple[str, str, str], ...], int] = {}
            sets: list[tuple[Taint, ...]] = []
            for i, taints in enumerate(self.taints):
                sig = tuple((t.key, t.value, t.effect) for t in taints)
                g = groups.get(sig)
                if g is None:
                    g = len(sets)
                    groups[sig] = g
                    sets.append(tuple(taints))
                ids[i] = g
            self._taint_groups = (ids, sets)
        return self._taint_groups

    # ---- pods ------------------------------------------------------------------------------
    def add_pod(self, pi: PodInfo, node: int, *, defer_devices: bool = False) -> None:
        """Account a pod on a node (bind or assume). Its GPU devices are placed at once, unless
        ``defer_devices`` (the scheduler's assume): then a Reserve plugin chooses them, or the
        scheduler has :meth:`place_gpu_devices` choose after Reserve, so each pod's devices are
        chosen exactly once."""
        if pi.node >= 0:
            raise RuntimeError(f"pod {pi.key} is already on node {self.node_names[pi.node]}")
        req, nz = self.pod_vectors(pi)
        _account(self.requested, self.non_zero_requested, self.free, self.requested_units,
                 self.non_zero_units, self.allocatable, self.unit_scale, node, req, nz, 1)
        self.pod_count[node] += 1
        self.pods_on_node[node][pi.key] = pi
        self.pods[pi.key] = pi
        pi.node = node
        priority = pi._counted_priority = pi.priority
        self.priority_counts[priority] = self.priority_counts.get(priority, 0) + 1
        affinity = pi.pod.spec.affinity
        if affinity is not None and (affinity.pod_affinity is not None
                                     or affinity.pod_anti_affinity is not None):
            pi._counted_pod_affinity = True
            self.pod_affinity_pods += 1
        self.gpus.stamp[node] += 1
        if pi.gpu.count:
            if node in self.gpu_pooled:
                pi.gpu_devices = ()
            elif defer_devices:
                pi.gpu_pending = True
            else:
                self._hold_gpu(pi, node, None)
        self.generation += 1

    def place_gpu_devices(self, pi: PodInfo, devices: tuple[int, ...] | None = None) -> None:
        """Choose an assumed pod's devices: ``devices`` when a policy chose them (RuntimeError
        when they cannot hold it), else the fallback of a pod nobody chose for. A pod already
        placed is moved to ``devices`` (its old ones are kept when the new cannot hold it)."""
        node = pi.node
        if node < 0 or not pi.gpu.count or node in self.gpu_pooled:
            return
        if pi.gpu_pending:
            if devices is not None and not self.gpus.valid(node, pi.gpu, devices):
                raise RuntimeError(f"pod {pi.key}: devices {devices} cannot hold it")
            pi.gpu_pending = False
            self._hold_gpu(pi, node, devices)
            self.gpus.stamp[node] += 1
            self.generation += 1
            return
        if devices is None or devices == pi.gpu_devices:
            return
        gpus = self.gpus
        held = pi.gpu_devices
        if held:
            gpus.give_back(node, pi.gpu, held)
        if not gpus.valid(node, pi.gpu, devices):
            if held:
                gpus.hold(node, pi.gpu, held)
            raise RuntimeError(f"pod {pi.key}: devices {devices} cannot hold it")
        gpus.hold(node, pi.gpu, devices)
        gpus.stamp[node] += 1
        if not held:
            self.gpu_unplaced -= 1
        pi.gpu_devices = devices
        self.generation += 1

    def _hold_gpu(self, pi: PodInfo, node: int, devices: tuple[int, ...] | None) -> None:
        """Hold ``devices`` (valid), else the fallback: those the pod's manifest names when
        they have room, else the best fit, as a kubelet's device manager allocates. A pod no
        device set can hold (only possible when the profile lacks the GpuDevices filter) holds
        none and is counted in ``gpu_unplaced``, as a kubelet would refuse it."""
        gpus = self.gpus
        demand = pi.gpu
        if devices is None:
            devices = demand.devices
            if not devices or not gpus.valid(node, demand, devices):
                devices = best_fit_devices(gpus.free[node, : gpus.count[node]], demand)
        if devices:
            gpus.hold(node, demand, devices)
        else:
            self.gpu_unplaced += 1
        pi.gpu_devices = devices

    def remove_pod(self, pi: PodInfo) -> None:
        """Release a pod's resources (completion, eviction, preemption, unreserve)."""
        node = pi.node
        if node < 0:
            return
        req, nz = self.pod_vectors(pi)
        _account(self.requested, self.non_zero_requested, self.free, self.requested_units,
                 self.non_zero_units, self.allocatable, self.unit_scale, node, req, nz, -1)
        self.pod_count[node] -= 1
        del self.pods_on_node[node][pi.key]
        self.pods.pop(pi.key, None)
        pi.node = -1
        left = self.priority_counts[pi._counted_priority] - 1
        if left:
            self.priority_counts[pi._counted_priority] = left
        else:
            del self.priority_counts[pi._counted_priority]
        if pi._counted_pod_affinity:
            pi._counted_pod_affinity = False
            self.pod_affinity_pods -= 1
        self.gpus.stamp[node] += 1
        if pi.gpu_pending:
            pi.gpu_pending = False
        elif pi.gpu_devices:
            self.gpus.give_back(node, pi.gpu, pi.gpu_devices)
            pi.gpu_devices = ()
        elif pi.gpu.count and node not in self.gpu_pooled:
            self.gpu_unplaced -= 1
        self.generation += 1

    def has_priority_below(self, priority: int) -> bool:
        """Whether some bound pod has a priority below ``priority`` (a preemption candidate)."""
        return any(p < priority for p in self.priority_counts)

    def iter_pods(self) -> Iterator[PodInfo]:
        return iter(self.pods.values())

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.namespaces.get(namespace)
        labels = dict(ns.metadata.labels) if ns else {}
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        return labels

    # ---- configuration sources -------------------------------------------------------------
    def set_config_map(self, key: str, data: Mapping[str, str] | None) -> None:
        """Add or replace (``data``) or delete (None) the ConfigMap ``namespace/name``."""
        if data is None:
            self.config_maps.pop(key, None)
        else:
            self.config_maps[key] = dict(data)
        self.config_maps_version += 1
