"""FGD's target workload and scoring at their edges: which pod types are typical, what the
arguments accept, CPU exactly at a type's request, several nodes at once, and the memo keyed by
the whole pod shape. (Written against the surviving mutants of tools/mutation.py's ``fgd``
target; the worked examples are in test_fgd_paper.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from kubeberth.api.errors import InputError
from kubeberth.scheduling.plugins import fgd_score
from kubeberth.scheduling.plugins.fgd_score import FGDScoreArgs
from kubeberth.state.fragmentation import (
    PodType,
    TargetWorkload,
    cluster_fragmentation,
    typical_pod_types,
)

from .plugin_builders import handle, run_score
from .test_fgd_paper import ARGS, WEIGHTS, sigmoid_score
from .test_gpu_plugins import cluster, gpu_node, gpu_pod, use

A_SHARE = PodType(1000, 500, 1)
A, B, C, D = (PodType(1000, 500, 1), PodType(2000, 500, 1), PodType(3000, 500, 1),
              PodType(4000, 500, 1))


@pytest.mark.parametrize(("counts", "popularity", "typical"), [
    # 95 %: A 50 → 50 %, B → 80 %, C → 95 %: reached, D (the last 5 %) is left out.
    ({A: 50, B: 30, C: 15, D: 5}, 95, {A, B, C}),
    ({A: 50, B: 30, C: 15, D: 5}, 80, {A, B}),
    ({A: 50, B: 30, C: 15, D: 5}, 100, {A, B, C, D}),
    # 90 %: 5 + 3 + 1 = 9 of 10 reaches it; of the tied C and D the larger, D, comes first.
    ({A: 5, B: 3, C: 1, D: 1}, 90, {A, B, D}),
    # A tie in count goes to the larger shape (B's CPU is larger), whatever the order given.
    ({A: 10, B: 10}, 50, {B}),
    ({B: 10, A: 10}, 50, {B}),
    ({A: 3}, 1, {A}),
    # 99 %: after A, 80 of 81 pods is 98.8 %, short of it: B is added.
    ({A: 80, B: 1}, 99, {A, B}),
])
def test_typical_pod_types(counts: dict[PodType, int], popularity: int,
                           typical: set[PodType]) -> None:
    chosen = typical_pod_types(counts, popularity)
    assert set(chosen) == typical and all(chosen[t] == counts[t] for t in chosen)


@pytest.mark.parametrize("popularity", [0, 101, -5])
def test_popularity_out_of_range(popularity: int) -> None:
    with pytest.raises(InputError) as err:
        typical_pod_types({A: 1}, popularity)
    assert (err.value.field, err.value.expected) == ("popularityThreshold",
                                                     "a percentage from 1 to 100")
    assert f"popularity {popularity} is out of range" in str(err.value)
    with pytest.raises(InputError) as err:
        FGDScoreArgs.parse({"popularityThreshold": popularity})
    assert (err.value.field, err.value.expected) == ("popularityThreshold",
                                                     "a percentage from 1 to 100")


def test_arguments_default_and_accept_the_edges() -> None:
    args = FGDScoreArgs.parse({"popularityThreshold": 1, "targetWorkload": [
        {"cpuMilli": 0, "gpuMilli": 500},                   # count defaults to 1, weight to 1
        {"cpuMilli": 100},                                  # CPU only: no GPU, count 0
        {"cpuMilli": 100, "gpuSpec": "V100"},               # a CPU-only type has no model
        {"cpuMilli": 0, "gpuMilli": 1000, "gpuCount": 2, "gpuSpec": "V100|A100", "weight": 3},
    ]})
    assert args.popularity_threshold == 1
    assert args.target_workload == ((PodType(0, 500, 1), 1), (PodType(100, 0, 0), 2),
                                    (PodType(0, 1000, 2, ("A100", "V100")), 3))
    assert FGDScoreArgs.parse({"popularityThreshold": 100}).popularity_threshold == 100


@pytest.mark.parametrize("entry", [
    {"cpuMilli": -1, "gpuMilli": 500}, {"cpuMilli": 0, "gpuMilli": 500, "weight": 0},
    {"cpuMilli": 0, "gpuMilli": 500, "gpuCount": -1}, {"cpuMilli": 0, "gpuMilli": 1001},
    {"cpuMilli": 0, "gpuMilli": 500, "gpuCount": 2}, {"cpuMilli": 0, "gpuCount": 1},
])
def test_each_bad_shape_alone_is_refused(entry: dict[str, int]) -> None:
    with pytest.raises(InputError) as err:
        FGDScoreArgs.parse({"targetWorkload": [{"cpuMilli": 1, "gpuMilli": 500}, entry]})
    assert err.value.field == "targetWorkload[1]"
    assert err.value.expected is not None and err.value.expected.startswith("cpuMilli ≥ 0")


@pytest.mark.parametrize(("entry", "field"), [
    ({"cpuMilli": "x"}, "targetWorkload[0].cpuMilli"),
    ({"cpuMilli": 1, "gpuMilli": "x"}, "targetWorkload[0].gpuMilli"),
    ({"cpuMilli": 1, "gpuMilli": 500, "gpuCount": "x"}, "targetWorkload[0].gpuCount"),
    ({"cpuMilli": 1, "weight": "x"}, "targetWorkload[0].weight"),
    ({"cpuMilli": 1, "bogus": 1}, "targetWorkload[0].bogus"),
    ({"cpuMilli": 1, "gpuMilli": 500, "gpuSpec": 5}, "targetWorkload[0].gpuSpec"),
])
def test_argument_errors_name_the_entry(entry: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        FGDScoreArgs.parse({"targetWorkload": [entry]})
    assert err.value.field == field
    with pytest.raises(InputError) as err:
        FGDScoreArgs.parse({"targetWorkload": ["not a mapping"]})
    assert err.value.field == "targetWorkload[0]"


def test_from_pods_and_cluster_fragmentation() -> None:
    pods = ([(1000, gpu_pod("a", milli=500).gpu)] * 3 + [(1000, gpu_pod("b", whole=2).gpu)]
            + [(2000, gpu_pod("c").gpu)])
    workload = TargetWorkload.from_pods(pods, popularity=100)
    assert workload.weights == WEIGHTS
    # The popularity is applied: at 60 % the three A pods alone make it.
    assert TargetWorkload.from_pods(pods, popularity=60).weights == {A_SHARE: 3}
    assert PodType.of(1000, gpu_pod("v", milli=500, spec="V100").gpu) == \
        PodType(1000, 500, 1, ("V100",))
    snap = cluster(gpu_node("x", 4), gpu_node("y", 4))
    use(snap, "x", [1000, 1000, 300, 0])
    nodes = np.array([0, 1])
    # Both nodes at once: x 3500 (test_fgd_paper), y 4000 (only C's fragment, all 4000 free).
    assert workload.node_fragmentation(snap.gpus, nodes, np.array([64000, 64000])).tolist() \
        == [3500, 4000]
    frag = cluster_fragmentation(workload, snap.gpus, nodes, np.array([64000, 64000]))
    # (3500 + 4000) / W 5 = 1500 milli-GPU fragmented, of 2300 + 4000 idle and 8 GPUs in all.
    assert (frag.fragmented_milli, frag.idle_milli, frag.total_milli) == (1500.0, 6300, 8000)
    assert frag.pct_of_total == pytest.approx(18.75)
    assert frag.pct_of_idle == pytest.approx(100 * 1500 / 6300)


def test_cpu_left_exactly_at_a_types_request_counts_as_fitting() -> None:
    """The paper example's node ([1000, 600, 0, 0]) with 5 cores: the three fill pods hold 3,
    the 500m pod takes 1, which leaves exactly 1000m, A's and B's request: they still run,
    so the score is the worked example's 54 (with 999m left it would not be)."""
    snap = cluster(gpu_node("n", 4, cpu=5))
    use(snap, "n", [1000, 600, 0, 0])
    plugin = fgd_score.new(ARGS, handle(snap))
    assert run_score(plugin, gpu_pod("p", milli=500), snap) == {"n": 54}


