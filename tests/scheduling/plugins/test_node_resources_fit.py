"""NodeResourcesFit: the fit filter (reasons, order, resolvability, ignored resources), the three
scoring strategies and the args defaults and validation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import node_resources_fit
from kubeberth.scheduling.plugins.helper import ResourceSpec
from kubeberth.scheduling.plugins.node_resources_fit import (
    NAME,
    PRE_FILTER_KEY,
    NodeResourcesFit,
    NodeResourcesFitArgs,
    PreFilterState,
)

from .plugin_builders import (
    cluster,
    container,
    handle,
    make_node,
    make_pod,
    place,
    run_filter,
    run_score,
)

GPU = "nvidia.com/gpu"


def fit(args: dict[str, Any] | None = None) -> NodeResourcesFit:
    return node_resources_fit.new(args, handle())


def rtcr(shape: list[tuple[int, int]], resources: list[dict[str, Any]] | None = None
         ) -> NodeResourcesFit:
    strategy: dict[str, Any] = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s}
                                               for u, s in shape]}}
    if resources:
        strategy["resources"] = resources
    return fit({"scoringStrategy": strategy})


# ---- filter ------------------------------------------------------------------------------------
def test_pod_fits_free_resources() -> None:
    snap = cluster(make_node("n", {"cpu": "4", "memory": "8Gi", "pods": 10}))
    place(snap, make_pod("a", {"cpu": "3", "memory": "4Gi"}), "n")
    verdicts = run_filter(fit(), make_pod("p", {"cpu": "1", "memory": "4Gi"}), snap)
    assert verdicts["n"].ok


def test_reasons_follow_upstream_order() -> None:
    snap = cluster(make_node("n", {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi",
                                   "pods": 1, GPU: 4, "example.com/b": 1}))
    place(snap, make_pod("a", {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi",
                               GPU: 4, "example.com/b": 1}), "n")
    pod = make_pod("p", {GPU: 1, "example.com/b": 1, "ephemeral-storage": "1",
                         "memory": "1", "cpu": "1"})
    st_ = run_filter(fit(), pod, snap)["n"]
    assert st_.code == Code.UNSCHEDULABLE
    assert st_.reasons == ("Too many pods", "Insufficient cpu", "Insufficient memory",
                           "Insufficient ephemeral-storage", "Insufficient example.com/b",
                           "Insufficient nvidia.com/gpu")
    assert st_.plugin == NAME


def test_request_above_allocatable_is_unresolvable() -> None:
    snap = cluster(make_node("small", {"cpu": "2", "memory": "4Gi"}),
                   make_node("busy", {"cpu": "8", "memory": "4Gi"}))
    place(snap, make_pod("a", {"cpu": "6"}), "busy")
    verdicts = run_filter(fit(), make_pod("p", {"cpu": "3"}), snap)
    assert verdicts["small"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdicts["small"].reasons == ("Insufficient cpu",)
    assert verdicts["busy"].code == Code.UNSCHEDULABLE
    assert verdicts["busy"].reasons == ("Insufficient cpu",)


def test_one_unresolvable_resource_makes_the_node_unresolvable() -> None:
    snap = cluster(make_node("n", {"cpu": "4", "memory": "1Gi"}))
    place(snap, make_pod("a", {"cpu": "4"}), "n")
    st_ = run_filter(fit(), make_pod("p", {"cpu": "1", "memory": "2Gi"}), snap)["n"]
    assert st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st_.reasons == ("Insufficient cpu", "Insufficient memory")


def test_too_many_pods_alone_is_resolvable() -> None:
    snap = cluster(make_node("n", {"cpu": "4", "pods": 1}))
    place(snap, make_pod("a", {"cpu": "1"}), "n")
    st_ = run_filter(fit(), make_pod("p", containers=[]), snap)["n"]
    assert (st_.code, st_.reasons) == (Code.UNSCHEDULABLE, ("Too many pods",))


def test_resource_the_node_lacks() -> None:
    snap = cluster(make_node("cpu-only", {"cpu": "4"}), make_node("gpu", {"cpu": "4", GPU: 2}))
    verdicts = run_filter(fit(), make_pod("p", {GPU: 1}), snap)
    assert verdicts["cpu-only"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdicts["cpu-only"].reasons == ("Insufficient nvidia.com/gpu",)
    assert verdicts["gpu"].ok


def test_zero_requests_are_not_checked() -> None:
    snap = cluster(make_node("n", {"cpu": "1"}))
    place(snap, make_pod("a", {"cpu": "1"}), "n")
    pod = make_pod("p", {"cpu": "0", GPU: 0})
    assert run_filter(fit(), pod, snap)["n"].ok


def test_unscored_resource_names_are_ignored() -> None:
    snap = cluster(make_node("n", {"cpu": "1"}))
    assert run_filter(fit(), make_pod("p", {"foo": 3, "cpu": "1"}), snap)["n"].ok


def test_hugepages_and_prefixed_native_are_checked() -> None:
    snap = cluster(make_node("n", {"cpu": "1", "hugepages-2Mi": "2Mi"}))
    pod = make_pod("p", {"hugepages-2Mi": "4Mi", "kubernetes.io/something": 1})
    st_ = run_filter(fit(), pod, snap)["n"]
    assert st_.reasons == ("Insufficient hugepages-2Mi", "Insufficient kubernetes.io/something")


def test_ignored_resources_and_groups_skip_only_extended_resources() -> None:
    snap = cluster(make_node("n", {"cpu": "1"}))
    pod = make_pod("p", {GPU: 1, "example.com/a": 1, "example.com/b": 1,
                         "kubernetes.io/something": 1})
    plugin = fit({"ignoredResources": [GPU, "kubernetes.io/something"],
                  "ignoredResourceGroups": ["example.com"]})
    st_ = run_filter(plugin, pod, snap)["n"]
    assert st_.reasons == ("Insufficient kubernetes.io/something",)


def test_init_containers_and_overhead_count() -> None:
    snap = cluster(make_node("n", {"cpu": "10", "memory": "20"}))
    place(snap, make_pod("a", {"cpu": "5", "memory": "5"}), "n")
    fits = make_pod("p", {"cpu": "1", "memory": "1"}, overhead={"cpu": "3", "memory": "13"})
    assert run_filter(fit(), fits, snap)["n"].ok
    too_big = make_pod("q", {"cpu": "1"}, init_containers=[container({"cpu": "6"})])
    assert run_filter(fit(), too_big, snap)["n"].reasons == ("Insufficient cpu",)


def test_filter_shares_reason_tuples_between_nodes() -> None:
    snap = cluster(*(make_node(f"n{i}", {"cpu": "1"}) for i in range(5)))
    plugin = fit()
    state = CycleState()
    pod = make_pod("p", {"cpu": "2"})
    plugin.pre_filter(state, pod, snap)
    res = plugin.filter(state, pod, snap, snap.node_ids())
    assert len(res.reasons) == 2
    assert res.reason_ids.tolist() == [1] * 5


def test_pre_filter_state_lists_checks() -> None:
    state = CycleState()
    plugin = fit({"ignoredResources": [GPU]})
    pod = make_pod("p", {GPU: 1, "memory": "1Gi", "cpu": "1", "example.com/z": 1})
    result, st_ = plugin.pre_filter(state, pod, cluster())
    assert result is None and st_.ok
    s = state.read(PRE_FILTER_KEY, PreFilterState)
    assert s.names == ("cpu", "memory", "example.com/z")
    assert s.requests == (1000, 1024**3 * 1000, 1000)
    assert s.labels[0] == "Too many pods"


def test_filter_without_pre_filter_state_is_an_error() -> None:
    """A profile that disables the PreFilter: upstream's Filter fails reading its state."""
    snap = cluster(make_node("n", {"cpu": "1"}), make_node("m", {"cpu": "4"}))
    pod = make_pod("p", {"cpu": "2"})
    res = fit().filter(CycleState(), pod, snap, snap.node_ids())
    assert res.codes.tolist() == [Code.ERROR, Code.ERROR]
    assert res.status(1, NAME).reasons == (
        'error reading "PreFilterNodeResourcesFit" from cycleState: not found',)


