"""The simulator's host API: node updates the queue reacts to, timed and periodic calls,
``until``, node start latency and pod listeners."""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import (
    LabelSelector,
    Node,
    ObjectMeta,
    Pod,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    Taint,
)
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import PodListener, Simulation
from kubeberth.sim.traces import Scenario, TracePod
from kubeberth.state.cluster import PodInfo

BLOCK = Taint(key="maintenance", value="true", effect="NoSchedule")


def node(name: str, taints: list[Taint] | None = None, cpu: str = "4") -> Node:
    n = msgspec.convert({"metadata": {"name": name},
                         "status": {"allocatable": {"cpu": cpu, "memory": "16Gi",
                                                    "pods": "110"}}}, Node)
    n.spec.taints = list(taints or [])
    return n


def pod(name: str, cpu: str = "1") -> Pod:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"containers": [
        {"resources": {"requests": {"cpu": cpu}}}]}}, Pod)


def sim_of(nodes: list[Node], pods: list[TracePod], until: float | None = None) -> Simulation:
    return Simulation(Scenario(nodes, pods, "t", "t"), load_scheduler_config(None),
                      in_tree_registry(), sample_interval=10.0, until=until)


def test_untainting_a_node_binds_a_waiting_pod_at_that_instant() -> None:
    sim = sim_of([node("n1", [BLOCK])], [TracePod(pod("p"), 0.0, 50.0)])
    sim.call_at(40.0, lambda: sim.update_node(node("n1")), counts=True)
    res = sim.run()
    assert res.metrics.pods["default/p"].bound == 40.0
    assert res.metrics.pods["default/p"].finished == 90.0


def test_added_node_takes_pending_pods() -> None:
    sim = sim_of([node("n1", cpu="1")], [TracePod(pod("a"), 0.0, None),
                                         TracePod(pod("b"), 0.0, None)])
    sim.call_at(25.0, lambda: sim.add_node(node("n2")), counts=True)
    res = sim.run()
    bound = sorted((r.bound, r.node) for r in res.metrics.pods.values())
    assert bound == [(0.0, "n1"), (25.0, "n2")]


def test_every_runs_periodically_and_busy_keeps_the_run_alive() -> None:
    sim = sim_of([node("n1")], [TracePod(pod("a"), 0.0, 10.0)])
    ticks: list[float] = []

    def tick() -> bool:
        ticks.append(sim.now)
        return sim.now < 100.0  # busy until t=100

    sim.every(20.0, tick)
    res = sim.run()
    assert ticks == [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    assert res.end_time == 100.0


def test_idle_periodic_does_not_prolong_the_run() -> None:
    sim = sim_of([node("n1")], [TracePod(pod("a"), 0.0, 10.0)])
    ticks: list[float] = []
    sim.every(3.0, lambda: bool(ticks.append(sim.now)))
    res = sim.run()
    assert res.end_time == 10.0 and ticks == [0.0, 3.0, 6.0, 9.0]


def test_until_stops_the_run() -> None:
    sim = sim_of([node("n1")], [TracePod(pod("a"), 0.0, 10.0), TracePod(pod("b"), 500.0, 1.0)],
                 until=100.0)
    res = sim.run()
    assert res.end_time <= 100.0 and "default/b" not in res.metrics.pods


def test_start_latency_and_listeners() -> None:
    events: list[tuple[str, str, str, float]] = []

    class Recorder(PodListener):
        def pod_started(self, pi: PodInfo, node: str, now: float) -> None:
            events.append(("start", pi.key, node, now))

        def pod_stopped(self, pi: PodInfo, node: str, now: float) -> None:
            events.append(("stop", pi.key, node, now))

    sim = sim_of([node("slow")], [TracePod(pod("a"), 0.0, 30.0)])
    sim.start_latency["slow"] = 15.0
    sim.listeners.append(Recorder())
    phases: list[str] = []
    sim.call_at(10.0, lambda: phases.append(sim.snapshot.pods["default/a"].pod.status.phase))
    sim.call_at(20.0, lambda: phases.append(sim.snapshot.pods["default/a"].pod.status.phase))
    res = sim.run()
    # Run time starts after the 15 s latency: completion at 45, not 30.
    assert res.metrics.pods["default/a"].finished == 45.0
    assert events == [("start", "default/a", "slow", 0.0), ("stop", "default/a", "slow", 45.0)]
    assert phases == ["Pending", "Running"]


def test_evicting_an_unknown_pod_is_404() -> None:
    sim = sim_of([node("n1")], [])
    verdict = sim.evict("default/ghost", plugin="X", reason="y")
    assert not verdict.allowed and verdict.code == 404
    assert sim.evictions[0].pod == "default/ghost"


def test_descheduler_hook_gets_live_pdb_status() -> None:
    p = pod("a")
    p.metadata.labels = {"app": "a"}
    seen: list[int] = []

    def pass_(snap: object, now: float) -> list[object]:
        seen.append(sim.snapshot.pdbs[0].status.current_healthy)
        return []

    sim = Simulation(Scenario([node("n1")], [TracePod(p, 0.0, 100.0)], "t", "t"),
                     load_scheduler_config(None), in_tree_registry(),
                     descheduler=pass_,  # type: ignore[arg-type]
                     deschedule_interval=30.0)
    sim.snapshot.pdbs = [PodDisruptionBudget(
        metadata=ObjectMeta(name="a", namespace="default"),
        spec=PodDisruptionBudgetSpec(min_available=0,
                                     selector=LabelSelector(match_labels={"app": "a"})))]
    sim.run()
    assert seen == [1, 1, 1]  # passes at 30, 60, 90 see the running pod as healthy


def test_periodic_calls_observe_the_instant_after_scheduling() -> None:
    """A tick at the instant a pod arrives sees it bound, and a tick at the instant a pod
    completes and another takes its place sees the replacement, never the gap."""
    sim = sim_of([node("n1", cpu="1")], [TracePod(pod("a"), 0.0, 10.0),
                                         TracePod(pod("b"), 0.0, 10.0)])
    seen: list[tuple[float, list[str]]] = []
    sim.every(10.0, lambda: bool(seen.append((sim.now, sorted(sim.snapshot.pods)))))
    sim.run()
    assert seen == [(0.0, ["default/a"]), (10.0, ["default/b"]), (20.0, [])]
