"""PodTopologySpread: the shared conformance cases, cases transcribed from upstream's
filtering_test.go and scoring_test.go, the preemption extensions, defaulting and args."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
import yaml
from tests.paths import SHARED

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import ClusterEvent
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import pod_topology_spread as pts
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info

CASES = SHARED / "conformance" / \
    "kube-scheduler" / "cases.yaml"

EXISTS_FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
EXISTS_BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
FOO = {"foo": ""}
HOST = "kubernetes.io/hostname"


# ---- builders ----------------------------------------------------------------------------------
def make_node(name: str, labels: dict[str, str] | None = None,
              taints: list[dict[str, str]] | None = None) -> Node:
    return msgspec.convert({"metadata": {"name": name, "labels": labels or {}},
                            "spec": {"taints": taints or []}}, Node)


def make_pod(name: str, labels: dict[str, str] | None = None, *, node: str = "",
             namespace: str = "default", spec: dict[str, Any] | None = None,
             meta: dict[str, Any] | None = None) -> Pod:
    return msgspec.convert({
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                     **(meta or {})},
        "spec": {"nodeName": node, **(spec or {})},
    }, Pod)


def spread(max_skew: int, key: str, when: str, selector: dict[str, Any] | None,
           **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                         **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def incoming(labels: dict[str, str], *constraints: dict[str, Any],
             **spec: Any) -> PodInfo:
    return make_pod_info(make_pod("p", labels, spec={"topologySpreadConstraints":
                                                     list(constraints), **spec}))


def build(nodes: list[Node], pods: list[Pod]) -> ClusterState:
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)
    for p in pods:
        snap.add_pod(make_pod_info(p), snap.node_index[p.spec.node_name])
    return snap


def pods_on(spec: dict[str, int], labels: dict[str, str] | None = None,
            namespace: str = "default") -> list[Pod]:
    """``{"node-a": 2}`` -> two pods on node-a carrying ``labels`` (foo by default)."""
    return [make_pod(f"p-{node}-{namespace}-{i}", FOO if labels is None else labels, node=node,
                     namespace=namespace)
            for node, count in spec.items() for i in range(count)]


def abxy(key: str = "zone") -> list[Node]:
    """The four nodes upstream tests use: node-a/b in zone1, node-x/y in zone2."""
    return [make_node(n, {"zone": z, "node": n}) for n, z in
            (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"),
             ("node-y", "zone2"))]


def run_filter(plugin: pts.PodTopologySpread, snap: ClusterState,
               pod: PodInfo) -> dict[str, Code]:
    state = CycleState()
    _, st = plugin.pre_filter(state, pod, snap)
    assert st.code == Code.SUCCESS, st
    nodes = snap.node_ids()
    res = plugin.filter(state, pod, snap, nodes)
    return {snap.node_names[n]: Code(int(c)) for n, c in zip(nodes, res.codes, strict=True)}


def run_score(plugin: pts.PodTopologySpread, snap: ClusterState, pod: PodInfo,
              candidates: list[str]) -> dict[str, int]:
    state = CycleState()
    nodes = np.array([snap.node_index[n] for n in candidates], dtype=np.int64)
    st = plugin.pre_score(state, pod, snap, nodes)
    assert st.code == Code.SUCCESS, st
    raw = plugin.score(state, pod, snap, nodes)
    norm = plugin.normalize_score(state, pod, raw)
    assert norm is not None
    return dict(zip(candidates, (int(s) for s in norm), strict=True))


def default_plugin(**args: Any) -> pts.PodTopologySpread:
    return pts.new(args or None, None)  # type: ignore[arg-type]


S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ---- conformance -------------------------------------------------------------------------------
def _conformance_cases() -> list[dict[str, Any]]:
    if not CASES.exists():
        return []
    with CASES.open() as fh:
        doc = yaml.load(fh, Loader=yaml.CSafeLoader)
    return [c for c in doc["cases"] if c["plugin"] == pts.NAME]


def _case_expect(case: dict[str, Any]) -> dict[str, Any]:
    expect: dict[str, Any] = case["expect"]
    by_version = expect.get("by_version")
    if by_version:
        for version in ("newest-upstream", "current-upstream"):
            if version in by_version:
                return dict(by_version[version])
    return expect


_POD_KEYS = {"labels", "namespace", "topologySpreadConstraints", "nodeSelector", "tolerations"}


@pytest.mark.skipif(not CASES.exists(), reason="shared conformance cases are not checked out")
@pytest.mark.parametrize("case", _conformance_cases(), ids=lambda c: c["id"])
def test_conformance_case(case: dict[str, Any]) -> None:
    unknown = set(case["pod"]) - _POD_KEYS
    if unknown:
        pytest.skip(f"case uses pod fields {sorted(unknown)} that this runner does not translate")
    nodes = [make_node(n["name"], n.get("labels")) for n in case["nodes"]]
    existing = [make_pod(p["name"], p.get("labels"), node=p["node"],
                         namespace=p.get("namespace", "default"))
                for p in case["existing_pods"]]
    snap = build(nodes, existing)
    spec = {k: v for k, v in case["pod"].items() if k not in ("labels", "namespace")}
    pod = make_pod_info(make_pod("incoming", case["pod"].get("labels"),
                                 namespace=case["pod"].get("namespace", "default"), spec=spec))
    plugin = pts.new(case["config"] or None, None)  # type: ignore[arg-type]
    expect = _case_expect(case)
    if case["extension_point"] == "filter":
        got = run_filter(plugin, snap, pod)
        by_label = {code.label: code for code in Code}
        want = {name: by_label[v["code"]] for name, v in expect["verdicts"].items()}
        assert got == want
    elif case["extension_point"] == "score":
        assert run_score(plugin, snap, pod, list(expect["scores"])) == expect["scores"]
    else:
        pytest.skip(f"extension point {case['extension_point']} is not run here")


def test_conformance_file_has_pod_topology_spread_cases() -> None:
    if not CASES.exists():
        pytest.skip("shared conformance cases are not checked out")
    assert {c["id"] for c in _conformance_cases()} >= {"pts-filter-01", "pts-filter-02",
                                                       "pts-filter-04"}


# ---- Filter (upstream TestSingleConstraint / TestMultipleConstraints) --------------------------
def test_no_existing_pods_all_fit() -> None:
    snap = build(abxy(), [])
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO))
    assert set(run_filter(default_plugin(), snap, pod).values()) == {S}


def test_incoming_pod_not_matching_itself_fits_everywhere() -> None:
    snap = build(abxy(), [])
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_BAR))
    assert set(run_filter(default_plugin(), snap, pod).values()) == {S}


def test_zones_spread_3_3_all_fit() -> None:
    snap = build(abxy(), pods_on({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO))
    assert set(run_filter(default_plugin(), snap, pod).values()) == {S}


def test_node_without_zone_label_is_unresolvable() -> None:
    nodes = abxy()
    nodes[1] = make_node("node-b", {"zon": "zone1", "node": "node-b"})
    snap = build(nodes, pods_on({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}))
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": S, "node-b": UU, "node-x": U, "node-y": U}


def test_all_nodes_missing_the_key() -> None:
    snap = build([make_node("node-a", {"zone": "zone1"}), make_node("node-x", {"zone": "zone2"})],
                 [])
    pod = incoming(FOO, spread(1, "rack", "DoNotSchedule", EXISTS_FOO))
    state = CycleState()
    plugin = default_plugin()
    _, st = plugin.pre_filter(state, pod, snap)
    assert st.ok
    out = plugin.filter(state, pod, snap, snap.node_ids())
    assert [Code(int(c)) for c in out.codes] == [UU, UU]
    assert out.status(0, pts.NAME).reasons == (pts.ERR_REASON_NODE_LABEL_NOT_MATCH,)


def test_pod_not_matching_itself_on_nodes_2_1_0_3() -> None:
    snap = build(abxy(), pods_on({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming({"bar": ""}, spread(1, "node", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": U, "node-b": S, "node-x": S, "node-y": U}


def test_required_node_affinity_limits_counted_domains() -> None:
    snap = build(abxy(), pods_on({"node-a": 2, "node-b": 1, "node-y": 3}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}
    pod = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO), affinity=affinity)
    # Only node-a (2) and node-y (3) are domains; node-b/x would be removed by NodeAffinity.
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": S, "node-b": S, "node-x": S, "node-y": U}


def test_terminating_pods_do_not_count() -> None:
    nodes = [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"node": "node-b"})]
    pods = [make_pod("p-a", FOO, node="node-a", meta={"deletionTimestamp": "2024-01-01T00:00:00Z"}),
            make_pod("p-b", FOO, node="node-b")]
    snap = build(nodes, pods)
    pod = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == {"node-a": S, "node-b": U}


def test_two_constraints_intersect() -> None:
    snap = build(abxy(), pods_on({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO),
                   spread(1, "node", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": U, "node-b": U, "node-x": S, "node-y": U}


def test_first_failing_constraint_decides_the_code() -> None:
    # node-b lacks "rack" (so its own pods count nowhere) but already fails the zone
    # constraint, which comes first; node-d lacks "rack" and passes the zone constraint.
    nodes = [make_node("node-a", {"zone": "zone1", "rack": "r1"}),
             make_node("node-b", {"zone": "zone2"}),
             make_node("node-c", {"zone": "zone2", "rack": "r2"}),
             make_node("node-d", {"zone": "zone1"})]
    snap = build(nodes, pods_on({"node-b": 5, "node-c": 2}))
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO),
                   spread(1, "rack", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": S, "node-b": U, "node-c": U, "node-d": UU}


def test_min_domains_treats_global_minimum_as_zero() -> None:
    snap = build(abxy(), pods_on({"node-a": 1, "node-x": 1}))
    plain = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO))
    assert set(run_filter(default_plugin(), snap, plain).values()) == {S}
    strict = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO, minDomains=3))
    assert set(run_filter(default_plugin(), snap, strict).values()) == {U}
    enough = incoming(FOO, spread(1, "zone", "DoNotSchedule", EXISTS_FOO, minDomains=2))
    assert set(run_filter(default_plugin(), snap, enough).values()) == {S}


def test_node_taints_policy_honor_drops_tainted_domains() -> None:
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    nodes = [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"node": "node-b"}),
             make_node("node-c", {"node": "node-c"}, taint)]
    snap = build(nodes, pods_on({"node-a": 1, "node-b": 1}))
    ignore = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, ignore) == {"node-a": U, "node-b": U, "node-c": S}
    honor = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO,
                                 nodeTaintsPolicy="Honor"))
    assert run_filter(default_plugin(), snap, honor) == {"node-a": S, "node-b": S, "node-c": S}
    tolerating = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO,
                                      nodeTaintsPolicy="Honor"),
                          tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert run_filter(default_plugin(), snap, tolerating) == {
        "node-a": U, "node-b": U, "node-c": S}


def test_match_label_keys_narrow_the_selector() -> None:
    snap = build(abxy(), pods_on({"node-a": 2}, {"foo": "", "rev": "1"})
                 + pods_on({"node-x": 1}, {"foo": "", "rev": "2"}))
    pod = incoming({"foo": "", "rev": "2"},
                   spread(1, "zone", "DoNotSchedule", EXISTS_FOO, matchLabelKeys=["rev"]))
    # Only rev=2 pods count: zone1 0, zone2 1 -> zone2 is at the limit.
    assert run_filter(default_plugin(), snap, pod) == {
        "node-a": S, "node-b": S, "node-x": U, "node-y": U}


def test_empty_selector_counts_no_pods_but_matches_itself() -> None:
    snap = build(abxy(), pods_on({"node-a": 5}))
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", {}))
    assert set(run_filter(default_plugin(), snap, pod).values()) == {S}


def test_pre_filter_skips_without_hard_constraints() -> None:
    snap = build(abxy(), [])
    pod = incoming(FOO, spread(1, "zone", "ScheduleAnyway", EXISTS_FOO))
    _, st = default_plugin().pre_filter(CycleState(), pod, snap)
    assert st.code == Code.SKIP


def test_bad_selector_is_an_error_status() -> None:
    snap = build(abxy(), [])
    bad = {"matchExpressions": [{"key": "foo", "operator": "Near"}]}
    pod = incoming(FOO, spread(1, "zone", "DoNotSchedule", bad))
    _, st = default_plugin().pre_filter(CycleState(), pod, snap)
    assert st.code == Code.ERROR
    assert "spec.topologySpreadConstraints[0].labelSelector" in st.message()


def _naive_filter(snap: ClusterState, pod: Pod, max_skew: int, key: str) -> dict[str, Code]:
    """Upstream's per-node algorithm, written the slow way, for one hard constraint."""
    counts: dict[str, int] = {}
    for n in snap.node_ids():
        value = snap.labels[n].get(key)
        if value is None:
            continue
        counts.setdefault(value, 0)
        for pi in snap.pods_on_node[n].values():
            if pi.namespace == "default" and "foo" in pi.labels:
                counts[value] += 1
    low = min(counts.values()) if counts else 0
    out = {}
    for n in snap.node_ids():
        value = snap.labels[n].get(key)
        if value is None:
            out[snap.node_names[n]] = UU
        else:
            out[snap.node_names[n]] = U if counts[value] + 1 - low > max_skew else S
    return out


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_filter_matches_naive_per_node_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = []
    for i in range(30):
        labels = {"rack": f"r{rng.integers(0, 6)}"} if rng.random() < 0.9 else {}
        nodes.append(make_node(f"n{i}", labels))
    pods = []
    for j in range(120):
        host = f"n{rng.integers(0, 30)}"
        labels = FOO if rng.random() < 0.7 else {"other": ""}
        ns = "default" if rng.random() < 0.8 else "elsewhere"
        pods.append(make_pod(f"p{j}", labels, node=host, namespace=ns))
    snap = build(nodes, pods)
    skew = int(rng.integers(1, 4))
    pod = incoming(FOO, spread(skew, "rack", "DoNotSchedule", EXISTS_FOO))
    assert run_filter(default_plugin(), snap, pod) == _naive_filter(snap, pod.pod, skew, "rack")