def test_filter_sees_pods_added_after_pre_filter() -> None:
    snap = cluster(make_node("n", {"cpu": "2"}))
    plugin, state, pod = fit(), CycleState(), make_pod("p", {"cpu": "1"})
    plugin.pre_filter(state, pod, snap)
    nodes = snap.node_ids()
    assert plugin.filter(state, pod, snap, nodes).codes.tolist() == [0]
    place(snap, make_pod("a", {"cpu": "2"}), "n")
    assert plugin.filter(state, pod, snap, nodes).codes.tolist() == [Code.UNSCHEDULABLE]


def test_request_shapes_share_check_orders_but_not_zero_requests() -> None:
    snap = cluster(make_node("n", {"cpu": "1", "memory": "1Gi"}))
    place(snap, make_pod("a", {"cpu": "1"}), "n")
    plugin = fit()
    assert run_filter(plugin, make_pod("p", {"cpu": "1", "memory": "1"}), snap)["n"].reasons \
        == ("Insufficient cpu",)
    # Same resource names, but cpu is 0: it is not checked.
    assert run_filter(plugin, make_pod("q", {"cpu": "0", "memory": "1"}), snap)["n"].ok


def test_resource_no_node_has_fails_everywhere_unresolvably() -> None:
    snap = cluster(make_node("a", {"cpu": "4"}), make_node("b", {"cpu": "4"}))
    verdicts = run_filter(fit(), make_pod("p", {"cpu": "1", "example.com/new": 1}), snap)
    for v in verdicts.values():
        assert v.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert v.reasons == ("Insufficient example.com/new",)


