"""TaintToleration: the filter's verdict on untolerated NoSchedule/NoExecute taints (upstream
v1.37's reason does not name the taint), the PreferNoSchedule count and its reversed
normalisation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Taint, Toleration
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code, StatusError
from kubeberth.scheduling.plugins import taint_toleration
from kubeberth.scheduling.plugins.taint_toleration import TaintToleration, first_untolerated

from .plugin_builders import cluster, handle, make_node, make_pod, run_filter, run_score


def plugin() -> TaintToleration:
    return taint_toleration.new(None, handle())


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint(key=key, value=value, effect=effect)


def tol(key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> Toleration:
    return Toleration(key=key, value=value, effect=effect, operator=operator)


# ---- filter ------------------------------------------------------------------------------------
def test_untainted_node_passes() -> None:
    snap = cluster(make_node("a"))
    assert run_filter(plugin(), make_pod("p"), snap)["a"].ok


def test_untolerated_taint_is_unresolvable_with_upstreams_reason() -> None:
    snap = cluster(make_node("a", taints=[taint("dedicated", "gpu")]))
    st_ = run_filter(plugin(), make_pod("p"), snap)["a"]
    assert st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st_.reasons == ("node(s) had untolerated taint(s)",)


def test_any_untolerated_hard_taint_rejects_and_prefer_no_schedule_does_not() -> None:
    taints = [taint("a", "1", "PreferNoSchedule"), taint("b", "2"), taint("c", "3", "NoExecute")]
    snap = cluster(make_node("n", taints=taints))
    assert run_filter(plugin(), make_pod("p"), snap)["n"].reasons == \
        ("node(s) had untolerated taint(s)",)
    tolerant = make_pod("q", tolerations=[tol("b", "2")])
    assert run_filter(plugin(), tolerant, snap)["n"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    both = make_pod("r", tolerations=[tol("b", "2"), tol("c", "3")])
    assert run_filter(plugin(), both, snap)["n"].ok


@pytest.mark.parametrize(("toleration", "ok"), [
    (tol("k", "v", "NoSchedule"), True),
    (tol("k", "v"), True),  # empty effect matches every effect
    (tol("k", "other"), False),
    (tol("k", effect="NoSchedule", operator="Exists"), True),
    (tol(operator="Exists"), True),  # empty key with Exists tolerates everything
    (tol("k", "v", "PreferNoSchedule"), False),
    (tol("k", "v", "NoExecute"), False),
    (tol("x", "v"), False),
])
def test_toleration_matching(toleration: Toleration, ok: bool) -> None:
    snap = cluster(make_node("a", taints=[taint("k", "v")]))
    assert run_filter(plugin(), make_pod("p", tolerations=[toleration]), snap)["a"].ok is ok


def test_prefer_no_schedule_never_filters() -> None:
    snap = cluster(make_node("a", taints=[taint("k", "v", "PreferNoSchedule")]))
    assert run_filter(plugin(), make_pod("p"), snap)["a"].ok


def test_every_untolerated_node_shares_one_reason() -> None:
    snap = cluster(*(make_node(f"n{i}", taints=[taint("k", str(i % 2))]) for i in range(6)),
                   make_node("clean"))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids())
    assert res.reasons == [(), ("node(s) had untolerated taint(s)",)]
    assert res.reason_ids.tolist() == [1, 1, 1, 1, 1, 1, 0]
    assert res.codes.tolist() == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE] * 6 + [0]


def test_filter_follows_taint_updates() -> None:
    snap = cluster(make_node("a", taints=[taint("k")]))
    assert not run_filter(plugin(), make_pod("p"), snap)["a"].ok
    snap.update_node(make_node("a"))
    assert run_filter(plugin(), make_pod("p"), snap)["a"].ok


_taints = st.lists(st.builds(Taint, key=st.sampled_from(["a", "b"]),
                             value=st.sampled_from(["", "1"]),
                             effect=st.sampled_from(["NoSchedule", "NoExecute",
                                                     "PreferNoSchedule"])), max_size=3)
_tolerations = st.lists(st.builds(Toleration, key=st.sampled_from(["", "a", "b"]),
                                  value=st.sampled_from(["", "1"]),
                                  effect=st.sampled_from(["", "NoSchedule", "NoExecute",
                                                          "PreferNoSchedule"]),
                                  operator=st.sampled_from(["Equal", "Exists"])), max_size=3)


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(_taints, min_size=1, max_size=6), tolerations=_tolerations)
def test_filter_matches_per_node_reference(nodes: list[list[Taint]],
                                           tolerations: list[Toleration]) -> None:
    snap = cluster(*(make_node(f"n{i}", taints=t) for i, t in enumerate(nodes)))
    verdicts = run_filter(plugin(), make_pod("p", tolerations=tolerations), snap)
    for i, taints in enumerate(nodes):
        bad = first_untolerated(taints, tolerations)
        got = verdicts[f"n{i}"]
        if bad is None:
            assert got.ok
        else:
            assert got.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert got.reasons == ("node(s) had untolerated taint(s)",)


# ---- score -------------------------------------------------------------------------------------
def test_score_counts_intolerable_prefer_no_schedule_taints() -> None:
    snap = cluster(make_node("none"),
                   make_node("one", taints=[taint("a", "1", "PreferNoSchedule")]),
                   make_node("two", taints=[taint("a", "1", "PreferNoSchedule"),
                                            taint("b", "2", "PreferNoSchedule"),
                                            taint("c", "3", "NoSchedule")]))
    assert run_score(plugin(), make_pod("p"), snap) == {"none": 100, "one": 50, "two": 0}


def test_score_only_uses_prefer_no_schedule_tolerations() -> None:
    snap = cluster(make_node("x", taints=[taint("a", "1", "PreferNoSchedule")]), make_node("y"))
    no_schedule = make_pod("p", tolerations=[tol("a", "1", "NoSchedule")])
    assert run_score(plugin(), no_schedule, snap) == {"x": 0, "y": 100}
    any_effect = make_pod("q", tolerations=[tol("a", "1")])
    assert run_score(plugin(), any_effect, snap) == {"x": 100, "y": 100}


def test_raw_score_and_normalisation() -> None:
    snap = cluster(make_node("x", taints=[taint("a", "1", "PreferNoSchedule")]), make_node("y"))
    state, pod, p = CycleState(), make_pod("p"), plugin()
    p.pre_score(state, pod, snap, snap.node_ids())
    raw = p.score(state, pod, snap, snap.node_ids())
    assert raw.tolist() == [1, 0]
    norm = p.normalize_score(state, pod, raw)
    assert norm is not None and norm.tolist() == [0, 100]


def test_score_without_pre_score_state_is_an_error() -> None:
    """A profile that disables PreScore: upstream's Score fails reading its state."""
    snap = cluster(make_node("x"), make_node("y"))
    with pytest.raises(StatusError) as err:
        plugin().score(CycleState(), make_pod("p"), snap, snap.node_ids())
    assert err.value.status.code == Code.ERROR
    assert err.value.status.message() == \
        'failed to read "PreScoreTaintToleration" from cycleState: not found'


