"""NodeResourcesBalancedAllocation: the newest-upstream "change in balance" score, best-effort
skipping, actual (not non-zero) requests, and the args rules."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import balanced_allocation
from kubeberth.scheduling.plugins.balanced_allocation import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
)

from .plugin_builders import cluster, handle, make_node, make_pod, place, run_score

GPU = "nvidia.com/gpu"


def balanced(args: dict[str, Any] | None = None) -> NodeResourcesBalancedAllocation:
    return balanced_allocation.new(args, handle())


def test_score_rewards_a_more_even_node() -> None:
    snap = cluster(make_node("empty", {"cpu": "4", "memory": "4Gi"}),
                   make_node("memory-heavy", {"cpu": "4", "memory": "4Gi"}))
    place(snap, make_pod("x", {"cpu": "0", "memory": "2Gi"}), "memory-heavy")
    scores = run_score(balanced(), make_pod("p", {"cpu": "2", "memory": "1Gi"}), snap)
    # empty: 100 -> 87 gives 50 + (50 + 87 - 100) / 2 = 68; memory-heavy: 75 -> 87 gives 81.
    assert scores == {"empty": 68, "memory-heavy": 81}


def test_unchanged_balance_scores_75() -> None:
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi"}))
    place(snap, make_pod("x", {"cpu": "1", "memory": "1Gi"}), "a")
    assert run_score(balanced(), make_pod("p", {"cpu": "1", "memory": "1Gi"}), snap) == {"a": 75}


def test_extremes_score_50_and_100() -> None:
    snap = cluster(make_node("balanced", {"cpu": "2", "memory": "2Gi"}),
                   make_node("lopsided", {"cpu": "2", "memory": "2Gi"}))
    place(snap, make_pod("x", {"cpu": "0", "memory": "2Gi"}), "lopsided")
    scores = run_score(balanced(), make_pod("p", {"cpu": "2", "memory": "0"}), snap)
    assert scores == {"balanced": 50, "lopsided": 100}


def test_fractions_are_capped_at_one() -> None:
    snap = cluster(make_node("a", {"cpu": "1", "memory": "4Gi"}))
    place(snap, make_pod("x", {"cpu": "3", "memory": "4Gi"}), "a")
    # Both with and without the pod the fractions are (1, 1): unchanged balance.
    assert run_score(balanced(), make_pod("p", {"cpu": "1"}), snap) == {"a": 75}


def test_uses_actual_requests_not_scoring_defaults() -> None:
    snap = cluster(make_node("a", {"cpu": "1", "memory": "1Gi"}))
    place(snap, make_pod("x", {}), "a")  # counts 0, not 100m/200Mi
    # Without: (0, 0) -> 100; with: (0.5, 0) -> 75; 50 + (50 + 75 - 100) / 2 = 62.
    assert run_score(balanced(), make_pod("p", {"cpu": "500m"}), snap) == {"a": 62}


def test_best_effort_pod_skips() -> None:
    snap = cluster(make_node("a", {"cpu": "1", "memory": "1Gi", GPU: 1}))
    plugin = balanced()
    assert run_score(plugin, make_pod("p", {}), snap) is None
    assert run_score(plugin, make_pod("q", {GPU: 1}), snap) is None  # gpu is not configured
    st_ = plugin.pre_score(CycleState(), make_pod("r", containers=[]), snap, snap.node_ids())
    assert st_.code == Code.SKIP


def test_three_resources_use_population_std() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
    snap = cluster(make_node("a", {"cpu": "3500m", "memory": "40000", GPU: 8}))
    place(snap, make_pod("x", {"cpu": "3", "memory": "5000", GPU: 3}), "a")
    # Upstream case "include scalar resource on a node": 70 with the pod, 69 without.
    assert run_score(balanced(args), make_pod("p", {"memory": "0", GPU: 1}), snap) == {"a": 75}


def test_resources_a_node_lacks_are_skipped() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
    snap = cluster(make_node("gpu", {"cpu": "4", "memory": "4Gi", GPU: 4}),
                   make_node("plain", {"cpu": "4", "memory": "4Gi"}))
    scores = run_score(balanced(args), make_pod("p", {"cpu": "2", "memory": "2Gi", GPU: 2}),
                       snap)
    # Both stay perfectly balanced; "plain" scores over cpu and memory only.
    assert scores == {"gpu": 75, "plain": 75}


def test_unrequested_scalar_resource_is_not_scored() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
    snap = cluster(make_node("a", {"cpu": "4", "memory": "4Gi", GPU: 4}))
    place(snap, make_pod("x", {GPU: 4}), "a")
    # The full gpu would unbalance the node, but the pod does not ask for gpus.
    assert run_score(balanced(args), make_pod("p", {"cpu": "2", "memory": "2Gi"}), snap) == \
        {"a": 75}


def _reference(node: tuple[int, int, int], used: tuple[int, int, int],
               pod: tuple[int, int, int], k: int) -> int:
    """Upstream's Go, per node, in upstream units, over the first ``k`` of cpu, memory, gpu."""
    def balance(req: list[int]) -> int:
        fractions = []
        total = 0.0
        for i in range(k):
            if node[i] == 0 or (i == 2 and pod[2] == 0):
                continue
            f = min(req[i] / node[i], 1.0)
            total += f
            fractions.append(f)
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = total / len(fractions)
            s = 0.0
            for f in fractions:
                s = s + (f - mean) * (f - mean)
            std = math.sqrt(s / len(fractions))
        return int((1 - std) * 100)

    with_pod = balance([used[i] + pod[i] for i in range(3)])
    without = balance(list(used))
    change = 50 + with_pod - without
    return 50 + int(change / 2)