@pytest.mark.parametrize("count", [3, 10, 20, 70])
def test_many_failing_requests_are_all_reported(count: int) -> None:
    names = [f"example.com/r{i:02d}" for i in range(count)]
    snap = cluster(make_node("empty", {"cpu": "4"}),
                   make_node("half", {"cpu": "4", **{n: 1 for n in names[::2]}}),
                   make_node("all", {"cpu": "4", **{n: 1 for n in names}}))
    verdicts = run_filter(fit(), make_pod("p", {n: 1 for n in names}), snap)
    assert verdicts["empty"].reasons == tuple(f"Insufficient {n}" for n in names)
    assert verdicts["empty"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdicts["half"].reasons == tuple(f"Insufficient {n}" for n in names[1::2])
    assert verdicts["all"].ok


def test_passing_nodes_share_one_empty_reason_entry() -> None:
    snap = cluster(*(make_node(f"n{i}", {"cpu": "2"}) for i in range(4)))
    place(snap, make_pod("a", {"cpu": "2"}), "n1")
    plugin, state, pod = fit(), CycleState(), make_pod("p", {"cpu": "1"})
    plugin.pre_filter(state, pod, snap)
    res = plugin.filter(state, pod, snap, snap.node_ids())
    assert res.codes.tolist() == [0, Code.UNSCHEDULABLE, 0, 0]
    assert res.codes.dtype == np.int8 and res.reason_ids.dtype == np.int32
    assert res.reasons == [(), ("Insufficient cpu",)]
    assert res.reason_ids.tolist() == [0, 1, 0, 0]


# Property: the filter accepts exactly the nodes where every request fits, and calls a node
# unresolvable exactly when some request exceeds its whole allocatable.
_amount = st.integers(0, 16)


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.tuples(_amount, _amount, _amount, st.integers(1, 4)), min_size=1,
                      max_size=6),
       placed=st.lists(st.tuples(st.integers(0, 5), _amount, _amount, _amount), max_size=8),
       pod=st.tuples(_amount, _amount, _amount))
