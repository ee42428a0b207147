"""LowNodeUtilization and HighNodeUtilization, including GPUs as extended resources."""

from __future__ import annotations

from typing import Any

import pytest
from tests.descheduling.builders import evicted, node, pod, policy, run, skipped

from kubeberth.api.errors import InputError

LNU = "LowNodeUtilization"
HNU = "HighNodeUtilization"
GPU = "nvidia.com/gpu"


def lnu(**args: Any) -> Any:
    return policy({"balance": [LNU]}, {LNU: args})


def hnu(**args: Any) -> Any:
    return policy({"balance": [HNU]}, {HNU: args})


def cpu_pods(prefix: str, node_name: str, count: int, cpu: str = "400m", **kw: Any) -> list[Any]:
    return [pod(f"{prefix}{i}", node_name, cpu=cpu, **kw) for i in range(count)]


def three_nodes() -> list[Any]:
    return [node("n1", pods=10), node("n2", pods=10), node("n3", pods=10)]


def test_lnu_moves_pods_until_the_node_is_under_its_target() -> None:
    pods = cpu_pods("a", "n1", 8) + cpu_pods("b", "n2", 1) + cpu_pods("c", "n3", 4)
    pol = lnu(thresholds={"cpu": 20, "pods": 20}, targetThresholds={"cpu": 50, "pods": 50})
    result = run(pol, three_nodes(), pods)
    # n1 is at 80% cpu; n2 (10%) can take pods until n1 reaches 50% (2000m): three pods.
    assert evicted(result) == ["a0", "a1", "a2"]
    assert "node n1 is over its target utilization (cpu 80%, pods 80%)" in \
        result.evictions[0].reason


def test_lnu_evicts_lowest_priority_then_best_effort_first() -> None:
    pods = [pod("high", "n1", cpu="1600m", priority=100),
            pod("guaranteed", "n1", cpu="800m", priority=1,
                spec={"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "800m", "memory": "1Gi"},
                    "limits": {"cpu": "800m", "memory": "1Gi"}}}]}),
            pod("burstable", "n1", cpu="800m", priority=1),
            pod("best-effort", "n1", cpu=None, priority=1), *cpu_pods("b", "n2", 1)]
    pol = lnu(thresholds={"cpu": 20}, targetThresholds={"cpu": 50})
    result = run(pol, [node("n1"), node("n2")], pods)
    assert evicted(result) == ["best-effort", "burstable", "guaranteed"]


def test_lnu_nothing_when_no_node_is_underutilized_or_all_are() -> None:
    pol = lnu(thresholds={"cpu": 20}, targetThresholds={"cpu": 50})
    busy = cpu_pods("a", "n1", 8) + cpu_pods("b", "n2", 4) + cpu_pods("c", "n3", 4)
    assert evicted(run(pol, three_nodes(), busy)) == []
    idle = cpu_pods("a", "n1", 1) + cpu_pods("b", "n2", 1)
    assert evicted(run(pol, three_nodes(), idle)) == []


def test_lnu_number_of_nodes_and_deviation_thresholds() -> None:
    pods = cpu_pods("a", "n1", 8) + cpu_pods("b", "n2", 1) + cpu_pods("c", "n3", 3)
    static = lnu(thresholds={"cpu": 10}, targetThresholds={"cpu": 50}, numberOfNodes=1)
    # Only n2 is under 10%: one underutilized node is not more than numberOfNodes.
    assert evicted(run(static, three_nodes(), pods)) == []
    deviation = lnu(thresholds={"cpu": 10}, targetThresholds={"cpu": 10},
                    useDeviationThresholds=True, numberOfNodes=1)
    # Mean 40%: n2 (10%) and n3 (30%) are under 30%, n1 (80%) is over 50%.
    assert evicted(run(deviation, three_nodes(), pods)) == ["a0", "a1", "a2"]


def test_lnu_gpus_as_an_extended_resource() -> None:
    nodes = [node("g1", **{GPU: "8"}), node("g2", **{GPU: "8"}), node("g3", **{GPU: "8"})]
    gpu = {"extra_requests": {GPU: "1"}}
    pods = (cpu_pods("a", "g1", 8, cpu="100m", **gpu) + cpu_pods("b", "g2", 1, cpu="100m", **gpu)
            + cpu_pods("c", "g3", 3, cpu="100m", **gpu))
    pol = lnu(thresholds={GPU: 25}, targetThresholds={GPU: 50})
    result = run(pol, nodes, pods)
    # g2 can take int(50% x 8) - 1 = 3 GPUs: g1 gives three of its eight.
    assert evicted(result) == ["a0", "a1", "a2"]
    assert f"{GPU} 100%" in result.evictions[0].reason


