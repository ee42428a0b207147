"""Workload-aware preemption (KEP-5710): DefaultPreemption's PodGroupPostFilter on the KEP's
cases, the host's handling (evict, nominate, retry), and the all-or-nothing property."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduling.podgroups.test_pod_group_cycle import RACK, node, pod, pod_group, run, write

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.config.workload_api import load_workload_api
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.placement import PodGroupInfo, ProposedAssignment
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.workload_preemption import (
    DefaultPreemption,
    Victim,
    domain_victims,
)
from kubeberth.scheduling.pod_group_cycle import GroupOutcome
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.explain import build_state
from kubeberth.state.cluster import ClusterState, PodInfo


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}


def member(name: str, group: str | None, gpus: int, node_name: str = "",
           cls: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    doc = pod(name, group, gpus=gpus, node_name=node_name)
    if cls:
        doc["spec"]["priorityClassName"] = cls
    if labels:
        doc["metadata"]["labels"] = labels
    return doc


def full_cluster(mode: str) -> list[dict[str, Any]]:
    """Two 8-GPU nodes full with a low-priority 4-pod batch gang; a high-priority 2-pod gang
    of 4-GPU pods waits (the shape of examples/native-gangs/preemption.yaml)."""
    return [priority_class("low", 100), priority_class("high", 1000), node("n1"), node("n2"),
            pod_group("batch", 4, priorityClassName="low", disruptionMode={mode: {}}),
            *[member(f"batch-{i}", "batch", 4, n, "low")
              for i, n in enumerate(["n1", "n1", "n2", "n2"])],
            pod_group("train", 2, priorityClassName="high"),
            *[member(f"train-{i}", "train", 4, cls="high") for i in range(2)]]


def groups(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in out["podGroups"] if g["podGroup"] == "default/train"]


def selected(out: dict[str, Any]) -> dict[str, str | None]:
    return {p["pod"]: p["selectedNode"] for p in out["pods"]}


# ---- the KEP's preemption units ----------------------------------------------------------------
def test_disruption_mode_all_evicts_the_whole_group_then_the_preemptor_binds(
        tmp_path: Path) -> None:
    out = run(tmp_path, full_cluster("all"))
    first, second = groups(out)
    pre = first["preemption"]
    assert (first["result"], pre["plugin"], pre["result"]) == \
        ("Unschedulable", "DefaultPreemption", "Success")
    assert pre["victims"] == [f"default/batch-{i}" for i in range(4)]
    nominated = pre["nominatedNodes"]
    assert sorted(nominated) == ["default/train-0", "default/train-1"]
    assert second["result"] == "Scheduled" and second["preemption"] is None
    placed = selected(out)
    assert {k: placed[k] for k in nominated} == nominated


def test_disruption_mode_single_evicts_only_the_pods_in_the_way(tmp_path: Path) -> None:
    """Each pod is its own unit: the most important (first on each node) are reprieved."""
    out = run(tmp_path, full_cluster("single"))
    first, second = groups(out)
    victims = first["preemption"]["victims"]
    assert len(victims) == 2
    on_node = {"default/batch-0": "n1", "default/batch-1": "n1",
               "default/batch-2": "n2", "default/batch-3": "n2"}
    assert {on_node[v] for v in victims} == {"n1", "n2"}
    assert victims == ["default/batch-1", "default/batch-3"]
    assert second["result"] == "Scheduled"


def test_equal_priority_is_never_a_victim(tmp_path: Path) -> None:
    docs = full_cluster("all")
    docs[1]["value"] = 100  # "high" is now as low as the batch group
    out = run(tmp_path, docs)
    (g,) = groups(out)
    assert g["preemption"]["result"] == "UnschedulableAndUnresolvable"
    assert g["message"].endswith(
        ", pod group preemption: No preemption victims found for incoming preemptor")
    assert all(selected(out)[f"default/train-{i}"] is None for i in range(2))


def test_group_priority_decides_not_the_pods(tmp_path: Path) -> None:
    """KEP-5710: a member's priority as a victim is its PodGroup's, whatever its own says."""
    docs = full_cluster("all")
    for d in docs:
        if d["metadata"]["name"].startswith("batch-"):
            d["spec"]["priorityClassName"] = "high"
    out = run(tmp_path, docs)
    assert groups(out)[0]["preemption"]["victims"] == [f"default/batch-{i}" for i in range(4)]


def test_pdb_protected_pods_are_reprieved_first(tmp_path: Path) -> None:
    """Lone low-priority pods: without a budget the later pod on each node goes; with the
    first ones protected, the protected ones stay and the others go."""
    lone = [member(f"p{i}", None, 4, n, "low", {"app": "keep" if i % 2 else "free"})
            for i, n in enumerate(["n1", "n1", "n2", "n2"])]
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "keep"},
           "spec": {"selector": {"matchLabels": {"app": "keep"}}, "maxUnavailable": 0},
           "status": {"disruptionsAllowed": 0}}
    base = [priority_class("low", 100), priority_class("high", 1000), node("n1"), node("n2"),
            *lone, pod_group("train", 2, priorityClassName="high"),
            *[member(f"train-{i}", "train", 4, cls="high") for i in range(2)]]
    without = groups(run(tmp_path, base))[0]["preemption"]["victims"]
    assert without == ["default/p1", "default/p3"]
    with_pdb = groups(run(tmp_path, [*base, pdb]))[0]["preemption"]["victims"]
    assert with_pdb == ["default/p0", "default/p2"]


def test_preemption_policy_never_makes_the_group_ineligible(tmp_path: Path) -> None:
    docs = full_cluster("all")
    docs[1]["preemptionPolicy"] = "Never"
    out = run(tmp_path, docs)
    (g,) = groups(out)
    assert g["preemption"]["result"] == "Unschedulable"
    assert g["preemption"]["message"] == \
        "pod group preemption: not eligible due to preemptionPolicy=Never."


def test_a_rack_constrained_group_preempts_inside_one_rack(tmp_path: Path) -> None:
    """1.37 preempts for topology-constrained groups too: the algorithm re-run picks a rack,
    and with Single only the two batch pods in that rack go."""
    docs = full_cluster("single")
    for d in docs:
        if d["kind"] == "Node":
            d["metadata"]["labels"] = {RACK: "rack-a" if d["metadata"]["name"] == "n1"
                                       else "rack-b"}
        if d["metadata"]["name"] == "train":
            d["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    out = run(tmp_path, docs)
    first, second = groups(out)
    pre = first["preemption"]
    (node_name,) = set(pre["nominatedNodes"].values())
    on_node = {"n1": ["default/batch-0", "default/batch-1"],
               "n2": ["default/batch-2", "default/batch-3"]}
    assert pre["victims"] == on_node[node_name]
    assert pre["message"] == \
        "pod group preemption: found a placement for podgroup, preempting 2 victims"
    assert first["message"].endswith(", " + pre["message"])
    assert second["result"] == "Scheduled"
    assert {selected(out)[f"default/train-{i}"] for i in range(2)} == {node_name}


def test_an_ongoing_preemption_keeps_the_nominations_and_evicts_nothing(tmp_path: Path) -> None:
    """A batch pod still terminating from an earlier preemption on a node a training pod is
    nominated to: Success without victims (upstream's isOngoingPreemption)."""
    docs = full_cluster("all")
    for d in docs:
        name = d["metadata"]["name"]
        if name == "batch-0":
            d["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            d["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                           "reason": "PreemptionByScheduler"}]}
        if name.startswith("train-"):
            d["status"] = {"nominatedNodeName": "n1"}
    (g,) = groups(run(tmp_path, docs))
    assert g["preemption"] == {
        "plugin": "DefaultPreemption", "result": "Success", "victims": [],
        "message": "pod group preemption: ongoing preemption on nominated nodes",
        "nominatedNodes": {"default/train-0": "n1", "default/train-1": "n1"}}


