"""The shortcuts the state keeps for binding: device choice over plain lists, shared request
vectors per pod shape, the compiled per-row accounting, and the counters plugins ask instead of
walking every pod. Each must equal a straightforward recomputation after any change sequence,
or a decision would be taken on stale numbers."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from kubeberth.api.gpu import MILLI_PER_GPU, GpuDemand
from kubeberth.api.objects import Node, Pod
from kubeberth.state.cluster import ClusterState, PodInfo, ResourceIndex, make_pod_info
from kubeberth.state.gpu import (
    best_fit_devices,
    random_devices,
    whole_devices,
    worst_fit_devices,
)


# ---- device choice against the numpy formulas it replaced ------------------------------------
def ref_whole(free: np.ndarray, count: int) -> tuple[int, ...]:
    idle = np.flatnonzero(free == MILLI_PER_GPU)
    return () if len(idle) < count else tuple(int(d) for d in idle[:count])


def ref_best(free: np.ndarray, demand: GpuDemand) -> tuple[int, ...]:
    if not demand.is_share:
        return ref_whole(free, demand.count)
    fits = np.flatnonzero(free >= demand.milli)
    return () if len(fits) == 0 else (int(fits[np.argmin(free[fits])]),)


def ref_worst(free: np.ndarray, demand: GpuDemand) -> tuple[int, ...]:
    if not demand.is_share:
        return ref_whole(free, demand.count)
    fits = np.flatnonzero(free >= demand.milli)
    return () if len(fits) == 0 else (int(fits[np.argmax(free[fits])]),)


def ref_random(free: np.ndarray, demand: GpuDemand, rng: np.random.Generator
               ) -> tuple[int, ...]:
    if not demand.is_share:
        return ref_whole(free, demand.count)
    fits = np.flatnonzero(free >= demand.milli)
    return () if len(fits) == 0 else (int(fits[int(rng.integers(len(fits)))]),)


def random_rows(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = [np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64),
            np.full(8, MILLI_PER_GPU, dtype=np.int64), np.full(4, 500, dtype=np.int64)]
    for _ in range(300):
        width = int(rng.integers(0, 12))
        # Few distinct values, so ties between devices are common.
        rows.append(rng.choice(np.array([0, 100, 250, 500, 999, 1000]), size=width
                               ).astype(np.int64))
    return rows


DEMANDS = [GpuDemand(1, m) for m in (1, 100, 250, 500, 999)] + \
    [GpuDemand(c, MILLI_PER_GPU) for c in (1, 2, 3, 8)]


@pytest.mark.parametrize("demand", DEMANDS, ids=lambda d: f"{d.count}x{d.milli}")
def test_device_choices_equal_the_array_formulas(demand: GpuDemand) -> None:
    for row in random_rows(demand.count * 1000 + demand.milli):
        assert best_fit_devices(row, demand) == ref_best(row, demand)
        assert worst_fit_devices(row, demand) == ref_worst(row, demand)
        assert whole_devices(row, demand.count) == ref_whole(row, demand.count)
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        assert random_devices(row, demand, a) == ref_random(row, demand, b)
        assert a.integers(1 << 30) == b.integers(1 << 30)  # the same draws were made


def test_device_choice_reads_a_strided_row() -> None:
    matrix = np.array([[1000, 200], [300, 1000], [300, 0]], dtype=np.int64)
    column = matrix[:, 0]  # not contiguous
    assert best_fit_devices(column, GpuDemand(1, 250)) == (1,)
    assert whole_devices(column, 1) == (0,)


# ---- request vectors per pod shape -----------------------------------------------------------
def test_equal_request_maps_share_one_read_only_vector() -> None:
    index = ResourceIndex()
    a = index.vector({"cpu": 5, "memory": 7})
    assert index.vector({"cpu": 5, "memory": 7}) is a
    assert not a.flags.writeable
    assert a.tolist() == [5, 7, 0]
    assert index.vector({"memory": 7, "cpu": 5}).tolist() == [5, 7, 0]
    assert index.vector({"cpu": 6}).tolist() == [6, 0, 0]


def test_a_new_column_gives_fresh_vectors_of_the_new_width() -> None:
    index = ResourceIndex()
    before = index.vector({"cpu": 5})
    index.add("example.com/x")
    after = index.vector({"cpu": 5})
    assert after is not before
    assert after.tolist() == [5, 0, 0, 0]


def test_the_shape_memo_is_bounded() -> None:
    index = ResourceIndex()
    for k in range(5000):
        assert index.vector({"cpu": k})[0] == k
    assert len(index._vectors) <= 4096


# ---- counters ---------------------------------------------------------------------------------
def node(name: str) -> Node:
    return msgspec.convert({"metadata": {"name": name},
                            "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}, Node)


def pod(name: str, priority: int, affinity: str | None) -> PodInfo:
    spec: dict[str, object] = {"priority": priority, "containers": [
        {"resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}}]}
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}
    if affinity == "affinity":
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                            [term]}}
    elif affinity == "anti":
        spec["affinity"] = {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "podAffinityTerm": term}]}}
    elif affinity == "node":  # node affinity only: no pod terms
        spec["affinity"] = {"nodeAffinity": {}}
    return make_pod_info(msgspec.convert({"metadata": {"name": name, "labels": {"a": "b"}},
                                          "spec": spec}, Pod))


def assert_counters(s: ClusterState) -> None:
    expected: dict[int, int] = {}
    with_terms = 0
    for pi in s.pods.values():
        expected[pi.priority] = expected.get(pi.priority, 0) + 1
        aff = pi.pod.spec.affinity
        with_terms += aff is not None and (aff.pod_affinity is not None
                                           or aff.pod_anti_affinity is not None)
    assert s.priority_counts == expected
    assert s.pod_affinity_pods == with_terms
    for p in range(-2, 5):
        assert s.has_priority_below(p) == any(q < p for q in expected)


def test_counters_follow_every_change() -> None:
    rng = np.random.default_rng(11)
    s = ClusterState()
    for k in range(6):
        s.add_node(node(f"n{k}"))
    assert_counters(s)
    placed: list[PodInfo] = []
    kinds = [None, "affinity", "anti", "node"]
    for k in range(400):
        roll = rng.random()
        if roll < 0.55 or not placed:
            pi = pod(f"p{k}", int(rng.integers(0, 3)), kinds[int(rng.integers(4))])
            s.add_pod(pi, int(rng.integers(6)))
            placed.append(pi)
        elif roll < 0.9:
            s.remove_pod(placed.pop(int(rng.integers(len(placed)))))
        elif roll < 0.95:
            victim = int(rng.integers(6))
            gone = set(id(pi) for pi in s.remove_node(f"n{victim}"))
            placed = [pi for pi in placed if id(pi) not in gone]
            s.add_node(node(f"n{victim}"))
        else:
            # A bound pod's object replaced (a watch update): removal takes back what was
            # counted, and the pods then agree with the counters again once removed.
            pi = placed.pop(int(rng.integers(len(placed))))
            pi.pod = pod(pi.name, 0, kinds[int(rng.integers(4))]).pod
            s.remove_pod(pi)
        assert_counters(s)
    for pi in list(s.pods.values()):
        s.remove_pod(pi)
    assert s.priority_counts == {}
    assert s.pod_affinity_pods == 0


# ---- the compiled row update -------------------------------------------------------------------
def test_row_accounting_equals_the_numpy_formulas() -> None:
    from kubeberth.state.cluster import _account

    rng = np.random.default_rng(3)
    for _ in range(50):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        mats = [np.asfortranarray(rng.integers(-5000, 5000, size=(rows, cols))) for _ in range(6)]
        requested, non_zero, free, req_units, nz_units, alloc = mats
        scale = np.array([1 if c == 0 else 1000 for c in range(cols)], dtype=np.int64)
        width = int(rng.integers(0, cols + 1))  # a pod vector may be narrower than the matrix
        req = rng.integers(-3000, 3000, size=width).astype(np.int64)
        nz = rng.integers(-3000, 3000, size=width).astype(np.int64)
        node, sign = int(rng.integers(rows)), int(rng.choice([1, -1]))
        exp_req, exp_nz = requested.copy(), non_zero.copy()
        exp_req[node, :width] += sign * req
        exp_nz[node, :width] += sign * nz
        exp_free, exp_ru, exp_nu = free.copy(), req_units.copy(), nz_units.copy()
        exp_free[node] = alloc[node] - exp_req[node]
        exp_ru[node] = exp_req[node] // scale
        exp_nu[node] = exp_nz[node] // scale
        _account(requested, non_zero, free, req_units, nz_units, alloc, scale, node, req, nz,
                 sign)
        for got, want in zip((requested, non_zero, free, req_units, nz_units),
                             (exp_req, exp_nz, exp_free, exp_ru, exp_nu), strict=True):
            np.testing.assert_array_equal(got, want)


def test_pod_vectors_of_a_known_shape_follow_a_new_column() -> None:
    # The first pod's shape is kept; a second pod of that shape after a column appeared must
    # not get the old, narrower vector.
    s = ClusterState()
    s.add_node(node("n0"))
    first = pod("a", 0, None)
    s.add_pod(first, 0)
    s.col("example.com/new")
    second = pod("b", 0, None)
    req, nz = s.pod_vectors(second)
    assert len(req) == len(nz) == len(s.resources)
    assert s.resources.known_vector(second.requests) is req
    s.add_pod(second, 0)
    np.testing.assert_array_equal(s.requested[0, : len(req)], 2 * req)
