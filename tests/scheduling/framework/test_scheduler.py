"""The scheduler's cycle end to end with the in-tree plugins: routing, selection, preemption."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import yaml

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.config.manifests import load_manifests
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.explain import explain
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info


def node_doc(name: str, cpu: str = "4", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "20"}}}


def pod_doc(name: str, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec}}


def write(tmp: Path, name: str, docs: list[dict[str, Any]] | dict[str, Any]) -> Path:
    p = tmp / name
    if isinstance(docs, list):
        p.write_text(yaml.safe_dump_all(docs))
    else:
        p.write_text(yaml.safe_dump(docs))
    return p


TWO_PROFILES = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "packer",
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {
             "scoringStrategy": {"type": "MostAllocated",
                                 "resources": [{"name": "cpu", "weight": 1}]}}}]},
    ],
}


def run(tmp: Path, docs: list[dict[str, Any]], config: dict[str, Any] | None = None,
        seed: int = 0) -> dict[str, Any]:
    manifests = load_manifests([write(tmp, "m.yaml", docs)])
    cfg = load_scheduler_config(write(tmp, "c.yaml", config) if config else None)
    return explain(manifests, cfg, in_tree_registry(), seed=seed)


def test_profiles_route_by_scheduler_name(tmp_path: Path) -> None:
    docs = [node_doc("busy"), node_doc("idle"),
            {**pod_doc("resident", cpu="2"), "spec": {**pod_doc("r", cpu="2")["spec"],
                                                      "nodeName": "busy"}},
            pod_doc("spread"), pod_doc("packed", schedulerName="packer"),
            pod_doc("stranger", schedulerName="nobody")]
    data = run(tmp_path, docs, TWO_PROFILES)
    placed = {p["pod"]: (p.get("profile", None), p["selectedNode"])
              for p in data["pods"]}
    assert placed["default/spread"] == ("default-scheduler", "idle")
    assert placed["default/packed"] == ("packer", "busy")
    assert placed["default/stranger"] == (None, None)


def test_queue_sort_must_match_across_profiles(tmp_path: Path) -> None:
    cfg = {**TWO_PROFILES, "profiles": [
        {"schedulerName": "a"},
        {"schedulerName": "b", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}},
    ]}
    with pytest.raises(InputError):
        run(tmp_path, [node_doc("n")], cfg)


def test_queue_order_is_priority_then_arrival(tmp_path: Path) -> None:
    docs = [node_doc("n", cpu="1"), pod_doc("first"), pod_doc("vip", priority=100)]
    data = run(tmp_path, docs)
    assert [p["pod"] for p in data["pods"]] == ["default/vip", "default/first"]
    assert data["pods"][0]["selectedNode"] == "n"
    assert data["pods"][1]["result"] == "Unschedulable"


def test_preemption_nominates_and_evicts_in_explain(tmp_path: Path) -> None:
    low = pod_doc("low", cpu="4", priority=0, nodeName="n")
    docs = [node_doc("n"), low, pod_doc("high", cpu="4", priority=10)]
    data = run(tmp_path, docs)
    high = data["pods"][0]
    assert high["result"] == "Unschedulable"
    assert high["nominatedNode"] == "n" and high["victims"] == ["default/low"]


def test_nominated_pod_capacity_is_respected_by_lower_priority_pods(tmp_path: Path) -> None:
    # high preempts low on n and is nominated there; mid (lower priority than high) must not
    # take the room high is waiting for.
    docs = [node_doc("n"), pod_doc("low", cpu="4", priority=0, nodeName="n"),
            pod_doc("high", cpu="4", priority=10), pod_doc("mid", cpu="1", priority=5)]
    data = run(tmp_path, docs)
    by_pod = {p["pod"]: p for p in data["pods"]}
    assert by_pod["default/high"]["nominatedNode"] == "n"
    assert by_pod["default/mid"]["result"] == "Unschedulable"


def test_ties_are_broken_by_seed_reproducibly(tmp_path: Path) -> None:
    docs = [node_doc(f"n{i}") for i in range(6)] + [pod_doc(f"p{i}") for i in range(6)]
    a = run(tmp_path, docs, seed=1)
    b = run(tmp_path, docs, seed=1)
    assert [p["selectedNode"] for p in a["pods"]] == [p["selectedNode"] for p in b["pods"]]
    seeds = {tuple(p["selectedNode"] for p in run(tmp_path, docs, seed=s)["pods"])
             for s in range(6)}
    assert len(seeds) > 1  # the tie-break really is random across seeds


def test_percentage_of_nodes_to_score_limits_scored_nodes(tmp_path: Path) -> None:
    docs = [node_doc(f"n{i:03d}") for i in range(200)] + [pod_doc("p")]
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1",
           "kind": "KubeSchedulerConfiguration", "percentageOfNodesToScore": 10}
    data = run(tmp_path, docs, cfg)
    scored = [n for n, e in data["pods"][0]["nodes"].items() if e["scored"]]
    assert len(scored) == 100  # never fewer than 100 nodes


def _scheduler(nodes: int) -> tuple[Scheduler, ClusterState]:
    snap = ClusterState()
    for i in range(nodes):
        snap.add_node(msgspec.convert({"metadata": {"name": f"n{i}"}, "status": {
            "allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}}}, Node))

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    return Scheduler(load_scheduler_config(None), in_tree_registry(), snap,
                     clock=lambda: 0.0, seed=0, binder=bind, evictor=evict), snap


def test_start_index_rotates_over_large_clusters() -> None:
    sched, snap = _scheduler(300)
    starts = []
    for i in range(3):
        pod = msgspec.convert({"metadata": {"name": f"p{i}"}, "spec": {"containers": [
            {"resources": {"requests": {"cpu": "1"}}}]}}, Pod)
        starts.append(sched.next_start_node_index)
        sched.add(make_pod_info(pod, seq=i))
        res = sched.schedule_one()
        assert res is not None and res.outcome == "assumed"
        assert res.evaluated == 144  # numFeasibleNodesToFind: 48% of 300 nodes
        sched.bind(res)
    assert starts == [0, 144, 288]
    assert int(snap.pod_count.sum()) == 3
    assert np.all(snap.requested.sum(axis=0)[snap.col("cpu")] == 3000)


def test_gated_pods_are_reported_not_attempted(tmp_path: Path) -> None:
    docs = [node_doc("n"), pod_doc("gated", schedulingGates=[{"name": "example.com/wait"}]),
            pod_doc("free")]
    data = run(tmp_path, docs)
    by_pod = {p["pod"]: p for p in data["pods"]}
    assert by_pod["default/free"]["selectedNode"] == "n"
    assert by_pod["default/gated"]["result"] == "SchedulingGated"
    assert by_pod["default/gated"]["nodes"] == {}


def _mixed_scheduler(nodes: int) -> tuple[Scheduler, ClusterState]:
    """Nodes of four shapes, every seventh cordoned, so filters reject some of them."""
    snap = ClusterState()
    for i in range(nodes):
        snap.add_node(msgspec.convert({
            "metadata": {"name": f"n{i:05d}"},
            "spec": {"unschedulable": i % 7 == 3},
            "status": {"allocatable": {"cpu": str(2 + 2 * (i % 4)), "memory": f"{4 + i % 3}Gi",
                                       "pods": "30"}}}, Node))

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    return Scheduler(load_scheduler_config(None), in_tree_registry(), snap,
                     clock=lambda: 0.0, seed=3, binder=bind, evictor=evict), snap


@pytest.mark.parametrize("nodes", [300, 5000])
def test_fast_path_decides_what_the_recorded_path_decides(nodes: int) -> None:
    """Without recording, a cycle may judge every node at once and read the verdicts in
    rotated order (300 nodes) or filter in rotated batches (5,000 nodes); either way it must
    pick the node, count the evaluated nodes and move the start index as the recorded
    (node by node in rotated order) cycle does."""
    runs = []
    for record in (False, True):
        sched, _snap = _mixed_scheduler(nodes)
        decisions = []
        for i in range(40):
            pod = msgspec.convert({"metadata": {"name": f"p{i}"}, "spec": {"containers": [
                {"resources": {"requests": {"cpu": f"{1 + i % 5}", "memory": "1Gi"}}}]}}, Pod)
            sched.add(make_pod_info(pod, seq=i))
            res = sched.schedule_one(record=record)
            assert res is not None
            decisions.append((res.outcome, res.node, res.evaluated, res.feasible,
                              sched.next_start_node_index))
            if res.outcome == "assumed":
                sched.bind(res)
        runs.append(decisions)
    assert runs[0] == runs[1]
    assert any(d[0] == "assumed" for d in runs[0])


@pytest.mark.parametrize("seed", range(4))
def test_nominated_pods_count_in_the_whole_cluster_filter_pass(seed: int) -> None:
    # Without "big" (nominated to the roomier n0, not yet bound) counted, n0 would win on
    # LeastAllocated; counted, n0 has 1 cpu left and "mid" must go to n1. The small n2 fails
    # Fit outright, so the filter pass knows its feasible positions before the nominated check.
    snap = ClusterState()
    snap.add_node(msgspec.convert(node_doc("n0", cpu="8"), Node))
    snap.add_node(msgspec.convert(node_doc("n1", cpu="4"), Node))
    snap.add_node(msgspec.convert(node_doc("n2", cpu="1"), Node))

    def bind(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    sched = Scheduler(load_scheduler_config(None), in_tree_registry(), snap,
                      clock=lambda: 0.0, seed=seed, binder=bind, evictor=lambda _v, _b: None)
    big = make_pod_info(msgspec.convert({**pod_doc("big", cpu="7"),
                                         "spec": {**pod_doc("big", cpu="7")["spec"],
                                                  "priority": 100}}, Pod))
    sched.handle.nominator.add(big, snap.node_index["n0"])
    sched.next_start_node_index = seed % 3
    sched.add(make_pod_info(msgspec.convert(pod_doc("mid", cpu="2"), Pod)))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "assumed" and res.node == "n1"


def test_preemption_clears_lower_priority_nominations_on_its_node() -> None:
    """Upstream's prepareCandidate clears the nomination of lower-priority pods nominated to the
    node a preemptor is nominated to (they may no longer fit there); the scheduler does it."""
    snap = ClusterState()
    snap.add_node(msgspec.convert({"metadata": {"name": "n"}, "status": {
        "allocatable": {"cpu": "4", "memory": "64Gi", "pods": "10"}}}, Node))

    def pod(name: str, priority: int, node: str = "", cpu: str = "2") -> PodInfo:
        return make_pod_info(msgspec.convert({"metadata": {"name": name}, "spec": {
            "nodeName": node, "priority": priority,
            "containers": [{"resources": {"requests": {"cpu": cpu}}}]}}, Pod))

    for i in range(2):
        low = pod(f"low{i}", 0, "n")
        low.start_time = float(i)
        snap.add_pod(low, 0)
    calls: list[tuple[str, str | None]] = []

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    sched = Scheduler(load_scheduler_config(None), in_tree_registry(), snap, clock=lambda: 0.0,
                      seed=0, binder=lambda _p, _n: SUCCESS, evictor=evict,
                      nominate=lambda p, node: calls.append((p.name, node)))
    lesser = pod("lesser", 5)
    sched.add(lesser)
    first = sched.schedule_one()
    assert first is not None and first.nominated_node == "n"
    sched.add(pod("hi", 10, cpu="4"))
    second = sched.schedule_one()
    assert second is not None and second.pod.name == "hi" and second.nominated_node == "n"
    assert calls == [("lesser", "n"), ("lesser", None), ("hi", "n")]
    assert sched.handle.nominator.node_of(lesser.key) is None
    assert lesser.pod.status.nominated_node_name == ""


NO_PRE_SCORE = {"apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"plugins": {"preScore": {"disabled": [{"name": "*"}]}}}]}


def test_score_without_pre_score_fails_the_cycle_with_an_error(tmp_path: Path) -> None:
    """A valid configuration that disables every PreScore: upstream's TaintToleration,
    PodTopologySpread and InterPodAffinity Scores fail reading their state, and the pod's cycle
    fails with that Error (no traceback); a lone feasible node is never scored."""
    docs = [node_doc("a"), node_doc("b", cpu="1"), pod_doc("p"), pod_doc("big", cpu="3")]
    data = run(tmp_path, docs, NO_PRE_SCORE)
    by_pod = {p["pod"]: p for p in data["pods"]}
    p = by_pod["default/p"]
    assert p["result"] == "Error" and p["selectedNode"] is None
    assert p["message"] == ('running Score plugins: plugin "TaintToleration" failed with: '
                            'failed to read "PreScoreTaintToleration" from cycleState: not found')
    assert by_pod["default/big"]["result"] == "Scheduled"
    assert by_pod["default/big"]["selectedNode"] == "a"


@pytest.mark.parametrize(("plugin", "message"), [
    ("PodTopologySpread", 'error reading "PreScorePodTopologySpread" from cycleState: not found'),
    ("InterPodAffinity", 'failed to read "PreScoreInterPodAffinity" from cycleState: not found'),
])
def test_each_plugin_words_its_missing_pre_score_state(tmp_path: Path, plugin: str,
                                                      message: str) -> None:
    config = {**NO_PRE_SCORE, "profiles": [{"plugins": {
        "preScore": {"disabled": [{"name": "*"}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": plugin}]}}}]}
    data = run(tmp_path, [node_doc("a"), node_doc("b"), pod_doc("p")], config)
    (p,) = data["pods"]
    assert p["result"] == "Error"
    assert p["message"] == f'running Score plugins: plugin "{plugin}" failed with: {message}'


def no_pre_filter(*names: str) -> dict[str, Any]:
    return {**NO_PRE_SCORE, "profiles": [{"plugins": {
        "preFilter": {"disabled": [{"name": n} for n in names]}}}]}


def tainted(name: str) -> dict[str, Any]:
    doc = node_doc(name)
    doc["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    return doc


def test_filter_without_pre_filter_state_fails_the_cycle_with_an_error(tmp_path: Path) -> None:
    """Was a KeyError (#14): with every PreFilter disabled, NodePorts (first in the default
    order to read PreFilter state) fails the first node that gets past the filters before it,
    and the pod's cycle fails with that Error. The search stops there: the tainted node judged
    before it and the failing node are reported, the node after it is not judged. A pod that
    no node lets that far is unschedulable as usual."""
    nowhere = pod_doc("nowhere", nodeSelector={"zone": "none"})
    data = run(tmp_path, [tainted("a"), node_doc("b"), node_doc("c"), pod_doc("p"), nowhere],
               no_pre_filter("*"))
    by_pod = {p["pod"]: p for p in data["pods"]}
    p = by_pod["default/p"]
    assert p["result"] == "Error" and p["selectedNode"] is None
    assert p["message"] == ('running "NodePorts" filter plugin: reading "PreFilterNodePorts" '
                            "from cycleState: not found")
    nodes = p["nodes"]
    assert nodes["a"]["filter"]["TaintToleration"]["code"] == "UnschedulableAndUnresolvable"
    assert nodes["b"]["filter"]["NodePorts"]["code"] == "Error"
    assert nodes["b"]["filter"]["NodeResourcesFit"]["reasons"] == [
        'error reading "PreFilterNodeResourcesFit" from cycleState: not found']
    assert nodes["c"]["filter"] == {} and not any(n["feasible"] for n in nodes.values())
    other = by_pod["default/nowhere"]
    assert other["result"] == "Unschedulable"
    # DynamicResources' PostFilter (before preemption) fails reading its state too.
    assert other["message"] == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
                                "2 node(s) didn't match Pod's node affinity/selector. not found")


@pytest.mark.parametrize(("plugin", "message"), [
    ("NodeResourcesFit", 'error reading "PreFilterNodeResourcesFit" from cycleState: not found'),
    ("PodTopologySpread", 'reading "PreFilterPodTopologySpread" from cycleState: not found'),
    ("InterPodAffinity", 'error reading "PreFilterInterPodAffinity" from cycleState: not found'),
    ("DynamicResources", "not found"),
    ("NodePorts", 'reading "PreFilterNodePorts" from cycleState: not found'),
    ("VolumeRestrictions", 'cannot read "PreFilterVolumeRestrictions" from cycleState'),
    ("VolumeBinding", "not found"),
    ("NodeDeclaredFeatures",
     'error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found'),
])
def test_each_filter_words_its_missing_pre_filter_state(tmp_path: Path, plugin: str,
                                                       message: str) -> None:
    data = run(tmp_path, [node_doc("a"), node_doc("b"), pod_doc("p")], no_pre_filter(plugin))
    (p,) = data["pods"]
    assert p["result"] == "Error"
    assert p["message"] == f'running "{plugin}" filter plugin: {message}'


def test_filters_that_need_no_pre_filter_state_decide_without_it(tmp_path: Path) -> None:
    """NodeAffinity computes what its PreFilter would have stored, as upstream's does."""
    config = no_pre_filter("NodeAffinity")
    data = run(tmp_path, [node_doc("a", zone="x"), node_doc("b", zone="y"),
                          pod_doc("p", nodeSelector={"zone": "y"})], config)
    (p,) = data["pods"]
    assert p["result"] == "Scheduled" and p["selectedNode"] == "b"