def test_podgroup_post_filter_can_be_disabled(tmp_path: Path) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
              "kind": "KubeSchedulerConfiguration",
              "profiles": [{"plugins": {"podGroupPostFilter": {"disabled": [{"name": "*"}]}}}]}
    (g,) = groups(run(tmp_path, full_cluster("all"), config))
    assert g["preemption"] == {"plugin": None, "result": "Unschedulable", "message": "",
                               "victims": [], "nominatedNodes": {}}
    # Upstream appends the plugins' (empty) status message as one more reason.
    assert g["message"].endswith("Insufficient nvidia.com/gpu., ")


# ---- victims and their order -------------------------------------------------------------------
def test_victim_units_and_importance(tmp_path: Path) -> None:
    docs = [priority_class("low", 100), node("n1"), node("n2"),
            pod_group("all3", 3, priorityClassName="low", disruptionMode={"all": {}}),
            *[member(f"a{i}", "all3", 1, n) for i, n in enumerate(["n1", "n2", "n2"])],
            pod_group("single", 2, priorityClassName="low"),
            *[member(f"s{i}", "single", 1, "n1") for i in range(2)],
            member("lone", None, 1, "n2", "low")]
    snap, _ = build_state(load_manifests([write(tmp_path, docs)]))
    units = domain_victims(snap)
    shape = [([pi.key for pi, _ in v.pods], v.priority, v.group) for v in units]
    assert shape == [(["default/a0", "default/a1", "default/a2"], 100, True),
                     (["default/s0"], 100, True), (["default/s1"], 100, True),
                     (["default/lone"], 100, False)]
    ranked = sorted(units, key=Victim.importance)
    # A larger group is more important than a smaller one, any group more than a lone pod.
    assert [len(v.pods) for v in ranked] == [3, 1, 1, 1] and not ranked[-1].group


