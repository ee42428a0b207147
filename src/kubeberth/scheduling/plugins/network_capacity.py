"""NetworkCapacity: pods that need high-speed networking get a labelled node with a free slot.

Distributed training and inference pods that talk over RDMA/NVLink-class fabrics must land only
on nodes wired for it, and each such node has a limited number of network slots (NIC queues,
SR-IOV virtual functions). A pod states its need with the annotation
``kubeberth.io/network-slots: "N"``. Filter rejects, as UnschedulableAndUnresolvable, nodes
without the label ``nodeLabel`` (``kubeberth.io/network=high-speed`` by default: a hard
constraint, never a low score) and, as Unschedulable, nodes whose free slots are fewer than N.

The capacity source is a ConfigMap (arg ``capacityConfigMap``, ``kube-system/network-capacity``
by default) whose ``data`` maps a node name to its slots as a string integer; a node it does not
name has none. The plugin reads it from the cluster state, which every host fills (manifests
and timed updates in a simulation, ``kubeberth explain``'s manifests, an informer in the live
scheduler), and re-reads it whenever the state's ConfigMaps change. A malformed value makes the
whole ConfigMap invalid, never half-read: an InputError when the scheduler is built with it, and
afterwards (an update) an Error status for every pod that needs a slot, naming the ConfigMap,
the key and the expected form, until the ConfigMap is fixed.

Slots in use are the slots of the pods the cluster state holds on the node, assumed pods
included, so a slot is reserved from the moment the scheduler assumes a pod. Reserve checks the
node once more with the pod counted (two pods racing for the last slot: the second is rejected
and requeued); giving a reservation back (Unreserve after a Permit rejection or timeout, a failed
bind) and a pod's completion remove the pod from the state, which frees its slots, so nothing
can leak. Per-node usage is cached until the node's pods change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import all_pass, args_mapping, args_str, reject_unknown
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NetworkCapacity"
SLOTS_ANNOTATION = "kubeberth.io/network-slots"
DEFAULT_LABEL = "kubeberth.io/network=high-speed"
DEFAULT_CONFIG_MAP = "kube-system/network-capacity"
REASON_LABEL = "node(s) didn't have high-speed networking"
REASON_SLOTS = "node(s) had no free network slot"
UNLISTED = -1  # capacity of a node the ConfigMap does not name


def slots_of(pod: Pod) -> int:
    """Network slots a pod needs (0 when it does not ask)."""
    raw = pod.metadata.annotations.get(SLOTS_ANNOTATION)
    if raw is None:
        return 0
    if not raw.strip().isdecimal():
        raise InputError(f"pod {pod.key}: {SLOTS_ANNOTATION} is {raw!r}",
                         field=f"metadata.annotations[{SLOTS_ANNOTATION}]",
                         expected="a whole number of network slots such as 1")
    return int(raw)


def _held(pod: Pod) -> int:
    """Slots a pod on a node holds; a malformed annotation (a pod another scheduler placed)
    holds none, as this plugin never admitted it."""
    try:
        return slots_of(pod)
    except InputError:
        return 0


class ConfigMapValueError(InputError):
    """A bad value in the capacity ConfigMap. It is located in the ConfigMap (source
    ``ConfigMap <namespace>/<name>``, field ``data.<node>``), so the layers that place plugin
    errors in the scheduler configuration file leave it where it is."""

    def at(self, *, source: str | None = None, line: int | None = None,
           field: str | None = None) -> InputError:
        return self


def parse_capacity(key: str, data: Mapping[str, str]) -> dict[str, int]:
    """Node name -> network slots from the capacity ConfigMap ``key``'s data."""
    out: dict[str, int] = {}
    for node, raw in data.items():
        if not raw.strip().isdecimal():
            raise ConfigMapValueError(
                f"{raw!r} is not a number of network slots", source=f"ConfigMap {key}",
                field=f"data.{node}", expected='the node\'s network slots as a whole number in '
                'a string, such as "4"')
        out[node] = int(raw)
    return out


@dataclass(frozen=True, slots=True)
class NetworkCapacityArgs:
    label_key: str = "kubeberth.io/network"
    label_value: str = "high-speed"
    config_map: str = DEFAULT_CONFIG_MAP

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NetworkCapacityArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, ("nodeLabel", "capacityConfigMap"), None)
        label = args_str(raw, "nodeLabel", None, DEFAULT_LABEL)
        key, eq, value = label.partition("=")
        if not key or not eq:
            raise InputError(f"Invalid value: {label!r}", field="nodeLabel",
                             expected="key=value, such as " + DEFAULT_LABEL)
        cm = args_str(raw, "capacityConfigMap", None, DEFAULT_CONFIG_MAP)
        namespace, slash, name = cm.partition("/")
        if not namespace or not slash or not name or "/" in name:
            raise InputError(f"Invalid value: {cm!r}", field="capacityConfigMap",
                             expected="namespace/name of a ConfigMap, such as "
                             + DEFAULT_CONFIG_MAP)
        return cls(key, value, cm)


