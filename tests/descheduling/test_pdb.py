"""Evictions honour PodDisruptionBudgets as the eviction API does, from the pods present."""

from __future__ import annotations

from typing import Any

from tests.descheduling.builders import evicted, node, pdb, pod, policy, run, skipped

from kubeberth.api.objects import PodDisruptionBudget

TAINTS = "RemovePodsViolatingNodeTaints"
TAINT = [{"key": "k", "effect": "NoSchedule"}]
WEB = {"matchLabels": {"app": "web"}}


def drain(pods: list[Any], budgets: list[PodDisruptionBudget], **snapshot: Any) -> Any:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}})
    return run(pol, [node("n1", taints=TAINT), node("n2")], pods, pdbs=budgets, **snapshot)


def web(name: str, node_name: str = "n1", **kw: Any) -> Any:
    return pod(name, node_name, labels={"app": "web"}, owner=("ReplicaSet", "web"), **kw)


def test_min_available_allows_only_the_excess() -> None:
    pods = [web("w1"), web("w2"), web("w3"), web("w4", "n2")]
    result = drain(pods, [pdb("web", WEB, min_available=2)])
    assert evicted(result) == ["w1", "w2"]
    reason = skipped(result)["w3"]
    assert "PodDisruptionBudget default/web" in reason and "minAvailable 2" in reason


def test_max_unavailable_percent_uses_the_owner_replicas() -> None:
    pods = [web("w1"), web("w2"), web("w3"), web("w4", "n2")]
    # 4 replicas, maxUnavailable 25% -> ceil(1) unavailable -> 3 must stay healthy.
    result = drain(pods, [pdb("web", WEB, max_unavailable="25%")],
                   owner_replicas={("ReplicaSet", "default", "web"): 4})
    assert evicted(result) == ["w1"]
    # With 6 desired replicas, only 4 healthy: 6 - ceil(1.5) = 4 required, nothing may go.
    result = drain(pods, [pdb("web", WEB, max_unavailable="25%")],
                   owner_replicas={("ReplicaSet", "default", "web"): 6})
    assert evicted(result) == []


def test_min_available_percent_rounds_up() -> None:
    pods = [web("w1"), web("w2"), web("w3")]
    # ceil(50% of 3) = 2 of the 3 present must stay.
    assert evicted(drain(pods, [pdb("web", WEB, min_available="50%")])) == ["w1"]


def test_unready_pods_do_not_count_as_healthy() -> None:
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    pods = [web("w1"), web("w2", status=not_ready), web("w3", "n2")]
    # Healthy: w1 and w3. minAvailable 2 leaves no disruption for w1; unready w2 may go
    # because the budget is met (IfHealthyBudget).
    result = drain(pods, [pdb("web", WEB, min_available=2)])
    assert evicted(result) == ["w2"]
    result = drain(pods, [pdb("web", WEB, min_available=3)])
    assert evicted(result) == []
    result = drain(pods, [pdb("web", WEB, min_available=3,
                              unhealthyPodEvictionPolicy="AlwaysAllow")])
    assert evicted(result) == ["w2"]


def test_finished_and_pending_pods_skip_the_budget() -> None:
    pods = [web("failed", phase="Failed"), web("pending", phase="Pending"), web("w3", "n2")]
    pol = policy({"deschedule": ["RemoveFailedPods", TAINTS]},
                 {"RemoveFailedPods": {"minPodLifetimeSeconds": 0}, TAINTS: {}})
    result = run(pol, [node("n1", taints=TAINT), node("n2")], pods,
                 pdbs=[pdb("web", WEB, min_available=5)])
    assert evicted(result) == ["failed", "pending"]


def test_two_budgets_for_one_pod_refuse_the_eviction() -> None:
    pods = [web("w1"), web("w2", "n2")]
    result = drain(pods, [pdb("a", WEB, max_unavailable=1), pdb("b", WEB, max_unavailable=1)])
    assert evicted(result) == []
    assert "more than one PodDisruptionBudget" in skipped(result)["w1"]


def test_selector_semantics_nil_matches_nothing_empty_matches_all() -> None:
    pods = [web("w1"), web("w2", "n2")]
    assert evicted(drain(pods, [pdb("nil", None, min_available=2)])) == ["w1"]
    assert evicted(drain(pods, [pdb("all", {}, min_available=2)])) == []


def test_budget_in_another_namespace_does_not_apply() -> None:
    pods = [web("w1"), web("w2", "n2")]
    assert evicted(drain(pods, [pdb("web", WEB, ns="other", min_available=2)])) == ["w1"]
