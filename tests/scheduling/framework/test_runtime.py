from collections import Counter

import msgspec
import numpy as np
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.runtime import (
    FilterOutcome,
    Framework,
    num_feasible_nodes_to_find,
)
from kubeberth.scheduling.framework.status import FilterResult
from kubeberth.state.cluster import ClusterState, make_pod_info

from .fakes import registry


def profile(**points: PluginSet) -> Profile:
    return Profile(plugins=dict(points))


def multi(*names: str, weights: dict[str, int] | None = None) -> PluginSet:
    return PluginSet(enabled=[PluginRef(n, (weights or {}).get(n, 0)) for n in names])


def cluster(n: int) -> ClusterState:
    s = ClusterState()
    for i in range(n):
        s.add_node(msgspec.convert({"metadata": {"name": f"n{i}"}}, Node))
    return s


def fw_for(prof: Profile, snap: ClusterState | None = None) -> Framework:
    handle = Handle(snap or cluster(1), clock=lambda: 0.0, rng=np.random.default_rng(0))
    return Framework(prof, registry(), handle)


def test_multipoint_expands_to_every_implemented_point() -> None:
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "EvenOnly", "SlotScore")))
    assert [p.name for p in fw.filter] == ["EvenOnly"]
    assert [p.name for p in fw.score] == ["SlotScore"]
    assert fw.queue_sort.name == "Sort"
    assert fw.score_weights == {"SlotScore": 1}  # weight 0 means 1


def test_specific_point_disables_and_overrides_order_and_weight() -> None:
    fw = fw_for(profile(
        multiPoint=multi("Sort", "Binder", "EvenOnly", "NotZero", "SlotScore", "Flat"),
        filter=PluginSet(disabled=["EvenOnly"]),
        score=PluginSet(enabled=[PluginRef("Flat", 5)]),
    ))
    assert [p.name for p in fw.filter] == ["NotZero"]
    assert [p.name for p in fw.score] == ["Flat", "SlotScore"]
    assert fw.score_weights["Flat"] == 5


def test_star_disables_all_multipoint_plugins_at_a_point() -> None:
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "EvenOnly", "NotZero"),
                        filter=PluginSet(enabled=[PluginRef("NotZero")], disabled=["*"])))
    assert [p.name for p in fw.filter] == ["NotZero"]


def test_unknown_plugin_names_profile_field() -> None:
    with pytest.raises(InputError) as err:
        fw_for(profile(multiPoint=multi("Sort", "Binder", "Nope")))
    assert "unknown plugin 'Nope'" in str(err.value)
    assert err.value.field == "profiles[0].plugins"


def test_plugin_at_wrong_point_is_rejected() -> None:
    with pytest.raises(InputError) as err:
        fw_for(profile(multiPoint=multi("Sort", "Binder"),
                       score=PluginSet(enabled=[PluginRef("EvenOnly")])))
    assert "does not extend score" in str(err.value)


def test_queue_sort_and_bind_required() -> None:
    with pytest.raises(InputError):
        fw_for(profile(multiPoint=multi("Binder")))
    with pytest.raises(InputError):
        fw_for(profile(multiPoint=multi("Sort")))


def test_unmodelled_upstream_plugins_are_accepted_and_listed() -> None:
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "VolumeBinding", "ImageLocality")))
    assert fw.unmodelled == ["VolumeBinding", "ImageLocality"]


def test_filters_report_first_failing_plugin_per_node() -> None:
    snap = cluster(4)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "NotZero", "EvenOnly")), snap)
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    out = fw.run_filters(CycleState(), pi, snap, snap.node_ids())
    assert out.codes.tolist() == [3, 2, 0, 2]
    assert [out.plugin_at(i) for i in range(4)] == ["NotZero", "EvenOnly", "", "EvenOnly"]
    assert out.reasons_at(0) == ("node zero",)
    assert out.feasible.tolist() == [2]


def test_recorded_filters_keep_every_verdict() -> None:
    snap = cluster(2)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "NotZero", "EvenOnly")), snap)
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    out = fw.run_filters(CycleState(), pi, snap, snap.node_ids(), record=True)
    assert out.per_plugin["EvenOnly"].codes.tolist() == [0, 2]
    assert out.per_plugin["NotZero"].codes.tolist() == [3, 0]


def test_scores_are_normalized_then_weighted() -> None:
    snap = cluster(3)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "SlotScore", "Flat",
                                         weights={"SlotScore": 2})), snap)
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    out = fw.run_score(CycleState(), pi, snap, snap.node_ids(), record=True)
    raw, norm, weighted = out.per_plugin["SlotScore"]
    assert raw.tolist() == [0, 1, 2] and norm.tolist() == [0, 50, 100]
    assert weighted.tolist() == [0, 100, 200]
    assert out.totals.tolist() == [50, 150, 250]