def test_filter_accepts_exactly_what_fits(nodes: list[tuple[int, int, int, int]],
                                          placed: list[tuple[int, int, int, int]],
                                          pod: tuple[int, int, int]) -> None:
    names = ("cpu", "memory", GPU)
    snap = cluster(*(make_node(f"n{i}", {"cpu": f"{c}m", "memory": m, GPU: g, "pods": p})
                     for i, (c, m, g, p) in enumerate(nodes)))
    for k, (where, c, m, g) in enumerate(placed):
        place(snap, make_pod(f"a{k}", {"cpu": f"{c}m", "memory": m, GPU: g}),
              f"n{where % len(nodes)}")
    incoming = make_pod("p", {"cpu": f"{pod[0]}m", "memory": pod[1], GPU: pod[2]})
    verdicts = run_filter(fit(), incoming, snap)
    for i, (c, m, g, max_pods) in enumerate(nodes):
        alloc = (c, m, g)
        on_node = [x for x in placed if x[0] % len(nodes) == i]
        used = [sum(x[j + 1] for x in on_node) for j in range(3)]
        fits = all(pod[j] == 0 or pod[j] <= alloc[j] - used[j] for j in range(3)) \
            and len(on_node) < max_pods
        too_big = any(pod[j] > alloc[j] for j in range(3))
        got = verdicts[f"n{i}"]
        assert got.ok == fits
        if not fits:
            assert (got.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE) == too_big
            expected = ["Too many pods"] if len(on_node) >= max_pods else []
            expected += [f"Insufficient {names[j]}" for j in range(3)
                         if pod[j] > 0 and pod[j] > alloc[j] - used[j]]
            assert list(got.reasons) == expected


# ---- score -------------------------------------------------------------------------------------
def test_least_allocated_default() -> None:
    snap = cluster(make_node("a", {"cpu": "4", "memory": "10Gi"}),
                   make_node("b", {"cpu": "8", "memory": "10Gi"}))
    scores = run_score(fit(), make_pod("p", {"cpu": "2", "memory": "5Gi"}), snap)
    # a: (50 + 50) / 2; b: (75 + 50) / 2 = 62 (integer division)
    assert scores == {"a": 50, "b": 62}


def test_least_allocated_uses_non_zero_requests() -> None:
    snap = cluster(make_node("a", {"cpu": "1", "memory": "1000Mi"}))
    # An empty container counts as 100m and 200Mi: (90 + 80) / 2 = 85.
    assert run_score(fit(), make_pod("p", {}), snap) == {"a": 85}
    # A pod without containers counts nothing.
    assert run_score(fit(), make_pod("q", containers=[]), snap) == {"a": 100}


def test_least_allocated_existing_pods_count_non_zero() -> None:
    snap = cluster(make_node("a", {"cpu": "1", "memory": "1000Mi"}))
    place(snap, make_pod("x", {}), "a")
    assert run_score(fit(), make_pod("p", {"cpu": "0", "memory": "0"}), snap) == {"a": 85}


def test_most_allocated_caps_at_allocatable() -> None:
    plugin = fit({"scoringStrategy": {"type": "MostAllocated"}})
    snap = cluster(make_node("a", {"cpu": "1", "memory": "1Gi"}))
    place(snap, make_pod("x", {"cpu": "2", "memory": "512Mi"}), "a")
    assert run_score(plugin, make_pod("p", {"cpu": "0", "memory": "0"}), snap) == {"a": 75}


