"""InterPodAffinity: cases transcribed from upstream's filtering_test.go and scoring_test.go,
namespace selectors, matchLabelKeys, the preemption extensions and args."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Namespace, Node, Pod
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import ClusterEvent
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import inter_pod_affinity as ipa
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info

S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
AFF = ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING = ipa.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH

SECURITYSCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
NAMESPACES = {"subteam1.team1": "team1", "subteam2.team1": "team1", "subteam1.team2": "team2",
              "subteam2.team2": "team2"}


# ---- builders ----------------------------------------------------------------------------------
def make_node(name: str, labels: dict[str, str]) -> Node:
    return msgspec.convert({"metadata": {"name": name, "labels": labels}}, Node)


def make_pod(labels: dict[str, str] | None = None, *, node: str = "", namespace: str = "default",
             affinity: dict[str, Any] | None = None, name: str = "") -> Pod:
    spec: dict[str, Any] = {"nodeName": node}
    if affinity is not None:
        spec["affinity"] = affinity
    return msgspec.convert({"metadata": {"name": name, "namespace": namespace,
                                         "labels": labels or {}}, "spec": spec}, Pod)


def build(nodes: list[Node], pods: list[Pod]) -> ClusterState:
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)
    for team_ns, team in NAMESPACES.items():
        snap.namespaces[team_ns] = msgspec.convert(
            {"metadata": {"name": team_ns, "labels": {"team": team}}}, Namespace)
    for i, p in enumerate(pods):
        p.metadata.name = p.metadata.name or f"existing-{i}"
        snap.add_pod(make_pod_info(p), snap.node_index[p.spec.node_name])
    return snap


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(key: str, op: str, values: tuple[str, ...], topology: str,
         **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": [expr(key, op, *values)]},
            "topologyKey": topology, **extra}


def required(*terms: dict[str, Any], anti: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if terms:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return out


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return required(anti=terms)


def preferred(kind: str, *weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def plugin(**args: Any) -> ipa.InterPodAffinity:
    return ipa.new(args or None, None)  # type: ignore[arg-type]


def run_filter(pl: ipa.InterPodAffinity, snap: ClusterState,
               pod: PodInfo) -> dict[str, tuple[Code, tuple[str, ...]]] | Code:
    """Per node (code, reasons); the PreFilter code instead when it did not succeed."""
    state = CycleState()
    _, st = pl.pre_filter(state, pod, snap)
    if not st.ok:
        return st.code
    nodes = snap.node_ids()
    res = pl.filter(state, pod, snap, nodes)
    return {snap.node_names[n]: (Code(int(res.codes[i])), res.reasons[int(res.reason_ids[i])])
            for i, n in enumerate(nodes)}


def run_score(pl: ipa.InterPodAffinity, snap: ClusterState, pod: PodInfo) -> dict[str, int] | Code:
    state = CycleState()
    nodes = snap.node_ids()
    st = pl.pre_score(state, pod, snap, nodes)
    if not st.ok:
        return st.code
    raw = pl.score(state, pod, snap, nodes)
    norm = pl.normalize_score(state, pod, raw)
    final = raw if norm is None else norm
    return {snap.node_names[n]: int(final[i]) for i, n in enumerate(nodes)}


# ---- Filter: upstream TestRequiredAffinitySingleNode -------------------------------------------
NODE1 = make_node("node1", {"region": "r1", "zone": "z11"})
EXISTING_SCAN = make_pod(SECURITYSCAN, node="node1")

SINGLE_NODE_CASES: list[tuple[str, Pod, list[Pod], Code | tuple[Code, tuple[str, ...]]]] = [
    ("no affinity: PreFilter skips", make_pod(), [], Code.SKIP),
    ("affinity In matches the existing pod",
     make_pod(S1, affinity=required(term("service", "In", ("securityscan", "value2"), "region"))),
     [EXISTING_SCAN], (S, ())),
    ("affinity NotIn matches the existing pod",
     make_pod(S1, affinity=required(term("service", "NotIn", ("securityscan3", "value3"),
                                         "region"))),
     [EXISTING_SCAN], (S, ())),
    ("affinity namespaces exclude the existing pod",
     make_pod(S1, affinity=required(term("service", "In", ("securityscan", "value2"), "",
                                         namespaces=["DiffNameSpace"]))),
     [make_pod(SECURITYSCAN, node="node1", namespace="ns")], (UU, (AFF,))),
    ("affinity selector matches nobody",
     make_pod(SECURITYSCAN, affinity=required(term("service", "In", ("antivirusscan", "value2"),
                                                   ""))),
     [EXISTING_SCAN], (UU, (AFF,))),
    ("two affinity terms with several operators all match",
     make_pod(S1, affinity=required(
         {"labelSelector": {"matchExpressions": [expr("service", "Exists"),
                                                 expr("wrongkey", "DoesNotExist")]},
          "topologyKey": "region"},
         {"labelSelector": {"matchExpressions": [expr("service", "In", "securityscan"),
                                                 expr("service", "NotIn", "WrongValue")]},
          "topologyKey": "region"})),
     [EXISTING_SCAN], (S, ())),
    ("one of two affinity terms does not match",
     make_pod(S1, affinity=required(
         {"labelSelector": {"matchExpressions": [expr("service", "Exists"),
                                                 expr("wrongkey", "DoesNotExist")]},
          "topologyKey": "region"},
         {"labelSelector": {"matchExpressions": [expr("service", "In", "securityscan2"),
                                                 expr("service", "NotIn", "WrongValue")]},
          "topologyKey": "region"})),
     [EXISTING_SCAN], (UU, (AFF,))),
    ("affinity and anti-affinity both satisfied",
     make_pod(S1, affinity=required(
         term("service", "In", ("securityscan", "value2"), "region"),
         anti=(term("service", "In", ("antivirusscan", "value2"), "node"),))),
     [EXISTING_SCAN], (S, ())),
    ("existing pod's anti-affinity does not match the incoming pod",
     make_pod(S1, affinity=required(
         term("service", "In", ("securityscan", "value2"), "region"),
         anti=(term("service", "In", ("antivirusscan", "value2"), "node"),))),
     [make_pod(SECURITYSCAN, node="node1",
               affinity=anti(term("service", "In", ("antivirusscan", "value2"), "node")))],
     (S, ())),
    ("incoming anti-affinity matches the existing pod",
     make_pod(S1, affinity=required(
         term("service", "In", ("securityscan", "value2"), "region"),
         anti=(term("service", "In", ("securityscan", "value2"), "zone"),))),
     [EXISTING_SCAN], (U, (ANTI,))),
    ("existing pod's anti-affinity matches the incoming pod",
     make_pod(SECURITYSCAN, affinity=required(
         term("service", "In", ("securityscan", "value2"), "region"),
         anti=(term("service", "In", ("antivirusscan", "value2"), "node"),))),
     [make_pod(SECURITYSCAN, node="node1",
               affinity=anti(term("service", "In", ("securityscan", "value2"), "zone")))],
     (U, (EXISTING,))),
    ("pod matching its own NotIn term is not the first of a group",
     make_pod(SECURITYSCAN, affinity=required(
         term("service", "NotIn", ("securityscan", "value2"), "region"))),
     [], (UU, (AFF,))),
    ("existing anti-affinity applies to a pod without affinity",
     make_pod(SECURITYSCAN),
     [make_pod(SECURITYSCAN, node="node1",
               affinity=anti(term("service", "In", ("securityscan", "value2"), "zone")))],
     (U, (EXISTING,))),
    ("existing anti-affinity NotIn: PreFilter skips",
     make_pod(SECURITYSCAN),
     [make_pod(SECURITYSCAN, node="node1",
               affinity=anti(term("service", "NotIn", ("securityscan", "value2"), "zone")))],
     Code.SKIP),
    ("incoming anti-affinity Exists matches the existing pod's labels",
     make_pod(SECURITYSCAN, affinity=anti(term("service", "Exists", (), "region"),
                                          term("security", "Exists", (), "region"))),
     [make_pod(S1, node="node1", affinity=anti(term("security", "Exists", (), "zone")))],
     (U, (ANTI,))),
    ("symmetry a1",
     make_pod(SECURITYSCAN, affinity=anti(term("service", "Exists", (), "zone"),
                                          term("security", "Exists", (), "zone"))),
     [make_pod(S1, node="node1", affinity=anti(term("security", "Exists", (), "zone")))],
     (U, (ANTI,))),
    ("symmetry a2",
     make_pod(S1, affinity=anti(term("security", "Exists", (), "zone"))),
     [make_pod(SECURITYSCAN, node="node1", affinity=anti(term("service", "Exists", (), "zone"),
                                                         term("security", "Exists", (), "zone")))],
     (U, (EXISTING,))),
    ("symmetry b1",
     make_pod({"abc": "", "xyz": ""}, affinity=anti(term("abc", "Exists", (), "zone"),
                                                    term("def", "Exists", (), "zone"))),
     [make_pod({"def": "", "xyz": ""}, node="node1",
               affinity=anti(term("abc", "Exists", (), "zone"),
                             term("def", "Exists", (), "zone")))],
     (U, (ANTI,))),
    ("affinity with a matching namespaceSelector",
     make_pod(S1, affinity=required(term("service", "In", ("securityscan", "value2"), "region",
                                         namespaceSelector={"matchExpressions": [
                                             expr("team", "In", "team1")]}))),
     [make_pod(SECURITYSCAN, node="node1", namespace="subteam1.team1")], (S, ())),
    ("affinity with a non-matching namespaceSelector",
     make_pod(S1, affinity=required(term("service", "In", ("securityscan", "value2"), "region",
                                         namespaceSelector={"matchExpressions": [
                                             expr("team", "In", "team1")]}))),
     [make_pod(SECURITYSCAN, node="node1", namespace="subteam1.team2")], (UU, (AFF,))),
    ("anti-affinity with a matching namespaceSelector",
     make_pod(S1, namespace="subteam1.team1",
              affinity=anti(term("service", "In", ("securityscan", "value2"), "zone",
                                 namespaceSelector={"matchExpressions": [
                                     expr("team", "In", "team1")]}))),
     [make_pod(SECURITYSCAN, node="node1", namespace="subteam2.team1")], (U, (ANTI,))),
    ("anti-affinity with an all-namespaces selector",
     make_pod(S1, namespace="subteam1.team1",
              affinity=anti(term("service", "In", ("securityscan", "value2"), "zone",
                                 namespaceSelector={}))),
     [make_pod(SECURITYSCAN, node="node1", namespace="subteam2.team1")], (U, (ANTI,))),
    ("anti-affinity with a non-matching namespaceSelector",
     make_pod(S1, namespace="subteam1.team1",
              affinity=anti(term("service", "In", ("securityscan", "value2"), "zone",
                                 namespaceSelector={"matchExpressions": [
                                     expr("team", "In", "team1")]}))),
     [make_pod(SECURITYSCAN, node="node1", namespace="subteam1.team2")], (S, ())),
]


@pytest.mark.parametrize(("name", "pod", "existing", "want"), SINGLE_NODE_CASES,
                         ids=[c[0] for c in SINGLE_NODE_CASES])
def test_required_affinity_single_node(name: str, pod: Pod, existing: list[Pod],
                                       want: Code | tuple[Code, tuple[str, ...]]) -> None:
    snap = build([NODE1], existing)
    got = run_filter(plugin(), snap, make_pod_info(pod))
    assert got == (want if isinstance(want, Code) else {"node1": want})


# ---- Filter: upstream TestRequiredAffinityMultipleNodes ----------------------------------------
def test_nodes_sharing_the_topology_value_all_satisfy_affinity() -> None:
    snap = build([make_node("node1", CHINA), make_node("node2", CHINA_AZ1),
                  make_node("node3", INDIA)], [make_pod({"foo": "bar"}, node="node1")])
    pod = make_pod(affinity=required(term("foo", "In", ("bar",), "region")))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "node1": (S, ()), "node2": (S, ()), "node3": (UU, (AFF,))}


@pytest.mark.parametrize(("key", "want"), [("zone", (S, ())), ("zoneLabel", (UU, (AFF,)))])
def test_first_pod_of_a_self_affine_group(key: str, want: tuple[Code, tuple[str, ...]]) -> None:
    # The existing pod matches only one of the two terms, so no pod matches all of them; the
    # incoming pod matches its own terms and may go to any node that has the topology key.
    snap = build([make_node("nodeA", {key: "az1", "hostname": "h1"}),
                  make_node("nodeB", {key: "az2", "hostname": "h2"})],
                 [make_pod({"foo": "bar"}, node="nodeA")])
    pod = make_pod({"foo": "bar", "service": "securityscan"}, affinity=required(
        term("foo", "In", ("bar",), "zone"), term("service", "In", ("securityscan",), "zone")))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {"nodeA": want, "nodeB": want}


def test_anti_affinity_blocks_the_whole_topology_domain() -> None:
    nodes = [make_node("nodeA", {"region": "r1", "zone": "z1"}),
             make_node("nodeB", {"region": "r1", "zone": "z2"})]
    snap = build(nodes, [make_pod({"foo": "abc", "service": "securityscan"}, node="nodeA")])
    one = make_pod(affinity=anti(term("foo", "In", ("abc",), "region")))
    assert run_filter(plugin(), snap, make_pod_info(one)) == {
        "nodeA": (U, (ANTI,)), "nodeB": (U, (ANTI,))}
    two = make_pod(affinity=anti(term("foo", "In", ("abc",), "region"),
                                 term("service", "In", ("securityscan",), "zone")))
    assert run_filter(plugin(), snap, make_pod_info(two)) == {
        "nodeA": (U, (ANTI,)), "nodeB": (U, (ANTI,))}


def test_anti_affinity_other_region_and_other_namespace() -> None:
    nodes = [make_node("nodeA", CHINA), make_node("nodeB", CHINA_AZ1), make_node("nodeC", INDIA)]
    snap = build(nodes, [make_pod({"foo": "abc"}, node="nodeA")])
    pod = make_pod(affinity=anti(term("foo", "In", ("abc",), "region")))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "nodeA": (U, (ANTI,)), "nodeB": (U, (ANTI,)), "nodeC": (S, ())}
    snap = build(nodes, [
        make_pod({"foo": "bar"}, node="nodeA", namespace="NS1"),
        make_pod(node="nodeC", namespace="NS2",
                 affinity=anti(term("foo", "In", ("123",), "region")))])
    pod = make_pod({"foo": "123"}, namespace="NS1",
                   affinity=anti(term("foo", "In", ("bar",), "region")))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "nodeA": (U, (ANTI,)), "nodeB": (U, (ANTI,)), "nodeC": (S, ())}


def test_terms_with_a_topology_key_no_node_has() -> None:
    nodes = [make_node("nodeA", {"region": "r1", "zone": "z1"}),
             make_node("nodeB", {"region": "r1", "zone": "z1"})]
    existing_term = [make_pod(node="nodeA",
                              affinity=anti(term("foo", "Exists", (), "invalid-node-label")))]
    assert run_filter(plugin(), build(nodes, existing_term),
                      make_pod_info(make_pod({"foo": ""}))) == Code.SKIP
    incoming_term = make_pod(affinity=anti(term("foo", "Exists", (), "invalid-node-label")))
    assert run_filter(plugin(), build(nodes, [make_pod({"foo": ""}, node="nodeA")]),
                      make_pod_info(incoming_term)) == {"nodeA": (S, ()), "nodeB": (S, ())}


def test_existing_anti_affinity_on_two_keys() -> None:
    nodes = [make_node("nodeA", {"region": "r1", "zone": "z1"}),
             make_node("nodeB", {"region": "r1", "zone": "z2"}),
             make_node("nodeC", {"region": "r2", "zone": "z2"})]
    snap = build(nodes, [
        make_pod(node="nodeA", affinity=anti(term("foo", "Exists", (), "zone"))),
        make_pod(node="nodeA", affinity=anti(term("bar", "Exists", (), "region")))])
    pod = make_pod({"foo": "", "bar": ""})
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "nodeA": (U, (EXISTING,)), "nodeB": (U, (EXISTING,)), "nodeC": (S, ())}


def test_affinity_failure_takes_precedence_over_anti_affinity() -> None:
    snap = build([make_node("n1", {"zone": "z1"}), make_node("n2", {"rack": "r"})],
                 [make_pod({"app": "db"}, node="n1")])
    pod = make_pod(affinity=required(term("app", "In", ("db",), "zone"),
                                     anti=(term("app", "In", ("db",), "zone"),)))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "n1": (U, (ANTI,)), "n2": (UU, (AFF,))}


def test_unparsable_incoming_terms_are_unresolvable() -> None:
    snap = build([NODE1], [])
    pod = make_pod(affinity=required(term("service", "Near", ("x",), "region")))
    state = CycleState()
    _, st = plugin().pre_filter(state, make_pod_info(pod), snap)
    assert st.code == UU
    assert st.message().startswith("parsing pod:")
    assert "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in st.message()


# ---- matchLabelKeys / mismatchLabelKeys --------------------------------------------------------
def test_match_label_keys_restrict_affinity_to_the_same_version() -> None:
    nodes = [make_node("n1", {"region": "r1"}), make_node("n2", {"region": "r2"})]
    snap = build(nodes, [make_pod({"app": "a", "version": "v2"}, node="n1"),
                         make_pod({"app": "a", "version": "v1"}, node="n2")])
    pod = make_pod({"app": "a", "version": "v1"}, affinity=required(
        term("app", "Exists", (), "region", matchLabelKeys=["version"])))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {
        "n1": (UU, (AFF,)), "n2": (S, ())}


def test_mismatch_label_keys_keep_tenants_apart() -> None:
    nodes = [make_node("n1", {"region": "r1"}), make_node("n2", {"region": "r2"})]
    snap = build(nodes, [make_pod({"tenant": "t2"}, node="n1"),
                         make_pod({"tenant": "t1"}, node="n2")])
    pod = make_pod({"tenant": "t1"}, affinity=anti(
        term("tenant", "Exists", (), "region", mismatchLabelKeys=["tenant"])))
    assert run_filter(plugin(), snap, make_pod_info(pod)) == {"n1": (U, (ANTI,)), "n2": (S, ())}


# ---- PreFilterExtensions -----------------------------------------------------------------------
def test_remove_and_add_pod_update_a_clone_only() -> None:
    nodes = [make_node("n1", {"zone": "z1"}), make_node("n2", {"zone": "z2"})]
    snap = build(nodes, [make_pod({"app": "db"}, node="n1", name="db-0"),
                         make_pod({"app": "web"}, node="n2", name="web-0",
                                  affinity=anti(term("app", "In", ("cache",), "zone")))])
    pl = plugin()
    pod = make_pod_info(make_pod({"app": "cache"}, name="cache-0", affinity=required(
        term("app", "In", ("db",), "zone"), anti=(term("app", "In", ("db",), "zone"),))))
    state = CycleState()
    _, st = pl.pre_filter(state, pod, snap)
    assert st.ok
    nodes_ = snap.node_ids()

    def codes(s: CycleState) -> list[Code]:
        return [Code(int(c)) for c in pl.filter(s, pod, snap, nodes_).codes]

    assert codes(state) == [U, UU]
    what_if = state.clone()
    db = snap.pods["default/db-0"]
    web = snap.pods["default/web-0"]
    assert pl.remove_pod(what_if, pod, db, db.node, snap).ok
    # No db pod left anywhere, and the cache pod does not match its own affinity.
    assert codes(what_if) == [UU, UU]
    assert pl.add_pod(what_if, pod, db, snap.node_index["n2"], snap).ok
    assert codes(what_if) == [UU, U]
    assert pl.remove_pod(what_if, pod, web, web.node, snap).ok
    assert codes(what_if) == [UU, U]
    assert codes(state) == [U, UU]


# ---- Score: upstream TestPreferredAffinity -----------------------------------------------------
STAY_WITH_S1_IN_REGION = preferred("podAffinity", (5, term("security", "In", ("S1",), "region")))
STAY_WITH_S2_IN_REGION = preferred("podAffinity", (6, term("security", "In", ("S2",), "region")))
AFFINITY3 = preferred(
    "podAffinity",
    (8, {"labelSelector": {"matchExpressions": [expr("security", "NotIn", "S1"),
                                                expr("security", "In", "S2")]},
         "topologyKey": "region"}),
    (2, {"labelSelector": {"matchExpressions": [expr("security", "Exists"),
                                                expr("wrongkey", "DoesNotExist")]},
         "topologyKey": "region"}))
HARD_AFFINITY = required(
    term("security", "In", ("S1", "value2"), "region"),
    {"labelSelector": {"matchExpressions": [expr("security", "Exists"),
                                            expr("wrongkey", "DoesNotExist")]},
     "topologyKey": "region"})
AWAY_FROM_S1_IN_AZ = preferred("podAntiAffinity", (5, term("security", "In", ("S1",), "az")))
AWAY_FROM_S2_IN_AZ = preferred("podAntiAffinity", (5, term("security", "In", ("S2",), "az")))
STAY_S1_AWAY_S2 = {**preferred("podAffinity", (8, term("security", "In", ("S1",), "region"))),
                   **AWAY_FROM_S2_IN_AZ}
NS_SELECTOR_TERM = term("security", "In", ("S1",), "region", namespaces=["subteam2.team2"],
                        namespaceSelector={"matchExpressions": [expr("team", "In", "team1")]})
AFFINITY_NS_SELECTOR = preferred("podAffinity", (5, NS_SELECTOR_TERM))
ANTI_AFFINITY_NS_SELECTOR = preferred("podAntiAffinity", (5, NS_SELECTOR_TERM))


def nodes_of(*specs: tuple[str, dict[str, str]]) -> list[Node]:
    return [make_node(name, labels) for name, labels in specs]


THREE = nodes_of(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))

SCORE_CASES: list[tuple[str, Pod, list[Pod], list[Node], dict[str, int] | Code]] = [
    ("no affinity anywhere: skip", make_pod(S1), [], THREE, Code.SKIP),
    ("affinity: matching topology and pods scores high",
     make_pod(S1, affinity=STAY_WITH_S1_IN_REGION),
     [make_pod(S1, node="node1"), make_pod(S2, node="node2"), make_pod(S1, node="node3")],
     THREE, {"node1": 100, "node2": 0, "node3": 0}),
    ("affinity: the whole region shares the score",
     make_pod(affinity=STAY_WITH_S1_IN_REGION), [make_pod(S1, node="node1")],
     nodes_of(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)),
     {"node1": 100, "node2": 100, "node3": 0}),
    ("affinity: the region with more matches wins",
     make_pod(S1, affinity=STAY_WITH_S2_IN_REGION),
     [make_pod(S2, node=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
     nodes_of(("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA),
              ("node5", INDIA)),
     {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}),
    ("affinity: several operators and weights",
     make_pod(S1, affinity=AFFINITY3),
     [make_pod(S1, node="node1"), make_pod(S2, node="node2"), make_pod(S1, node="node3")],
     THREE, {"node1": 20, "node2": 100, "node3": 0}),
    ("symmetry: existing pods' preferred affinity",
     make_pod(S2),
     [make_pod(S1, node="node1", affinity=STAY_WITH_S1_IN_REGION),
      make_pod(S2, node="node2", affinity=STAY_WITH_S2_IN_REGION)],
     THREE, {"node1": 0, "node2": 100, "node3": 0}),
    ("symmetry with a namespace selector",
     make_pod(S1, namespace="subteam1.team1"),
     [make_pod(S1, node="node1", affinity=AFFINITY_NS_SELECTOR),
      make_pod(S2, node="node2", affinity=STAY_WITH_S2_IN_REGION)],
     THREE, {"node1": 100, "node2": 0, "node3": 0}),
    ("anti-affinity symmetry with a namespace selector",
     make_pod(S1, namespace="subteam1.team1"),
     [make_pod(S1, node="node1", affinity=ANTI_AFFINITY_NS_SELECTOR),
      make_pod(S2, node="node2", affinity=STAY_WITH_S2_IN_REGION)],
     THREE, {"node1": 0, "node2": 100, "node3": 100}),
    ("symmetry: existing pods' required affinity with hardPodAffinityWeight",
     make_pod(S1),
     [make_pod(S1, node="node1", affinity=HARD_AFFINITY),
      make_pod(S2, node="node2", affinity=HARD_AFFINITY)],
     THREE, {"node1": 100, "node2": 100, "node3": 0}),
    ("anti-affinity: the node without matching pods scores high",
     make_pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
     [make_pod(S1, node="node1"), make_pod(S2, node="node2")],
     nodes_of(("node1", AZ1), ("node2", CHINA)), {"node1": 0, "node2": 100}),
    ("anti-affinity: the node without the topology key scores high",
     make_pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
     [make_pod(S1, node="node1"), make_pod(S1, node="node2")],
     nodes_of(("node1", AZ1), ("node2", CHINA)), {"node1": 0, "node2": 100}),
    ("anti-affinity: more matching pods score lower",
     make_pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
     [make_pod(S1, node="node1"), make_pod(S1, node="node1"), make_pod(S2, node="node2")],
     nodes_of(("node1", AZ1), ("node2", INDIA)), {"node1": 0, "node2": 100}),
    ("anti-affinity symmetry",
     make_pod(S2),
     [make_pod(S1, node="node1", affinity=AWAY_FROM_S2_IN_AZ),
      make_pod(S2, node="node2", affinity=AWAY_FROM_S1_IN_AZ)],
     nodes_of(("node1", AZ1), ("node2", AZ2)), {"node1": 0, "node2": 100}),
    ("affinity and anti-affinity",
     make_pod(S1, affinity=STAY_S1_AWAY_S2),
     [make_pod(S1, node="node1"), make_pod(S1, node="node2")],
     nodes_of(("node1", CHINA), ("node2", AZ1)), {"node1": 100, "node2": 0}),
    ("affinity and anti-affinity, same labels on every pod",
     make_pod(S1, affinity=STAY_S1_AWAY_S2),
     [make_pod(S1, node=n) for n in ("node1", "node1", "node2", "node3", "node3", "node4",
                                     "node5")],
     nodes_of(("node1", CHINA_AZ1), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA),
              ("node5", INDIA)),
     {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}),
    ("affinity, anti-affinity and symmetry",
     make_pod(S1, affinity=STAY_S1_AWAY_S2),
     [make_pod(S1, node="node1"), make_pod(S2, node="node2"),
      make_pod(node="node3", affinity=STAY_S1_AWAY_S2),
      make_pod(node="node4", affinity=AWAY_FROM_S1_IN_AZ)],
     nodes_of(("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)),
     {"node1": 100, "node2": 0, "node3": 100, "node4": 0}),
    ("some nodes of a topology host pods with affinity, the incoming pod has none",
     make_pod(S1),
     [make_pod(S1, node="node1"), make_pod(node="node2", affinity=STAY_S1_AWAY_S2)],
     nodes_of(("node1", CHINA), ("node2", CHINA)), {"node1": 0, "node2": 0}),
    ("affinity with pods matching the namespace selector",
     make_pod(S1, namespace="subteam1.team1", affinity=AFFINITY_NS_SELECTOR),
     [make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam1.team2"),
      make_pod(S1, node="node2", namespace="subteam2.team1")],
     nodes_of(("node1", CHINA), ("node2", INDIA)), {"node1": 100, "node2": 0}),
    ("affinity with pods matching the namespace selector and namespaces",
     make_pod(S1, namespace="subteam1.team1", affinity=AFFINITY_NS_SELECTOR),
     [make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam2.team2"),
      make_pod(S1, node="node2", namespace="subteam2.team1")],
     nodes_of(("node1", CHINA), ("node2", INDIA)), {"node1": 100, "node2": 0}),
    ("anti-affinity with pods matching the namespace selector",
     make_pod(S1, namespace="subteam1.team1", affinity=ANTI_AFFINITY_NS_SELECTOR),
     [make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam1.team1"),
      make_pod(S1, node="node1", namespace="subteam1.team2"),
      make_pod(S1, node="node2", namespace="subteam2.team1")],
     nodes_of(("node1", CHINA), ("node2", INDIA)), {"node1": 0, "node2": 100}),
    ("do not ignore preferred terms of existing pods",
     make_pod(S2),
     [make_pod(S1, node="node1", affinity=STAY_S1_AWAY_S2),
      make_pod(S2, node="node2", affinity=STAY_WITH_S2_IN_REGION)],
     nodes_of(("node1", CHINA), ("node2", INDIA)), {"node1": 0, "node2": 100}),
    ("no nodes to score", make_pod(S2), [], [], Code.SKIP),
]


@pytest.mark.parametrize(("name", "pod", "existing", "nodes", "want"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_preferred_affinity(name: str, pod: Pod, existing: list[Pod], nodes: list[Node],
                            want: dict[str, int] | Code) -> None:
    assert run_score(plugin(), build(nodes, existing), make_pod_info(pod)) == want


def test_ignore_preferred_terms_of_existing_pods() -> None:
    snap = build(nodes_of(("node1", CHINA), ("node2", INDIA)),
                 [make_pod(S1, node="node1", affinity=STAY_S1_AWAY_S2),
                  make_pod(S2, node="node2", affinity=STAY_WITH_S2_IN_REGION)])
    pod = make_pod_info(make_pod(S2))
    assert run_score(plugin(ignorePreferredTermsOfExistingPods=True), snap, pod) == Code.SKIP
    assert run_score(plugin(), snap, pod) == {"node1": 0, "node2": 100}


def test_invalid_preferred_terms_fail_pre_score() -> None:
    snap = build(nodes_of(("node1", CHINA)), [])
    pod = make_pod(affinity=preferred("podAffinity", (8, term("security", "Near", ("x",),
                                                              "region"))))
    st = plugin().pre_score(CycleState(), make_pod_info(pod), snap, snap.node_ids())
    assert st.code == Code.ERROR


# ---- Score: upstream TestPreferredAffinityWithHardPodAffinitySymmetricWeight -------------------
HARD_WITH_NAMESPACES = required({
    "labelSelector": {"matchExpressions": [expr("service", "In", "S1")]},
    "namespaces": ["default", "subteam2.team2"],
    "namespaceSelector": {"matchExpressions": [expr("team", "In", "team1")]},
    "topologyKey": "region"})


@pytest.mark.parametrize(("namespace", "weight", "want"), [
    ("default", 1, {"node1": 100, "node2": 100, "node3": 0}),
    ("default", 0, Code.SKIP),
    ("subteam1.team2", 1, Code.SKIP),
    ("subteam1.team1", 1, {"node1": 100, "node2": 100, "node3": 0}),
    ("subteam2.team2", 1, {"node1": 100, "node2": 100, "node3": 0}),
])
def test_hard_pod_affinity_symmetric_weight(namespace: str, weight: int,
                                            want: dict[str, int] | Code) -> None:
    # Upstream writes the empty namespace; kubeberth defaults it to "default".
    snap = build(THREE, [make_pod(node="node1", affinity=HARD_WITH_NAMESPACES),
                         make_pod(node="node2", affinity=HARD_WITH_NAMESPACES)])
    pod = make_pod_info(make_pod({"service": "S1"}, namespace=namespace))
    assert run_score(plugin(hardPodAffinityWeight=weight), snap, pod) == want


def test_normalize_truncates_like_go() -> None:
    snap = build(nodes_of(("n1", {"r": "a"}), ("n2", {"r": "b"}), ("n3", {"r": "c"})),
                 [make_pod(S1, node="n1"), make_pod(S1, node="n2"), make_pod(S1, node="n2")])
    pod = make_pod(S1, affinity=preferred("podAffinity",
                                          (1, term("security", "In", ("S1",), "r"))))
    # Raw scores 1/2/0 -> 100 * (1/2) = 50, 100, 0; with 3 pods on n2: 1/3 -> 33.
    assert run_score(plugin(), snap, make_pod_info(pod)) == {"n1": 50, "n2": 100, "n3": 0}
    snap.add_pod(make_pod_info(make_pod(S1, node="n2", name="extra")), snap.node_index["n2"])
    assert run_score(plugin(), snap, make_pod_info(pod)) == {"n1": 33, "n2": 100, "n3": 0}


def test_affinity_index_follows_cluster_changes() -> None:
    nodes = nodes_of(("n1", {"zone": "z1"}), ("n2", {"zone": "z2"}))
    snap = build(nodes, [])
    pl = plugin()
    pod = make_pod_info(make_pod({"app": "web"}))
    assert run_filter(pl, snap, pod) == Code.SKIP
    guard = make_pod_info(make_pod(node="n1", name="guard",
                                   affinity=anti(term("app", "In", ("web",), "zone"))))
    snap.add_pod(guard, snap.node_index["n1"])
    assert run_filter(pl, snap, pod) == {"n1": (U, (EXISTING,)), "n2": (S, ())}
    snap.remove_pod(guard)
    assert run_filter(pl, snap, pod) == Code.SKIP
    # Again, with the guard no longer the newest pod when it leaves.
    snap.add_pod(guard, snap.node_index["n2"])
    assert run_filter(pl, snap, pod) == {"n1": (S, ()), "n2": (U, (EXISTING,))}
    snap.add_pod(make_pod_info(make_pod(node="n1", name="plain")), snap.node_index["n1"])
    assert run_filter(pl, snap, pod) == {"n1": (S, ()), "n2": (U, (EXISTING,))}
    snap.remove_pod(guard)
    assert run_filter(pl, snap, pod) == Code.SKIP


def _verdicts(pl: ipa.InterPodAffinity, snap: ClusterState, pod: PodInfo) -> tuple[Any, Any]:
    return run_filter(pl, snap, pod), run_score(pl, snap, pod)


_GUARD = anti(term("app", "In", ("web",), "zone"))
_LIKES_WEB = preferred("podAffinity", (5, term("app", "In", ("web",), "kubernetes.io/hostname")))
_OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "readd", "relabel", "dry-run"]),
                          st.integers(-3, 2), st.sampled_from([None, "guard", "likes", "both"]),
                          st.sampled_from(["web", "db"]), st.booleans()), max_size=25)


# Property: the incrementally kept index of pods with terms gives the same verdicts as a plugin
# that has never seen the cluster before, through adds, removals, pods re-added behind the last
# one, node relabels and preemption-style dry runs that restore the pod order, whether the
# plugin looks after every change or only after several.
@settings(max_examples=100, deadline=None)
@given(ops=_OPS)
def test_affinity_index_matches_a_fresh_scan(ops: list[tuple[str, int, str | None, str, bool]]
                                             ) -> None:
    nodes = nodes_of(("n0", {"zone": "z0"}), ("n1", {"zone": "z1"}), ("n2", {"zone": "z1"}))
    snap = build(nodes, [])
    pl = plugin()
    removed: list[PodInfo] = []
    incoming = [make_pod_info(make_pod({"app": "web"}, name="in-web")),
                make_pod_info(make_pod({"app": "db"}, name="in-db", affinity=_GUARD))]
    for step, (op, node, kind, app, look) in enumerate(ops):
        # ``node`` also picks pods: negative values count from the newest.
        where = snap.node_index[f"n{node % 3}"]
        if op == "add":
            aff = {None: None, "guard": _GUARD, "likes": _LIKES_WEB,
                   "both": {**_GUARD, **_LIKES_WEB}}[kind]
            snap.add_pod(make_pod_info(make_pod({"app": app}, name=f"p{step}", affinity=aff)),
                         where)
        elif op == "remove" and snap.pods:
            victim = list(snap.pods.values())[node % len(snap.pods)]
            snap.remove_pod(victim)
            removed.append(victim)
        elif op == "readd" and removed:
            snap.add_pod(removed.pop(node % len(removed)), where)
        elif op == "relabel":
            snap.update_node(make_node(f"n{node % 3}", {"zone": f"z{step}"}))
        elif op == "dry-run" and snap.pods:
            saved = list(snap.pods.items())
            victim = saved[node % len(saved)][1]
            home = victim.node
            snap.remove_pod(victim)
            snap.add_pod(victim, home)
            snap.pods.clear()
            snap.pods.update(saved)
        if look or step == len(ops) - 1:
            for pod in incoming:
                assert _verdicts(pl, snap, pod) == _verdicts(plugin(), snap, pod)


def test_affinity_index_sees_a_pod_added_before_the_newest_pod_returned() -> None:
    # The newest pod leaves and comes back behind a new pod with terms: looking only behind the
    # newest pod would miss the new one.
    nodes = nodes_of(("n1", {"zone": "z1"}), ("n2", {"zone": "z2"}))
    snap = build(nodes, [make_pod({"app": "db"}, node="n1")])
    pl = plugin()
    pod = make_pod_info(make_pod({"app": "web"}))
    assert run_filter(pl, snap, pod) == Code.SKIP
    newest = next(reversed(snap.pods.values()))
    snap.remove_pod(newest)
    guard = make_pod_info(make_pod(node="n1", name="guard", affinity=_GUARD))
    snap.add_pod(guard, snap.node_index["n1"])
    snap.add_pod(newest, snap.node_index["n2"])
    assert run_filter(pl, snap, pod) == {"n1": (U, (EXISTING,)), "n2": (S, ())}


# ---- args and events ---------------------------------------------------------------------------
def test_args_defaults() -> None:
    args = ipa.InterPodAffinityArgs.from_mapping(None)
    assert args.hard_pod_affinity_weight == 1
    assert args.ignore_preferred_terms_of_existing_pods is False


@pytest.mark.parametrize(("raw", "field"), [
    ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
    ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
    ({"hardPodAffinityWeight": True}, "hardPodAffinityWeight"),
    ({"hardPodAffinityWeight": "1"}, "hardPodAffinityWeight"),
    ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
    ({"hardPodAffinityWeigth": 1}, "hardPodAffinityWeigth"),
])
def test_args_validation_names_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        ipa.new(raw, None)  # type: ignore[arg-type]
    assert err.value.field == field


def test_events_to_register() -> None:
    events = plugin().events_to_register()
    assert ClusterEvent("Pod", "Add") in events
    assert ClusterEvent("Pod", "Delete") in events
    assert ClusterEvent("Pod", "UpdatePodLabel") in events
    assert ClusterEvent("Node", "Add") in events
    assert ClusterEvent("Node", "Delete") not in events


def test_score_arrays_are_int64() -> None:
    snap = build(THREE, [make_pod(S1, node="node1")])
    pod = make_pod_info(make_pod(S1, affinity=STAY_WITH_S1_IN_REGION))
    state = CycleState()
    pl = plugin()
    assert pl.pre_score(state, pod, snap, snap.node_ids()).ok
    raw = pl.score(state, pod, snap, snap.node_ids())
    assert raw.dtype == np.int64
    assert raw.tolist() == [5, 0, 0]
