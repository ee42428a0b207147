"""The compiled resource kernels against straightforward per-node formulas written from upstream's
Go (``fitsRequest``, ``resourceAllocationScorer`` and its three scorers, BalancedAllocation's
``balancedResourceScorer``), on random clusters and on the edge cases: zero or missing
allocatable, over-commit, resources no node has, ignored resources, 0 and 1 nodes, gathered
node subsets, more checks than fit in one integer's bits."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from kubeberth.api.resources import node_allocatable
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import balanced_allocation, node_resources_fit
from kubeberth.scheduling.plugins import resource_kernels as kernels
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

from .plugin_builders import cluster, container, handle, make_node, make_pod, place

CPU, MEMORY, EPHEMERAL = "cpu", "memory", "ephemeral-storage"
FOO, BAR, HUGE = "example.com/foo", "example.com/bar", "hugepages-2Mi"
UNIVERSE = (CPU, MEMORY, EPHEMERAL, FOO, BAR, HUGE)
FIXED = (CPU, MEMORY, EPHEMERAL)


# ---- random clusters ---------------------------------------------------------------------------
def _quantity(name: str, amount: int) -> str | int:
    if name == CPU:
        return f"{amount * 250}m"
    if name in (MEMORY, EPHEMERAL, HUGE):
        return f"{amount * 512}Mi"
    return amount


def _random_requests(rng: np.random.Generator, small: bool) -> dict[str, str | int]:
    top = 4 if small else 12
    return {name: _quantity(name, int(rng.integers(0, top))) for name in UNIVERSE
            if rng.random() < 0.55}


class World:
    """A random cluster and, kept alongside, what each node has in plain dicts (the
    reference formulas never read the state's matrices)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        nodes = []
        for i in range(n):
            alloc: dict[str, str | int] = {"pods": int(rng.integers(1, 5))}
            for name in UNIVERSE:
                if rng.random() < 0.75:
                    # 0 sometimes: a resource the node advertises with nothing left to give.
                    alloc[name] = _quantity(name, int(rng.integers(0, 16)) * (rng.random() < 0.9))
            nodes.append(make_node(f"n{i}", alloc))
        self.snap = cluster(*nodes)
        self.alloc = [node_allocatable(node) for node in nodes]
        self.pods: list[list[PodInfo]] = [[] for _ in range(n)]
        for k in range(int(rng.integers(0, 4 * n + 1))):
            i = int(rng.integers(0, n))
            # Placed without a fit check: nodes end up over-committed too.
            pi = self._pod(rng, f"x{k}", small=False)
            place(self.snap, pi, f"n{i}")
            self.pods[i].append(pi)

    @staticmethod
    def _pod(rng: np.random.Generator, name: str, small: bool) -> PodInfo:
        if rng.random() < 0.2:
            # A container without cpu/memory requests: scoring counts 100m / 200Mi for it.
            return make_pod(name, containers=[container(_random_requests(rng, small)),
                                              container({FOO: 1})])
        return make_pod(name, _random_requests(rng, small))

    def pod(self, rng: np.random.Generator) -> PodInfo:
        return self._pod(rng, "p", small=True)

    def used(self, i: int, name: str, non_zero: bool) -> int:
        return sum((p.non_zero if non_zero else p.requests).get(name, 0) for p in self.pods[i])


def _scale(name: str) -> int:
    return 1 if name == CPU else 1000


# ---- reference formulas ------------------------------------------------------------------------
def ref_filter(w: World, i: int, pod: PodInfo, ignored: tuple[str, ...]
               ) -> tuple[int, tuple[str, ...]]:
    """Upstream ``fitsRequest`` on node ``i``: (code, reasons)."""
    reasons: list[str] = []
    unresolvable = False
    alloc = w.alloc[i]
    if len(w.pods[i]) + 1 > alloc.get("pods", 110_000) // 1000:
        reasons.append("Too many pods")
    scalars = sorted(n for n in pod.requests if n not in FIXED and n not in ignored)
    for name in [n for n in FIXED if n in pod.requests] + scalars:
        request = pod.requests[name]
        if request == 0:
            continue
        free = alloc.get(name, 0) - w.used(i, name, non_zero=False)
        if request > free:
            reasons.append("Insufficient " + name)
            unresolvable = unresolvable or request > alloc.get(name, 0)
    if not reasons:
        return 0, ()
    return (3 if unresolvable else 2), tuple(reasons)


def _scored(w: World, i: int, pod: PodInfo, resources: list[tuple[str, int]],
            use_requested: bool) -> list[tuple[int, int, int, int]]:
    """(allocatable, requested without the pod, the pod's request, weight) in upstream units
    for each resource upstream scores on node ``i``."""
    out = []
    for name, weight in resources:
        pod_req = (pod.requests if use_requested else pod.non_zero).get(name, 0) // _scale(name)
        if "/" in name or name.startswith("hugepages-"):
            if pod_req == 0:
                continue
        elif name not in FIXED:
            continue
        alloc = w.alloc[i].get(name, 0) // _scale(name)
        if alloc == 0:
            continue
        non_zero = name in (CPU, MEMORY) and not use_requested
        used = w.used(i, name, non_zero) // _scale(name)
        out.append((alloc, used, pod_req, weight))
    return out


def _broken_linear(shape: list[tuple[int, int]], p: int) -> int:
    if p <= shape[0][0]:
        return shape[0][1]
    for (u0, s0), (u1, s1) in itertools.pairwise(shape):
        if p <= u1:
            return s0 + int((s1 - s0) * (p - u0) / (u1 - u0))
    return shape[-1][1]


def ref_fit_score(w: World, i: int, pod: PodInfo, kind: str, resources: list[tuple[str, int]],
                  shape: list[tuple[int, int]]) -> int:
    total = weight_sum = 0
    for alloc, used, pod_req, weight in _scored(w, i, pod, resources, use_requested=False):
        req = used + pod_req
        if kind == "LeastAllocated":
            score = 0 if req > alloc else (alloc - req) * 100 // alloc
        elif kind == "MostAllocated":
            score = min(req, alloc) * 100 // alloc
        else:
            util = 100 if req > alloc else req * 100 // alloc
            score = _broken_linear([(u, s * 10) for u, s in shape], util)
            if score <= 0:
                continue
        total += score * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    if kind == "RequestedToCapacityRatio":
        return math.floor(Fraction(total, weight_sum) + Fraction(1, 2))
    return total // weight_sum


def ref_balanced(w: World, i: int, pod: PodInfo, names: list[str]) -> int:
    rows = _scored(w, i, pod, [(n, 1) for n in names], use_requested=True)

    def balance(requested: list[int]) -> int:
        fractions = [min(r / row[0], 1.0) for row, r in zip(rows, requested, strict=True)]
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            s = 0.0
            for f in fractions:
                s += (f - mean) * (f - mean)
            std = math.sqrt(s / len(fractions))
        return int((1 - std) * 100)

    with_pod = balance([used + pod_req for _, used, pod_req, _ in rows])
    without = balance([used for _, used, _, _ in rows])
    change = 50 + with_pod - without
    return 50 + int(change / 2)


# ---- helpers -----------------------------------------------------------------------------------
def _fit_args(rng: np.random.Generator) -> tuple[dict[str, Any], str, list[tuple[str, int]],
                                                 list[tuple[int, int]]]:
    kind = str(rng.choice(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
    names = [str(n) for n in rng.permutation((*UNIVERSE, "pods"))[: int(rng.integers(1, 6))]]
    resources = [(n, int(rng.integers(1, 6))) for n in names]
    utils = sorted(int(u) for u in rng.choice(101, size=int(rng.integers(1, 5)), replace=False))
    shape = [(u, int(rng.integers(0, 11))) for u in utils]
    strategy: dict[str, Any] = {"type": kind,
                                "resources": [{"name": n, "weight": wt} for n, wt in resources]}
    if kind == "RequestedToCapacityRatio":
        strategy["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": s} for u, s in shape]}
    ignored = [BAR] if rng.random() < 0.3 else []
    return {"scoringStrategy": strategy, "ignoredResources": ignored}, kind, resources, shape


def _node_sets(rng: np.random.Generator, snap: ClusterState) -> list[IntArray]:
    """Every node (the state's read-only ids) and a gathered, shuffled subset."""
    every = snap.node_ids()
    subset = rng.permutation(every)[: int(rng.integers(0, len(every) + 1))].astype(np.int64)
    return [every, subset]


def _filter_verdicts(plugin: node_resources_fit.NodeResourcesFit, pod: PodInfo,
                     snap: ClusterState, nodes: IntArray) -> list[tuple[int, tuple[str, ...]]]:
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    res = plugin.filter(state, pod, snap, nodes)
    assert len(res.codes) == len(nodes)
    return [(int(res.codes[k]), res.status(k, plugin.name).reasons) for k in range(len(nodes))]


def _scores(plugin: Any, pod: PodInfo, snap: ClusterState, nodes: IntArray) -> list[int] | None:
    state = CycleState()
    if plugin.pre_score(state, pod, snap, nodes).code == Code.SKIP:
        return None
    return [int(s) for s in plugin.score(state, pod, snap, nodes)]


# ---- tests -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(40))
def test_filter_matches_fits_request(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = World(rng, int(rng.integers(1, 25)))
    args, _, _, _ = _fit_args(rng)
    plugin = node_resources_fit.new(args, handle())
    for _ in range(4):
        pod = w.pod(rng)
        for nodes in _node_sets(rng, w.snap):
            got = _filter_verdicts(plugin, pod, w.snap, nodes)
            want = [ref_filter(w, int(i), pod, tuple(args["ignoredResources"])) for i in nodes]
            assert got == want


@pytest.mark.parametrize("seed", range(40))
def test_fit_scores_match_the_scorers(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    w = World(rng, int(rng.integers(1, 25)))
    args, kind, resources, shape = _fit_args(rng)
    plugin = node_resources_fit.new(args, handle())
    for _ in range(4):
        pod = w.pod(rng)
        for nodes in _node_sets(rng, w.snap):
            want = [ref_fit_score(w, int(i), pod, kind, resources, shape) for i in nodes]
            got = _scores(plugin, pod, w.snap, nodes)
            assert got == want
            # The plugin declares scores_in_range, so the runtime no longer checks them.
            assert all(0 <= score <= 100 for score in got)


@pytest.mark.parametrize("seed", range(40))
def test_balanced_scores_match_the_balance_change(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    w = World(rng, int(rng.integers(1, 25)))
    names = [str(n) for n in rng.permutation((*UNIVERSE, "pods"))[: int(rng.integers(1, 7))]]
    plugin = balanced_allocation.new({"resources": [{"name": n} for n in names]}, handle())
    for _ in range(4):
        pod = w.pod(rng)
        for nodes in _node_sets(rng, w.snap):
            got = _scores(plugin, pod, w.snap, nodes)
            if not any(pod.requests.get(n, 0) // _scale(n) for n in names):
                assert got is None  # best effort for these resources: PreScore skips
                continue
            assert got == [ref_balanced(w, int(i), pod, names) for i in nodes]
            assert all(50 <= score <= 100 for score in got)  # scores_in_range, and tighter


def test_no_nodes() -> None:
    snap = cluster()
    pod = make_pod("p", {CPU: "1", FOO: 1})
    nodes = np.zeros(0, dtype=np.int64)
    fit = node_resources_fit.new(None, handle())
    assert _filter_verdicts(fit, pod, snap, nodes) == []
    assert _scores(fit, pod, snap, nodes) == []
    assert _scores(balanced_allocation.new(None, handle()), pod, snap, nodes) == []


def test_one_node_over_committed_and_unresolvable() -> None:
    snap = cluster(make_node("n", {CPU: "2", MEMORY: "2Gi", "pods": 5}))
    place(snap, make_pod("a", {CPU: "3", MEMORY: "1Gi"}), "n")
    fit = node_resources_fit.new(None, handle())
    nodes = snap.node_ids()
    # cpu over-committed (fails, resolvable by preemption), FOO absent (unresolvable).
    assert _filter_verdicts(fit, make_pod("p", {CPU: "1", FOO: 1}), snap, nodes) == \
        [(3, ("Insufficient cpu", "Insufficient example.com/foo"))]
    assert _filter_verdicts(fit, make_pod("q", {CPU: "1"}), snap, nodes) == \
        [(2, ("Insufficient cpu",))]
    # LeastAllocated: cpu over-committed scores 0, memory (1Gi + 1Gi of 2Gi) 0.
    assert _scores(fit, make_pod("r", {CPU: "1", MEMORY: "1Gi"}), snap, nodes) == [0]
    most = node_resources_fit.new({"scoringStrategy": {"type": "MostAllocated"}}, handle())
    assert _scores(most, make_pod("r", {CPU: "1", MEMORY: "1Gi"}), snap, nodes) == [100]


def test_zero_allocatable_leaves_the_resource_out() -> None:
    snap = cluster(make_node("n", {CPU: "0", MEMORY: "4Gi"}))
    fit = node_resources_fit.new(None, handle())
    # Only memory is scored: (4Gi - 1Gi) / 4Gi.
    assert _scores(fit, make_pod("p", {CPU: "1", MEMORY: "1Gi"}), snap, snap.node_ids()) == [75]
    # One fraction: balance 100 with and without the pod, so 75.
    ba = balanced_allocation.new(None, handle())
    assert _scores(ba, make_pod("p", {CPU: "1", MEMORY: "1Gi"}), snap, snap.node_ids()) == [75]


def test_more_checks_than_bits() -> None:
    names = [f"example.com/r{j:02d}" for j in range(70)]
    snap = cluster(make_node("big", {CPU: "4", **dict.fromkeys(names, 2)}),
                   make_node("small", {CPU: "4", **dict.fromkeys(names[:65], 2)}))
    fit = node_resources_fit.new(None, handle())
    pod = make_pod("p", dict.fromkeys(names, 1))
    got = _filter_verdicts(fit, pod, snap, snap.node_ids())
    assert got == [(0, ()), (3, tuple("Insufficient " + n for n in names[65:]))]
    # Past the bits, a failure only in the last checks still counts.
    place(snap, make_pod("a", {names[-1]: 2}), "big")
    assert _filter_verdicts(fit, pod, snap, snap.node_ids())[0] == \
        (2, ("Insufficient " + names[-1],))


def test_plans_follow_new_resource_columns() -> None:
    snap = cluster(make_node("n", {CPU: "4", MEMORY: "4Gi"}))
    fit = node_resources_fit.new(None, handle())
    pod = make_pod("p", {CPU: "1", FOO: 1})
    assert _filter_verdicts(fit, pod, snap, snap.node_ids()) == \
        [(3, ("Insufficient example.com/foo",))]
    # A node with the resource arrives: the cached check columns must see its new column.
    snap.add_node(make_node("m", {CPU: "4", MEMORY: "4Gi", FOO: 2}))
    assert _filter_verdicts(fit, pod, snap, snap.node_ids()) == \
        [(3, ("Insufficient example.com/foo",)), (0, ())]
    args = {"scoringStrategy": {"type": "MostAllocated",
                                "resources": [{"name": CPU}, {"name": "example.com/bar"}]}}
    most = node_resources_fit.new(args, handle())
    pod = make_pod("q", {CPU: "1", BAR: 1})
    assert _scores(most, pod, snap, snap.node_ids()) == [25, 25]
    snap.add_node(make_node("b", {CPU: "4", BAR: 4}))
    assert _scores(most, pod, snap, snap.node_ids()) == [25, 25, 25]


# ---- compiled vs interpreted -------------------------------------------------------------------
def _python(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The kernel's plain Python form (what NUMBA_DISABLE_JIT=1 runs)."""
    wrapped: Callable[..., Any] = fn.__wrapped__  # type: ignore[attr-defined]
    return wrapped


@pytest.mark.parametrize("seed", range(10))
def test_compiled_kernels_equal_their_python_form(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    n, r = int(rng.integers(0, 30)), 5
    alloc = np.asfortranarray(rng.integers(0, 3, size=(n + 3, r)) * rng.integers(0, 1 << 40,
                                                                                size=(n + 3, r)))
    requested = np.asfortranarray(rng.integers(0, 1 << 40, size=(n + 3, r)))
    non_zero = np.asfortranarray(requested + rng.integers(0, 1000, size=(n + 3, r)))
    nodes = rng.permutation(n + 3)[:n].astype(np.int64)
    m = int(rng.integers(0, r + 1))
    plan = np.zeros((kernels.PLAN_ROWS, m), dtype=np.int64)
    plan[kernels.PLAN_COLUMN] = rng.permutation(r)[:m]
    plan[kernels.PLAN_POD] = rng.integers(0, 1 << 40, size=m)
    plan[kernels.PLAN_WEIGHT] = rng.integers(1, 101, size=m)
    plan[kernels.PLAN_NON_ZERO] = rng.integers(0, 2, size=m)
    shape = np.array([[0, 30, 80, 100], [0, 70, 40, 100]], dtype=np.int64)
    for strategy in (kernels.LEAST, kernels.MOST, kernels.RATIO):
        args = (alloc, requested, non_zero, nodes, plan, strategy, shape)
        fast, slow = np.full(n, -7, dtype=np.int64), np.full(n, -9, dtype=np.int64)
        kernels.share_scores(*args, fast)
        _python(kernels.share_scores)(*args, slow)
        assert fast.tolist() == slow.tolist()
    args2 = (alloc, requested, nodes, plan)
    fast, slow = np.full(n, -7, dtype=np.int64), np.full(n, -9, dtype=np.int64)
    kernels.balanced_scores(*args2, fast)
    _python(kernels.balanced_scores)(*args2, slow)
    assert fast.tolist() == slow.tolist()
    free = np.asfortranarray(alloc - requested // 4)
    pod_count = rng.integers(0, 5, size=n + 3)
    max_pods = rng.integers(0, 5, size=n + 3)
    columns = plan[kernels.PLAN_COLUMN].copy()
    requests = plan[kernels.PLAN_POD].copy()
    prefix = np.arange(n, dtype=np.int64)  # the first n slots: the column-reading path
    for failed, ids, every in itertools.product(
            (np.zeros((0, 0), dtype=np.bool_), np.zeros((m + 1, n), dtype=np.bool_)),
            (nodes, prefix), (False, True)):
        if every and ids is nodes:
            continue
        args3 = (free, alloc, pod_count, max_pods, ids, every, columns, requests)
        # Outputs start with junk: the kernel must write every entry.
        fast_out = (np.full(n, -7, dtype=np.int64), np.full(n, 9, dtype=np.int8))
        slow_out = (np.full(n, -5, dtype=np.int64), np.full(n, 7, dtype=np.int8))
        fast = kernels.fit_filter(*args3, failed.copy(), *fast_out)
        slow = _python(kernels.fit_filter)(*args3, failed.copy(), *slow_out)
        assert fast == slow
        assert fast_out[0].tolist() == slow_out[0].tolist()
        assert fast_out[1].tolist() == slow_out[1].tolist()
        if ids is prefix:
            # Reading columns front to back decides what the indirect reads decide.
            other = (np.full(n, -3, dtype=np.int64), np.full(n, 5, dtype=np.int8))
            assert kernels.fit_filter(free, alloc, pod_count, max_pods, ids, not every, columns,
                                      requests, failed.copy(), *other) == fast
            assert other[0].tolist() == fast_out[0].tolist()
            assert other[1].tolist() == fast_out[1].tolist()
