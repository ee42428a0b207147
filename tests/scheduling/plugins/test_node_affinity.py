"""NodeAffinity: nodeSelector and required terms, PreFilter narrowing by node name, the added
(scheduler-enforced) affinity, preferred-term scoring and the args rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Affinity, NodeSelectorTerm
from kubeberth.api.objects import NodeAffinity as NodeAffinitySpec
from kubeberth.api.selectors import compile_node_selector_term
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import node_affinity
from kubeberth.scheduling.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    PREFERRED,
    REQUIRED,
    NodeAffinity,
    NodeAffinityArgs,
)

from .plugin_builders import cluster, convert, handle, make_node, make_pod, run_filter, run_score


def plugin(args: dict[str, Any] | None = None) -> NodeAffinity:
    return node_affinity.new(args, handle())


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def affinity(required: list[dict[str, Any]] | None = None,
             preferred: list[tuple[int, dict[str, Any]]] | None = None) -> Affinity:
    spec: dict[str, Any] = {}
    if required is not None:
        spec[REQUIRED] = {"nodeSelectorTerms": required}
    if preferred is not None:
        spec[PREFERRED] = [{"weight": w, "preference": t} for w, t in preferred]
    return Affinity(node_affinity=convert(spec, NodeAffinitySpec))


def zones() -> Any:
    return cluster(make_node("a", labels={"zone": "z1", "gpus": "8"}),
                   make_node("b", labels={"zone": "z2", "gpus": "2"}),
                   make_node("c", labels={"gpus": "many"}))


def ok_nodes(verdicts: dict[str, Any]) -> list[str]:
    return [n for n, st_ in verdicts.items() if st_.ok]


# ---- filter ------------------------------------------------------------------------------------
def test_node_selector() -> None:
    verdicts = run_filter(plugin(), make_pod("p", node_selector={"zone": "z2"}), zones())
    assert ok_nodes(verdicts) == ["b"]
    assert verdicts["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdicts["a"].reasons == (ERR_REASON_POD,)


def test_hostname_label_is_present() -> None:
    pod = make_pod("p", node_selector={"kubernetes.io/hostname": "c"})
    assert ok_nodes(run_filter(plugin(), pod, zones())) == ["c"]


@pytest.mark.parametrize(("requirement", "nodes"), [
    (expr("zone", "In", "z1", "z2"), ["a", "b"]),
    (expr("zone", "NotIn", "z1"), ["b", "c"]),
    (expr("zone", "Exists"), ["a", "b"]),
    (expr("zone", "DoesNotExist"), ["c"]),
    (expr("gpus", "Gt", "4"), ["a"]),
    (expr("gpus", "Lt", "4"), ["b"]),
])
def test_operators(requirement: dict[str, Any], nodes: list[str]) -> None:
    pod = make_pod("p", affinity=affinity([{"matchExpressions": [requirement]}]))
    assert ok_nodes(run_filter(plugin(), pod, zones())) == nodes


def test_terms_are_ored_and_expressions_anded() -> None:
    terms = [{"matchExpressions": [expr("zone", "In", "z1"), expr("gpus", "Lt", "4")]},
             {"matchExpressions": [expr("zone", "DoesNotExist")]}]
    pod = make_pod("p", affinity=affinity(terms))
    assert ok_nodes(run_filter(plugin(), pod, zones())) == ["c"]


def test_node_selector_and_affinity_both_apply() -> None:
    pod = make_pod("p", node_selector={"zone": "z1"},
                   affinity=affinity([{"matchExpressions": [expr("zone", "Exists")]}]))
    assert ok_nodes(run_filter(plugin(), pod, zones())) == ["a"]


def test_empty_terms_match_nothing() -> None:
    assert ok_nodes(run_filter(plugin(), make_pod("p", affinity=affinity([{}])), zones())) == []
    assert ok_nodes(run_filter(plugin(), make_pod("q", affinity=affinity([])), zones())) == []


def test_pre_filter_skips_pods_without_constraints() -> None:
    _, st_ = plugin().pre_filter(CycleState(), make_pod("p"), zones())
    assert st_.code == Code.SKIP
    only_preferred = make_pod("q", affinity=affinity(preferred=[(1, {"matchExpressions": [
        expr("zone", "Exists")]})]))
    assert plugin().pre_filter(CycleState(), only_preferred, zones())[1].code == Code.SKIP


def test_pre_filter_narrows_to_named_nodes() -> None:
    terms = [{"matchFields": [expr("metadata.name", "In", "a")]},
             {"matchFields": [expr("metadata.name", "In", "c")],
              "matchExpressions": [expr("gpus", "Exists")]}]
    result, st_ = plugin().pre_filter(CycleState(), make_pod("p", affinity=affinity(terms)),
                                      zones())
    assert st_.ok and result is not None and result.node_names == {"a", "c"}


def test_pre_filter_does_not_narrow_when_a_term_names_no_node() -> None:
    terms = [{"matchFields": [expr("metadata.name", "In", "a")]},
             {"matchExpressions": [expr("zone", "In", "z2")]}]
    pod = make_pod("p", affinity=affinity(terms))
    result, st_ = plugin().pre_filter(CycleState(), pod, zones())
    assert st_.ok and result is None
    assert ok_nodes(run_filter(plugin(), pod, zones())) == ["a", "b"]


def test_pre_filter_conflicting_names() -> None:
    terms = [{"matchFields": [expr("metadata.name", "In", "a"),
                              expr("metadata.name", "In", "b")]}]
    _, st_ = plugin().pre_filter(CycleState(), make_pod("p", affinity=affinity(terms)), zones())
    assert st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st_.reasons == (ERR_REASON_CONFLICT,)


def test_match_fields_not_in() -> None:
    terms = [{"matchFields": [expr("metadata.name", "NotIn", "b")]}]
    assert ok_nodes(run_filter(plugin(), make_pod("p", affinity=affinity(terms)), zones())) == \
        ["a", "c"]


def test_added_affinity_is_checked_first() -> None:
    p = plugin({"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [expr("zone", "Exists")]}]}}})
    verdicts = run_filter(p, make_pod("p", node_selector={"zone": "z1"}), zones())
    assert verdicts["a"].ok
    assert verdicts["b"].reasons == (ERR_REASON_POD,)
    assert verdicts["c"].reasons == (ERR_REASON_ENFORCED,)
    assert run_filter(p, make_pod("q"), zones())["c"].reasons == (ERR_REASON_ENFORCED,)


def test_filter_follows_label_updates() -> None:
    snap = zones()
    pod = make_pod("p", node_selector={"zone": "z3"})
    assert ok_nodes(run_filter(plugin(), pod, snap)) == []
    snap.update_node(make_node("c", labels={"zone": "z3"}))
    assert ok_nodes(run_filter(plugin(), pod, snap)) == ["c"]


def test_filter_without_pre_filter_state() -> None:
    snap = zones()
    pod = make_pod("p", node_selector={"zone": "z1"})
    res = plugin().filter(CycleState(), pod, snap, snap.node_ids())
    unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert res.codes.tolist() == [0, unresolvable, unresolvable]


@pytest.mark.parametrize(("requirement", "field"), [
    (expr("zone", "Near", "z1"), "matchExpressions[0].operator"),
    (expr("zone", "In"), "matchExpressions[0].values"),
    (expr("zone", "Exists", "z1"), "matchExpressions[0].values"),
    (expr("gpus", "Gt", "four"), "matchExpressions[0].values"),
    (expr("gpus", "Gt", "1", "2"), "matchExpressions[0].values"),
])
def test_invalid_pod_requirements_name_the_field(requirement: dict[str, Any], field: str) -> None:
    pod = make_pod("p", affinity=affinity([{"matchExpressions": [requirement]}]))
    with pytest.raises(InputError) as err:
        plugin().pre_filter(CycleState(), pod, zones())
    assert err.value.field == \
        f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[0].{field}"
    assert "default/p" in err.value.message


@pytest.mark.parametrize("requirement", [expr("metadata.uid", "In", "x"),
                                         expr("metadata.name", "In", "a", "b"),
                                         expr("metadata.name", "Exists")])
def test_invalid_match_fields(requirement: dict[str, Any]) -> None:
    pod = make_pod("p", affinity=affinity([{"matchFields": [requirement]}]))
    with pytest.raises(InputError):
        plugin().pre_filter(CycleState(), pod, zones())


_values = st.sampled_from(["1", "5", "x"])
_labels = st.dictionaries(st.sampled_from(["k", "l"]), _values, max_size=2)
_reqs = st.lists(st.builds(lambda key, op, vals: {"key": key, "operator": op, "values": vals},
                           st.sampled_from(["k", "l"]),
                           st.sampled_from(["In", "NotIn"]),
                           st.lists(_values, min_size=1, max_size=2)), min_size=1, max_size=2)


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(_labels, min_size=1, max_size=6), terms=st.lists(_reqs, min_size=1,
                                                                       max_size=2))
def test_filter_matches_per_node_reference(nodes: list[dict[str, str]],
                                           terms: list[list[dict[str, Any]]]) -> None:
    snap = cluster(*(make_node(f"n{i}", labels=lbl) for i, lbl in enumerate(nodes)))
    raw_terms = [{"matchExpressions": t} for t in terms]
    verdicts = run_filter(plugin(), make_pod("p", affinity=affinity(raw_terms)), snap)
    compiled = [compile_node_selector_term(convert(t, NodeSelectorTerm)) for t in raw_terms]
    for i in range(len(nodes)):
        name = f"n{i}"
        labels = snap.labels[snap.node_index[name]]
        assert verdicts[name].ok == any(c(labels, name) for c in compiled)


# ---- score -------------------------------------------------------------------------------------
def test_score_sums_matching_weights() -> None:
    pod = make_pod("p", affinity=affinity(preferred=[
        (2, {"matchExpressions": [expr("zone", "Exists")]}),
        (4, {"matchExpressions": [expr("gpus", "Gt", "4")]}),
        (0, {"matchExpressions": [expr("zone", "In", "z2")]}),  # weight 0 is dropped
        (9, {}),  # an empty preference matches nothing
    ]))
    assert run_score(plugin(), pod, zones()) == {"a": 100, "b": 33, "c": 0}


def test_added_preferred_terms_add_to_the_pods() -> None:
    p = plugin({"addedAffinity": {PREFERRED: [
        {"weight": 3, "preference": {"matchExpressions": [expr("zone", "In", "z2")]}}]}})
    pod = make_pod("p", affinity=affinity(preferred=[
        (2, {"matchExpressions": [expr("zone", "In", "z1")]})]))
    assert run_score(p, pod, zones()) == {"a": 66, "b": 100, "c": 0}
    assert run_score(p, make_pod("q"), zones()) == {"a": 0, "b": 100, "c": 0}


def test_pre_score_skips_without_preferences() -> None:
    assert run_score(plugin(), make_pod("p"), zones()) is None


def test_score_without_pre_score_state() -> None:
    snap = zones()
    pod = make_pod("p", affinity=affinity(preferred=[
        (5, {"matchExpressions": [expr("zone", "In", "z1")]})]))
    assert plugin().score(CycleState(), pod, snap, snap.node_ids()).tolist() == [5, 0, 0]


def test_all_zero_scores_stay_zero() -> None:
    pod = make_pod("p", affinity=affinity(preferred=[
        (5, {"matchExpressions": [expr("zone", "In", "z9")]})]))
    assert run_score(plugin(), pod, zones()) == {"a": 0, "b": 0, "c": 0}


# ---- args and events ---------------------------------------------------------------------------
def test_default_args() -> None:
    assert NodeAffinityArgs.parse(None).added_affinity is None
    assert NodeAffinityArgs.parse({}).compiled() == (None, None)


@pytest.mark.parametrize(("raw", "field"), [
    ({"addedAffinty": {}}, "addedAffinty"),
    ({"addedAffinity": {"required": {}}}, "addedAffinity.required"),
    ({"addedAffinity": {PREFERRED: [{"weight": "high", "preference": {}}]}},
     f"addedAffinity.{PREFERRED}[0].weight"),
    ({"addedAffinity": {PREFERRED: [{"weight": 101, "preference": {"matchExpressions": [
        expr("zone", "Exists")]}}]}}, f"addedAffinity.{PREFERRED}[0].weight"),
    ({"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
        expr("zone", "Near")]}]}}},
     f"addedAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator"),
    ({"addedAffinity": {PREFERRED: [{"weight": 1, "preference": {"matchExpressions": [
        expr("zone", "In")]}}]}},
     f"addedAffinity.{PREFERRED}[0].preference.matchExpressions[0].values"),
])
def test_invalid_args(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        NodeAffinityArgs.parse(raw)
    assert err.value.field == field


def test_events() -> None:
    events = {(e.resource, e.action) for e in plugin().events_to_register()}
    assert events == {("Node", "Add"), ("Node", "UpdateNodeLabel")}