_amount = st.integers(0, 64)


@settings(max_examples=300, deadline=None)
@given(node=st.tuples(_amount, _amount, st.integers(0, 8)),
       used=st.tuples(_amount, _amount, st.integers(0, 8)),
       pod=st.tuples(_amount, _amount, st.integers(0, 8)), k=st.sampled_from([2, 3]))
def test_matches_upstream_reference(node: tuple[int, int, int], used: tuple[int, int, int],
                                    pod: tuple[int, int, int], k: int) -> None:
    names = ["cpu", "memory", GPU][:k]
    args = {"resources": [{"name": name} for name in names]}
    snap = cluster(make_node("a", {"cpu": f"{node[0]}m", "memory": node[1], GPU: node[2]}))
    place(snap, make_pod("x", {"cpu": f"{used[0]}m", "memory": used[1], GPU: used[2]}), "a")
    incoming = make_pod("p", {"cpu": f"{pod[0]}m", "memory": pod[1], GPU: pod[2]})
    got = run_score(balanced(args), incoming, snap)
    if not any(pod[:k]):
        assert got is None
        return
    assert got == {"a": _reference(node, used, pod, k)}
    assert 50 <= got["a"] <= 100


# Property: over several nodes at once (every node having both resources takes the two-fraction
# path for all of them; one lacking a resource takes the general path) each node still gets
# upstream's integer.
@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.tuples(st.tuples(_amount, _amount, st.integers(0, 8)),
                                st.tuples(_amount, _amount, st.integers(0, 8))),
                      min_size=1, max_size=5),
       pod=st.tuples(_amount, _amount, st.integers(0, 8)), k=st.sampled_from([2, 3]))
def test_many_nodes_match_upstream_reference(
        nodes: list[tuple[tuple[int, int, int], tuple[int, int, int]]],
        pod: tuple[int, int, int], k: int) -> None:
    names = ["cpu", "memory", GPU][:k]
    args = {"resources": [{"name": name} for name in names]}
    snap = cluster(*(make_node(f"n{i}", {"cpu": f"{a[0]}m", "memory": a[1], GPU: a[2]})
                     for i, (a, _u) in enumerate(nodes)))
    for i, (_a, u) in enumerate(nodes):
        place(snap, make_pod(f"x{i}", {"cpu": f"{u[0]}m", "memory": u[1], GPU: u[2]}), f"n{i}")
    incoming = make_pod("p", {"cpu": f"{pod[0]}m", "memory": pod[1], GPU: pod[2]})
    got = run_score(balanced(args), incoming, snap)
    if not any(pod[:k]):
        assert got is None
        return
    assert got == {f"n{i}": _reference(a, u, pod, k) for i, (a, u) in enumerate(nodes)}


def test_two_scored_resources_besides_cpu_and_memory() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": GPU}]}
    snap = cluster(make_node("a", {"cpu": "4", GPU: 4}), make_node("b", {"cpu": "4", GPU: 4}))
    place(snap, make_pod("x", {GPU: 2}), "b")
    # a: (0, 0) -> 100, with (0.5, 0.25) -> 87: 68; b: (0, 0.5) -> 75, with (0.5, 0.75) -> 87: 81.
    assert run_score(balanced(args), make_pod("p", {"cpu": "2", GPU: 1}), snap) == \
        {"a": 68, "b": 81}


# ---- args --------------------------------------------------------------------------------------
def test_default_args() -> None:
    args = NodeResourcesBalancedAllocationArgs.parse(None)
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1), ("memory", 1)]
    args = NodeResourcesBalancedAllocationArgs.parse({"resources": [{"name": GPU, "weight": 0}]})
    assert [(r.name, r.weight) for r in args.resources] == [(GPU, 1)]


@pytest.mark.parametrize(("raw", "field", "text"), [
    ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight", "must be 1"),
    ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name", "Duplicate"),
    ({"resource": []}, "resource", "unknown field"),
    ({"resources": {"name": "cpu"}}, "resources", "not a list"),
])
def test_invalid_args(raw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as err:
        NodeResourcesBalancedAllocationArgs.parse(raw)
    assert err.value.field == field
    assert text in err.value.message


def test_no_normalize_score() -> None:
    scores = np.array([60, 70], dtype=np.int64)
    assert balanced().normalize_score(CycleState(), make_pod("p"), scores) is None