def test_memo_tells_pods_apart_by_cpu() -> None:
    """Two pods with the same GPU share and different CPU, scored one after the other by one
    plugin: the second must not get the first one's memoised score."""
    snap = cluster(gpu_node("n", 4, cpu=5))
    use(snap, "n", [1000, 600, 0, 0])
    plugin = fgd_score.new(ARGS, handle(snap))
    assert run_score(plugin, gpu_pod("small", milli=500), snap) == {"n": 54}
    # 2 cores leave none: before, W·F is 3200 as in the worked example; after, neither A nor
    # B can run, so all 1100 free milli-GPU are fragments for all: 5 · 1100 = 5500 on either
    # device. Δ = −2300 → ⌊100 · sigmoid(−0.46)⌋ = 38.
    big = run_score(plugin, gpu_pod("big", milli=500, cpu=2), snap)
    assert big == {"n": sigmoid_score(-2300 / 5)} == {"n": 38}
    fresh = fgd_score.new(ARGS, handle(snap))
    assert run_score(fresh, gpu_pod("big", milli=500, cpu=2), snap) == big


def _frag(node: object, free: list[int], weights: dict[PodType, int]) -> int:
    snap = cluster(node)  # type: ignore[arg-type]
    use(snap, snap.node_names[0], free)
    return int(TargetWorkload(weights).node_fragmentation(snap.gpus, np.array([0]),
                                                         np.array([64000]))[0])