def test_snapshot_is_restored_and_nothing_is_evicted_by_the_plugin(tmp_path: Path) -> None:
    m = load_manifests([write(tmp_path, full_cluster("all"))])
    snap, pending = build_state(m)
    before = {k: (p.node, p.gpu_devices) for k, p in snap.pods.items()}
    order = [list(on) for on in snap.pods_on_node]
    free = snap.free.copy()
    sched = Scheduler(load_scheduler_config(None), in_tree_registry(), snap, clock=lambda: 0.0,
                      binder=lambda _p, _n: SUCCESS, evictor=lambda _v, _p: None)
    fw = sched.frameworks["default-scheduler"]
    plugin = fw.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    train = [p for p in pending if p.key.startswith("default/train")]
    group = snap.objects.native_group(train[0])
    assert group is not None
    calls: list[int] = []

    def schedule() -> tuple[list[ProposedAssignment], Status]:
        """train-0 on n1, train-1 on n2, each with its PreFilter state."""
        calls.append(len(snap.pods))
        proposed = []
        for i, p in enumerate(train):
            state = CycleState()
            fw.run_pre_filter(state, p, snap)
            proposed.append(ProposedAssignment(p, i, state))
        return proposed, SUCCESS

    result, st = plugin.pod_group_post_filter(CycleState(), PodGroupInfo(group, train), snap,
                                              schedule)
    assert st.code == Code.SUCCESS and result is not None
    assert calls == [0]  # run once, with every potential victim removed
    assert [v.key for v in result.victims] == [f"default/batch-{i}" for i in range(4)]
    assert result.nominated == {"default/train-0": "n1", "default/train-1": "n2"}
    assert {k: (p.node, p.gpu_devices) for k, p in snap.pods.items()} == before
    assert [list(on) for on in snap.pods_on_node] == order
    assert (snap.free == free).all()