def test_lnu_excluded_namespaces_and_node_limit() -> None:
    pods = (cpu_pods("sys", "n1", 4, ns="kube-system") + cpu_pods("a", "n1", 4)
            + cpu_pods("b", "n2", 1))
    pol = lnu(thresholds={"cpu": 20}, targetThresholds={"cpu": 50},
              evictableNamespaces={"exclude": ["kube-system"]}, evictionLimits={"node": 2})
    assert evicted(run(pol, three_nodes(), pods)) == ["a0", "a1"]


def test_lnu_pod_must_tolerate_some_underutilized_node() -> None:
    taint = [{"key": "dedicated", "effect": "NoSchedule"}]
    nodes = [node("n1"), node("n2", taints=taint)]
    pods = [*cpu_pods("a", "n1", 8),
            pod("tolerant", "n1", cpu="400m",
                spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})]
    pol = lnu(thresholds={"cpu": 20}, targetThresholds={"cpu": 50})
    assert evicted(run(pol, nodes, pods)) == ["tolerant"]


def test_lnu_pre_eviction_filter_refusals_are_reported() -> None:
    pinned = {"nodeSelector": {"zone": "a"}}
    pods = cpu_pods("a", "n1", 8, spec=pinned) + cpu_pods("b", "n2", 1)
    pol = policy({"balance": [LNU]}, {"DefaultEvictor": {"nodeFit": True},
                                      LNU: {"thresholds": {"cpu": 20},
                                            "targetThresholds": {"cpu": 50}}})
    nodes = [node("n1", labels={"zone": "a"}), node("n2")]
    result = run(pol, nodes, pods)
    assert evicted(result) == []
    assert "nodeFit" in skipped(result)["a0"]


def test_hnu_empties_underutilized_nodes() -> None:
    pods = cpu_pods("a", "n1", 1) + cpu_pods("b", "n2", 6) + cpu_pods("c", "n3", 5)
    result = run(hnu(thresholds={"cpu": 20}), three_nodes(), pods)
    assert evicted(result) == ["a0"]
    assert "node n1 is underutilized (cpu 10%)" in result.evictions[0].reason


def test_hnu_unschedulable_nodes_do_not_receive_pods() -> None:
    nodes = [node("n1"), node("n2", unschedulable=True)]
    pods = cpu_pods("a", "n1", 1) + cpu_pods("b", "n2", 6)
    assert evicted(run(hnu(thresholds={"cpu": 20}), nodes, pods)) == []


def test_hnu_only_thresholding_resources_keeps_cpu_pods() -> None:
    nodes = [node("g1", **{GPU: "8"}), node("g2", **{GPU: "8"}), node("g3", **{GPU: "8"})]
    gpu = {"extra_requests": {GPU: "1"}}
    pods = [pod("gpu-pod", "g1", **gpu), pod("cpu-pod", "g1"),
            *cpu_pods("b", "g2", 6, cpu="100m", **gpu), *cpu_pods("c", "g3", 6, cpu="100m", **gpu)]
    assert evicted(run(hnu(thresholds={GPU: 25}), nodes, pods)) == ["cpu-pod", "gpu-pod"]
    only = hnu(thresholds={GPU: 25}, evictionModes=["OnlyThresholdingResources"])
    assert evicted(run(only, nodes, pods)) == ["gpu-pod"]


@pytest.mark.parametrize(("plugin", "args", "field", "message"), [
    (LNU, {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}}, "thresholds.cpu",
     "greater than targetThresholds"),
    (LNU, {"thresholds": {"cpu": 20}, "targetThresholds": {"memory": 50}}, "targetThresholds",
     "different resources"),
    (LNU, {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 150}}, "thresholds.cpu",
     "not in [0, 100] range"),
    (LNU, {"targetThresholds": {"cpu": 50}}, "thresholds", "no resource threshold"),
    (LNU, {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 20},
           "evictableNamespaces": {"include": ["a"]}}, "evictableNamespaces.include",
     "inclusion is not supported"),
    (LNU, {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 20},
           "metricsUtilization": {"metricsServer": True}}, "metricsUtilization", "metrics"),
    (LNU, {"thresholds": {"cpu": "ten"}, "targetThresholds": {"cpu": 20}}, "thresholds.cpu",
     "got the string"),
    (HNU, {"thresholds": {}}, "thresholds", "no resource threshold"),
    (HNU, {"thresholds": {"cpu": 10}, "evictionModes": ["Sometimes"]}, "evictionModes[0]",
     "invalid eviction mode"),
])
def test_bad_args(plugin: str, args: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        run(policy({"balance": [plugin]}, {plugin: args}), three_nodes(), [])
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"
    assert message in err.value.message


def test_thresholds_equal_to_targets_are_allowed() -> None:
    pol = lnu(thresholds={"cpu": 50}, targetThresholds={"cpu": 50})
    assert run(pol, three_nodes(), []).evictions == []
