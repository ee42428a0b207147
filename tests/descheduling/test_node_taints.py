"""RemovePodsViolatingNodeTaints: which taints count and which pods go."""

from __future__ import annotations

from typing import Any

import pytest
from tests.descheduling.builders import evicted, node, pod, policy, run, skipped

from kubeberth.api.errors import InputError

NAME = "RemovePodsViolatingNodeTaints"
VK_TAINT = {"key": "vk.node.com", "value": "true", "effect": "NoSchedule"}
LOW_GPU = {"key": "vk.node.com/low-gpu-usage", "value": "true", "effect": "NoSchedule"}


def taints_policy(**args: Any) -> Any:
    return policy({"deschedule": [NAME]}, {NAME: args})


def tol(key: str, value: str = "", effect: str = "", op: str = "Equal") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect, "operator": op}


def test_pod_not_tolerating_no_schedule_taint_is_evicted() -> None:
    nodes = [node("n1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
             node("n2")]
    pods = [pod("intolerant", "n1"),
            pod("tolerant", "n1", spec={"tolerations": [tol("k", "v", "NoSchedule")]}),
            pod("elsewhere", "n2")]
    result = run(taints_policy(), nodes, pods)
    assert evicted(result) == ["intolerant"]
    d = result.evictions[0]
    assert (d.node, d.plugin) == ("n1", NAME)
    assert "k=v:NoSchedule" in d.reason


def test_prefer_no_schedule_counts_only_when_included() -> None:
    nodes = [node("n1", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), node("n2")]
    pods = [pod("p", "n1")]
    assert evicted(run(taints_policy(), nodes, pods)) == []
    assert evicted(run(taints_policy(includePreferNoSchedule=True), nodes, pods)) == ["p"]


def test_no_execute_taints_are_left_to_the_kubelet() -> None:
    nodes = [node("n1", taints=[{"key": "k", "effect": "NoExecute"}]), node("n2")]
    assert evicted(run(taints_policy(), nodes, [pod("p", "n1")])) == []


@pytest.mark.parametrize(("excluded", "expected"), [
    (["k"], []), (["k=v"], []), (["k=other"], ["p"]), (["unrelated"], ["p"])])
def test_excluded_taints_by_key_or_key_value(excluded: list[str], expected: list[str]) -> None:
    nodes = [node("n1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]), node("n2")]
    assert evicted(run(taints_policy(excludedTaints=excluded), nodes, [pod("p", "n1")])) \
        == expected


def test_included_taints_limit_the_plugin_to_the_named_taints() -> None:
    nodes = [node("vk", taints=[VK_TAINT, LOW_GPU]), node("gpu-1")]
    pods = [pod("migrated", "vk", spec={"tolerations": [tol("vk.node.com", "true",
                                                             "NoSchedule")]}),
            pod("other", "vk")]
    # Only the low-GPU taint counts: every pod on vk lacks a toleration for it.
    result = run(taints_policy(includedTaints=["vk.node.com/low-gpu-usage"]), nodes, pods)
    assert sorted(evicted(result)) == ["migrated", "other"]
    # An empty includedTaints list considers no taint at all.
    assert evicted(run(taints_policy(includedTaints=[]), nodes, pods)) == []


def test_vk_spill_pods_wait_for_min_pod_age() -> None:
    """The spill design: only VK pods older than minPodAge leave when the low-GPU taint is on."""
    nodes = [node("vk", taints=[VK_TAINT, LOW_GPU]), node("gpu-1")]
    tolerate_vk = {"tolerations": [tol("vk.node.com", "true", "NoSchedule")]}
    pods = [pod("old", "vk", started=-1200, spec=tolerate_vk),
            pod("young", "vk", started=-60, spec=tolerate_vk)]
    pol = policy({"deschedule": [NAME]},
                 {"DefaultEvictor": {"minPodAge": "10m"},
                  NAME: {"includedTaints": ["vk.node.com/low-gpu-usage=true"]}})
    result = run(pol, nodes, pods)
    assert evicted(result) == ["old"]
    assert "minPodAge" in skipped(result)["young"]


def test_exists_toleration_without_key_tolerates_everything() -> None:
    nodes = [node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]), node("n2")]
    pods = [pod("p", "n1", spec={"tolerations": [{"operator": "Exists"}]})]
    assert evicted(run(taints_policy(), nodes, pods)) == []


def test_node_limit_moves_on_to_the_next_node() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    nodes = [node("n1", taints=taint), node("n2", taints=taint)]
    pods = [pod("a1", "n1"), pod("a2", "n1"), pod("b1", "n2"), pod("b2", "n2")]
    pol = policy({"deschedule": [NAME]}, {NAME: {}}, maxNoOfPodsToEvictPerNode=1)
    result = run(pol, nodes, pods)
    assert evicted(result) == ["a1", "b1"]
    reasons = skipped(result)
    assert set(reasons) == {"a2", "b2"}
    assert "maxNoOfPodsToEvictPerNode (1)" in reasons["a2"]


def test_namespace_and_label_scope() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    nodes = [node("n1", taints=taint), node("n2")]
    pods = [pod("a", "n1", ns="team-a", labels={"app": "x"}),
            pod("b", "n1", ns="team-b", labels={"app": "x"}),
            pod("c", "n1", ns="team-a", labels={"app": "y"})]
    pol = taints_policy(namespaces={"include": ["team-a"]},
                        labelSelector={"matchLabels": {"app": "x"}})
    assert evicted(run(pol, nodes, pods)) == ["a"]


@pytest.mark.parametrize(("args", "field"), [
    ({"includedTaints": ["a"], "excludedTaints": ["b"]}, "includedTaints"),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "namespaces"),
    ({"excludedTaints": "k"}, "excludedTaints"),
    ({"includePreferNoSchedule": "yes"}, "includePreferNoSchedule"),
    ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     "labelSelector.matchExpressions[0].values"),
    ({"typo": 1}, "typo"),
])
def test_bad_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        run(taints_policy(**args), [node("n1"), node("n2")], [])
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"
    assert err.value.source == "policy.yaml"
    assert err.value.line is not None


def test_finished_pods_are_not_considered() -> None:
    """Since descheduler v0.34 the plugin lists only pods that are not Succeeded or Failed."""
    nodes = [node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]), node("n2")]
    pods = [pod("done", "n1", phase="Succeeded"), pod("failed", "n1", phase="Failed"),
            pod("running", "n1")]
    result = run(taints_policy(), nodes, pods)
    assert evicted(result) == ["running"] and result.skipped == []
