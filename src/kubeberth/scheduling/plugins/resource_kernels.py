"""Compiled per-node loops of NodeResourcesFit and NodeResourcesBalancedAllocation.

Both plugins visit every candidate node in every cycle with a few integer or float operations
per scored resource. As numpy code that was some forty array calls per cycle, each costing more
in dispatch than in arithmetic; as kernels (:func:`kubeberth.state.jit.kernel`) it is one call
per plugin that reads the state's matrices by node index, so nothing is gathered first.

The kernels take a per-pod *plan*, a small int64 matrix built once per pod shape and state
column layout (:class:`PlanCache`): the state columns to read and, per row, the pod's request,
weight and which matrix holds the nodes' usage. The formulas are upstream's, in the operation
order of the numpy code they replaced, so integer results are exact and float results
IEEE-identical (no fastmath).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from kubeberth.state.cluster import ClusterState, IntArray
from kubeberth.state.jit import kernel
from kubeberth.state.memo import ShapeMemo

Int8Array = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

# Scoring strategies of :func:`share_scores`.
LEAST = 0
MOST = 1
RATIO = 2

# Rows of a score plan (columns are the scored resources).
PLAN_COLUMN = 0  # state column of the resource
PLAN_POD = 1  # the pod's request, upstream units
PLAN_WEIGHT = 2  # the resource's weight
PLAN_NON_ZERO = 3  # 1: the nodes' usage is their non-zero requests, 0: their requests
PLAN_ROWS = 4

MAX_SCORE = 100  # framework.interface.MAX_NODE_SCORE, as a kernel constant
MAX_UTILIZATION = 100


@kernel
def fit_filter(free: IntArray, allocatable: IntArray, pod_count: IntArray, max_pods: IntArray,
               nodes: IntArray, every: bool, columns: IntArray, requests: IntArray,
               failed: BoolArray, bits: IntArray, codes: Int8Array) -> int:
    """Upstream ``fitsRequest`` over ``nodes``: check 0 is the pod slot, check ``j`` request
    ``requests[j - 1]`` against the free amount of state column ``columns[j - 1]``. Returns
    how many nodes failed, per node the failed checks as bits (check ``j`` is bit ``j``, for
    the first 63) and the code: 0, Unschedulable (2) or, when a failed request exceeds the
    node's whole allocatable, UnschedulableAndUnresolvable (3). When ``failed`` has rows, it
    receives every check's verdict (checks × nodes), for more checks than bits. ``bits`` and
    ``codes`` (one entry per node, any content) receive the results: arrays made by the caller
    cost less than arrays a kernel hands back. ``every`` says that ``nodes`` is ``0 .. n-1``:
    each check then reads its column front to back, without the indirection."""
    n = len(nodes)
    m = len(columns)
    bits[:n] = 0
    codes[:n] = 0
    record = failed.shape[0] > 0
    for k in range(n):
        i = nodes[k]
        if pod_count[i] >= max_pods[i]:
            bits[k] = 1
            if record:
                failed[0, k] = True
    for j in range(m):
        c = columns[j]
        request = requests[j]
        bit = np.int64(1) << np.int64(j + 1) if j < 62 else np.int64(0)
        if every and not record:
            column = free[:, c]
            for k in range(n):
                if column[k] < request:
                    bits[k] |= bit
            continue
        for k in range(n):
            if free[nodes[k], c] < request:
                bits[k] |= bit
                if record:
                    failed[j + 1, k] = True
    failures = 0
    for k in range(n):
        any_failed = bits[k] != 0
        if record and not any_failed:
            for j in range(m + 1):
                any_failed = any_failed or failed[j, k]
        if not any_failed:
            continue
        failures += 1
        code = 2
        i = nodes[k]
        # The free amount never exceeds allocatable, so a request above allocatable failed.
        for j in range(m):
            if allocatable[i, columns[j]] < requests[j]:
                code = 3
                break
        codes[k] = code
    return failures


@kernel
def share_scores(allocatable: IntArray, requested: IntArray, non_zero: IntArray, nodes: IntArray,
                 plan: IntArray, strategy: int, shape: IntArray, out: IntArray) -> None:
    """NodeResourcesFit's score per node (upstream ``resourceAllocationScorer`` with the
    LeastAllocated, MostAllocated or RequestedToCapacityRatio scorer), from the state's
    matrices in upstream units. A resource the node lacks (allocatable 0) is skipped for that
    node, leaving its weight out; RequestedToCapacityRatio also leaves out resources scoring
    0 and rounds half up. ``shape`` holds the ratio's utilizations (row 0) and scores (row 1).
    The scores land in ``out`` (one entry per node, any content)."""
    n = len(nodes)
    m = plan.shape[1]
    out[:n] = 0
    if m == 2 and strategy != RATIO:
        # The common case with the loop-invariant plan in registers; the same formulas.
        c0, c1 = plan[PLAN_COLUMN, 0], plan[PLAN_COLUMN, 1]
        p0, p1 = plan[PLAN_POD, 0], plan[PLAN_POD, 1]
        w0, w1 = plan[PLAN_WEIGHT, 0], plan[PLAN_WEIGHT, 1]
        used0 = non_zero if plan[PLAN_NON_ZERO, 0] else requested
        used1 = non_zero if plan[PLAN_NON_ZERO, 1] else requested
        most = strategy == MOST
        for k in range(n):
            i = nodes[k]
            total = 0
            weight_sum = 0
            alloc = allocatable[i, c0]
            if alloc != 0:
                req = used0[i, c0] + p0
                if most:
                    total += min(req, alloc) * MAX_SCORE // alloc * w0
                elif req <= alloc:
                    total += (alloc - req) * MAX_SCORE // alloc * w0
                weight_sum += w0
            alloc = allocatable[i, c1]
            if alloc != 0:
                req = used1[i, c1] + p1
                if most:
                    total += min(req, alloc) * MAX_SCORE // alloc * w1
                elif req <= alloc:
                    total += (alloc - req) * MAX_SCORE // alloc * w1
                weight_sum += w1
            if weight_sum != 0:
                out[k] = total // weight_sum
        return
    utils = shape[0]
    points = shape[1]
    last = shape.shape[1] - 1
    for k in range(n):
        i = nodes[k]
        total = 0
        weight_sum = 0
        for j in range(m):
            c = plan[PLAN_COLUMN, j]
            alloc = allocatable[i, c]
            if alloc == 0:
                continue
            used = non_zero[i, c] if plan[PLAN_NON_ZERO, j] else requested[i, c]
            req = used + plan[PLAN_POD, j]
            weight = plan[PLAN_WEIGHT, j]
            if strategy == LEAST:
                score = 0 if req > alloc else (alloc - req) * MAX_SCORE // alloc
            elif strategy == MOST:
                score = min(req, alloc) * MAX_SCORE // alloc
            else:
                util = MAX_UTILIZATION if req > alloc else req * MAX_UTILIZATION // alloc
                # Upstream BuildBrokenLinearFunction: constant outside the points, linear
                # between them with Go's truncating integer division.
                if util <= utils[0]:
                    score = points[0]
                elif util > utils[last]:
                    score = points[last]
                else:
                    hi = 1
                    while utils[hi] < util:
                        hi += 1
                    num = (points[hi] - points[hi - 1]) * (util - utils[hi - 1])
                    den = utils[hi] - utils[hi - 1]
                    q = num // den
                    if q < 0 and q * den != num:
                        q += 1
                    score = points[hi - 1] + q
                if score <= 0:
                    continue
            total += score * weight
            weight_sum += weight
        if weight_sum == 0:
            continue
        if strategy == RATIO:
            out[k] = (2 * total + weight_sum) // (2 * weight_sum)
        else:
            out[k] = total // weight_sum


@kernel
def balanced_scores(allocatable: IntArray, requested: IntArray, nodes: IntArray,
                    plan: IntArray, out: IntArray) -> None:
    """NodeResourcesBalancedAllocation's score per node: the balance of the resources' used
    fractions (requests / allocatable, capped at 1, over the resources the node has) with the
    pod minus without it, mapped onto 50..100 as ``50 + (50 + change) / 2`` (Go division).
    The scores land in ``out`` (one entry per node)."""
    n = len(nodes)
    m = plan.shape[1]
    half = MAX_SCORE // 2
    if m == 2:
        # The common case with the loop-invariant plan in registers; the same formulas.
        c0, c1 = plan[PLAN_COLUMN, 0], plan[PLAN_COLUMN, 1]
        p0, p1 = plan[PLAN_POD, 0], plan[PLAN_POD, 1]
        for k in range(n):
            i = nodes[k]
            a0 = allocatable[i, c0]
            a1 = allocatable[i, c1]
            change = half
            if a0 != 0 and a1 != 0:  # else at most one fraction: balance 100 either way
                u0 = requested[i, c0]
                u1 = requested[i, c1]
                f0 = min(float(u0 + p0) / float(a0), 1.0)
                f1 = min(float(u1 + p1) / float(a1), 1.0)
                change += int((1.0 - abs(f0 - f1) / 2) * float(MAX_SCORE))
                f0 = min(float(u0) / float(a0), 1.0)
                f1 = min(float(u1) / float(a1), 1.0)
                change -= int((1.0 - abs(f0 - f1) / 2) * float(MAX_SCORE))
            q = change // 2
            if q < 0 and q * 2 != change:
                q += 1
            out[k] = half + q
        return
    fractions = np.empty(max(m, 1), dtype=np.float64)
    for k in range(n):
        i = nodes[k]
        change = half
        for with_pod in (1, 0):
            # The fractions of the resources this node has, capped at 1.
            count = 0
            for j in range(m):
                c = plan[PLAN_COLUMN, j]
                alloc = allocatable[i, c]
                if alloc == 0:
                    continue
                used = requested[i, c] + with_pod * plan[PLAN_POD, j]
                fractions[count] = min(float(used) / float(alloc), 1.0)
                count += 1
            # The balance int64((1 - std) * 100): std is half the difference of two
            # fractions, the population standard deviation of more, else 0.
            std = 0.0
            if count == 2:
                std = abs(fractions[0] - fractions[1]) / 2
            elif count > 2:
                total = fractions[0]
                for j in range(1, count):
                    total += fractions[j]
                mean = total / count
                d = fractions[0] - mean
                squares = d * d
                for j in range(1, count):
                    d = fractions[j] - mean
                    squares += d * d
                std = math.sqrt(squares / count)
            balance = int((1.0 - std) * float(MAX_SCORE))
            change += balance if with_pod else -balance
        q = change // 2
        if q < 0 and q * 2 != change:
            q += 1
        out[k] = half + q


_IDS: list[IntArray] = [np.arange(1024, dtype=np.int64)]


def every_node_ids(n: int) -> IntArray:
    """``0 .. n-1`` as a writeable array, to pass for every node: the state's own node ids are
    read-only, and numba types a read-only argument through a slow path (~1 µs a call).
    Kernels never write their ``nodes``."""
    ids = _IDS[0]
    if len(ids) < n:
        ids = _IDS[0] = np.arange(max(n, 2 * len(ids)), dtype=np.int64)
    return ids[:n]


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_PLAN_CACHE_LIMIT = 1024


class PlanCache(Generic[K, V]):
    """Per-pod-shape work that depends on the state's resource columns, kept while the
    resource index (same object, same version and matrix width) is unchanged."""

    __slots__ = ("_index", "_plans", "_version", "_width")

    def __init__(self) -> None:
        self._index: object = None
        self._version = -1
        self._width = -1
        self._plans: ShapeMemo[K, V] = ShapeMemo(_PLAN_CACHE_LIMIT)

    def get(self, snap: ClusterState, key: K) -> V | None:
        index = snap.resources
        width = snap.allocatable.shape[1]
        if index is not self._index or index.version != self._version or width != self._width:
            self._index, self._version, self._width = index, index.version, width
            self._plans.clear()
        return self._plans.get(key)

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` (call right after a missed :meth:`get`)."""
        return self._plans.put(key, value)
