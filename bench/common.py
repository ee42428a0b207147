"""Shared set-up for the benchmarks: the default scheduler over a cluster and a pod stream."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable

import msgspec

from kubeberth.api.objects import Node
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.traces import TracePod, bundled_nodes, bundled_pods
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info


def synthetic_nodes(count: int) -> list[Node]:
    """``count`` nodes cycling through the openb node shapes, renamed to stay unique."""
    base = bundled_nodes()
    nodes = []
    for i in range(count):
        src = base[i % len(base)]
        meta = msgspec.structs.replace(src.metadata, name=f"node-{i:05d}",
                                       labels={**src.metadata.labels,
                                               "kubernetes.io/hostname": f"node-{i:05d}"})
        nodes.append(msgspec.structs.replace(src, metadata=meta))
    return nodes


def scheduler_for(nodes: list[Node], seed: int = 0) -> tuple[Scheduler, ClusterState]:
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    sched = Scheduler(load_scheduler_config(None), in_tree_registry(), snap,
                      clock=lambda: 0.0, seed=seed, binder=bind, evictor=evict)
    return sched, snap


def pod_stream(count: int) -> list[TracePod]:
    pods = bundled_pods()
    out = []
    for i in range(count):
        tp = pods[i % len(pods)]
        meta = msgspec.structs.replace(tp.pod.metadata, name=f"bench-{i:06d}")
        out.append(TracePod(msgspec.structs.replace(tp.pod, metadata=meta), tp.arrival,
                            tp.duration))
    return out


def measure_decisions(nodes: list[Node], pods: int, *, seed: int = 0) -> tuple[float, int]:
    """Schedule ``pods`` pods (binding each) and return (decisions per second, scheduled)."""
    sched, _snap = scheduler_for(nodes, seed)
    infos = [make_pod_info(tp.pod, seq=i) for i, tp in enumerate(pod_stream(pods))]
    for pi in infos:
        sched.add(pi)
    scheduled = 0
    start = time.perf_counter()
    while (res := sched.schedule_one()) is not None:
        if res.outcome == "assumed" and sched.bind(res).ok:
            scheduled += 1
    elapsed = time.perf_counter() - start
    return pods / elapsed, scheduled


def peak_rss_mib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
