"""The runtime's and scheduler's shortcuts decide exactly what their plain forms decide: lazily
assembled first failures, segments kept only for failing filters, the rotated cut without a join,
skipped range checks and NormalizeScore calls, shared verdicts and statuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec
import numpy as np
import pytest

from kubeberth.api.objects import Node, Pod
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import FilterPlugin, ScorePlugin
from kubeberth.scheduling.framework.runtime import FilterOutcome, Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler, _rotated
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo, make_pod_info

from .fakes import registry as fake_registry


def _cluster(n: int) -> ClusterState:
    snap = ClusterState()
    for i in range(n):
        snap.add_node(msgspec.convert({"metadata": {"name": f"n{i}"}}, Node))
    return snap


def _pod(name: str = "p") -> PodInfo:
    return make_pod_info(msgspec.convert({"metadata": {"name": name}}, Pod))


# ---- filters: fast and recorded outcomes agree -------------------------------------------------
class _MaskFilter(FilterPlugin):
    """Fails the node slots in ``fail`` with ``code`` and a per-plugin, per-parity reason."""

    name: ClassVar[str] = "Mask"

    def __init__(self, name: str, fail: set[int], code: Code, *, lazy: bool) -> None:
        self.name = name  # type: ignore[misc]
        self.fail = fail
        self.code = code
        self.lazy = lazy

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        failed = np.isin(nodes, np.array(sorted(self.fail), dtype=np.int64))
        if not failed.any():
            return FilterResult.passing(len(nodes))
        codes = np.where(failed, np.int8(self.code), np.int8(0)).astype(np.int8)
        ids = (failed * (1 + nodes % 2)).astype(np.int32)
        table: list[tuple[str, ...]] = [(), (f"{self.name} even",), (f"{self.name} odd",)]
        if self.lazy:
            return FilterResult(codes, explain=lambda: (ids, table))
        return FilterResult(codes, ids, table)


def _mask_framework(snap: ClusterState, plugins: list[_MaskFilter]) -> Framework:
    reg = fake_registry()
    for p in plugins:
        reg.register(p.name, lambda _a, _h, p=p: p)
    names = ["Sort", "Binder", *(p.name for p in plugins)]
    prof = Profile(plugins={"multiPoint": PluginSet(enabled=[PluginRef(n) for n in names])})
    return Framework(prof, reg, Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(0)))


def _describe(out: FilterOutcome) -> tuple[Any, ...]:
    n = len(out.nodes)
    return (out.codes.tolist(), out.first_plugin.tolist(),
            [out.reasons_at(i) for i in range(n)], [out.plugin_at(i) for i in range(n)],
            sorted(out.reason_counts().items()), out.feasible_positions().tolist())


@pytest.mark.parametrize("seed", range(12))
def test_fast_filter_pass_matches_the_recorded_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    snap = _cluster(n)
    plugins = [_MaskFilter(f"F{k}", {int(s) for s in np.flatnonzero(rng.random(n) < rate)},
                           Code(int(rng.choice([2, 3]))), lazy=bool(rng.integers(2)))
               for k, rate in enumerate(rng.choice([0.0, 0.1, 0.5, 1.0], size=4))]
    fw = _mask_framework(snap, plugins)
    nodes = snap.node_ids()
    fast = fw.run_filters(CycleState(), _pod(), snap, nodes)
    recorded = fw.run_filters(CycleState(), _pod(), snap, nodes, record=True)
    assert _describe(fast) == _describe(recorded)
    # Positions a later writer changes (nominated pods, extenders) read back as written.
    fast.first_plugin[0] = 3
    assert fast.first_plugin[0] == 3


def test_only_failing_filters_keep_a_segment() -> None:
    snap = _cluster(6)
    fw = _mask_framework(snap, [_MaskFilter("A", set(), Code.UNSCHEDULABLE, lazy=False),
                                _MaskFilter("B", {1, 4}, Code.UNSCHEDULABLE, lazy=True),
                                _MaskFilter("C", {2}, Code.UNSCHEDULABLE, lazy=False),
                                _MaskFilter("D", {1, 2}, Code.UNSCHEDULABLE, lazy=False)])
    out = fw.run_filters(CycleState(), _pod(), snap, snap.node_ids())
    assert [len(s) for s in out.segments] == [0, 1, 1, 0]
    assert out.first_plugin.tolist() == [-1, 1, 2, -1, 1, -1]
    assert out.reasons_at(1) == ("B odd",) and out.reasons_at(2) == ("C even",)
    assert out.reasons_at(0) == () and out.plugin_at(0) == ""
    assert out.feasible_positions().tolist() == [0, 3, 5]


def test_no_failure_gives_writeable_zero_codes() -> None:
    snap = _cluster(5)
    fw = _mask_framework(snap, [_MaskFilter("A", set(), Code.UNSCHEDULABLE, lazy=False)])
    out = fw.run_filters(CycleState(), _pod(), snap, snap.node_ids())
    assert out.codes.tolist() == [0] * 5 and out.first_plugin.tolist() == [-1] * 5
    assert out.passed is None and out.feasible_positions().tolist() == [0, 1, 2, 3, 4]
    out.codes[2] = 2  # the nominated-pod check writes here
    assert out.feasible_positions().tolist() == [0, 1, 3, 4]


def test_concatenated_outcomes_keep_reasons() -> None:
    snap = _cluster(8)
    fw = _mask_framework(snap, [_MaskFilter("A", {0, 5}, Code.UNSCHEDULABLE, lazy=True),
                                _MaskFilter("B", {1, 5, 6}, Code.UNSCHEDULABLE, lazy=False)])
    ids = snap.node_ids()
    both = FilterOutcome.concat(fw.run_filters(CycleState(), _pod(), snap, ids[:4]),
                                fw.run_filters(CycleState(), _pod(), snap, ids[4:]))
    whole = fw.run_filters(CycleState(), _pod(), snap, ids, record=True)
    assert _describe(both)[:5] == _describe(whole)[:5]


# ---- the all-pass verdict and statuses ---------------------------------------------------------
def test_all_pass_verdict_is_shared_and_read_only() -> None:
    a = FilterResult.passing(7)
    assert a is FilterResult.passing(7) and a.passes_all
    assert a.reasons == [()] and a.reason_ids.tolist() == [0] * 7
    with pytest.raises(ValueError):
        a.codes[0] = 2


def test_with_plugin_names_once_and_shares_named_success() -> None:
    named = SUCCESS.with_plugin("DefaultBinder")
    assert named == Status(Code.SUCCESS, (), "DefaultBinder")
    assert named is SUCCESS.with_plugin("DefaultBinder")
    assert SUCCESS.plugin == ""  # the shared unnamed success is untouched
    failed = Status(Code.UNSCHEDULABLE, ("no",), "First")
    assert failed.with_plugin("Second") is failed
    assert Status(Code.ERROR, ("x",)).with_plugin("P") == Status(Code.ERROR, ("x",), "P")


# ---- score: range check and NormalizeScore -----------------------------------------------------
class _Fixed(ScorePlugin):
    name: ClassVar[str] = "Fixed"

    def __init__(self, name: str, scores: IntArray, *, in_range: bool = False) -> None:
        self.name = name  # type: ignore[misc]
        self.scores = scores
        self.scores_in_range = in_range  # type: ignore[misc]
        self.calls = 0

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        self.calls += 1
        return self.scores


def _score_framework(snap: ClusterState, *plugins: ScorePlugin,
                     weights: Mapping[str, int] | None = None) -> Framework:
    reg = fake_registry()
    for p in plugins:
        reg.register(p.name, lambda _a, _h, p=p: p)
    refs = [PluginRef(p.name, (weights or {}).get(p.name, 0)) for p in plugins]
    prof = Profile(plugins={"multiPoint": PluginSet(enabled=[PluginRef("Sort"),
                                                             PluginRef("Binder"), *refs])})
    return Framework(prof, reg, Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(0)))


def test_out_of_range_scores_fail_unless_the_plugin_promises_its_range() -> None:
    snap = _cluster(3)
    bad = np.array([0, 101, 5], dtype=np.int64)
    checked = _score_framework(snap, _Fixed("Bad", bad))
    with pytest.raises(RuntimeError, match="Bad returned score 101"):
        checked.run_score(CycleState(), _pod(), snap, snap.node_ids())
    negative = _score_framework(snap, _Fixed("Neg", np.array([0, -1, 5], dtype=np.int64)))
    with pytest.raises(RuntimeError, match="Neg returned score -1"):
        negative.run_score(CycleState(), _pod(), snap, snap.node_ids())
    # The promise is the plugin's: the runtime takes its word and skips the check.
    trusted = _score_framework(snap, _Fixed("Trusted", bad, in_range=True))
    out = trusted.run_score(CycleState(), _pod(), snap, snap.node_ids())
    assert out.totals.tolist() == [0, 101, 5]


def test_read_only_scores_are_checked_once_and_new_ones_again() -> None:
    snap = _cluster(3)
    good = np.array([100, 0, 7], dtype=np.int64)
    good.flags.writeable = False
    plugin = _Fixed("Shared", good)
    fw = _score_framework(snap, plugin, weights={"Shared": 2})
    for _ in range(3):
        out = fw.run_score(CycleState(), _pod(), snap, snap.node_ids(), record=True)
        assert out.totals.tolist() == [200, 0, 14]
        assert out.per_plugin["Shared"][1] is good
    bad = np.array([100, 0, 700], dtype=np.int64)
    bad.flags.writeable = False
    plugin.scores = bad
    with pytest.raises(RuntimeError, match="700"):
        fw.run_score(CycleState(), _pod(), snap, snap.node_ids())
    # Writeable scores are checked every time, even when the same array comes back.
    scratch = np.array([1, 2, 3], dtype=np.int64)
    plugin.scores = scratch
    fw.run_score(CycleState(), _pod(), snap, snap.node_ids())
    scratch[1] = 500
    with pytest.raises(RuntimeError, match="500"):
        fw.run_score(CycleState(), _pod(), snap, snap.node_ids())


class _Normalizing(_Fixed):
    def __init__(self, name: str, scores: IntArray) -> None:
        super().__init__(name, scores)
        self.normalized = 0

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        self.normalized += 1
        return scores // 2


def test_normalize_score_runs_where_a_plugin_has_one() -> None:
    snap = _cluster(3)
    norm = _Normalizing("Halves", np.array([100, 50, 0], dtype=np.int64))
    plain = _Fixed("Plain", np.array([1, 2, 3], dtype=np.int64))
    per_instance = _Fixed("PerInstance", np.array([10, 10, 10], dtype=np.int64))
    per_instance.normalize_score = lambda _s, _p, s: s * 0  # type: ignore[method-assign]
    fw = _score_framework(snap, norm, plain, per_instance)
    out = fw.run_score(CycleState(), _pod(), snap, snap.node_ids(), record=True)
    assert norm.normalized == 1
    assert out.per_plugin["Halves"][1].tolist() == [50, 25, 0]
    assert out.per_plugin["Plain"][1] is out.per_plugin["Plain"][0]
    assert out.per_plugin["PerInstance"][1].tolist() == [0, 0, 0]
    assert out.totals.tolist() == [51, 27, 3]


def test_scores_of_other_dtypes_are_read_as_int64() -> None:
    snap = _cluster(3)
    fw = _score_framework(snap, _Fixed("Small", np.array([1, 2, 3], dtype=np.int32)),
                          weights={"Small": 3})
    out = fw.run_score(CycleState(), _pod(), snap, snap.node_ids(), record=True)
    raw = out.per_plugin["Small"][0]
    assert raw.dtype == np.int64 and out.totals.tolist() == [3, 6, 9]


# ---- the rotated cut ---------------------------------------------------------------------------
def _cordoned_scheduler(nodes: int, cordoned: set[int]) -> Scheduler:
    snap = ClusterState()
    for i in range(nodes):
        snap.add_node(msgspec.convert({
            "metadata": {"name": f"n{i:04d}"}, "spec": {"unschedulable": i in cordoned},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "30"}}}, Node))

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    return Scheduler(load_scheduler_config(None), in_tree_registry(), snap, clock=lambda: 0.0,
                     seed=11, binder=bind, evictor=lambda _v, _b: None)


@pytest.mark.parametrize(("cordon_every", "start"), [
    (5, 0), (5, 10), (5, 170), (5, 249),  # 200 feasible, 120 wanted: cut with and without wrap
    (2, 0), (2, 101), (2, 200),  # 125 feasible: the cut wraps almost always
    (1, 0), (1, 77),  # none feasible
])
def test_rotated_cut_decides_what_node_by_node_order_decides(cordon_every: int,
                                                             start: int) -> None:
    """250 identical nodes (every node ties), some cordoned: the whole-cluster pass with its
    rotated cut must pick the node, count the evaluated nodes and move the start index as the
    recorded node-by-node cycle does, also when the rng breaks ties among the cut nodes."""
    seen = []
    for record in (False, True):
        cordoned = {i for i in range(250) if i % cordon_every == 0} if cordon_every > 1 \
            else set(range(250))
        sched = _cordoned_scheduler(250, cordoned)
        runs = []
        for i in range(3):
            sched.next_start_node_index = (start + 37 * i) % 250
            sched.add(make_pod_info(msgspec.convert({"metadata": {"name": f"p{i}"}, "spec": {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}]}}, Pod), seq=i))
            res = sched.schedule_one(record=record)
            assert res is not None
            runs.append((res.outcome, res.node, res.evaluated, res.feasible,
                         sched.next_start_node_index))
            if res.outcome == "assumed":
                sched.bind(res)
        seen.append(runs)
    assert seen[0] == seen[1]


@pytest.mark.parametrize("n", [1, 2, 7])
def test_rotated_batches_are_slices_of_the_rotated_order(n: int) -> None:
    nodes = np.arange(10, 10 + n, dtype=np.int64)
    nodes.flags.writeable = False
    for start in range(n):
        ordered = np.concatenate([nodes[start:], nodes[:start]])
        for lo in range(n + 1):
            for hi in range(lo, n + 1):
                assert _rotated(nodes, start, lo, hi).tolist() == ordered[lo:hi].tolist()
    assert _rotated(nodes, 0, 0, n) is nodes


def test_every_extension_point_runner_is_called_even_without_plugins() -> None:
    """Hosts time extension points by wrapping the runners (live metrics: upstream records
    Reserve, Permit and PreBind also for a profile without such plugins)."""
    sched = _cordoned_scheduler(3, set())
    fw = sched.frameworks["default-scheduler"]
    # GangScheduling, in the default profile, is the only Permit plugin; it leaves pods of no
    # native PodGroup alone.
    assert not fw.reserve and [p.name for p in fw.permit] == ["GangScheduling"] \
        and not fw.pre_bind
    calls: list[str] = []
    for method in ("run_reserve", "run_permit", "run_pre_bind", "run_bind", "run_post_bind"):
        original = getattr(fw, method)

        def wrapper(*args: Any, _f: Any = original, _m: str = method) -> Any:
            calls.append(_m)
            return _f(*args)
        setattr(fw, method, wrapper)
    sched.add(_pod("p"))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "assumed" and sched.bind(res).ok
    assert calls == ["run_reserve", "run_permit", "run_pre_bind", "run_bind", "run_post_bind"]