# ---- PreFilterExtensions -----------------------------------------------------------------------
def test_add_and_remove_pod_update_a_clone_only() -> None:
    snap = build(abxy(), pods_on({"node-a": 2, "node-b": 1, "node-y": 3}))
    plugin = default_plugin()
    pod = incoming(FOO, spread(1, "node", "DoNotSchedule", EXISTS_FOO))
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    nodes = snap.node_ids()

    def codes(st: CycleState) -> list[Code]:
        return [Code(int(c)) for c in plugin.filter(st, pod, snap, nodes).codes]

    assert codes(state) == [U, U, S, U]
    what_if = state.clone()
    a = snap.node_index["node-a"]
    for pi in list(snap.pods_on_node[a].values()):
        assert plugin.remove_pod(what_if, pod, pi, a, snap).ok
    # 0/1/0/3: node-a and node-x are now at the minimum, node-b one above it.
    assert codes(what_if) == [S, U, S, U]
    assert codes(state) == [U, U, S, U]
    x = snap.node_index["node-x"]
    plugin.add_pod(what_if, pod, make_pod_info(make_pod("new", FOO)), x, snap)
    assert codes(what_if) == [S, U, U, U]
    plugin.add_pod(what_if, pod, make_pod_info(make_pod("ns", FOO, namespace="other")), a, snap)
    assert codes(what_if) == [S, U, U, U]


