"""Small builders for scheduling-plugin tests: nodes, pods, a cluster state and a cycle runner."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from kubeberth.api.objects import (
    Affinity,
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSchedulingGate,
    PodSpec,
    ResourceRequirements,
    Taint,
    Toleration,
)
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    FilterPlugin,
    Plugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.status import Code, FilterResult, Status
from kubeberth.scheduling.plugins import resource_kernels as kernels
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info


def make_node(name: str, allocatable: Mapping[str, int | str] | None = None, *,
              labels: Mapping[str, str] | None = None, taints: Iterable[Taint] = (),
              unschedulable: bool = False) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels=dict(labels or {})),
                spec=NodeSpec(unschedulable=unschedulable, taints=list(taints)),
                status=NodeStatus(allocatable=dict(allocatable or {})))


def container(requests: Mapping[str, int | str] | None = None,
              restart_policy: str | None = None) -> Container:
    return Container(resources=ResourceRequirements(requests=dict(requests or {})),
                     restart_policy=restart_policy)


def make_pod(name: str, requests: Mapping[str, int | str] | None = None, *,
             containers: Sequence[Container] | None = None,
             init_containers: Sequence[Container] = (),
             overhead: Mapping[str, int | str] | None = None,
             tolerations: Iterable[Toleration] = (),
             node_selector: Mapping[str, str] | None = None,
             affinity: Affinity | None = None, node_name: str = "",
             priority: int | None = None, gates: Sequence[str] = (),
             labels: Mapping[str, str] | None = None) -> PodInfo:
    """A pod: one container with ``requests`` unless ``containers`` is given."""
    if containers is None:
        containers = [container(requests)]
    pod = Pod(metadata=ObjectMeta(name=name, namespace="default", labels=dict(labels or {})),
              spec=PodSpec(containers=list(containers), init_containers=list(init_containers),
                           overhead=dict(overhead or {}), tolerations=list(tolerations),
                           node_selector=dict(node_selector or {}), affinity=affinity,
                           node_name=node_name, priority=priority,
                           scheduling_gates=[PodSchedulingGate(name=g) for g in gates]))
    return make_pod_info(pod)


def cluster(*nodes: Node) -> ClusterState:
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)
    return snap


def place(snap: ClusterState, pi: PodInfo, node: str) -> None:
    snap.add_pod(pi, snap.node_index[node])


def handle(snap: ClusterState | None = None) -> Handle:
    return Handle(snap or ClusterState(), clock=lambda: 0.0, rng=np.random.default_rng(0))


def convert(raw: Any, kind: type[Any]) -> Any:
    return msgspec.convert(raw, kind)


def run_filter(plugin: Plugin, pod: PodInfo, snap: ClusterState,
               state: CycleState | None = None) -> dict[str, Status]:
    """PreFilter (when the plugin has one) then Filter over every node; node name -> status.
    A PreFilter rejection is reported for every node."""
    state = state or CycleState()
    if isinstance(plugin, PreFilterPlugin):
        _, st = plugin.pre_filter(state, pod, snap)
        if st.code == Code.SKIP:
            return {name: Status() for name in snap.node_names}
        if not st.ok:
            return {name: st for name in snap.node_names}
    assert isinstance(plugin, FilterPlugin)
    nodes = snap.node_ids()
    res: FilterResult = plugin.filter(state, pod, snap, nodes)
    return {snap.node_names[int(n)]: res.status(i, plugin.name) for i, n in enumerate(nodes)}


def run_score(plugin: Plugin, pod: PodInfo, snap: ClusterState,
              state: CycleState | None = None) -> dict[str, int] | None:
    """PreScore, Score and NormalizeScore over every node; None when PreScore skips."""
    state = state or CycleState()
    nodes = snap.node_ids()
    if isinstance(plugin, PreScorePlugin):
        st = plugin.pre_score(state, pod, snap, nodes)
        if st.code == Code.SKIP:
            return None
        assert st.ok
    assert isinstance(plugin, ScorePlugin)
    raw = plugin.score(state, pod, snap, nodes)
    norm = plugin.normalize_score(state, pod, raw)
    out = raw if norm is None else norm
    return {snap.node_names[int(n)]: int(out[i]) for i, n in enumerate(nodes)}


def ratio_score(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """NodeResourcesFit's RequestedToCapacityRatio kernel on one resource of a 100-unit node
    at ``utilization`` percent: upstream's broken-linear function of the shape's
    ``(utilization, score)`` points (a request cannot be negative nor use more than the node,
    so utilization is clamped into [0, 100], where a valid shape's ends hold constant)."""
    allocatable = np.full((1, 1), 100, dtype=np.int64, order="F")
    zeros = np.zeros((1, 1), dtype=np.int64, order="F")
    plan = np.zeros((kernels.PLAN_ROWS, 1), dtype=np.int64)
    plan[kernels.PLAN_POD, 0] = max(utilization, 0)
    plan[kernels.PLAN_WEIGHT, 0] = 1
    points = np.array([[u for u, _ in shape], [s for _, s in shape]], dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    kernels.share_scores(allocatable, zeros, zeros, np.zeros(1, dtype=np.int64), plan,
                         kernels.RATIO, points, out)
    return int(out[0])