# ---- loading -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "field"), [
    ({"schedulingPolicy": {"basic": {}}, "priorityClassName": "nope"},
     "spec.priorityClassName"),
    ({"schedulingPolicy": {"basic": {}}, "priorityClassName": "low", "priority": 5},
     "spec.priority"),
    ({"schedulingPolicy": {"basic": {}}, "priority": 5}, "spec.priority"),  # computed: 0
])
def test_bad_priority_names_the_field(tmp_path: Path, spec: dict[str, Any],
                                              field: str) -> None:
    doc = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
           "metadata": {"name": "g"}, "spec": spec}
    with pytest.raises(InputError) as err:
        load_workload_api(load_manifests([write(tmp_path, [priority_class("low", 100), doc])]))
    assert err.value.field == field


def test_group_priority_defaults_as_a_pods_does(tmp_path: Path) -> None:
    default = {**priority_class("base", 42), "globalDefault": True}
    docs = [default, pod_group("plain", 1), pod_group("system", 1,
                                                     priorityClassName="system-node-critical")]
    api = load_workload_api(load_manifests([write(tmp_path, docs)]))
    assert api.groups["default/plain"].priority == 42
    assert api.groups["default/system"].priority == 2000001000


# ---- property: all-or-nothing survives preemption ----------------------------------------------
def _bound_counts(snap: ClusterState, names: list[str]) -> dict[str, int]:
    return {g: sum(1 for m in snap.objects.native_members(f"default/{g}").values()
                   if m.node >= 0) for g in names}


@settings(max_examples=30, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 8), st.integers(0, 2),
                               st.booleans()), min_size=2, max_size=6))
def test_no_group_is_ever_partly_bound_after_preemption(
        tmp_path: Path, jobs: list[tuple[int, int, int, bool]]) -> None:
    """Gangs of rising arrival, random priority and disruption mode on two 8-GPU nodes. After
    every cycle, each group with disruptionMode All (minCount = its size) has all or none of
    its pods bound: preemption never leaves a piece of one, and no gang binds partly."""
    docs: list[dict[str, Any]] = [node("n1"), node("n2"),
                                  *[priority_class(f"p{p}", p * 100) for p in range(3)]]
    names = []
    for j, (size, gpus, prio, whole) in enumerate(jobs):
        name = f"g{j}"
        names.append(name)
        docs.append(pod_group(name, size, priorityClassName=f"p{prio}",
                              disruptionMode={"all" if whole else "single": {}}))
        docs.extend(member(f"{name}-{i}", name, gpus, cls=f"p{prio}") for i in range(size))
    sizes = {f"g{j}": size for j, (size, *_rest) in enumerate(jobs)}
    whole_groups = [f"g{j}" for j, job in enumerate(jobs) if job[3]]
    snap, pending = build_state(load_manifests([write(tmp_path, docs)]))
    evicted: list[str] = []

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        evicted.append(victim.key)
        snap.remove_pod(victim)
        snap.objects.pod_deleted(victim.key)

    sched = Scheduler(load_scheduler_config(None), in_tree_registry(), snap,
                      clock=lambda: 0.0, binder=lambda _p, _n: SUCCESS, evictor=evict)
    retried: list[GroupOutcome] = []
    for name in names:
        # One group at a time: each arrives once the earlier ones are bound or waiting.
        for pi in pending:
            if pi.name.startswith(f"{name}-"):
                sched.add(pi)
        while (res := sched.schedule_one()) is not None:
            if res.outcome == "assumed":
                assert sched.bind(res).ok
            out = res.group
            if out is not None and out.preemption is not None and out.preemption.victims \
                    and all(o is not out for o in retried):
                retried.append(out)  # its victims are gone: retry it, as explain does
                sched.queue.activate(out.pods)
            counts = _bound_counts(snap, names)
            for g in whole_groups:
                # Victims are not re-created here: a group preempted whole has none left.
                assert counts[g] in (0, sizes[g]), (g, counts[g], sizes[g])
            for g, n in counts.items():
                alive = len(snap.objects.native_members(f"default/{g}"))
                assert n == 0 or n >= min(sizes[g], alive)
    for key in evicted:
        assert key not in snap.pods