def test_weights_and_unrequested_extended_resources() -> None:
    plugin = fit({"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": GPU, "weight": 3}]}})
    snap = cluster(make_node("a", {"cpu": "4", GPU: 4}), make_node("b", {"cpu": "4"}))
    # cpu 50 (weight 1), gpu 100 (weight 3) -> 350 / 4 = 87 on a; b has no gpu -> cpu only.
    assert run_score(plugin, make_pod("p", {"cpu": "2", GPU: 4}), snap) == {"a": 87, "b": 50}
    # A pod not asking for the gpu drops it from numerator and weights everywhere.
    assert run_score(plugin, make_pod("q", {"cpu": "2"}), snap) == {"a": 50, "b": 50}


def test_node_without_scored_resources_scores_zero() -> None:
    plugin = fit({"scoringStrategy": {"type": "LeastAllocated",
                                      "resources": [{"name": GPU, "weight": 1}]}})
    snap = cluster(make_node("a", {"cpu": "4"}))
    assert run_score(plugin, make_pod("p", {GPU: 1}), snap) == {"a": 0}


def test_requested_to_capacity_ratio_bin_packing() -> None:
    plugin = rtcr([(0, 0), (100, 10)])
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi"}),
                   make_node("b", {"cpu": "8", "memory": "4Gi"}))
    scores = run_score(plugin, make_pod("p", {"cpu": "1", "memory": "1Gi"}), snap)
    assert scores == {"a": 25, "b": 19}  # b: (12 + 25) / 2 rounds half away from zero


def test_requested_to_capacity_ratio_drops_zero_scores_from_weights() -> None:
    plugin = rtcr([(0, 10), (100, 0)])
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi"}))
    place(snap, make_pod("x", {"cpu": "4", "memory": "0"}), "a")
    # cpu over capacity scores 0 and leaves the mean; memory 25% used -> 75.
    assert run_score(plugin, make_pod("p", {"cpu": "1", "memory": "1Gi"}), snap) == {"a": 75}


def test_requested_to_capacity_ratio_extended_resource() -> None:
    plugin = rtcr([(0, 0), (100, 1)], resources=[{"name": GPU, "weight": 1}])
    snap = cluster(make_node("a", {GPU: 8}), make_node("b", {GPU: 4}))
    assert run_score(plugin, make_pod("p", {GPU: 4}), snap) == {"a": 5, "b": 10}


def test_score_without_pre_score_state() -> None:
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi"}))
    pod = make_pod("p", {"cpu": "2", "memory": "2Gi"})
    raw = fit().score(CycleState(), pod, snap, snap.node_ids())
    assert raw.tolist() == [50]
    assert raw.dtype == np.int64  # the framework weighs and sums integer scores


def test_fit_has_no_normalize_score() -> None:
    assert fit().normalize_score(CycleState(), make_pod("p"), np.array([1])) is None


def test_scores_use_whole_units_for_huge_memory() -> None:
    # 128 TiB in milli-bytes times 100 overflows int64; in upstream's bytes it does not.
    snap = cluster(make_node("a", {"cpu": "4", "memory": "128Ti"}))
    scores = run_score(fit(), make_pod("p", {"cpu": "2", "memory": "32Ti"}), snap)
    assert scores == {"a": 62}


def test_score_requests_stay_exact_near_the_int64_limit() -> None:
    # 2**53 + 1 bytes is 9,007,199,254,740,993,000 milli-bytes, still an int64; a float division
    # back to bytes would round it to 2**53 and score the full node 99.
    plugin = fit({"scoringStrategy": {"type": "MostAllocated",
                                      "resources": [{"name": "memory", "weight": 1}]}})
    snap = cluster(make_node("a", {"cpu": "1", "memory": "9007199254740993"}))
    pod = make_pod("p", {"memory": "9007199254740993"})
    assert node_resources_fit.pod_score_requests(pod, [ResourceSpec("memory")], False) == \
        (9007199254740993,)
    assert run_score(plugin, pod, snap) == {"a": 100}