# ---- fast paths --------------------------------------------------------------------------------
def test_cluster_without_hard_taints_passes_every_node() -> None:
    snap = cluster(make_node("a"), make_node("b", taints=[taint("s", "1", "PreferNoSchedule")]))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids())
    assert res.codes.tolist() == [0, 0]
    assert res.reasons == [()]


def test_tolerated_hard_taints_pass_without_per_node_work() -> None:
    snap = cluster(make_node("a", taints=[taint("k", "v")]), make_node("b"))
    pod = make_pod("p", tolerations=[tol("k", "v", "NoSchedule")])
    res = plugin().filter(CycleState(), pod, snap, snap.node_ids())
    assert res.codes.tolist() == [0, 0]


def test_score_without_prefer_no_schedule_taints_normalises_to_100() -> None:
    # Upstream scores every node 0 and the reversed normalisation turns that into 100.
    snap = cluster(make_node("a"), make_node("b", taints=[taint("k", "v")]))
    state, pod, p = CycleState(), make_pod("p"), plugin()
    p.pre_score(state, pod, snap, snap.node_ids())
    raw = p.score(state, pod, snap, snap.node_ids())
    assert raw.tolist() == [0, 0]
    norm = p.normalize_score(state, pod, raw)
    assert norm is not None and norm.tolist() == [100, 100]


def test_taint_changes_after_a_call_are_seen() -> None:
    p = plugin()
    snap = cluster(make_node("a"), make_node("b"))
    assert all(v.ok for v in run_filter(p, make_pod("p"), snap).values())
    assert run_score(p, make_pod("p"), snap) == {"a": 100, "b": 100}
    snap.update_node(make_node("b", taints=[taint("k", "v"), taint("s", "1", "PreferNoSchedule")]))
    snap.update_node(make_node("a", taints=[taint("s", "1", "PreferNoSchedule")]))
    verdicts = run_filter(p, make_pod("p"), snap)
    assert verdicts["a"].ok and verdicts["b"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert run_score(p, make_pod("p"), snap) == {"a": 0, "b": 0}
    snap.update_node(make_node("a"))
    assert run_score(p, make_pod("p"), snap) == {"a": 100, "b": 0}


def test_filter_on_a_subset_of_nodes() -> None:
    snap = cluster(make_node("a", taints=[taint("k")]), make_node("b"), make_node("c",
                   taints=[taint("k")]))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids()[1:])
    assert res.codes.tolist() == [0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE]


def test_no_args_and_events() -> None:
    with pytest.raises(InputError):
        taint_toleration.new({"x": 1}, handle())
    assert taint_toleration.new({}, handle()).name == "TaintToleration"
    events = {(e.resource, e.action) for e in plugin().events_to_register()}
    assert events == {("Node", "Add"), ("Node", "UpdateNodeTaint"),
                      ("Pod", "UpdatePodToleration")}
