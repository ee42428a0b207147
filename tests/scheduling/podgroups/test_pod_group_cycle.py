"""The native pod-group cycle: Workload/PodGroup loading, placements, placement scores,
all-or-nothing commits (KEP-4671, KEP-5832, KEP-5732)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.config.workload_api import load_workload_api
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.placement import (
    Placement,
    PlacementProgress,
    PodGroupAssignments,
    PodGroupInfo,
    num_placements_to_score,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.gang_scheduling import GangScheduling
from kubeberth.scheduling.plugins.pod_group_pods_count import PodGroupPodsCount
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.explain import build_state, explain
from kubeberth.state.cluster import ClusterState, PodInfo

GPU = "nvidia.com/gpu"
RACK = "topology.kubernetes.io/rack"


def node(name: str, rack: str | None = None, gpus: int = 8, cpu: str = "64") -> dict[str, Any]:
    labels = {RACK: rack} if rack else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "256Gi", GPU: str(gpus),
                                       "pods": "110"}}}


def pod_group(name: str, min_count: int | None, topology: str | None = None,
              **spec: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    body: dict[str, Any] = {"schedulingPolicy": policy, **spec}
    if topology:
        body["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": body}


def pod(name: str, group: str | None, gpus: int = 1, node_name: str = "",
        cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": cpu, "memory": "1Gi", GPU: str(gpus)}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def write(tmp: Path, docs: list[dict[str, Any]], name: str = "m.yaml") -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs))
    return p


def run(tmp: Path, docs: list[dict[str, Any]], config: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    cfg = load_scheduler_config(write(tmp, [config or {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}],
        "c.yaml"))
    return explain(load_manifests([write(tmp, docs)]), cfg, in_tree_registry())


def by_pod(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    first: dict[str, dict[str, Any]] = {}
    for p in out["pods"]:
        first.setdefault(p["pod"], p)
    return first


# ---- loading -----------------------------------------------------------------------------------
def test_v1alpha2_and_scheduler_plugins_podgroups_are_distinct(tmp_path: Path) -> None:
    docs = [pod_group("g", 2, RACK, disruptionMode={"all": {}}, priorityClassName="hi"),
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g"}, "spec": {"minMember": 3}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": "hi"}, "value": 7}]
    m = load_manifests([write(tmp_path, docs)])
    api = load_workload_api(m)
    g = api.groups["default/g"]
    assert (g.gang, g.min_count, g.topology_key, g.disruption_mode, g.priority_class_name,
            g.priority) == (True, 2, RACK, "All", "hi", 7)
    snap, _ = build_state(m)
    assert snap.objects.pod_groups["default/g"].spec.min_member == 3


@pytest.mark.parametrize(("spec", "field"), [
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": ""}]}},
     "spec.schedulingConstraints.topology[0].key"),
    ({"schedulingPolicy": {"basic": {}}, "disruptionMode": {}}, "spec.disruptionMode"),
])
def test_bad_podgroup_names_file_and_field(tmp_path: Path, spec: dict[str, Any],
                                           field: str) -> None:
    doc = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
           "metadata": {"name": "g"}, "spec": spec}
    with pytest.raises(InputError) as err:
        load_workload_api(load_manifests([write(tmp_path, [doc])]))
    assert err.value.field == field
    assert "m.yaml" in str(err.value)


def test_v1alpha1_workload_ref_converts_to_a_podgroup(tmp_path: Path) -> None:
    wl = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
          "metadata": {"name": "job"},
          "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}}
    pods = [pod(f"w{i}", None) for i in range(2)]
    for p in pods:
        p["spec"]["workloadRef"] = {"name": "job", "podGroup": "workers"}
    out = run(tmp_path, [node("n1"), wl, *pods])
    assert [g["podGroup"] for g in out["podGroups"]] == ["default/job-workers"]
    assert out["podGroups"][0]["minCount"] == 2
    assert {p["result"] for p in out["pods"]} == {"Scheduled"}


# ---- plugins -----------------------------------------------------------------------------------
def _info(min_count: int, scheduled: int = 0) -> PodGroupInfo:
    from kubeberth.config.workload_api import NativeGroup
    return PodGroupInfo(NativeGroup("ns", "g", True, min_count), [],
                        [PodInfo.__new__(PodInfo) for _ in range(scheduled)])


def test_gang_placement_feasible_follows_the_kep() -> None:
    gang = GangScheduling.__new__(GangScheduling)
    state = CycleState()
    info = _info(3)
    assert gang.placement_feasible(state, info, PlacementProgress(1, 1)).code == \
        Code.UNSCHEDULABLE
    assert gang.placement_feasible(state, info, PlacementProgress(2, 1)).code == Code.WAIT
    assert gang.placement_feasible(state, info, PlacementProgress(0, 3)) is SUCCESS


def test_pod_group_pods_count_scores_and_normalizes() -> None:
    plugin = PodGroupPodsCount()
    info = _info(2, scheduled=1)
    snap = ClusterState()
    a = PodGroupAssignments(Placement("p", np.zeros(0, dtype=np.int64)),
                            [(PodInfo.__new__(PodInfo), 0)] * 3)
    assert plugin.score_placement(CycleState(), info, a, snap) == (4, SUCCESS)
    norm, st = plugin.normalize_placement_score(CycleState(), info,
                                                np.array([2, 4], dtype=np.int64))
    assert st.ok and norm is not None and norm.tolist() == [50, 100]
    none, st = plugin.normalize_placement_score(CycleState(), info,
                                                np.array([0, 0], dtype=np.int64))
    assert none is None and st.code == Code.ERROR


def test_placements_to_score_is_adaptive() -> None:
    assert num_placements_to_score(None, 10, 50) == 10
    assert num_placements_to_score(None, 10, 1000) == 8  # 100 - 1000*90/5000 = 82%
    assert num_placements_to_score(None, 100, 5000) == 10
    assert num_placements_to_score(None, 100, 100000) == 5
    assert num_placements_to_score(50, 3, 10) == 1
    assert num_placements_to_score(100, 3, 10) == 3


# ---- the cycle ---------------------------------------------------------------------------------
def racks() -> list[dict[str, Any]]:
    return [node("a1", "rack-a"), node("a2", "rack-a"), node("b1", "rack-b"),
            node("b2", "rack-b"), pod("busy", None, gpus=4, node_name="b1", cpu="32")]


def test_rack_constrained_group_lands_in_one_rack_the_fuller_one(tmp_path: Path) -> None:
    members = [pod(f"w{i}", "train", gpus=4) for i in range(3)]
    out = run(tmp_path, [*racks(), pod_group("train", 3, RACK), *members])
    (g,) = out["podGroups"]
    assert g["result"] == "Scheduled"
    assert g["chosenPlacement"] == f"{RACK}=rack-b"
    pl = {p["name"]: p for p in g["placements"]}
    a, b = pl[f"{RACK}=rack-a"], pl[f"{RACK}=rack-b"]
    assert a["feasibility"] == b["feasibility"] == "Success"
    assert b["scores"]["NodeResourcesFit"]["raw"] > a["scores"]["NodeResourcesFit"]["raw"]
    assert b["scores"]["PodGroupPodsCount"] == {"raw": 3, "normalized": 100, "weighted": 100}
    assert b["total"] == b["scores"]["NodeResourcesFit"]["weighted"] + 100
    nodes = {p["selectedNode"] for p in out["pods"] if p.get("podGroup")}
    assert nodes <= {"b1", "b2"}


def test_group_that_fits_no_rack_binds_nothing(tmp_path: Path) -> None:
    members = [pod(f"w{i}", "train", gpus=8) for i in range(3)]
    out = run(tmp_path, [*racks(), pod_group("train", 3, RACK), *members])
    (g,) = out["podGroups"]
    assert g["result"] == "Unschedulable" and g["chosenPlacement"] is None
    assert all(p["feasibility"] == "Unschedulable" for p in g["placements"])
    assert any(p["failedPlugin"] == "NodeResourcesFit" for p in g["placements"])
    assert {p["result"] for p in out["pods"] if p.get("podGroup")} == {"Unschedulable"}


def test_group_short_of_min_count_binds_nothing(tmp_path: Path) -> None:
    members = [pod(f"w{i}", "train") for i in range(2)]
    out = run(tmp_path, [node("n1"), pod_group("train", 3), *members])
    assert "podGroups" not in out
    results = by_pod(out)
    assert {results[f"default/w{i}"]["result"] for i in range(2)} == {"SchedulingGated"}
    assert "GangScheduling" in results["default/w0"]["message"]


def test_missing_podgroup_blocks_its_pods(tmp_path: Path) -> None:
    out = run(tmp_path, [node("n1"), pod("w0", "nowhere")])
    assert by_pod(out)["default/w0"]["result"] == "SchedulingGated"


def test_placement_points_are_honoured(tmp_path: Path) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
              "kind": "KubeSchedulerConfiguration",
              "percentageOfPlacementsToScore": 50,
              "profiles": [{"plugins": {"placementScore": {"disabled": [{"name": "*"}]}}}]}
    members = [pod(f"w{i}", "train", gpus=4) for i in range(2)]
    out = run(tmp_path, [*racks(), pod_group("train", 2, RACK), *members], config)
    (g,) = out["podGroups"]
    # 50% of two placements: the first feasible one is taken without scoring.
    assert g["placementsToScore"] == 1
    assert g["chosenPlacement"] == f"{RACK}=rack-a"
    assert g["placements"][1]["feasibility"] == "NotEvaluated"


def test_placement_score_plugin_must_implement_it(tmp_path: Path) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
              "kind": "KubeSchedulerConfiguration",
              "profiles": [{"plugins": {"placementScore": {"enabled": [
                  {"name": "TaintToleration"}]}}}]}
    with pytest.raises(InputError, match="does not extend placementScore"):
        run(tmp_path, [node("n1")], config)


# ---- all or nothing ----------------------------------------------------------------------------
def scheduler_for(tmp: Path, docs: list[dict[str, Any]]) -> tuple[Scheduler, ClusterState]:
    m = load_manifests([write(tmp, docs)])
    cfg = load_scheduler_config(write(tmp, [{
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration"}], "c.yaml"))
    snap, pending = build_state(m)

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    sched = Scheduler(cfg, in_tree_registry(), snap, clock=lambda: 0.0, binder=bind,
                      evictor=evict)
    for pi in pending:
        sched.add(pi)
    return sched, snap


def gpus_requested(snap: ClusterState) -> int:
    col = snap.resources.get(GPU)
    return 0 if col is None else int(snap.requested[snap.node_ids(), col].sum()) // 1000


def drain(sched: Scheduler) -> list[str]:
    bound: list[str] = []
    while (res := sched.schedule_one()) is not None:
        if res.outcome == "assumed" and sched.bind(res).ok:
            bound.append(res.pod.key)
    return bound


@settings(max_examples=40, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(0, 1)),
                     min_size=1, max_size=6))
def test_no_group_is_ever_partly_bound(tmp_path: Path, jobs: list[tuple[int, int, int]]) -> None:
    docs: list[dict[str, Any]] = [node("a1", "rack-a"), node("a2", "rack-a"),
                                  node("b1", "rack-b")]
    for j, (size, gpus, racked) in enumerate(jobs):
        docs.append(pod_group(f"g{j}", size, RACK if racked else None))
        docs += [pod(f"g{j}-{i}", f"g{j}", gpus=gpus) for i in range(size)]
    sched, snap = scheduler_for(tmp_path, docs)
    bound = set(drain(sched))
    expected_gpus = 0
    for j, (size, gpus, _racked) in enumerate(jobs):
        mine = {f"default/g{j}-{i}" for i in range(size)}
        assert len(mine & bound) in (0, size), f"group g{j} partly bound"
        if mine <= bound:
            expected_gpus += size * gpus
    # Nothing of a failed group stays reserved: the state holds exactly the bound pods.
    assert gpus_requested(snap) == expected_gpus
    assert not list(sched.handle.waiting_pods)


def test_scheduler_plugins_117_713_shape_does_not_deadlock(tmp_path: Path) -> None:
    """2 × 8-GPU nodes, 60 jobs of 1-8 GPUs each as a gang of 1-GPU pods: groups bind whole,
    one after another, and the cluster is filled without deadlock."""
    rng = np.random.default_rng(7)
    sizes = [int(s) for s in rng.integers(1, 9, size=60)]
    docs: list[dict[str, Any]] = [node("n1"), node("n2")]
    for j, size in enumerate(sizes):
        docs.append(pod_group(f"job{j}", size))
        docs += [pod(f"job{j}-{i}", f"job{j}") for i in range(size)]
    sched, snap = scheduler_for(tmp_path, docs)
    bound = set(drain(sched))
    whole = [j for j, s in enumerate(sizes)
             if {f"default/job{j}-{i}" for i in range(s)} <= bound]
    for j, size in enumerate(sizes):
        got = sum(f"default/job{j}-{i}" in bound for i in range(size))
        assert got in (0, size)
    assert sum(sizes[j] for j in whole) == gpus_requested(snap)
    # No deadlock: whatever is left free, no waiting group would fit in it.
    free = 16 - gpus_requested(snap)
    assert all(sizes[j] > free for j in range(60) if j not in whole)
    assert gpus_requested(snap) >= 16 - max(sizes)


# ---- out-of-tree placement plugins ---------------------------------------------------------------
OOT = "tests.scheduling.podgroups.oot_plugins"


def test_out_of_tree_placement_score_plugin_weighs_in(tmp_path: Path) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
              "kind": "KubeSchedulerConfiguration",
              "profiles": [{"plugins": {"placementScore": {"enabled": [
                  {"name": "PreferRack", "weight": 5}]}},
                  "pluginConfig": [{"name": "PreferRack", "args": {"rack": "rack-a"}}]}]}
    cfg = load_scheduler_config(write(tmp_path, [config], "c.yaml"))
    registry = in_tree_registry().with_out_of_tree([f"{OOT}:PreferRack"])
    members = [pod(f"w{i}", "train", gpus=4) for i in range(3)]
    m = load_manifests([write(tmp_path, [*racks(), pod_group("train", 3, RACK), *members])])
    (g,) = explain(m, cfg, registry)["podGroups"]
    assert g["chosenPlacement"] == f"{RACK}=rack-a"
    a = g["placements"][0]
    assert a["scores"]["PreferRack"] == {"raw": 100, "normalized": 100, "weighted": 500}


def test_out_of_tree_pod_group_post_filter_victims_are_evicted(tmp_path: Path) -> None:
    blocker = pod("blocker", None, gpus=8, node_name="n2")
    blocker["metadata"]["labels"] = {"blocker": "yes"}
    docs = [node("n1"), node("n2"), blocker, pod_group("big", 2),
            *[pod(f"w{i}", "big", gpus=8) for i in range(2)]]
    m = load_manifests([write(tmp_path, docs)])
    cfg = load_scheduler_config(write(tmp_path, [{
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"podGroupPostFilter": {
            # DefaultPreemption would end the run first: no lower-priority victims is
            # UnschedulableAndUnresolvable, which stops the plugins (as upstream).
            "enabled": [{"name": "EvictBlockers"}],
            "disabled": [{"name": "DefaultPreemption"}]}}}]}], "c.yaml"))
    snap, pending = build_state(m)
    evicted: list[str] = []

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        evicted.append(victim.key)
        snap.remove_pod(victim)

    sched = Scheduler(cfg, in_tree_registry().with_out_of_tree([f"{OOT}:EvictBlockers"]), snap,
                      clock=lambda: 0.0, binder=lambda _p, _n: SUCCESS, evictor=evict)
    for pi in pending:
        sched.add(pi)
    assert drain(sched) == []
    assert evicted == ["default/blocker"]
    sched.queue.activate(["default/w0", "default/w1"])
    assert sorted(drain(sched)) == ["default/w0", "default/w1"]


def test_pods_of_one_group_must_share_the_scheduler(tmp_path: Path) -> None:
    other = pod("w1", "train")
    other["spec"]["schedulerName"] = "second"
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
              "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "default-scheduler"},
                           {"schedulerName": "second"}]}
    out = run(tmp_path, [node("n1"), pod_group("train", 2), pod("w0", "train"), other], config)
    (g,) = out["podGroups"]
    assert g["result"] == "Unschedulable" and "must share spec.schedulerName" in g["message"]
    assert all(p["selectedNode"] is None for p in out["pods"])


def test_basic_group_places_what_fits(tmp_path: Path) -> None:
    out = run(tmp_path, [node("n1"), pod_group("b", None),
                         *[pod(f"w{i}", "b", gpus=8) for i in range(3)]])
    (g,) = out["podGroups"]
    assert (g["policy"], g["minCount"], g["result"]) == ("Basic", 1, "Scheduled")
    results = by_pod(out)
    assert sorted(r["result"] for k, r in results.items()) == \
        ["Scheduled", "Unschedulable", "Unschedulable"]


def test_gang_binds_min_count_when_not_all_fit(tmp_path: Path) -> None:
    out = run(tmp_path, [node("n1"), pod_group("g", 2),
                         *[pod(f"w{i}", "g", gpus=4) for i in range(3)]])
    (g,) = out["podGroups"]
    assert g["result"] == "Scheduled"
    (placement,) = g["placements"]
    assert placement["feasibility"] == "Success" and placement["failedPod"] == "default/w2"
    assert placement["failedPlugin"] == "NodeResourcesFit"
    assert [by_pod(out)[f"default/w{i}"]["result"] for i in range(3)] == \
        ["Scheduled", "Scheduled", "Unschedulable"]


def test_scheduled_members_pin_the_topology_domain(tmp_path: Path) -> None:
    bound = pod("w0", "train", gpus=1, node_name="a1")
    out = run(tmp_path, [*racks(), bound, pod_group("train", 1, RACK), pod("w1", "train")])
    (g,) = out["podGroups"]
    assert g["scheduledBefore"] == ["default/w0"]
    assert [p["name"] for p in g["placements"]] == [f"{RACK}=rack-a"]
    assert by_pod(out)["default/w1"]["selectedNode"] in ("a1", "a2")


# ---- plugin units over a real state ------------------------------------------------------------
def _state(tmp: Path, docs: list[dict[str, Any]]) -> tuple[ClusterState, list[PodInfo]]:
    return build_state(load_manifests([write(tmp, docs)]))


def test_topology_generator_one_placement_per_domain(tmp_path: Path) -> None:
    from kubeberth.config.workload_api import NativeGroup
    from kubeberth.scheduling.plugins.topology_placement import TopologyPlacementGenerator
    snap, _ = _state(tmp_path, [node("b1", "rack-b"), node("a1", "rack-a"), node("x"),
                                node("a2", "rack-a")])
    gen = TopologyPlacementGenerator()
    parent = Placement("", snap.node_ids())
    racked = PodGroupInfo(NativeGroup("ns", "g", True, 1, topology_key=RACK), [])
    found, st = gen.generate_placements(CycleState(), racked, parent, snap)
    assert st.ok
    assert [(p.name, [snap.node_names[n] for n in p.nodes]) for p in found] == [
        (f"{RACK}=rack-a", ["a1", "a2"]), (f"{RACK}=rack-b", ["b1"])]
    plain = PodGroupInfo(NativeGroup("ns", "g", True, 1), [])
    assert gen.generate_placements(CycleState(), plain, parent, snap) == ([parent], SUCCESS)


def test_topology_generator_rejects_members_in_two_domains(tmp_path: Path) -> None:
    from kubeberth.config.workload_api import NativeGroup
    from kubeberth.scheduling.plugins.topology_placement import TopologyPlacementGenerator
    snap, _ = _state(tmp_path, [node("a1", "rack-a"), node("b1", "rack-b"),
                                pod("p0", None, node_name="a1"), pod("p1", None, node_name="b1")])
    members = list(snap.pods.values())
    info = PodGroupInfo(NativeGroup("ns", "g", True, 1, topology_key=RACK), [], members)
    found, st = TopologyPlacementGenerator().generate_placements(
        CycleState(), info, Placement("", snap.node_ids()), snap)
    assert found == [] and st.code == Code.ERROR and "more than 1 domain" in st.message()


def test_node_resources_fit_score_placement_is_most_allocated_over_the_placement(
        tmp_path: Path) -> None:
    from kubeberth.config.workload_api import NativeGroup
    from kubeberth.scheduling.plugins.node_resources_fit import new as new_fit
    snap, pending = _state(tmp_path, [
        node("a1", cpu="10"), node("a2", cpu="10"),
        pod("busy", None, node_name="a1", cpu="4"), pod("w0", None, cpu="2")])
    fit = new_fit({"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": GPU, "weight": 2}]}}, None)  # type: ignore[arg-type]
    (w0,) = pending
    a = PodGroupAssignments(Placement("p", snap.node_ids()), [(w0, 1)])
    info = PodGroupInfo(NativeGroup("ns", "g", True, 1), [w0])
    score, st = fit.score_placement(CycleState(), info, a, snap)
    # cpu: (4 + 2) of 20 cores = 30; GPUs: 1 + 1 (busy) of 16 = 12 (12.5 truncated), weight 2:
    # (30 + 2*12) / 3 = 18.
    assert st.ok and score == (30 + 2 * 12) // 3


def test_the_pod_completing_a_group_releases_its_gated_siblings(tmp_path: Path) -> None:
    sched, snap = scheduler_for(tmp_path, [node("n1"), pod_group("g", 3),
                                           *[pod(f"w{i}", "g") for i in range(2)]])
    assert [q.info.key for q in sched.queue.gated_pods()] == ["default/w0", "default/w1"]
    assert drain(sched) == []
    (late,) = build_state(load_manifests([write(tmp_path, [pod("w2", "g")], "late.yaml")]))[1]
    snap.objects.pod_created(late)
    sched.add(late)
    assert sched.queue.gated_pods() == []
    assert sorted(drain(sched)) == ["default/w0", "default/w1", "default/w2"]
