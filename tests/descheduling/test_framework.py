"""The descheduler framework: profiles, extension point order, limits, the node guard."""

from __future__ import annotations

import json

import pytest
from tests.descheduling.builders import (
    NOW,
    evicted,
    node,
    pod,
    policy,
    policy_from,
    run,
    skipped,
)

from kubeberth.api.errors import InputError
from kubeberth.descheduling.framework import Snapshot
from kubeberth.descheduling.registry import build_descheduler, in_tree_registry
from kubeberth.state.cluster import ClusterState, make_pod_info

TAINTS = "RemovePodsViolatingNodeTaints"
DUPS = "RemoveDuplicates"
LIFETIME = "PodLifeTime"
TAINT = [{"key": "k", "effect": "NoSchedule"}]


def test_registry_names_and_points() -> None:
    reg = in_tree_registry()
    assert reg["DefaultEvictor"].points == ("filter", "preEvictionFilter")
    deschedule = sorted(n for n, s in reg.items() if "deschedule" in s.points)
    balance = sorted(n for n, s in reg.items() if "balance" in s.points)
    assert deschedule == ["PodLifeTime", "RemoveFailedPods", "RemovePodsHavingTooManyRestarts",
                          "RemovePodsViolatingInterPodAntiAffinity",
                          "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeTaints"]
    assert balance == ["HighNodeUtilization", "LowNodeUtilization", "RemoveDuplicates",
                       "RemovePodsViolatingTopologySpreadConstraint"]


def test_deschedule_plugins_of_every_profile_run_before_any_balance_plugin() -> None:
    pol = policy_from({"profiles": [
        {"name": "balance-first-in-file", "pluginConfig": [{"name": DUPS, "args": {}}],
         "plugins": {"balance": {"enabled": [DUPS]}}},
        {"name": "deschedule", "pluginConfig": [{"name": TAINTS, "args": {}}],
         "plugins": {"deschedule": {"enabled": [TAINTS]}}},
    ]})
    nodes = [node("n1", taints=TAINT), node("n2"), node("n3")]
    pods = [pod("d1", "n2"), pod("d2", "n2"), pod("t1", "n1", owner=("ReplicaSet", "t"))]
    result = run(pol, nodes, pods)
    assert [(d.plugin, d.profile) for d in result.evictions] == [
        (TAINTS, "deschedule"), (DUPS, "balance-first-in-file")]


def test_plugins_run_in_enabled_order_within_a_profile() -> None:
    pol = policy({"deschedule": [LIFETIME, TAINTS]},
                 {LIFETIME: {"maxPodLifeTimeSeconds": 60}, TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2")]
    pods = [pod("old", "n2", created=-120), pod("tainted", "n1", created=0)]
    assert evicted(run(pol, nodes, pods)) == ["old", "tainted"]


def test_a_pod_is_evicted_once_per_pass() -> None:
    pol = policy({"deschedule": [LIFETIME, TAINTS]},
                 {LIFETIME: {"maxPodLifeTimeSeconds": 60}, TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2")]
    result = run(pol, nodes, [pod("both", "n1", created=-120)])
    assert evicted(result) == ["both"]
    assert result.skipped == []


def test_limits_are_shared_by_all_plugins_of_a_pass() -> None:
    pol = policy({"deschedule": [LIFETIME, TAINTS]},
                 {LIFETIME: {"maxPodLifeTimeSeconds": 60}, TAINTS: {}},
                 maxNoOfPodsToEvictTotal=2)
    nodes = [node("n1", taints=TAINT), node("n2")]
    pods = [pod("old", "n2", created=-120), pod("t1", "n1"), pod("t2", "n1")]
    result = run(pol, nodes, pods)
    assert evicted(result) == ["old", "t1"]
    assert "maxNoOfPodsToEvictTotal (2)" in skipped(result)["t2"]


def test_namespace_limit() -> None:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}}, maxNoOfPodsToEvictPerNamespace=1)
    nodes = [node("n1", taints=TAINT), node("n2")]
    pods = [pod("a1", "n1", ns="a"), pod("a2", "n1", ns="a"), pod("b1", "n1", ns="b")]
    result = run(pol, nodes, pods)
    assert evicted(result) == ["a1", "b1"]
    assert "maxNoOfPodsToEvictPerNamespace (1) reached in namespace a" in skipped(result)["a2"]


def test_fewer_than_two_ready_nodes_skip_the_cycle() -> None:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2", ready=False)]
    result = run(pol, nodes, [pod("p", "n1")])
    assert result.evictions == [] and result.cycle_skipped is not None
    assert "1 ready node(s)" in result.cycle_skipped
    assert evicted(run(pol, nodes, [pod("p", "n1")], min_ready_nodes=0)) == ["p"]


def test_not_ready_nodes_are_not_processed() -> None:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}})
    nodes = [node("n1", taints=TAINT, ready=False), node("n2"), node("n3")]
    assert evicted(run(pol, nodes, [pod("p", "n1")])) == []