def test_score_plan_leaves_out_resources_without_a_column() -> None:
    """Neither a name no state has seen nor one the resource index knows but the matrices have
    no column for yet is scored; the resources after them still are."""
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi"}))
    late = snap.resources.add("example.com/late")
    assert late == snap.allocatable.shape[1]
    resources = [ResourceSpec("example.com/none"), ResourceSpec("cpu", 2),
                 ResourceSpec("example.com/late"), ResourceSpec("memory", 3)]
    cpu, memory = snap.resources.get("cpu"), snap.resources.get("memory")
    plan = node_resources_fit.score_plan(snap, resources, [1, 2000, 1, 1024],
                                         use_requested=False)
    # Rows: state column, request, weight, whether nodes' usage is their non-zero requests.
    assert plan.T.tolist() == [[cpu, 2000, 2, 1], [memory, 1024, 3, 1]]
    plan = node_resources_fit.score_plan(snap, resources, [1, 2000, 1, 1024],
                                         use_requested=True)
    assert plan.T.tolist() == [[cpu, 2000, 2, 0], [memory, 1024, 3, 0]]


def _score_reference(alloc: list[int], used: list[int], pod: list[int], weights: list[int],
                     most: bool) -> int:
    """Upstream's per-node loop (least/most allocated), skipping resources the node lacks."""
    total = weight_sum = 0
    for a, u, r, w in zip(alloc, used, pod, weights, strict=True):
        if a == 0:
            continue
        req = u + r
        least = 0 if req > a else (a - req) * 100 // a
        total += (min(req, a) * 100 // a if most else least) * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


# Property: both scoring paths (every node has every resource, or some lack one) give upstream's
# per-node integers for any weights.
@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 4)),
                      min_size=1, max_size=5),
       used=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 4)),
                     min_size=5, max_size=5),
       pod=st.tuples(st.integers(1, 40), st.integers(1, 40), st.integers(0, 4)),
       weights=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)),
       most=st.booleans(), with_gpu=st.booleans())
def test_scores_match_upstream_loop(nodes: list[tuple[int, int, int]],
                                    used: list[tuple[int, int, int]], pod: tuple[int, int, int],
                                    weights: tuple[int, int, int], most: bool,
                                    with_gpu: bool) -> None:
    names = ["cpu", "memory", GPU] if with_gpu else ["cpu", "memory"]
    plugin = fit({"scoringStrategy": {
        "type": "MostAllocated" if most else "LeastAllocated",
        "resources": [{"name": n, "weight": w} for n, w in zip(names, weights, strict=False)]}})
    snap = cluster(*(make_node(f"n{i}", {"cpu": f"{c}m", "memory": m, GPU: g})
                     for i, (c, m, g) in enumerate(nodes)))
    for i in range(len(nodes)):
        c, m, g = used[i]
        place(snap, make_pod(f"u{i}", {"cpu": f"{c}m", "memory": m, GPU: g}), f"n{i}")
    got = run_score(plugin, make_pod("p", {"cpu": f"{pod[0]}m", "memory": pod[1], GPU: pod[2]}),
                    snap)
    k = len(names)
    for i, node in enumerate(nodes):
        # A scalar resource the pod does not request is not scored at all.
        ks = [j for j in range(k) if j < 2 or pod[j] > 0]
        want = _score_reference([node[j] for j in ks], [used[i][j] for j in ks],
                                [pod[j] for j in ks], [weights[j] for j in ks], most)
        assert got is not None and got[f"n{i}"] == want


# ---- args --------------------------------------------------------------------------------------
def test_default_args() -> None:
    args = NodeResourcesFitArgs.parse(None)
    assert args.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == \
        [("cpu", 1), ("memory", 1)]
    assert args.ignored_resources == () and args.ignored_resource_groups == ()


def test_strategy_resources_default_and_zero_weight() -> None:
    args = NodeResourcesFitArgs.parse({"scoringStrategy": {"type": "MostAllocated"}})
    assert [r.name for r in args.scoring_strategy.resources] == ["cpu", "memory"]
    args = NodeResourcesFitArgs.parse({"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}})
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1)]


