"""The event loop: arrivals, completions, retries, preemption and Permit waits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from kubeberth.api.objects import Node, Pod
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import PluginRef, PluginSet
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import PermitPlugin
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import Scenario, TracePod
from kubeberth.state.cluster import ClusterState, PodInfo


def node(name: str, cpu: str = "4", pods: str = "110") -> Node:
    return msgspec.convert({"metadata": {"name": name},
                            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi",
                                                       "pods": pods}}}, Node)


def pod(name: str, cpu: str = "1", priority: int | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": cpu,
                                                                       "memory": "1Gi"}}}]}
    if priority is not None:
        spec["priority"] = priority
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, Pod)


def run(nodes: list[Node], pods: list[TracePod], registry: Registry | None = None,
        config: Any = None, seed: int = 0) -> Simulation:
    sim = Simulation(Scenario(nodes, pods, "test", "test"), config or load_scheduler_config(None),
                     registry or in_tree_registry(), seed=seed, sample_interval=1.0)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def test_pods_bind_and_complete() -> None:
    sim = run([node("n1")], [TracePod(pod("a"), 0.0, 10.0), TracePod(pod("b"), 5.0, None)])
    m = sim.result.metrics  # type: ignore[attr-defined]
    assert m.pods["default/a"].bound == 0.0 and m.pods["default/a"].finished == 10.0
    assert m.pods["default/b"].bound == 5.0 and m.pods["default/b"].finished is None
    assert m.attempts["scheduled"] == 2


def test_pod_waits_for_capacity_freed_by_completion() -> None:
    sim = run([node("n1", cpu="2")], [TracePod(pod("big", cpu="2"), 0.0, 100.0),
                                       TracePod(pod("late", cpu="2"), 1.0, 10.0)])
    m = sim.result.metrics  # type: ignore[attr-defined]
    assert m.pods["default/late"].bound == 100.0  # moved by the Pod Delete event at t=100
    assert m.attempts["unschedulable"] >= 1


def test_never_schedulable_pod_is_reported_and_run_terminates() -> None:
    sim = run([node("n1", cpu="1")], [TracePod(pod("huge", cpu="8"), 0.0, 10.0)])
    res = sim.result  # type: ignore[attr-defined]
    assert res.unscheduled == ["default/huge"]


def test_preemption_evicts_and_recreates_victim() -> None:
    pods = [TracePod(pod("low", cpu="2", priority=0), 0.0, 50.0),
            TracePod(pod("high", cpu="2", priority=100), 1.0, 10.0)]
    sim = run([node("n1", cpu="2")], pods)
    m = sim.result.metrics  # type: ignore[attr-defined]
    assert m.preemptions == 1
    assert m.pods["default/high"].bound == 1.0
    # The re-created victim runs after the preemptor completes.
    assert m.pods["default/low"].preempted == 1
    assert m.pods["default/low"].bound == 11.0


def test_same_seed_same_series() -> None:
    pods = [TracePod(pod(f"p{i}", cpu="1"), float(i % 3), 5.0) for i in range(12)]
    a = run([node(f"n{i}") for i in range(3)], pods, seed=7)
    pods = [TracePod(pod(f"p{i}", cpu="1"), float(i % 3), 5.0) for i in range(12)]
    b = run([node(f"n{i}") for i in range(3)], pods, seed=7)
    ra = a.result.metrics  # type: ignore[attr-defined]
    rb = b.result.metrics  # type: ignore[attr-defined]
    assert ra.rows == rb.rows
    assert {k: v.node for k, v in ra.pods.items()} == {k: v.node for k, v in rb.pods.items()}


class HoldFor(PermitPlugin):
    """Holds every pod in Permit; the second pod to wait allows both (a two-member gang)."""

    name: ClassVar[str] = "HoldFor"

    def __init__(self, handle: Handle, timeout: float) -> None:
        self.handle = handle
        self.timeout = timeout

    def permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               node: int) -> tuple[Status, float]:
        waiting = list(self.handle.waiting_pods)
        if waiting:
            for wp in waiting:
                wp.allow(self.name)
            return SUCCESS, 0.0
        return Status(Code.WAIT), self.timeout


def _hold_registry(timeout: float) -> Registry:
    reg = in_tree_registry()

    def new(args: Mapping[str, Any] | None, handle: Handle) -> HoldFor:
        return HoldFor(handle, timeout)

    reg.register("HoldFor", new)
    return reg


def _hold_config() -> Any:
    cfg = load_scheduler_config(None)
    cfg.profiles[0].plugins["permit"] = PluginSet(enabled=[PluginRef("HoldFor")])
    return cfg


def test_permit_wait_released_by_sibling() -> None:
    pods = [TracePod(pod("a"), 0.0, None), TracePod(pod("b"), 3.0, None)]
    sim = run([node("n1")], pods, _hold_registry(10.0), _hold_config())
    m = sim.result.metrics  # type: ignore[attr-defined]
    assert m.pods["default/a"].bound == 3.0
    assert m.pods["default/b"].bound == 3.0


def test_permit_timeout_unreserves_and_retries() -> None:
    pods = [TracePod(pod("a", cpu="4"), 0.0, None)]
    sim = run([node("n1")], pods, _hold_registry(5.0), _hold_config())
    snap = sim.snapshot
    m = sim.result.metrics  # type: ignore[attr-defined]
    # Held at Permit, timed out at t=5 and given back, retried after backoff and held again:
    # the run ends there (nothing else can ever allow it), with exactly one reservation.
    assert sim.result.unscheduled == ["default/a"]  # type: ignore[attr-defined]
    assert m.pods["default/a"].attempts >= 2
    assert int(snap.pod_count.sum()) == 1
    assert int(snap.requested[:, snap.col("cpu")].sum()) == 4000
    assert len(sim.scheduler.handle.waiting_pods) == 1


def test_permit_timeout_releases_capacity_to_another_pod_and_run_ends() -> None:
    # a holds the whole node at Permit; b cannot fit until a's wait times out; neither can ever
    # be allowed (HoldFor needs two pods waiting at once), so they take turns until the run
    # sees no change that could help either, and it ends with at most one reservation.
    pods = [TracePod(pod("a", cpu="4"), 0.0, None), TracePod(pod("b", cpu="4"), 1.0, None)]
    sim = run([node("n1")], pods, _hold_registry(5.0), _hold_config())
    m = sim.result.metrics  # type: ignore[attr-defined]
    assert sim.result.unscheduled == ["default/a", "default/b"]  # type: ignore[attr-defined]
    assert m.pods["default/b"].attempts >= 2  # retried after a's reservation was released
    assert int(sim.snapshot.pod_count.sum()) <= 1


def test_gpu_allocation_counts_devices_however_pods_ask() -> None:
    """A manifest cluster with only nvidia.com/gpu (no milli-GPU pool): whole-GPU pods count."""
    gpu_node = msgspec.convert({"metadata": {"name": "g"}, "status": {"allocatable": {
        "cpu": "32", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"}}}, Node)
    whole = msgspec.convert({"metadata": {"name": "w"}, "spec": {"containers": [{"resources": {
        "limits": {"nvidia.com/gpu": "3"}}}]}}, Pod)
    sim = run([gpu_node], [TracePod(whole, 0.0, 10.0)])
    rows = sim.result.metrics.rows  # type: ignore[attr-defined]
    assert max(r[3] for r in rows) == 75.0  # gpu_alloc_pct: 3 of 4 devices
    assert rows[-1][3] == 0.0


def test_gpu_allocation_on_a_pooled_node_compares_like_units() -> None:
    """A node with more GPUs than modelled as devices is a pool; a pod asking nvidia.com/gpu
    there is measured in the same unit as the node's milli-GPU pool (50 of 100 GPUs is 50 %)."""
    pool = msgspec.convert({"metadata": {"name": "vk"}, "status": {"allocatable": {
        "cpu": "1000", "memory": "1Ti", "nvidia.com/gpu": "100",
        "kubeberth.io/gpu-milli": "100000", "pods": "110"}}}, Node)
    half = msgspec.convert({"metadata": {"name": "h"}, "spec": {"containers": [{"resources": {
        "limits": {"nvidia.com/gpu": "50"}}}]}}, Pod)
    sim = run([pool], [TracePod(half, 0.0, 10.0)])
    rows = sim.result.metrics.rows  # type: ignore[attr-defined]
    assert max(r[3] for r in rows) == 50.0