def test_explain_with_every_pre_filter_disabled_exits_0_without_a_traceback(
        tmp_path: Path) -> None:
    """Through the CLI, as a user runs it: the Error is the pod's result, not a crash."""
    manifests = write(tmp_path, "m.yaml", [node_doc("a"), pod_doc("p")])
    config = write(tmp_path, "c.yaml", no_pre_filter("*"))
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "explain", "-f", str(manifests),
                           "--config", str(config), "-o", "json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (p,) = json.loads(proc.stdout)["pods"]
    assert (p["result"], p["message"]) == ("Error", 'running "NodePorts" filter plugin: reading '
                                           '"PreFilterNodePorts" from cycleState: not found')


def test_scores_that_need_no_pre_score_state_compute_without_it(tmp_path: Path) -> None:
    """NodeResourcesFit, BalancedAllocation and NodeAffinity compute in Score what PreScore
    would have stored, as upstream's do."""
    config = {**NO_PRE_SCORE, "profiles": [{"plugins": {
        "preScore": {"disabled": [{"name": "*"}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [
            {"name": "NodeResourcesFit"}, {"name": "NodeResourcesBalancedAllocation"},
            {"name": "NodeAffinity"}]}}}]}
    data = run(tmp_path, [node_doc("a"), node_doc("b", cpu="8"), pod_doc("p")], config)
    (p,) = data["pods"]
    assert p["result"] == "Scheduled" and p["selectedNode"] == "b"
    assert all(n["scored"] for n in p["nodes"].values())