@pytest.mark.parametrize(("raw", "field", "text"), [
    ({"scoringStrategy": {"type": "Random"}}, "scoringStrategy.type", "Unsupported value"),
    ({"scoringStrategy": {"resources": [{"name": "cpu"}]}}, "scoringStrategy.type",
     "Unsupported value: ''"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 101}]}},
     "scoringStrategy.resources[1].weight", "not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "LeastAllocated",
                          "resources": [{"name": "cpu", "weight": -1}]}},
     "scoringStrategy.resources[0].weight", "resource weight of cpu"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     "scoringStrategy.requestedToCapacityRatio", "must be specified"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.requestedToCapacityRatio.shape", "at least one point"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 10, "score": 1}, {"utilization": 10, "score": 2}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[1].utilization", "increasing order"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 11}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].score", "[0, 10]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 101, "score": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].utilization", "[0, 100]"),
    ({"scoringStrategy": {"type": "LeastAllocated", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio", "must be nil"),
    ({"ignoredResourceGroups": ["example.com/x"]}, "ignoredResourceGroups[0]", "can't contain"),
    ({"ignoredResources": ["Not Valid"]}, "ignoredResources[0]", "Invalid value"),
    ({"ignoredResources": [3]}, "ignoredResources[0]", "not a string"),
    ({"scoringStrategies": {}}, "scoringStrategies", "unknown field"),
    ({"scoringStrategy": {"type": "LeastAllocated", "shape": []}}, "scoringStrategy.shape",
     "unknown field"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": "50", "score": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].utilization", "not an integer"),
    # Malformed values name the field they are in, at every depth of scoringStrategy.
    ({"scoringStrategy": {"type": 3}}, "scoringStrategy.type", "not a string"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": "cpu"}},
     "scoringStrategy.resources", "not a list"),
    ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": 1}]}},
     "scoringStrategy.resources[0].name", "not a string"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": 5}},
     "scoringStrategy.requestedToCapacityRatio", "not a mapping"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shapes": []}}},
     "scoringStrategy.requestedToCapacityRatio.shapes", "unknown field"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": {}}}},
     "scoringStrategy.requestedToCapacityRatio.shape", "not a list"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": [5]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0]", "not a mapping"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 1, "weight": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].weight", "unknown field"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": "1"}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].score", "not an integer"),
])
def test_invalid_args(raw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as err:
        NodeResourcesFitArgs.parse(raw)
    assert err.value.field == field
    assert text in err.value.message


_SHAPE = "field scoringStrategy.requestedToCapacityRatio.shape"


# The whole text a user reads: upstream validateFunctionShape's field error, then our hint.
@pytest.mark.parametrize(("shape", "text"), [
    ([], f"{_SHAPE}: Required value: at least one point must be specified. Expected a list of "
         "{utilization, score} points."),
    ([(10, 1), (10, 2)], f"{_SHAPE}[1].utilization: Invalid value: 10: values must be sorted in "
                         "increasing order. Expected strictly increasing utilizations."),
    ([(101, 1)], f"{_SHAPE}[0].utilization: Invalid value: 101: not in valid range [0, 100]. "
                 "Expected an integer from 0 to 100."),
    ([(0, 11)], f"{_SHAPE}[0].score: Invalid value: 11: not in valid range [0, 10]. Expected an "
                "integer from 0 to 10."),
])
def test_shape_errors_read_as_upstream(shape: list[tuple[int, int]], text: str) -> None:
    with pytest.raises(InputError) as err:
        rtcr(shape)
    assert str(err.value) == text


def test_registered_events() -> None:
    events = {(e.resource, e.action) for e in fit().events_to_register()}
    assert events == {("Pod", "Delete"), ("Pod", "UpdatePodScaleDown"), ("Node", "Add"),
                      ("Node", "UpdateNodeAllocatable")}