def test_policy_node_selector_limits_the_nodes() -> None:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}}, nodeSelector="pool=spill")
    nodes = [node("n1", taints=TAINT, labels={"pool": "spill"}),
             node("n2", taints=TAINT, labels={"pool": "spill"}), node("n3", taints=TAINT)]
    pods = [pod("a", "n1"), pod("b", "n2"), pod("c", "n3")]
    assert evicted(run(pol, nodes, pods)) == ["a", "b"]


def test_json_contract() -> None:
    pol = policy({"deschedule": [TAINTS]}, {TAINTS: {}}, maxNoOfPodsToEvictPerNode=1)
    nodes = [node("n1", taints=TAINT), node("n2")]
    out = json.loads(run(pol, nodes, [pod("a", "n1"), pod("b", "n1")]).dumps())
    assert set(out) == {"evictions", "skipped"}
    assert out["evictions"] == [{"pod": "default/a", "node": "n1", "plugin": TAINTS,
                                 "reason": "pod does not tolerate taint k:NoSchedule of node n1"}]
    assert [set(e) for e in out["skipped"]] == [{"pod", "node", "plugin", "reason"}]


def test_passes_are_deterministic() -> None:
    pol = policy({"balance": [DUPS]}, {DUPS: {}})
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [pod(f"p{i}", "n0") for i in range(9)]
    first = run(pol, nodes, pods).dumps()
    assert all(run(pol, nodes, pods).dumps() == first for _ in range(3))


def test_snapshot_from_cluster_uses_the_simulator_clock() -> None:
    state = ClusterState()
    for n in (node("vk", taints=TAINT), node("gpu")):
        state.add_node(n)
    pol = policy({"deschedule": [TAINTS]}, {"DefaultEvictor": {"minPodAge": "5m"}, TAINTS: {}})
    descheduler = build_descheduler(pol)
    for name, bound_at in (("old", 0.0), ("young", 500.0)):
        pi = make_pod_info(pod(name, started=None))
        state.add_pod(pi, state.node_index["vk"])
        pi.start_time = bound_at
    result = descheduler.run_pass(Snapshot.from_cluster(state, now=600.0))
    assert evicted(result) == ["old"]
    assert [d.node for d in result.evictions] == ["vk"]


@pytest.mark.parametrize(("plugins", "config", "field", "message"), [
    ({"deschedule": ["Nope"]}, {}, "profiles[0].plugins.deschedule.enabled[0]",
     "non-existing plugin 'Nope'"),
    ({"deschedule": ["LowNodeUtilization"]}, {"LowNodeUtilization": {
        "thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 20}}},
     "profiles[0].plugins.deschedule.enabled[0]", "non-existing plugin 'LowNodeUtilization'"),
    ({"deschedule": [TAINTS]}, {}, "profiles[0].plugins.deschedule.enabled[0]",
     "unable to find 'RemovePodsViolatingNodeTaints' plugin config"),
    ({"sort": ["DefaultEvictor"]}, {}, "profiles[0].plugins.sort.enabled[0]",
     "non-existing plugin 'DefaultEvictor'"),
    ({}, {"Unknown": {}}, "profiles[0].pluginConfig[0].name", "unknown plugin 'Unknown'"),
])
def test_profile_errors_name_the_field(plugins: dict[str, list[str]],
                                       config: dict[str, dict[str, object]], field: str,
                                       message: str) -> None:
    with pytest.raises(InputError) as err:
        build_descheduler(policy(plugins, config))
    assert err.value.field == field
    assert message in err.value.message
    assert err.value.source == "policy.yaml" and err.value.line is not None


def test_now_is_the_snapshot_clock() -> None:
    pol = policy({"deschedule": [LIFETIME]}, {LIFETIME: {"maxPodLifeTimeSeconds": 100}})
    nodes = [node("n1"), node("n2")]
    pods = [pod("p", "n1", created=0)]
    assert evicted(run(pol, nodes, pods, now=NOW + 100)) == []
    assert evicted(run(pol, nodes, pods, now=NOW + 101)) == ["p"]