# ---- Score (upstream TestPodTopologySpreadScore) -----------------------------------------------
def hosts(*names: str) -> list[Node]:
    return [make_node(n, {HOST: n}) for n in names]


@pytest.mark.parametrize(("skew", "existing", "want"), [
    (1, {}, {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
    (1, {"node-a": 2, "node-b": 1, "node-d": 3},
     {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
    (2, {"node-a": 2, "node-b": 1, "node-d": 3},
     {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    (3, {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1},
     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
])
def test_score_one_constraint_on_hostname(skew: int, existing: dict[str, int],
                                          want: dict[str, int]) -> None:
    snap = build(hosts("node-a", "node-b", "node-c", "node-d"), pods_on(existing))
    pod = incoming(FOO, spread(skew, HOST, "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, list(want)) == want


def test_score_null_selector_gives_everyone_100() -> None:
    snap = build(hosts("node-a", "node-b", "node-c", "node-d"),
                 pods_on({"node-a": 2, "node-b": 1, "node-d": 3}))
    pod = incoming(FOO, spread(1, HOST, "ScheduleAnyway", None))
    assert set(run_score(default_plugin(), snap, pod,
                         ["node-a", "node-b", "node-c", "node-d"]).values()) == {100}


def test_score_only_one_candidate() -> None:
    snap = build(hosts("node-a", "node-b"), pods_on({"node-a": 2, "node-b": 1}))
    pod = incoming(FOO, spread(1, HOST, "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a"]) == {"node-a": 100}


def test_score_three_of_four_candidates() -> None:
    snap = build(hosts("node-a", "node-b", "node-x", "node-y"),
                 pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}))
    pod = incoming(FOO, spread(1, HOST, "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33, "node-b": 83, "node-x": 100}


def test_score_candidate_without_the_key_scores_zero() -> None:
    # Upstream uses the hostname key with node-b lacking it; every kubeberth node carries a
    # hostname label, so the same numbers are checked with a plain "node" key.
    nodes = [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"n": "node-b"}),
             make_node("node-x", {"node": "node-x"}), make_node("node-y", {"node": "node-y"})]
    snap = build(nodes, pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}))
    pod = incoming(FOO, spread(1, "node", "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 16, "node-b": 0, "node-x": 100}


def zone_hosts() -> list[Node]:
    return [make_node(n, {"zone": z, HOST: n}) for n, z in
            (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"),
             ("node-y", "zone2"))]


def test_score_zone_three_of_four_candidates() -> None:
    snap = build(zone_hosts(), pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}))
    pod = incoming(FOO, spread(1, "zone", "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 75, "node-b": 75, "node-x": 100}


def test_score_zone_and_node_two_candidates() -> None:
    snap = build(zone_hosts(), pods_on({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}))
    pod = incoming(FOO, spread(1, "zone", "ScheduleAnyway", EXISTS_FOO),
                   spread(1, HOST, "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-x"]) == {
        "node-a": 100, "node-x": 63}


@pytest.mark.parametrize(("existing", "candidates", "want"), [
    # P{foo} on a, P{foo,bar} on b, P{foo} and P{bar} on y.
    ([("node-a", {"foo": ""}), ("node-b", {"foo": "", "bar": ""}), ("node-y", {"foo": ""}),
      ("node-y", {"bar": ""})], ["node-a", "node-b", "node-x", "node-y"],
     {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
    ([("node-b", {"bar": ""}), ("node-x", {"foo": ""}), ("node-y", {"foo": "", "bar": ""})],
     ["node-a", "node-b", "node-x", "node-y"],
     {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
    ([("node-a", {"foo": ""}), ("node-b", {"foo": "", "bar": ""}), ("node-y", {"foo": ""}),
      ("node-y", {"bar": ""})], ["node-a", "node-b", "node-x"],
     {"node-a": 50, "node-b": 25, "node-x": 100}),
])
def test_score_two_constraints_with_different_selectors(
        existing: list[tuple[str, dict[str, str]]], candidates: list[str],
        want: dict[str, int]) -> None:
    pods = [make_pod(f"e{i}", labels, node=n) for i, (n, labels) in enumerate(existing)]
    snap = build(zone_hosts(), pods)
    pod = incoming({"foo": "", "bar": ""}, spread(1, "zone", "ScheduleAnyway", EXISTS_FOO),
                   spread(1, HOST, "ScheduleAnyway", EXISTS_BAR))
    assert run_score(default_plugin(), snap, pod, candidates) == want


def test_score_other_namespaces_and_terminating_pods_do_not_count() -> None:
    snap = build(hosts("node-a", "node-b"),
                 pods_on({"node-a": 1}, namespace="ns1") + pods_on({"node-a": 1, "node-b": 2}))
    pod = incoming(FOO, spread(1, HOST, "ScheduleAnyway", EXISTS_FOO))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b"]) == {
        "node-a": 100, "node-b": 33}
    gone = [make_pod("p-a", FOO, node="node-a", meta={"deletionTimestamp": "2024-01-01T00:00:00Z"}),
            make_pod("p-b", FOO, node="node-b")]
    snap = build(hosts("node-a", "node-b"), gone)
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b"]) == {
        "node-a": 100, "node-b": 0}


def test_score_min_domains_has_no_effect_when_soft() -> None:
    nodes = [make_node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
    snap = build(nodes, pods_on({"node-a": 2, "node-b": 2, "node-c": 1}))
    pod = incoming(FOO, spread(2, "node", "ScheduleAnyway", EXISTS_FOO, minDomains=10))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-c"]) == {
        "node-a": 75, "node-b": 75, "node-c": 100}


def _abc_with_foo() -> ClusterState:
    nodes = [make_node("node-a", {"node": "node-a", "foo": ""}),
             make_node("node-b", {"node": "node-b", "foo": ""}),
             make_node("node-c", {"node": "node-c"})]
    return build(nodes, pods_on({"node-a": 2, "node-b": 1, "node-c": 1}))


@pytest.mark.parametrize(("policy", "want"), [
    (None, {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("Ignore", {"node-a": 66, "node-b": 100, "node-c": 100}),
])
@pytest.mark.parametrize("how", ["nodeSelector", "nodeAffinity"])
def test_score_node_affinity_policy(policy: str | None, want: dict[str, int], how: str) -> None:
    extra = {} if policy is None else {"nodeAffinityPolicy": policy}
    if how == "nodeSelector":
        spec: dict[str, Any] = {"nodeSelector": {"foo": ""}}
    else:
        spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "foo", "operator": "In", "values": [""]}]}]}}}}
    pod = incoming(FOO, spread(1, "node", "ScheduleAnyway", EXISTS_FOO, **extra), **spec)
    assert run_score(default_plugin(), _abc_with_foo(), pod, list(want)) == want


@pytest.mark.parametrize(("policy", "want"), [
    ("Honor", {"node-a": 0, "node-b": 33, "node-c": 100}),
    (None, {"node-a": 66, "node-b": 100, "node-c": 100}),
])
def test_score_node_taints_policy(policy: str | None, want: dict[str, int]) -> None:
    taint = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    nodes = [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"node": "node-b"}),
             make_node("node-c", {"node": "node-c"}, taint)]
    snap = build(nodes, pods_on({"node-a": 2, "node-b": 1, "node-c": 1}))
    extra = {} if policy is None else {"nodeTaintsPolicy": policy}
    pod = incoming(FOO, spread(1, "node", "ScheduleAnyway", EXISTS_FOO, **extra))
    assert run_score(default_plugin(), snap, pod, list(want)) == want


@pytest.mark.parametrize("selectors", ["empty", "non-empty"])
def test_score_match_label_keys(selectors: str) -> None:
    four = [make_node(n, {"zone": z, HOST: n}) for n, z in
            (("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2"))]
    if selectors == "empty":
        pod = incoming({"foo": "", "bar": ""},
                       spread(1, "zone", "ScheduleAnyway", {}, matchLabelKeys=["foo"]),
                       spread(1, HOST, "ScheduleAnyway", {}, matchLabelKeys=["bar"]))
        existing = [("node-a", {"foo": ""}), ("node-b", {"foo": "", "bar": ""}),
                    ("node-c", {"foo": ""}), ("node-c", {"bar": ""})]
    else:
        pod = incoming({"foo": "", "bar": "", "baz": ""},
                       spread(1, "zone", "ScheduleAnyway", EXISTS_FOO),
                       spread(1, HOST, "ScheduleAnyway", EXISTS_BAR, matchLabelKeys=["baz"]))
        existing = [("node-a", {"foo": ""}), ("node-b", {"foo": "", "bar": "", "baz": ""}),
                    ("node-c", {"foo": ""}), ("node-c", {"bar": ""}),
                    ("node-c", {"bar": "", "baz": ""})]
    pods = [make_pod(f"e{i}", labels, node=n) for i, (n, labels) in enumerate(existing)]
    snap = build(four, pods)
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-c", "node-d"]) == {
        "node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}


def test_score_system_defaults_for_a_replicaset_pod() -> None:
    # Upstream selects these pods through a Service; here the ReplicaSet owner provides the
    # selector. Nodes carry no zone label, so only the hostname default (maxSkew 3) scores.
    owner = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                  "controller": True}]}
    snap = build(hosts("node-a", "node-b", "node-c", "node-d"),
                 pods_on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}))
    pod = make_pod_info(make_pod("p", FOO, meta=owner))
    assert run_score(default_plugin(), snap, pod, ["node-a", "node-b", "node-c", "node-d"]) == {
        "node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_system_defaults_select_by_each_pods_own_labels() -> None:
    # One plugin instance scores pods of two ReplicaSets: the defaults are shared, the
    # selector comes from each pod.
    owner = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                  "controller": True}]}
    snap = build(hosts("node-a", "node-b"), pods_on({"node-a": 2}, {"app": "x"}))
    plugin = default_plugin()
    candidates = ["node-a", "node-b"]
    x = make_pod_info(make_pod("px", {"app": "x"}, meta=owner))
    y = make_pod_info(make_pod("py", {"app": "y"}, meta=owner))
    assert run_score(plugin, snap, x, candidates) == {"node-a": 40, "node-b": 100}
    assert run_score(plugin, snap, y, candidates) == {"node-a": 100, "node-b": 100}
    assert run_score(plugin, snap, x, candidates) == {"node-a": 40, "node-b": 100}