def test_a_type_as_wide_as_the_node_fits_and_a_wider_one_never_does() -> None:
    # A 2-GPU node, all free (2000). B asks for 2 whole GPUs: it fits, nothing is a fragment
    # for it. E asks for 4: it never fits, all 2000 is its fragment. W·F = 1·0 + 1·2000.
    e = PodType(1000, 1000, 4)
    assert _frag(gpu_node("n", 2), [1000, 1000], {e: 1, PodType(1000, 1000, 2): 1}) == 2000
    # The too-wide type listed first must not hide the ones after it.
    assert _frag(gpu_node("n", 2), [1000, 1000], {e: 1, A: 1}) == 2000


def test_models_a_type_accepts_and_nodes_without_a_model() -> None:
    v100 = PodType(1000, 500, 1, ("V100",))
    # A node without a GPU model label: types without a model constraint run there (A: no
    # fragment), a type that asks for V100 does not (all 2000 for it): W·F = 1·0 + 2·2000.
    assert _frag(gpu_node("n", 2, model=""), [1000, 1000], {A: 1, v100: 2}) == 4000
    # A T4 node alongside a V100 node: on the V100 one the V100 type runs.
    snap = cluster(gpu_node("t", 2, model="T4"), gpu_node("v", 2, model="V100"))
    got = TargetWorkload({A: 1, v100: 1}).node_fragmentation(snap.gpus, np.array([0, 1]),
                                                              np.array([64000, 64000]))
    assert got.tolist() == [2000, 0]


def test_an_empty_or_weightless_target_workload_is_refused() -> None:
    for weights in ({}, {A: 0}):
        with pytest.raises(InputError) as err:
            TargetWorkload(weights)
        assert (err.value.field, err.value.expected) == (
            "targetWorkload", "at least one pod type with a positive weight")
        assert "the target workload is empty" in str(err.value)


def test_the_plugin_applies_its_popularity_threshold() -> None:
    """Target {A: 20, B (2 GPUs): 1}; a 1-GPU pod on [1000, 600, 0, 0]. At 100 % B counts:
    before, B's fragment is all 1600 (one whole GPU only), after [0, 600, 0, 0] it is 600:
    W·F 1600 → 600, Δ = 1000 over W = 21 → ⌊100 · sigmoid(1000 / 21000)⌋ = 51. At 95 % A
    alone (20 of 21 pods) is typical and never fragments here: Δ = 0, score 50."""
    snap = cluster(gpu_node("n", 4))
    use(snap, "n", [1000, 600, 0, 0])
    workload = [{"cpuMilli": 1000, "gpuMilli": 500, "weight": 20},
                {"cpuMilli": 1000, "gpuMilli": 1000, "gpuCount": 2, "weight": 1}]
    for popularity, want in ((100, 51), (95, 50)):
        plugin = fgd_score.new({"targetWorkload": workload, "popularityThreshold": popularity},
                               handle(snap))
        assert run_score(plugin, gpu_pod("p", whole=1), snap) == {"n": want}
    # Learning from the pods seen applies it too: at 50 % the 500m pods seen twice are the
    # whole workload, so neither node fragments anything (compare test_gpu_plugins' 54/45).
    snap = cluster(gpu_node("a", 2), gpu_node("b", 2))
    use(snap, "a", [500, 1000])
    plugin = fgd_score.new({"popularityThreshold": 50}, handle(snap))
    run_score(plugin, gpu_pod("p", milli=500), snap)
    run_score(plugin, gpu_pod("w", whole=1), snap)
    assert run_score(plugin, gpu_pod("p2", milli=500), snap) == {"a": 50, "b": 50}
