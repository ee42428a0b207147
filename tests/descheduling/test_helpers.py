"""The shared predicates: QoS, pod kinds, selectors, taints, NodeFit, anti-affinity, sorting."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from tests.descheduling.builders import NOW, node, pod

from kubeberth.api.objects import LabelSelector, Pod, PriorityClass, Taint
from kubeberth.descheduling.framework import PodView, Snapshot, pod_qos
from kubeberth.descheduling.helpers import (
    anti_affinity_violated,
    label_filter,
    matches_node_selector,
    namespace_filter,
    node_fit,
    preferred_weight,
    show_taint,
    sort_by_priority_low_to_high,
    tolerates_taints,
    untolerated_taint,
)


def view(p: Pod, *others: Pod, nodes: list[Any] | None = None) -> tuple[PodView, Snapshot]:
    snap = Snapshot(nodes or [], [p, *others], now=NOW)
    return snap.pods[0], snap


def containers(*resources: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}


@pytest.mark.parametrize(("resources", "qos"), [
    ([{}], "BestEffort"),
    ([{"requests": {"cpu": "0", "memory": "0"}}], "BestEffort"),
    ([{"requests": {"cpu": "1"}}], "Burstable"),
    ([{"requests": {"nvidia.com/gpu": "1"}}], "BestEffort"),
    ([{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}],
     "Guaranteed"),
    # Requests are not defaulted from limits: manifests are read as written.
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Burstable"),
    ([{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}],
     "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {"requests": {"cpu": "1"}}], "Burstable"),
])
def test_qos_class_as_kubernetes_computes_it(resources: list[dict[str, Any]], qos: str) -> None:
    assert pod_qos(pod("p", spec=containers(*resources))) == qos


def test_status_qos_class_wins() -> None:
    assert pod_qos(pod("p", status={"qosClass": "Guaranteed"})) == "Guaranteed"


def test_priority_sort_nil_first_then_priority_then_qos() -> None:
    guaranteed = containers({"requests": {"cpu": "1", "memory": "1"},
                             "limits": {"cpu": "1", "memory": "1"}})
    pods = [pod("g5", priority=5, spec=guaranteed), pod("b5", priority=5),
            pod("e5", priority=5, cpu=None), pod("nil"), pod("one", priority=1)]
    snap = Snapshot([], pods, now=NOW)
    assert [p.name for p in sort_by_priority_low_to_high(snap.pods)] == \
        ["nil", "one", "e5", "b5", "g5"]


def test_priority_comes_from_the_priority_class() -> None:
    classes = [msgspec.convert({"metadata": {"name": "high"}, "value": 1000}, PriorityClass),
               msgspec.convert({"metadata": {"name": "default"}, "value": 7,
                                "globalDefault": True}, PriorityClass)]
    pods = [pod("named", spec={"priorityClassName": "high"}), pod("defaulted"),
            pod("explicit", priority=3), pod("system", spec={"priorityClassName":
                                                             "system-node-critical"})]
    snap = Snapshot([], pods, now=NOW, priority_classes=classes)
    assert [p.priority for p in snap.pods] == [1000, 7, 3, 2_000_001_000]
    assert Snapshot([], [pod("none")], now=NOW).pods[0].priority is None


def test_node_selector_and_required_affinity_both_apply() -> None:
    n = node("n", labels={"zone": "a", "gpu": "a100"})
    affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}}
    assert matches_node_selector(pod("p", spec=affinity), n)
    assert not matches_node_selector(pod("p", spec={**affinity, "nodeSelector": {"zone": "b"}}),
                                     n)
    no_terms = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                              {"nodeSelectorTerms": []}}}}
    assert not matches_node_selector(pod("p", spec=no_terms), n)
    by_name = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": ["n"]}]}]}}}}
    assert matches_node_selector(pod("p", spec=by_name), n)


def test_preferred_weight_sums_matching_terms() -> None:
    prefers = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}},
    ]}}}
    p = pod("p", spec=prefers)
    assert preferred_weight(p, node("n", labels={"a": "", "b": ""})) == 8
    assert preferred_weight(p, node("n", labels={"b": ""})) == 5
    assert preferred_weight(pod("plain"), node("n", labels={"a": ""})) == 0


def taint(key: str, effect: str, value: str = "") -> Taint:
    return Taint(key=key, value=value, effect=effect)


def test_taint_helpers() -> None:
    taints = [taint("a", "NoSchedule", "x"), taint("b", "PreferNoSchedule")]
    no_tolerations: list[Any] = []
    assert untolerated_taint(no_tolerations, taints) == taints[0]
    assert untolerated_taint(no_tolerations, taints, lambda t: t.effect == "PreferNoSchedule") \
        == taints[1]
    assert tolerates_taints(no_tolerations, taints, lambda t: False)
    assert show_taint(taints[0]) == "a=x:NoSchedule" and show_taint(taints[1]) == \
        "b:PreferNoSchedule"


def test_node_fit_checks_each_predicate() -> None:
    n1 = node("n1", cpu="2", pods=3, labels={"zone": "a"})
    p, snap = view(pod("p", "other", cpu="1"), pod("r", "n1", cpu="500m"), nodes=[n1])
    assert node_fit(snap, p, n1) is None
    big, snap = view(pod("big", "other", cpu="2"), pod("r", "n1", cpu="500m"), nodes=[n1])
    assert node_fit(snap, big, n1) == "insufficient cpu"
    gpu, snap = view(pod("gpu", "other", extra_requests={"nvidia.com/gpu": "1"}), nodes=[n1])
    assert node_fit(snap, gpu, n1) == "insufficient nvidia.com/gpu"
    picky, snap = view(pod("picky", "other", spec={"nodeSelector": {"zone": "b"}}), nodes=[n1])
    assert node_fit(snap, picky, n1) == "pod node selector does not match the node label"
    cordoned = node("c", cpu="2")
    cordoned.spec.unschedulable = True
    p, snap = view(pod("p", "other"), nodes=[cordoned])
    assert node_fit(snap, p, cordoned) == "node is not schedulable"
    tainted = node("t", taints=[{"key": "k", "effect": "NoExecute"}])
    p, snap = view(pod("p", "other"), nodes=[tainted])
    assert node_fit(snap, p, tainted) == "pod does not tolerate taints on the node"
    full = node("f", pods=1)
    p, snap = view(pod("p", "other", cpu=None), pod("r", "f", cpu=None), nodes=[full])
    assert node_fit(snap, p, full) == "insufficient pods"


def test_node_fit_skips_requests_on_the_pods_own_node() -> None:
    n1 = node("n1", cpu="1")
    p, snap = view(pod("p", "n1", cpu="1"), pod("r", "n1", cpu="1"), nodes=[n1])
    assert node_fit(snap, p, n1) is None


def test_anti_affinity_matching() -> None:
    nodes = {"n1": node("n1", labels={"zone": "a"}), "n2": node("n2", labels={"zone": "a"}),
             "n3": node("n3")}
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone",
         "namespaces": ["data"]}]}}}
    snap = Snapshot(list(nodes.values()), [
        pod("me", "n1", labels={"app": "db"}, spec=anti),
        pod("db-same-zone", "n2", ns="data", labels={"app": "db"}),
        pod("db-default-ns", "n2", labels={"app": "db"}),
        pod("db-no-zone", "n3", ns="data", labels={"app": "db"})], now=NOW)
    me, same_zone, default_ns, no_zone = snap.pods
    by_ns = {"data": [same_zone, no_zone], "default": [me, default_ns]}
    assert anti_affinity_violated(me, by_ns, nodes)
    assert not anti_affinity_violated(me, {"data": [no_zone], "default": [default_ns]}, nodes)


def test_namespace_and_label_filters() -> None:
    snap = Snapshot([], [pod("a", ns="x", labels={"t": "1"}), pod("b", ns="y")], now=NOW)
    a, b = snap.pods
    assert namespace_filter(["x"], [])(a) and not namespace_filter(["x"], [])(b)
    assert not namespace_filter([], ["x"])(a) and namespace_filter([], ["x"])(b)
    assert namespace_filter([], [])(b)
    assert label_filter(None)(b)
    assert label_filter(LabelSelector(match_labels={"t": "1"}))(a)
    assert not label_filter(LabelSelector(match_labels={"t": "1"}))(b)