def test_pre_score_skips() -> None:
    snap = build(hosts("node-a", "node-b"), [])
    nodes = snap.node_ids()
    no_soft = incoming(FOO, spread(1, HOST, "DoNotSchedule", EXISTS_FOO))
    assert default_plugin().pre_score(CycleState(), no_soft, snap, nodes).code == Code.SKIP
    ownerless = make_pod_info(make_pod("p", FOO))
    assert default_plugin().pre_score(CycleState(), ownerless, snap, nodes).code == Code.SKIP
    listed = default_plugin(defaultingType="List")
    owned = make_pod_info(make_pod("p", FOO, meta={"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}]}))
    assert listed.pre_score(CycleState(), owned, snap, nodes).code == Code.SKIP
    assert default_plugin().pre_score(CycleState(), owned, ClusterState(),
                                      np.zeros(0, dtype=np.int64)).code == Code.SKIP


def test_system_default_weights_count_nodes_without_zone_as_one_zone() -> None:
    # Upstream TestPreScoreStateEmptyNodes "system default constraints and a replicaset":
    # hostname weight log(4 + 2), zone weight log(2 + 2) (mars and the label-less "").
    owner = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                  "controller": True}]}
    zone = pts.LABEL_TOPOLOGY_ZONE
    nodes = [make_node("node-a", {zone: "mars"}), make_node("node-b", {zone: "mars"}),
             make_node("node-c"), make_node("node-d")]
    snap = build(nodes, [])
    pod = make_pod_info(make_pod("p", {"foo": "tar", "baz": "sup"}, meta=owner))
    state = CycleState()
    assert default_plugin().pre_score(state, pod, snap, snap.node_ids()).ok
    s = state.get(pts.PRE_SCORE_STATE_KEY)
    assert [c.key for c in s.constraints] == [HOST, zone]
    assert [c.max_skew for c in s.constraints] == [3, 5]
    assert s.weights == [pytest.approx(np.log(6)), pytest.approx(np.log(4))]
    assert not s.ignored.any()


