"""RemoveDuplicates and RemovePodsViolatingTopologySpreadConstraint."""

from __future__ import annotations

from typing import Any

import pytest
from tests.descheduling.builders import evicted, node, pod, policy, run

from kubeberth.api.errors import InputError

DUPS = "RemoveDuplicates"
TSC = "RemovePodsViolatingTopologySpreadConstraint"


def test_duplicates_keep_an_even_share_per_node() -> None:
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = [pod(f"p{i}", "n1") for i in range(3)] + [pod("other", "n1", owner=("Job", "j"))]
    result = run(policy({"balance": [DUPS]}, {DUPS: {}}), nodes, pods)
    assert evicted(result) == ["p1", "p2"]
    assert "3 pods of ReplicaSet default/rs" in result.evictions[0].reason


def test_duplicates_excluded_owner_kinds_and_namespaces() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [pod(f"p{i}", "n1") for i in range(3)]
    assert evicted(run(policy({"balance": [DUPS]}, {DUPS: {"excludeOwnerKinds": ["ReplicaSet"]}}),
                       nodes, pods)) == []
    assert evicted(run(policy({"balance": [DUPS]}, {DUPS: {"namespaces": {"exclude":
                                                                        ["default"]}}}),
                       nodes, pods)) == []


def test_duplicates_need_the_same_images() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [pod("a", "n1"), pod("b", "n1", spec={"containers": [{"name": "c", "image": "x"}]})]
    assert evicted(run(policy({"balance": [DUPS]}, {DUPS: {}}), nodes, pods)) == []


def test_duplicates_need_two_feasible_nodes() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    nodes = [node("n1"), node("n2", taints=taint)]
    pods = [pod("a", "n1"), pod("b", "n1")]
    assert evicted(run(policy({"balance": [DUPS]}, {DUPS: {}}), nodes, pods)) == []


def spread(max_skew: int = 1, when: str = "DoNotSchedule") -> dict[str, Any]:
    return {"topologySpreadConstraints": [{
        "maxSkew": max_skew, "topologyKey": "zone", "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}}}]}


def zoned(pods_allowed: int = 110) -> list[Any]:
    return [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"}, pods=pods_allowed)]


def web(name: str, node_name: str, when: str = "DoNotSchedule", **kw: Any) -> Any:
    return pod(name, node_name, labels={"app": "web"}, spec=spread(when=when), **kw)


def test_topology_spread_moves_the_excess() -> None:
    pods = [web("w1", "a1"), web("w2", "a1"), web("w3", "a1"), web("w4", "b1")]
    result = run(policy({"balance": [TSC]}, {TSC: {}}), zoned(), pods)
    assert evicted(result) == ["w3"]
    assert "domain a has 3 matching pods" in result.evictions[0].reason


def test_topology_spread_balanced_within_max_skew() -> None:
    pods = [web("w1", "a1"), web("w2", "a1"), web("w3", "b1")]
    assert evicted(run(policy({"balance": [TSC]}, {TSC: {}}), zoned(), pods)) == []


def test_topology_spread_node_fit_needs_room_in_the_smaller_domain() -> None:
    pods = [web("w1", "a1"), web("w2", "a1"), web("w3", "a1"), web("w4", "b1")]
    # b1 has no free pod slot: with topologyBalanceNodeFit (default) nothing can move.
    assert evicted(run(policy({"balance": [TSC]}, {TSC: {}}), zoned(pods_allowed=1), pods)) == []
    no_fit = policy({"balance": [TSC]}, {TSC: {"topologyBalanceNodeFit": False}})
    assert evicted(run(no_fit, zoned(pods_allowed=1), pods)) == ["w3"]


def test_topology_spread_schedule_anyway_only_when_asked() -> None:
    pods = [web(f"w{i}", "a1", when="ScheduleAnyway") for i in range(3)] + \
        [web("w9", "b1", when="ScheduleAnyway")]
    assert evicted(run(policy({"balance": [TSC]}, {TSC: {}}), zoned(), pods)) == []
    both = policy({"balance": [TSC]}, {TSC: {"constraints": ["DoNotSchedule",
                                                             "ScheduleAnyway"]}})
    assert evicted(run(both, zoned(), pods)) == ["w2"]


def test_topology_spread_prefers_evicting_pods_without_node_selector() -> None:
    pinned = {**spread(), "nodeSelector": {"zone": "a"}}
    pods = [pod("pinned", "a1", labels={"app": "web"}, spec=pinned),
            web("w1", "a1"), web("w2", "a1"), web("w3", "b1")]
    nodes = [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})]
    assert evicted(run(policy({"balance": [TSC]}, {TSC: {}}), nodes, pods)) == ["w2"]


@pytest.mark.parametrize(("args", "field"), [
    ({"constraints": ["Sometimes"]}, "constraints[0]"),
    ({"topologyBalanceNodeFit": 1}, "topologyBalanceNodeFit"),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "namespaces"),
])
def test_topology_spread_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        run(policy({"balance": [TSC]}, {TSC: args}), zoned(), [])
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"