class NetworkCapacity(PreFilterPlugin, FilterPlugin, ReservePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, args: NetworkCapacityArgs) -> None:
        self.args = args
        self.reason_unlisted = f"node(s) had no network slots in ConfigMap {args.config_map}"
        self._stamp = np.zeros(0, dtype=np.int64)
        self._used = np.zeros(0, dtype=np.int64)
        self._capacity = np.zeros(0, dtype=np.int64)
        self._source: tuple[ClusterState, int, int] | None = None
        self._error: InputError | None = None

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        """Pods that need no network slot skip the Filter; while the capacity ConfigMap is
        malformed, pods that need one get an Error status (retried with backoff)."""
        try:
            need = slots_of(pod.pod)
        except InputError as err:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(err),))
        if need == 0:
            return None, SKIP
        self._load(snap)
        if self._error is not None:
            return None, Status(Code.ERROR, (str(self._error),))
        return None, SUCCESS

    def _load(self, snap: ClusterState) -> None:
        """Capacity per node slot from the ConfigMap, re-read when the state's ConfigMaps or
        its node slots change. A bad value keeps every node at no capacity."""
        rows = snap.gpus.stamp.shape[0]
        source = (snap, snap.config_maps_version, snap.num_nodes)
        if self._source is not None and self._source[0] is snap \
                and self._source[1:] == source[1:] and len(self._capacity) == rows:
            return
        self._source = source
        self._capacity = np.full(rows, UNLISTED, dtype=np.int64)
        self._error = None
        data = snap.config_maps.get(self.args.config_map)
        if data is None:
            return
        try:
            table = parse_capacity(self.args.config_map, data)
        except InputError as err:
            self._error = err
            return
        for n, name in enumerate(snap.node_names):
            self._capacity[n] = table.get(name, UNLISTED)

    def _refresh(self, snap: ClusterState, nodes: IntArray) -> None:
        """Used slots of ``nodes``, recomputed where the node's pods changed (the state's
        per-node stamp)."""
        self._load(snap)
        rows = snap.gpus.stamp.shape[0]
        if len(self._stamp) != rows:
            self._stamp = np.full(rows, -1, dtype=np.int64)
            self._used = np.zeros(rows, dtype=np.int64)
        stale = nodes[self._stamp[nodes] != snap.gpus.stamp[nodes]]
        for n in stale.tolist():
            self._used[n] = sum(_held(p.pod) for p in snap.pods_on_node[n].values())
            self._stamp[n] = snap.gpus.stamp[n]

    def capacity(self, snap: ClusterState, nodes: IntArray) -> IntArray:
        """Total slots of ``nodes`` (-1 where the ConfigMap does not name the node)."""
        self._load(snap)
        cap: IntArray = self._capacity[nodes]
        return cap

    def free_slots(self, snap: ClusterState, nodes: IntArray) -> IntArray:
        """Free slots of ``nodes``; a node the ConfigMap does not name has none."""
        self._refresh(snap, nodes)
        free: IntArray = np.maximum(self._capacity[nodes], 0) - self._used[nodes]
        return free

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        need = slots_of(pod.pod)
        if need == 0:
            return all_pass(len(nodes))
        labelled = snap.label_values(self.args.label_key)[nodes] == self.args.label_value
        reason = np.where(labelled, 0, 1).astype(np.int32)
        reason[labelled & (self.free_slots(snap, nodes) < need)] = 2
        reason[labelled & (self._capacity[nodes] == UNLISTED)] = 3
        if not reason.any():
            return all_pass(len(nodes))
        codes = np.where(reason == 1, np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                         np.int8(Code.UNSCHEDULABLE)).astype(np.int8)
        codes[reason == 0] = 0
        return FilterResult(codes, reason, [(), (REASON_LABEL,), (REASON_SLOTS,),
                                            (self.reason_unlisted,)])

    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        """The assumed pod already counts on the node: the node must not be over its slots
        (the ConfigMap may have shrunk since Filter, in a host that applies updates between)."""
        if slots_of(pod.pod) == 0:
            return SUCCESS
        if self.free_slots(snap, np.array([node], dtype=np.int64))[0] < 0:
            return Status(Code.UNSCHEDULABLE, (REASON_SLOTS,))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> None:
        """Nothing to give back here: the scheduler forgets the assumed pod right after, and
        its slots are free from then on."""

    def events_to_register(self) -> list[ClusterEvent]:
        """Slots come free when a pod goes; nodes are added or relabelled; the capacity
        ConfigMap is created, changed or fixed."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "Update"), ClusterEvent("ConfigMap", "*")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NetworkCapacity:
    """The plugin; a capacity ConfigMap already in the state must be well-formed."""
    plugin = NetworkCapacity(NetworkCapacityArgs.parse(args))
    data = handle.snapshot.config_maps.get(plugin.args.config_map)
    if data is not None:
        parse_capacity(plugin.args.config_map, data)
    return plugin
