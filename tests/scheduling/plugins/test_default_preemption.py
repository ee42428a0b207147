"""DefaultPreemption: upstream conformance cases plus the behaviours the cases do not pin down
(eligibility, unresolvable nodes, PDB-aware choice, nominated pods, exact snapshot restore)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pytest
import yaml
from tests.paths import SHARED

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    Container,
    LabelSelector,
    Node,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
    PodSpec,
    PodStatus,
    PriorityClass,
    ResourceRequirements,
)
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    Diagnosis,
    FilterPlugin,
    Plugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
)
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins import (
    default_binder,
    default_preemption,
    node_resources_fit,
    priority_sort,
    workload_preemption,
)
from kubeberth.scheduling.plugins.default_preemption import (
    Candidate,
    DefaultPreemption,
    DefaultPreemptionArgs,
    dry_run_candidates,
    fit_error_message,
    select_candidate,
    select_victims_on_node,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo, make_pod_info

CASES_FILE = SHARED / "conformance" / "kube-scheduler" / "cases.yaml"
_LABELS = {c.label: c for c in Code}


def _load_cases() -> list[dict[str, Any]]:
    with CASES_FILE.open() as fh:
        doc = yaml.load(fh, Loader=yaml.CSafeLoader)
    return [c for c in doc["cases"] if c["plugin"] == "DefaultPreemption"]


CASES = _load_cases()


def _expect(case: Mapping[str, Any]) -> dict[str, Any]:
    expect: dict[str, Any] = case["expect"]
    versions = expect.get("by_version")
    if versions is None:
        return expect
    chosen: dict[str, Any] = versions.get("newest-upstream") or versions["current-upstream"]
    return chosen


def _cases(point: str) -> list[Any]:
    return [pytest.param(c, id=c["id"]) for c in CASES if c["extension_point"] == point]


# ---- building a cluster --------------------------------------------------------------------
def _quantity(resource: str, value: int) -> int | str:
    """Case units: cpu in millicores, everything else in whole units."""
    return f"{value}m" if resource == "cpu" else value


def _node(spec: Mapping[str, Any]) -> Node:
    alloc = {k: _quantity(k, v) for k, v in spec.get("allocatable", {}).items()}
    alloc.setdefault("pods", 32)
    return Node(metadata=ObjectMeta(name=spec["name"]), status=NodeStatus(allocatable=alloc))


def _pod(spec: Mapping[str, Any]) -> Pod:
    containers = [Container(resources=ResourceRequirements(
        requests={k: _quantity(k, v) for k, v in c.get("requests", {}).items()}))
        for c in spec.get("containers", [])]
    return Pod(
        metadata=ObjectMeta(name=spec["name"], namespace=spec.get("namespace", "default"),
                            labels=dict(spec.get("labels", {}))),
        spec=PodSpec(containers=containers, priority=spec.get("priority"),
                     preemption_policy=spec.get("preemption_policy")),
    )


def _pdb(i: int, spec: Mapping[str, Any]) -> PodDisruptionBudget:
    status = spec.get("status", {})
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=f"pdb-{i}", namespace=spec.get("namespace", "default")),
        spec=PodDisruptionBudgetSpec(selector=msgspec.convert(spec["selector"], LabelSelector)
                                     if spec.get("selector") is not None else None),
        status=PodDisruptionBudgetStatus(
            disruptions_allowed=status.get("disruptionsAllowed", 0),
            disrupted_pods={n: "2024-01-01T00:00:00Z" for n in status.get("disruptedPods", [])}),
    )


@dataclass
class World:
    snap: ClusterState
    handle: Handle
    fw: Framework
    pods: dict[str, PodInfo]

    def info(self, spec: Mapping[str, Any]) -> PodInfo:
        return make_pod_info(_pod(spec), self.snap.priority_classes)

    def node(self, name: str) -> int:
        return self.snap.node_index[name]

    def diagnosis(self, codes: Mapping[str, Code]) -> Diagnosis:
        arr = np.zeros(self.snap.num_nodes, dtype=np.int8)
        for name, code in codes.items():
            arr[self.node(name)] = code
        return Diagnosis(codes=arr, reasons=lambda _i: (), failing_plugin=lambda _i: "")

    def pre_filtered(self, pod: PodInfo) -> CycleState:
        state = CycleState()
        _, st = self.fw.run_pre_filter(state, pod, self.snap)
        assert st.ok, st
        return state

    def plugin(self) -> DefaultPreemption:
        p = self.fw.plugin(default_preemption.NAME)
        assert isinstance(p, DefaultPreemption)
        return p


def _world(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
           pdbs: Sequence[Mapping[str, Any]] | None = None, *,
           args: dict[str, Any] | None = None, extra: list[Plugin] | None = None,
           classes: list[PriorityClass] | None = None, seed: int = 0) -> World:
    snap = ClusterState()
    for pc in classes or []:
        snap.priority_classes[pc.metadata.name] = pc
    for spec in nodes:
        snap.add_node(_node(spec))
    snap.pdbs = [_pdb(i, p) for i, p in enumerate(pdbs or [])]
    handle = Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(seed))
    registry = Registry({m.NAME: m.new for m in
                         (priority_sort, node_resources_fit, workload_preemption, default_binder)})
    names = [priority_sort.NAME, node_resources_fit.NAME]
    for plugin in extra or []:
        registry.register(plugin.name, _factory(plugin))
        names.append(plugin.name)
    names += [default_preemption.NAME, default_binder.NAME]
    profile = Profile(plugins={"multiPoint": PluginSet(enabled=[PluginRef(n) for n in names])},
                      plugin_config={default_preemption.NAME: args} if args else {})
    fw = Framework(profile, registry, handle)
    handle.frameworks[profile.scheduler_name] = fw
    world = World(snap, handle, fw, {})
    for spec in pods:
        pi = world.info(spec)
        pi.start_time = float(spec.get("start_time", 0))
        snap.add_pod(pi, world.node(spec["node"]))
        world.pods[pi.name] = pi
    return world


def _factory(plugin: Plugin) -> Callable[[Mapping[str, Any] | None, Handle], Plugin]:
    return lambda _args, _handle: plugin


def _case_world(case: Mapping[str, Any]) -> World:
    return _world(case["nodes"], case["existing_pods"], case.get("pdbs"), args=case["config"])


def _names(victims: list[PodInfo]) -> list[str]:
    return [v.name for v in victims]


def _snapshot_fingerprint(snap: ClusterState) -> tuple[Any, ...]:
    """Everything preemption could disturb, in a form where order matters."""
    n = snap.num_nodes
    return (
        snap.allocatable[:n].tobytes(), snap.requested[:n].tobytes(),
        snap.non_zero_requested[:n].tobytes(), snap.pod_count[:n].tobytes(),
        [list(d) for d in snap.pods_on_node], list(snap.pods),
        [(k, pi.node) for k, pi in snap.pods.items()],
    )


# ---- conformance -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", _cases("postfilter(dry-run)"))
def test_conformance_dry_run(case: dict[str, Any]) -> None:
    w = _case_world(case)
    pod = w.info(case["pod"])
    args = DefaultPreemptionArgs.parse(case["config"])
    nodes = w.snap.node_ids()
    before = _snapshot_fingerprint(w.snap)
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0,
                                       args.num_candidates(len(nodes)))
    assert _snapshot_fingerprint(w.snap) == before
    got = {c.name: (sorted(_names(c.victims)), c.num_pdb_violations) for c in candidates}
    want = {c["node"]: (sorted(c["victims"]), c["num_pdb_violations"])
            for c in _expect(case)["candidates"]}
    assert got == want


@pytest.mark.parametrize("case", _cases("postfilter(select-candidate)"))
def test_conformance_select_candidate(case: dict[str, Any]) -> None:
    w = _case_world(case)
    pod = w.info(case["pod"])
    nodes = w.snap.node_ids()
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0,
                                       len(nodes))
    best = select_candidate(candidates)
    assert best is not None
    assert best.name in _expect(case)["selected_node_any_of"]


@pytest.mark.parametrize("case", _cases("postfilter"))
def test_conformance_post_filter(case: dict[str, Any]) -> None:
    w = _case_world(case)
    pod = w.info(case["pod"])
    diag = w.diagnosis({n: _LABELS[c] for n, c in case["filter_statuses"].items()})
    result, st = w.plugin().post_filter(w.pre_filtered(pod), pod, w.snap, diag)
    expect = _expect(case)
    assert st.code == _LABELS[expect["status"]]
    assert result is not None
    assert (result.nominated_node or "") == expect["nominated_node"]
    if "message" in expect:
        assert st.message() == expect["message"]


def test_every_preemption_case_is_run() -> None:
    points = {c["extension_point"] for c in CASES}
    assert points == {"postfilter(dry-run)", "postfilter(select-candidate)", "postfilter"}
    assert len(CASES) == 10  # every DefaultPreemption case of the shared file


# ---- a small cluster for the behavioural tests -----------------------------------------------
def _n(name: str, cpu: int = 1000, pods: int = 32) -> dict[str, Any]:
    return {"name": name, "allocatable": {"cpu": cpu, "memory": 10**9, "pods": pods}}


def _p(name: str, node: str | None = None, cpu: int = 500, priority: int = 0,
       **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "priority": priority,
                            "containers": [{"requests": {"cpu": cpu}}], **extra}
    if node is not None:
        spec["node"] = node
    return spec


def _all_unschedulable(w: World) -> Diagnosis:
    return w.diagnosis({name: Code.UNSCHEDULABLE for name in w.snap.node_names})


def _preempt(w: World, pod: PodInfo,
             diag: Diagnosis | None = None) -> tuple[PostFilterResult | None, Status]:
    return w.plugin().post_filter(w.pre_filtered(pod), pod, w.snap,
                                  diag or _all_unschedulable(w))


def test_success_returns_victims_and_nominated_node_without_evicting() -> None:
    w = _world([_n("n1")], [_p("low", "n1", priority=0), _p("mid", "n1", priority=5)])
    pod = w.info(_p("hi", cpu=600, priority=10))
    result, st = _preempt(w, pod)
    assert st.ok
    assert st.message() == ("preemption: found a potential placement for pod on node n1, "
                            "preempting 2 victims")
    assert result is not None and result.nominated_node == "n1"
    assert _names(result.victims) == ["mid", "low"]
    assert w.pods["low"].node == w.node("n1") and w.pods["mid"].node == w.node("n1")


def test_preemption_policy_never_is_not_eligible() -> None:
    w = _world([_n("n1")], [_p("low", "n1", cpu=1000)])
    pod = w.info(_p("hi", priority=10, preemption_policy="Never"))
    result, st = _preempt(w, pod)
    assert result is None
    assert st.code == Code.UNSCHEDULABLE
    assert st.message() == "preemption: not eligible due to preemptionPolicy=Never."


def test_preemption_policy_never_from_priority_class() -> None:
    never = PriorityClass(metadata=ObjectMeta(name="batch"), value=10,
                          preemption_policy="Never")
    w = _world([_n("n1")], [_p("low", "n1", cpu=1000)], classes=[never])
    spec = _p("hi")
    del spec["priority"]
    spec_pod = _pod(spec)
    spec_pod.spec.priority_class_name = "batch"
    pod = make_pod_info(spec_pod, w.snap.priority_classes)
    assert pod.priority == 10
    result, st = _preempt(w, pod)
    assert result is None and st.message().endswith("preemptionPolicy=Never.")


def test_terminating_victim_on_nominated_node_blocks_new_preemption() -> None:
    w = _world([_n("n1"), _n("n2")], [_p("low", "n1", cpu=1000), _p("other", "n2", cpu=1000)])
    victim = w.pods["low"].pod
    victim.metadata.deletion_timestamp = "2024-01-01T00:00:00Z"
    victim.status = PodStatus(conditions=[PodCondition(
        type="DisruptionTarget", status="True", reason="PreemptionByScheduler")])
    pod = w.info(_p("hi", priority=10))
    w.handle.nominator.add(pod, w.node("n1"))
    result, st = _preempt(w, pod)
    assert result is None
    assert st.message() == ("preemption: not eligible due to a terminating pod on the "
                            "nominated node.")
    # Once the filters call the nominated node unresolvable, the pod may preempt elsewhere.
    diag = w.diagnosis({"n1": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "n2": Code.UNSCHEDULABLE})
    result, st = _preempt(w, pod, diag)
    assert st.ok and result is not None and result.nominated_node == "n2"


def test_deleting_pod_without_preemption_condition_does_not_block() -> None:
    w = _world([_n("n1")], [_p("low", "n1", cpu=1000)])
    w.pods["low"].pod.metadata.deletion_timestamp = "2024-01-01T00:00:00Z"
    pod = w.info(_p("hi", priority=10))
    w.handle.nominator.add(pod, w.node("n1"))
    result, st = _preempt(w, pod)
    assert st.ok and result is not None and result.nominated_node == "n1"


def test_unresolvable_nodes_are_never_candidates() -> None:
    w = _world([_n("n1"), _n("n2"), _n("n3")],
               [_p("low", "n1", cpu=1000), _p("top", "n2", cpu=1000, priority=100),
                _p("low3", "n3", cpu=1000)])
    pod = w.info(_p("hi", priority=10))
    diag = w.diagnosis({"n1": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "n2": Code.UNSCHEDULABLE,
                        "n3": Code.UNSCHEDULABLE_AND_UNRESOLVABLE})
    result, st = _preempt(w, pod, diag)
    assert st.code == Code.UNSCHEDULABLE
    assert result is not None and result.nominated_node == ""
    assert st.message() == ("preemption: 0/3 nodes are available: 1 No preemption victims found "
                            "for incoming pod, 2 Preemption is not helpful for scheduling.")


def test_node_that_fits_without_victims_is_an_error() -> None:
    w = _world([_n("n1")], [_p("low", "n1", cpu=100)])
    pod = w.info(_p("hi", priority=10))
    result, st = _preempt(w, pod)
    assert result is None
    assert st.code == Code.ERROR
    assert st.message() == 'preemption: expected at least one victim pod on node "n1"'


def test_pdb_aware_choice_prefers_node_without_violation() -> None:
    # n1's victim has the lower priority, but evicting it breaks its PDB.
    w = _world([_n("n1"), _n("n2")],
               [_p("guarded", "n1", cpu=1000, priority=0, labels={"app": "db"}),
                _p("free", "n2", cpu=1000, priority=5)],
               pdbs=[{"namespace": "default", "selector": {"matchLabels": {"app": "db"}},
                      "status": {"disruptionsAllowed": 0}}])
    pod = w.info(_p("hi", priority=10))
    nodes = w.snap.node_ids()
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0, 2)
    assert [(c.name, c.num_pdb_violations) for c in candidates] == [("n2", 0), ("n1", 1)]
    result, st = _preempt(w, pod)
    assert st.ok and result is not None and result.nominated_node == "n2"


def test_pdb_violating_victims_are_reprieved_first() -> None:
    # Either pod alone frees enough; the PDB-covered one is reprieved and the other evicted.
    w = _world([_n("n1")],
               [_p("guarded", "n1", cpu=400, priority=0, labels={"app": "db"}),
                _p("plain", "n1", cpu=400, priority=5)],
               pdbs=[{"namespace": "default", "selector": {"matchLabels": {"app": "db"}},
                      "status": {"disruptionsAllowed": 0}}])
    pod = w.info(_p("hi", cpu=500, priority=10))
    result, st = _preempt(w, pod)
    assert st.ok and result is not None
    assert _names(result.victims) == ["plain"]


@pytest.mark.parametrize("selector", [None, {}])
def test_pdb_with_nil_or_empty_selector_matches_nothing(selector: Any) -> None:
    w = _world([_n("n1")], [_p("a", "n1", cpu=1000, labels={"app": "db"})],
               pdbs=[{"namespace": "default", "selector": selector,
                      "status": {"disruptionsAllowed": 0}}])
    pod = w.info(_p("hi", priority=10))
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                       w.snap.node_ids(), 0, 1)
    assert [c.num_pdb_violations for c in candidates] == [0]


def test_pdb_in_other_namespace_does_not_apply() -> None:
    w = _world([_n("n1")], [_p("a", "n1", cpu=1000, labels={"app": "db"})],
               pdbs=[{"namespace": "other", "selector": {"matchLabels": {"app": "db"}},
                      "status": {"disruptionsAllowed": 0}}])
    pod = w.info(_p("hi", priority=10))
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                       w.snap.node_ids(), 0, 1)
    assert [c.num_pdb_violations for c in candidates] == [0]


def test_snapshot_restored_exactly() -> None:
    w = _world([_n("n1"), _n("n2"), _n("n3")],
               [_p("a1", "n1", cpu=300, priority=0), _p("a2", "n1", cpu=300, priority=50),
                _p("a3", "n1", cpu=300, priority=1),
                _p("b1", "n2", cpu=600, priority=20), _p("b2", "n2", cpu=300, priority=0),
                _p("c1", "n3", cpu=900, priority=100)],
               pdbs=[{"namespace": "default", "selector": {"matchLabels": {"x": "y"}},
                      "status": {"disruptionsAllowed": 0}}])
    pod = w.info(_p("hi", cpu=700, priority=60))
    before = _snapshot_fingerprint(w.snap)
    result, st = _preempt(w, pod)
    assert st.ok and result is not None
    assert _snapshot_fingerprint(w.snap) == before


class _Exploding(FilterPlugin):
    """Fails the run on the n-th call, to prove restoration does not depend on success."""

    name = "Exploding"

    def __init__(self, after: int) -> None:
        self.calls = 0
        self.after = after

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        self.calls += 1
        if self.calls > self.after:
            raise RuntimeError("boom")
        return FilterResult.passing(len(nodes))


def test_snapshot_restored_when_a_filter_raises() -> None:
    boom = _Exploding(after=2)
    w = _world([_n("n1"), _n("n2")],
               [_p("a1", "n1", cpu=300), _p("a2", "n1", cpu=300), _p("a3", "n1", cpu=300),
                _p("b1", "n2", cpu=900)], extra=[boom])
    pod = w.info(_p("hi", cpu=700, priority=60))
    before = _snapshot_fingerprint(w.snap)
    state = w.pre_filtered(pod)
    with pytest.raises(RuntimeError, match="boom"):
        w.plugin().post_filter(state, pod, w.snap, _all_unschedulable(w))
    assert _snapshot_fingerprint(w.snap) == before


def test_higher_priority_nominated_pod_keeps_its_room() -> None:
    # n1 would do with one victim, but a nominated pod of equal priority already claims room.
    w = _world([_n("n1"), _n("n2")], [_p("low1", "n1", cpu=600), _p("low2", "n2", cpu=600)])
    claimant = w.info(_p("claimant", cpu=600, priority=10))
    w.handle.nominator.add(claimant, w.node("n1"))
    pod = w.info(_p("hi", cpu=500, priority=10))
    before = _snapshot_fingerprint(w.snap)
    candidates, statuses = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                              w.snap.node_ids(), 0, 2)
    assert [c.name for c in candidates] == ["n2"]
    assert statuses[w.node("n1")].code == Code.UNSCHEDULABLE
    result, st = _preempt(w, pod)
    assert st.ok and result is not None and result.nominated_node == "n2"
    assert claimant.node == -1
    assert _snapshot_fingerprint(w.snap) == before


class _LabelQuota(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    """At most one pod labelled team=a per node, counted in PreFilter state: proves that the
    dry run keeps PreFilter state in step through the add/remove extensions."""

    name = "LabelQuota"

    class Counts:
        def __init__(self, per_node: dict[int, int]) -> None:
            self.per_node = per_node

        def clone(self) -> _LabelQuota.Counts:
            return _LabelQuota.Counts(dict(self.per_node))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        counts: dict[int, int] = {}
        for pi in snap.iter_pods():
            if pi.labels.get("team") == "a":
                counts[pi.node] = counts.get(pi.node, 0) + 1
        state.write(self.name, _LabelQuota.Counts(counts))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def _bump(self, state: CycleState, pi: PodInfo, node: int, delta: int) -> Status:
        if pi.labels.get("team") == "a":
            counts = state.read(self.name, _LabelQuota.Counts).per_node
            counts[node] = counts.get(node, 0) + delta
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: int,
                snap: ClusterState) -> Status:
        return self._bump(state, to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: int,
                   snap: ClusterState) -> Status:
        return self._bump(state, to_remove, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        counts = state.read(self.name, _LabelQuota.Counts).per_node
        full = np.array([counts.get(int(n), 0) >= 1 for n in nodes], dtype=np.bool_)
        if pod.labels.get("team") != "a":
            full[:] = False
        return FilterResult.from_mask(full, Code.UNSCHEDULABLE, ["team quota"])


def test_pre_filter_state_follows_removals_and_reprieves() -> None:
    w = _world([_n("n1", cpu=4000)],
               [_p("a-old", "n1", cpu=100, priority=1, labels={"team": "a"}),
                _p("b-old", "n1", cpu=100, priority=0, labels={"team": "b"})],
               extra=[_LabelQuota()])
    pod = w.info(_p("a-new", cpu=100, priority=10, labels={"team": "a"}))
    state = w.pre_filtered(pod)
    result, st = w.plugin().post_filter(state, pod, w.snap, _all_unschedulable(w))
    assert st.ok and result is not None
    assert _names(result.victims) == ["a-old"]
    # The caller's state is untouched: the dry run worked on clones.
    assert state.read("LabelQuota", _LabelQuota.Counts).per_node == {w.node("n1"): 1}


def test_candidate_search_stops_once_enough_found_from_offset() -> None:
    w = _world([_n(f"n{i}") for i in range(5)], [_p(f"p{i}", f"n{i}", cpu=1000)
                                                for i in range(5)])
    pod = w.info(_p("hi", priority=10))
    nodes = w.snap.node_ids()
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 3, 2)
    assert [c.name for c in candidates] == ["n3", "n4"]
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 4, 2)
    assert [c.name for c in candidates] == ["n4", "n0"]


def test_violating_candidates_do_not_end_the_search() -> None:
    pdb = [{"namespace": "default", "selector": {"matchLabels": {"app": "db"}},
            "status": {"disruptionsAllowed": 0}}]
    w = _world([_n("n0"), _n("n1"), _n("n2")],
               [_p("p0", "n0", cpu=1000, labels={"app": "db"}),
                _p("p1", "n1", cpu=1000, labels={"app": "db"}),
                _p("p2", "n2", cpu=1000)], pdbs=pdb)
    pod = w.info(_p("hi", priority=10))
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                       w.snap.node_ids(), 0, 1)
    # Each list holds at most one; the search ran on until a non-violating candidate appeared.
    assert [(c.name, c.num_pdb_violations) for c in candidates] == [("n2", 0), ("n0", 1)]


def test_offset_comes_from_seeded_rng() -> None:
    specs = ([_n(f"n{i}") for i in range(30)], [_p(f"p{i}", f"n{i}", cpu=1000)
                                               for i in range(30)])
    chosen = []
    for _ in range(2):
        w = _world(*specs, args={"minCandidateNodesPercentage": 0,
                                 "minCandidateNodesAbsolute": 1}, seed=7)
        pod = w.info(_p("hi", priority=10))
        result, st = _preempt(w, pod)
        assert st.ok and result is not None
        chosen.append(result.nominated_node)
    expected = int(np.random.default_rng(7).integers(30))
    assert chosen == [f"n{expected}", f"n{expected}"]


# ---- select_candidate ------------------------------------------------------------------------
def _victim(name: str, priority: int, start: float = 0.0) -> PodInfo:
    pi = make_pod_info(_pod(_p(name, priority=priority)))
    pi.start_time = start
    return pi


def _cand(name: str, victims: list[PodInfo], violations: int = 0) -> Candidate:
    return Candidate(0, name, victims, violations)


def test_select_candidate_order_of_criteria() -> None:
    assert select_candidate([]) is None
    one = _cand("a", [_victim("x", 5)])
    assert select_candidate([one]) is one
    pick = select_candidate
    # 1. fewest PDB violations beats lower priority
    assert pick([_cand("a", [_victim("x", 0)], 1), _cand("b", [_victim("y", 9)])]).name == "b"
    # 2. lowest highest-priority victim
    assert pick([_cand("a", [_victim("x", 9)]), _cand("b", [_victim("y", 8),
                                                           _victim("z", 8)])]).name == "b"
    # 3. lowest offset sum: two victims at -100 cost more than one at -100
    assert pick([_cand("a", [_victim("x", -100), _victim("y", -100)]),
                 _cand("b", [_victim("z", -100)])]).name == "b"
    # 4. equal sums, fewer victims: a victim at -2^31 adds nothing to the offset sum
    assert pick([_cand("a", [_victim("x", 5), _victim("y", -(2**31))]),
                 _cand("b", [_victim("z", 5)])]).name == "b"
    # 5. latest earliest start among top-priority victims
    assert pick([_cand("a", [_victim("x", 5, 2.0), _victim("y", 5, 2.0)]),
                 _cand("b", [_victim("z", 5, 3.0), _victim("w", 5, 3.0)]),
                 _cand("c", [_victim("v", 5, 1.0), _victim("u", 5, 1.0)])]).name == "b"
    # 6. full tie: first in order
    assert pick([_cand("a", [_victim("x", 5)]), _cand("b", [_victim("y", 5)])]).name == "a"
    # a candidate without victims costs nothing
    assert pick([_cand("a", [_victim("x", 0)]), _cand("b", [])]).name == "b"


def test_select_candidate_start_time_uses_top_priority_victims_only() -> None:
    a = _cand("a", [_victim("x", 5, 10.0), _victim("y", 1, 0.0)])
    b = _cand("b", [_victim("z", 5, 5.0), _victim("w", 1, 99.0)])
    # Equal on everything before start time; a's top-priority victim started later.
    assert select_candidate([b, a]) is a


def test_fit_error_message_histogram() -> None:
    st = Status(Code.UNSCHEDULABLE, ("Insufficient cpu", "Too many pods"))
    cpu_only = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))
    msg = fit_error_message(12, {0: st, 1: st, 2: cpu_only})
    assert msg == ("0/12 nodes are available: 2 Too many pods, 3 Insufficient cpu, "
                   "9 Preemption is not helpful for scheduling.")


# ---- args --------------------------------------------------------------------------------------
def test_args_defaults_and_num_candidates() -> None:
    args = DefaultPreemptionArgs.parse(None)
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)
    assert args.num_candidates(50) == 50
    assert args.num_candidates(5000) == 500
    assert DefaultPreemptionArgs(0, 1).num_candidates(30) == 1
    assert DefaultPreemptionArgs(50, 0).num_candidates(7) == 3


@pytest.mark.parametrize(("raw", "field", "text"), [
    ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage",
     "Invalid value: 101: not in valid range [0, 100]"),
    ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage",
     "Invalid value: -1: not in valid range [0, 100]"),
    ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute",
     "Invalid value: -1: not in valid range [0, inf)"),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     "minCandidateNodesPercentage", "cannot be zero at the same time as minCandidateNodesAbsolute"),
    ({"minCandidateNodesPercentage": "10"}, "minCandidateNodesPercentage", "is not an integer"),
    ({"minCandidateNodesPercentage": True}, "minCandidateNodesPercentage", "is not an integer"),
    ({"minCandidateNodes": 3}, "minCandidateNodes", "unknown field"),
])
def test_args_validation(raw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as err:
        DefaultPreemptionArgs.parse(raw)
    assert err.value.field == field
    assert text in err.value.message


def test_args_error_is_located_in_profile() -> None:
    with pytest.raises(InputError) as err:
        _world([_n("n1")], [], args={"minCandidateNodesAbsolute": -5})
    assert err.value.field is not None
    assert err.value.field.endswith("minCandidateNodesAbsolute")


def _per_node_statuses(w: World, pod: PodInfo, offset: int) -> dict[int, Status]:
    """What the node-by-node walk answers (a selector other than the default one never takes
    the whole-cluster shortcut; this one is the default selector itself)."""
    def select(*args: Any) -> tuple[list[PodInfo], int, Status]:
        return select_victims_on_node(*args)
    _, statuses = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                     w.snap.node_ids(), offset, 2, select=select)
    return statuses


@pytest.mark.parametrize("offset", [0, 2, 4])
def test_no_lower_priority_pod_anywhere_answers_every_node_in_visiting_order(offset: int) -> None:
    w = _world([_n(f"n{i}") for i in range(5)],
               [_p(f"p{i}", f"n{i % 3}", cpu=300, priority=5) for i in range(6)])
    pod = w.info(_p("same", priority=5))
    candidates, statuses = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap,
                                              w.snap.node_ids(), offset, 2)
    assert candidates == []
    assert list(statuses) == [(offset + i) % 5 for i in range(5)]
    slow = _per_node_statuses(w, pod, offset)
    assert list(slow) == list(statuses)
    assert [st.message() for st in statuses.values()] == [st.message() for st in slow.values()]


def test_a_lower_priority_pod_bound_after_a_miss_is_found() -> None:
    # The shortcut reads the state's live priority counts: a pod bound (or evicted) since the
    # last preemption attempt changes the answer at once.
    w = _world([_n("n0"), _n("n1")], [_p("a", "n0", cpu=1000, priority=5),
                                      _p("b", "n1", cpu=400, priority=5)])
    pod = w.info(_p("hi", priority=5))
    nodes = w.snap.node_ids()
    assert dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0, 1)[0] == []
    low = w.info(_p("low", cpu=600, priority=1))
    w.snap.add_pod(low, w.node("n1"))
    candidates, _ = dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0, 1)
    assert [(c.name, _names(c.victims)) for c in candidates] == [("n1", ["low"])]
    w.snap.remove_pod(low)
    assert dry_run_candidates(w.fw, w.pre_filtered(pod), pod, w.snap, nodes, 0, 1)[0] == []