def test_pre_filter_narrows_and_skips() -> None:
    snap = cluster(3)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "OnlyNamed")), snap)
    pi = make_pod_info(msgspec.convert(
        {"metadata": {"name": "p", "annotations": {"only": "n1,n2"}}}, Pod))
    allowed, st = fw.run_pre_filter(CycleState(), pi, snap)
    assert st.ok and allowed == {"n1", "n2"}
    plain = make_pod_info(msgspec.convert({"metadata": {"name": "q"}}, Pod))
    state = CycleState()
    allowed, st = fw.run_pre_filter(state, plain, snap)
    assert allowed is None and "OnlyNamed" in state.skip_filter


@pytest.mark.parametrize(("pct", "n", "want"), [
    (0, 10, 10), (40, 10, 10), (0, 1000, 420), (40, 1000, 400), (0, 6000, 300),
    (40, 6000, 2400), (0, 15000, 750), (100, 5000, 5000),
])
def test_num_feasible_nodes_to_find(pct: int, n: int, want: int) -> None:
    assert num_feasible_nodes_to_find(pct, n) == want


def _outcome_for(snap: ClusterState, fw: Framework, nodes: np.ndarray) -> FilterOutcome:
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    return fw.run_filters(CycleState(), pi, snap, nodes)


def _histogram(out: FilterOutcome) -> Counter[str]:
    counts: Counter[str] = Counter()
    for pos in np.flatnonzero(out.codes != 0):
        counts.update(out.reasons_at(int(pos)))
    return counts


def test_reason_counts_match_node_by_node_reasons_across_batches() -> None:
    snap = cluster(9)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "NotZero", "EvenOnly")), snap)
    ids = snap.node_ids()
    out = FilterOutcome.concat(_outcome_for(snap, fw, ids[:4]), _outcome_for(snap, fw, ids[4:]))
    assert out.codes.tolist() == [3, 2, 0, 2, 0, 2, 0, 2, 0]
    assert out.reasons_at(5) == out.reasons_at(1) != ()
    # A verdict decided after the filters (a nominated pod counted) overrides the plugin's.
    out.codes[2] = 2
    out.first_plugin[2] = 1
    out.overrides[2] = ("nominated pods take the room",)
    assert out.reasons_at(2) == ("nominated pods take the room",)
    assert out.reason_counts() == _histogram(out)
    assert out.reason_counts()["node zero"] == 1


def test_lazy_filter_reasons_are_built_once_and_only_when_read() -> None:
    calls: list[int] = []

    def explain() -> tuple[np.ndarray, list[tuple[str, ...]]]:
        calls.append(1)
        return np.array([0, 1], dtype=np.int32), [(), ("too small",)]

    res = FilterResult(np.array([0, 2], dtype=np.int8), explain=explain)
    assert calls == []
    assert res.reasons[int(res.reason_ids[1])] == ("too small",)
    assert res.status(1, "P").reasons == ("too small",)
    assert calls == [1]
    with pytest.raises(ValueError):
        FilterResult(np.zeros(1, dtype=np.int8))


def test_passing_verdicts_share_read_only_arrays() -> None:
    a, b = FilterResult.passing(3), FilterResult.passing(3)
    assert a.passes_all and a.codes is b.codes
    assert not a.codes.flags.writeable


@pytest.mark.parametrize("names", [("NotZero", "EvenOnly"), ("EvenOnly", "NotZero"),
                                   ("EvenOnly",), ("NotZero",), ()])
def test_known_feasible_positions_match_the_codes(names: tuple[str, ...]) -> None:
    snap = cluster(7)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", *names)), snap)
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    for nodes in (snap.node_ids(), np.array([5, 0, 2, 3], dtype=np.int64)):
        out = fw.run_filters(CycleState(), pi, snap, nodes)
        assert out.feasible_positions().tolist() == np.flatnonzero(out.codes == 0).tolist()


def test_scores_sum_into_a_fresh_array_even_from_shared_ones() -> None:
    snap = cluster(3)
    fw = fw_for(profile(multiPoint=multi("Sort", "Binder", "Flat", "SlotScore",
                                         weights={"Flat": 3})), snap)
    pi = make_pod_info(msgspec.convert({"metadata": {"name": "p"}}, Pod))
    out = fw.run_score(CycleState(), pi, snap, snap.node_ids(), record=True)
    weighted = out.per_plugin["Flat"][2]
    # The recorded weighted scores are not the running total the next plugin added to.
    assert weighted is not out.totals
    assert out.totals.tolist() == [w + s for w, s in zip(weighted.tolist(), [0, 50, 100],
                                                         strict=True)]
    plain = fw.run_score(CycleState(), pi, snap, snap.node_ids())
    assert plain.totals.tolist() == out.totals.tolist()