def _naive_scores(snap: ClusterState, candidates: list[str],
                  constraints: list[tuple[str, int]]) -> dict[str, int]:
    """Upstream PreScore/Score/NormalizeScore node by node, for explicit soft constraints
    selecting ``foo`` in the default namespace (no inclusion policies in play)."""
    def matching(n: int) -> int:
        return sum(1 for pi in snap.pods_on_node[n].values()
                   if pi.namespace == "default" and "foo" in pi.labels)

    keys = [k for k, _ in constraints]
    idx = [snap.node_index[c] for c in candidates]
    ignored = {n for n in idx if any(k not in snap.labels[n] for k in keys)}
    weights, counts = [], []
    for key, _ in constraints:
        values = {snap.labels[n][key] for n in idx if n not in ignored}
        size = len(idx) - len(ignored) if key == HOST else len(values)
        weights.append(float(np.log(size + 2)))
        per_value: dict[str, int] = dict.fromkeys(values, 0)
        for n in snap.node_ids():
            if all(k in snap.labels[n] for k in keys) and snap.labels[n][key] in per_value:
                per_value[snap.labels[n][key]] += matching(n)
        counts.append(per_value)
    raw = {}
    for n in idx:
        if n in ignored:
            raw[n] = 0
            continue
        total = 0.0
        for (key, skew), w, per_value in zip(constraints, weights, counts, strict=True):
            if key in snap.labels[n]:
                cnt = matching(n) if key == HOST else per_value[snap.labels[n][key]]
                total += cnt * w + (skew - 1)
        raw[n] = int(np.floor(total + 0.5))
    valid = [raw[n] for n in idx if n not in ignored]
    low, high = (min(valid), max(max(valid), 0)) if valid else (0, 0)
    out = {}
    for n in idx:
        if n in ignored:
            out[snap.node_names[n]] = 0
        elif high == 0:
            out[snap.node_names[n]] = 100
        else:
            out[snap.node_names[n]] = 100 * (high + low - raw[n]) // high
    return out


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_score_matches_naive_per_node_loop(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    nodes = []
    for i in range(25):
        labels = {"zone": f"z{rng.integers(0, 4)}"} if rng.random() < 0.85 else {}
        nodes.append(make_node(f"n{i}", labels))
    pods = [make_pod(f"p{j}", FOO if rng.random() < 0.7 else {"other": ""},
                     node=f"n{rng.integers(0, 25)}",
                     namespace="default" if rng.random() < 0.85 else "elsewhere")
            for j in range(90)]
    snap = build(nodes, pods)
    constraints = [("zone", int(rng.integers(1, 4))), (HOST, int(rng.integers(1, 4)))]
    pod = incoming(FOO, *(spread(s, k, "ScheduleAnyway", EXISTS_FOO) for k, s in constraints))
    candidates = [f"n{i}" for i in range(25) if rng.random() < 0.7]
    assert run_score(default_plugin(), snap, pod, candidates) == _naive_scores(
        snap, candidates, constraints)


# ---- defaults, args, events --------------------------------------------------------------------
def test_default_selector_from_owner() -> None:
    ss = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                               "controller": True}]}
    pod = make_pod("db-0", {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0",
                            "apps.kubernetes.io/pod-index": "0",
                            "controller-revision-hash": "abc"}, meta=ss)
    assert pts.default_selector(pod) == {"app": "db"}
    job = {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                "controller": True}]}
    assert pts.default_selector(make_pod("j", {"app": "x"}, meta=job)) == {}
    not_controller = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": "rs"}]}
    assert pts.default_selector(make_pod("r", {"app": "x"}, meta=not_controller)) == {}


def test_list_default_constraints_apply_to_owned_pods_only() -> None:
    plugin = default_plugin(defaultingType="List", defaultConstraints=[
        {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}])
    rc = {"ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                               "name": "rc", "controller": True}]}
    snap = build(abxy(), pods_on({"node-a": 1, "node-b": 1, "node-x": 1}, {"app": "web"}))
    owned = make_pod_info(make_pod("p", {"app": "web"}, meta=rc))
    assert run_filter(plugin, snap, owned) == {
        "node-a": U, "node-b": U, "node-x": U, "node-y": S}
    _, st = plugin.pre_filter(CycleState(), make_pod_info(make_pod("q", {"app": "web"})), snap)
    assert st.code == Code.SKIP


def test_args_defaults() -> None:
    args = pts.PodTopologySpreadArgs.from_mapping(None)
    assert args.defaulting_type == pts.SYSTEM_DEFAULTING
    assert args.default_constraints == ()
    assert [(c.topology_key, c.max_skew) for c in pts.SYSTEM_DEFAULT_CONSTRAINTS] == [
        (HOST, 3), (pts.LABEL_TOPOLOGY_ZONE, 5)]


@pytest.mark.parametrize(("raw", "field"), [
    ({"defaultingType": "Sometimes"}, "defaultingType"),
    ({"defaultingType": "System", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultingType"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].topologyKey"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "bad key!", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].topologyKey"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]},
     "defaultConstraints[0].whenUnsatisfiable"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"a": "b"}}}]},
     "defaultConstraints[0].labelSelector"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[1]"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": "one"}]},
     "defaultConstraints[0]"),
    ({"defaultConstraint": []}, "defaultConstraint"),
])
def test_args_validation_names_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        pts.new(raw, None)  # type: ignore[arg-type]
    assert err.value.field == field


def test_args_accept_prefixed_topology_keys() -> None:
    args = pts.PodTopologySpreadArgs.from_mapping({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "ScheduleAnyway"}]})
    assert args.default_constraints[0].topology_key == "topology.kubernetes.io/zone"


def test_events_to_register() -> None:
    events = default_plugin().events_to_register()
    assert ClusterEvent("Pod", "Add") in events
    assert ClusterEvent("Pod", "Delete") in events
    assert ClusterEvent("Node", "UpdateNodeLabel") in events
    assert ClusterEvent("Node", "UpdateNodeTaint") in events
