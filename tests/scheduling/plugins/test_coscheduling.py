"""Coscheduling: gangs are all or nothing, waits time out and give every reservation back,
groups leave the queue together, and bad PodGroups get upstream's pending reasons or errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from tests.paths import ROOT
from typer.testing import CliRunner

from kubeberth.api.errors import InputError
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import PreFilterPlugin
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.coscheduling import CoschedulingArgs
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.explain import build_state, explain
from kubeberth.state.cluster import ClusterState, PodInfo

EXAMPLE = ROOT / "examples" / "gangs"
GPU = "nvidia.com/gpu"

CONFIG: dict[str, Any] = yaml.safe_load((EXAMPLE / "scheduler-config.yaml").read_text())


def node(name: str, gpus: int = 2) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", GPU: str(gpus),
                                       "pods": "20"}}}


def group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": min_member, **spec}}


def worker(name: str, grp: str | None, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": grp} if grp else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}}}], **spec}}


def config(**args: Any) -> dict[str, Any]:
    cfg = json.loads(json.dumps(CONFIG))
    if args:
        cfg["profiles"][0]["pluginConfig"][0]["args"].update(args)
    return cfg


def _write(tmp: Path, name: str, docs: Any) -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else yaml.safe_dump(docs))
    return p


def run_explain(tmp: Path, docs: list[dict[str, Any]], **args: Any) -> dict[str, dict[str, Any]]:
    """Each pod's first attempt in explain (a rejected gang's retries come after)."""
    manifests = load_manifests([_write(tmp, "m.yaml", docs)])
    cfg = load_scheduler_config(_write(tmp, "c.yaml", config(**args)))
    out = explain(manifests, cfg, in_tree_registry())
    first: dict[str, dict[str, Any]] = {}
    for p in out["pods"]:
        first.setdefault(p["pod"], p)
    return first


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scheduler(tmp: Path, docs: list[dict[str, Any]], fail_bind: str = "", **args: Any
              ) -> tuple[Scheduler, ClusterState, Clock, list[PodInfo]]:
    manifests = load_manifests([_write(tmp, "m.yaml", docs)])
    cfg = load_scheduler_config(_write(tmp, "c.yaml", config(**args)))
    snap, pending = build_state(manifests)
    clock = Clock()

    def bind(p: PodInfo, _n: str) -> Status:
        return Status(Code.ERROR, ("bind refused",)) if p.name == fail_bind else SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    sched = Scheduler(cfg, in_tree_registry(), snap, clock=clock, binder=bind, evictor=evict)
    for pi in pending:
        sched.add(pi)
    return sched, snap, clock, pending


def gpus_requested(snap: ClusterState) -> int:
    col = snap.resources.get(GPU)
    return 0 if col is None else int(snap.requested[snap.node_ids(), col].sum()) // 1000


def drain(sched: Scheduler, now: float) -> list[str]:
    """Run cycles until the queue is empty, binding what Permit allows; returns bound pods."""
    bound: list[str] = []
    while True:
        res = sched.schedule_one()
        if res is None:
            break
        if res.outcome == "assumed" and sched.bind(res).ok:
            bound.append(res.pod.name)
        for done in sched.resolve_waiting(now):
            if done.outcome == "assumed" and sched.bind(done).ok:
                bound.append(done.pod.name)
    return bound


# ---- args -------------------------------------------------------------------------------------
def test_args_defaults_and_validation() -> None:
    assert CoschedulingArgs.parse(None) == CoschedulingArgs(60, 0)
    assert CoschedulingArgs.parse({"permitWaitingTimeSeconds": 5}).permit_waiting_time_seconds == 5
    with pytest.raises(InputError, match="cannot be negative"):
        CoschedulingArgs.parse({"podGroupBackoffSeconds": -1})
    with pytest.raises(InputError, match="unknown field 'minMember'"):
        CoschedulingArgs.parse({"minMember": 3})


# ---- all or nothing ---------------------------------------------------------------------------
def test_a_gang_that_fits_is_allowed_together(tmp_path: Path) -> None:
    docs = [node("n1"), node("n2"), group("job", 4)] + [worker(f"w{i}", "job") for i in range(4)]
    pods = run_explain(tmp_path, docs)
    assert [p["result"] for p in pods.values()] == ["Scheduled"] * 4
    assert sorted(p["selectedNode"] for p in pods.values()) == ["n1", "n1", "n2", "n2"]


def test_explain_shows_members_waiting_for_their_quorum(tmp_path: Path) -> None:
    docs = [node("n1", 4), group("job", 3), worker("w0", "job"), worker("w1", "job"),
            worker("w2", "job", schedulingGates=[{"name": "example.com/hold"}])]
    pods = run_explain(tmp_path, docs)
    assert {k: p["result"] for k, p in pods.items()} == {
        "default/w0": "Waiting", "default/w1": "Waiting", "default/w2": "SchedulingGated"}
    assert pods["default/w0"]["selectedNode"] is None  # reserved, not bound


def test_members_wait_until_min_member_are_reserved(tmp_path: Path) -> None:
    docs = [node("n1", 4), group("job", 3)] + [worker(f"w{i}", "job") for i in range(3)]
    sched, snap, _clock, _ = scheduler(tmp_path, docs)
    first = sched.schedule_one()
    second = sched.schedule_one()
    assert first is not None and second is not None
    assert (first.outcome, second.outcome) == ("waiting", "waiting")
    assert len(sched.handle.waiting_pods) == 2 and gpus_requested(snap) == 2
    third = sched.schedule_one()
    assert third is not None and third.outcome == "assumed"
    released = sched.resolve_waiting(0.0)
    assert sorted(r.pod.name for r in released) == ["w0", "w1"]
    assert all(r.outcome == "assumed" for r in released)
    assert len(sched.handle.waiting_pods) == 0


def test_a_gang_that_does_not_fit_places_nothing_and_leaks_nothing(tmp_path: Path) -> None:
    # Three GPUs for a four-member gang: the fourth fails Filter and PostFilter rejects the
    # waiting siblings. Retries (from backoff) may hold reservations again, but only for pods
    # that are waiting right now, and the timeout gives those back too.
    docs = [node("n1", 2), node("n2", 1), group("job", 4)] + \
        [worker(f"w{i}", "job") for i in range(4)]
    sched, snap, clock, pending = scheduler(tmp_path, docs)
    assert drain(sched, 0.0) == []
    waiting = sorted(wp.info.key for wp in sched.handle.waiting_pods)
    assert sorted(snap.pods) == waiting
    assert gpus_requested(snap) == len(waiting)
    clock.now = 60.0
    while sched.resolve_waiting(60.0):
        pass
    assert gpus_requested(snap) == 0 and not snap.pods
    assert len(sched.handle.waiting_pods) == 0
    assert all(pi.node == -1 for pi in pending)
    assert int(snap.pod_count[snap.node_ids()].sum()) == 0


def test_post_filter_message_names_the_group(tmp_path: Path) -> None:
    docs = [node("n1", 2), node("n2", 1), group("job", 4)] + \
        [worker(f"w{i}", "job") for i in range(4)]
    pods = run_explain(tmp_path, docs)
    assert all(p["result"] == "Unschedulable" for p in pods.values())
    assert "PodGroup default/job gets rejected due to Pod w3 is unschedulable even after " \
           "PostFilter" in pods["default/w3"]["message"]
    assert pods["default/w0"]["message"] == "optimistic rejection in PostFilter"


def test_timeout_rejects_every_waiting_member_and_returns_resources(tmp_path: Path) -> None:
    # The fourth member exists but is gated, so the others wait at Permit until they time out.
    docs = [node("n1", 4), group("job", 4, scheduleTimeoutSeconds=10)] + \
        [worker(f"w{i}", "job") for i in range(3)] + \
        [worker("w3", "job", schedulingGates=[{"name": "example.com/hold"}])]
    sched, snap, clock, _ = scheduler(tmp_path, docs)
    assert drain(sched, 0.0) == []
    assert len(sched.handle.waiting_pods) == 3 and gpus_requested(snap) == 3
    assert sched.next_permit_deadline() == 10.0
    clock.now = 9.0
    assert sched.resolve_waiting(9.0) == []
    clock.now = 10.0
    done = sched.resolve_waiting(10.0)
    assert sorted(r.pod.name for r in done) == ["w0", "w1", "w2"]
    assert {r.outcome for r in done} == {"unschedulable"}
    # The first to time out is unreserved, and its Unreserve rejects the other two.
    assert [r.message for r in done] == ["rejected due to timeout after waiting at permit",
                                         "rejection in Unreserve", "rejection in Unreserve"]
    assert len(sched.handle.waiting_pods) == 0
    assert gpus_requested(snap) == 0 and not snap.pods


def test_one_member_timing_out_rejects_its_siblings_at_once(tmp_path: Path) -> None:
    # Members reach Permit at different times; the earliest deadline's Unreserve rejects the
    # rest immediately rather than at their own, later deadlines.
    docs = [node("n1", 4), group("job", 4, scheduleTimeoutSeconds=10)] + \
        [worker(f"w{i}", "job") for i in range(3)] + \
        [worker("w3", "job", schedulingGates=[{"name": "example.com/hold"}])]
    sched, snap, clock, _ = scheduler(tmp_path, docs)
    first = sched.schedule_one()
    assert first is not None and first.outcome == "waiting"
    clock.now = 5.0
    drain(sched, 5.0)
    assert len(sched.handle.waiting_pods) == 3
    clock.now = 10.0
    done = sched.resolve_waiting(10.0)
    done += sched.resolve_waiting(10.0)
    assert sorted(r.pod.name for r in done) == ["w0", "w1", "w2"]
    messages = {r.pod.name: r.message for r in done}
    assert messages["w0"] == "rejected due to timeout after waiting at permit"
    assert messages["w1"] == messages["w2"] == "rejection in Unreserve"
    assert gpus_requested(snap) == 0 and len(sched.handle.waiting_pods) == 0


def test_a_decision_once_made_stands(tmp_path: Path) -> None:
    # w2 completes the quorum and allows w0 and w1; its own bind then fails and its Unreserve
    # rejects the group's waiting pods. Upstream's waiting pod takes the first signal only, so
    # the allowed siblings still bind; w2's reservation is given back.
    docs = [node("n1", 4), group("job", 3)] + [worker(f"w{i}", "job") for i in range(3)]
    sched, snap, _clock, _ = scheduler(tmp_path, docs, fail_bind="w2")
    results = [sched.schedule_one() for _ in range(3)]
    assert [r.outcome for r in results if r] == ["waiting", "waiting", "assumed"]
    third = results[2]
    assert third is not None and not sched.bind(third).ok
    assert "default/w2" not in snap.pods
    done = sched.resolve_waiting(0.0)
    assert sorted((r.pod.name, r.outcome) for r in done) == [("w0", "assumed"),
                                                             ("w1", "assumed")]
    assert all(sched.bind(r).ok for r in done)
    assert gpus_requested(snap) == 2


def test_a_rejection_before_the_quorum_stands(tmp_path: Path) -> None:
    docs = [node("n1", 4), group("job", 3)] + [worker(f"w{i}", "job") for i in range(3)]
    sched, _snap, _clock, _ = scheduler(tmp_path, docs)
    assert sched.schedule_one() is not None
    wp = sched.handle.waiting_pods.get("default/w0")
    assert wp is not None
    wp.reject("Coscheduling", "first")
    wp.reject("Coscheduling", "second")
    wp.allow("Coscheduling")
    assert wp.rejected is not None and wp.rejected.reasons == ("first",)
    done = sched.resolve_waiting(0.0)
    assert [(r.pod.name, r.outcome, r.message) for r in done] == [("w0", "unschedulable",
                                                                   "first")]


def test_default_timeout_comes_from_the_args(tmp_path: Path) -> None:
    docs = [node("n1", 4), group("job", 2), worker("w0", "job"),
            worker("w1", "job", schedulingGates=[{"name": "example.com/hold"}])]
    sched, _snap, _clock, _ = scheduler(tmp_path, docs, permitWaitingTimeSeconds=7)
    drain(sched, 0.0)
    assert sched.next_permit_deadline() == 7.0


# ---- PreFilter -------------------------------------------------------------------------------
def test_min_member_above_the_group_size_is_a_pending_reason(tmp_path: Path) -> None:
    docs = [node("n1", 4), group("job", 5)] + [worker(f"w{i}", "job") for i in range(3)]
    pods = run_explain(tmp_path, docs)
    for i in range(3):
        p = pods[f"default/w{i}"]
        assert p["result"] == "Unschedulable"
        assert (f"pre-filter pod w{i} cannot find enough sibling pods, current pods number: 3, "
                "minMember of group: 5") in p["message"]


def test_min_resources_the_cluster_lacks_are_a_resource_gap(tmp_path: Path) -> None:
    docs = [node("n1", 2), node("n2", 2), group("job", 2, minResources={GPU: "6"})] + \
        [worker(f"w{i}", "job") for i in range(2)]
    pods = run_explain(tmp_path, docs)
    assert all(p["result"] == "Unschedulable" for p in pods.values())
    assert "resource gap: map[nvidia.com/gpu:2]" in pods["default/w0"]["message"]


def test_min_resources_count_the_groups_own_pods_as_free(tmp_path: Path) -> None:
    # w0 already runs on n1; the group's minResources (4 GPUs) still fit because its own pod's
    # GPU counts as available, as upstream's getNodeResource removes the group's pods.
    running = worker("w0", "job", nodeName="n1")
    docs = [node("n1", 2), node("n2", 2), group("job", 2, minResources={GPU: "4"}), running,
            worker("w1", "job")]
    pods = run_explain(tmp_path, docs)
    assert pods["default/w1"]["result"] == "Scheduled"


def test_a_missing_pod_group_is_rejected_at_permit(tmp_path: Path) -> None:
    pods = run_explain(tmp_path, [node("n1"), worker("w0", "nowhere")])
    assert pods["default/w0"]["result"] == "Unschedulable"
    assert pods["default/w0"]["message"] == "PodGroup not found"


def test_a_group_that_failed_backs_off(tmp_path: Path) -> None:
    docs = [node("n1", 2), node("n2", 1), group("job", 4)] + \
        [worker(f"w{i}", "job") for i in range(4)]
    sched, snap, clock, pending = scheduler(tmp_path, docs, podGroupBackoffSeconds=20)
    first = [sched.schedule_one() for _ in range(4)]
    assert [r.outcome for r in first if r] == ["waiting", "waiting", "waiting", "unschedulable"]
    plugin = sched.frameworks["default-scheduler"].plugin("Coscheduling")
    assert isinstance(plugin, PreFilterPlugin)
    clock.now = 19.0
    _, st = plugin.pre_filter(CycleState(), pending[0], snap)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("podGroup default/job failed recently",)
    clock.now = 20.0
    assert plugin.pre_filter(CycleState(), pending[0], snap)[1].ok


# ---- QueueSort -------------------------------------------------------------------------------
def test_queue_sort_keeps_each_group_together(tmp_path: Path) -> None:
    later = group("b", 2)
    later["metadata"]["annotations"] = {"kubeberth.io/arrival-seconds": "5"}
    docs = [node("n1", 8), later, group("a", 2), worker("b0", "b"), worker("a0", "a"),
            worker("b1", "b"), worker("solo", None), worker("a1", "a")]
    pods = run_explain(tmp_path, docs)
    # The lone pod (queued at 0; at equal times lone pods go before groups), group a (created
    # at 0, listed after b), then group b (created at 5), each group's members back to back.
    assert list(pods) == ["default/solo", "default/a0", "default/a1", "default/b0",
                          "default/b1"]


def test_priority_comes_before_the_group(tmp_path: Path) -> None:
    docs = [node("n1", 8), group("a", 1), worker("a0", "a"), worker("vip", None, priority=10)]
    assert list(run_explain(tmp_path, docs)) == ["default/vip", "default/a0"]


# ---- the deadlock, through the CLI -----------------------------------------------------------
def _simulate(tmp: Path, *extra: str) -> dict[str, tuple[str, str]]:
    out = tmp / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(EXAMPLE / "workload.yaml"), "-q", "-o", str(out),
                                   *extra])
    assert res.exit_code == 0, res.output
    with (out / "pods.csv").open() as f:
        return {row["pod"]: (row["bound"], row["node"]) for row in csv.DictReader(f)}


def test_default_scheduler_deadlocks_two_four_gpu_jobs(tmp_path: Path) -> None:
    pods = _simulate(tmp_path)
    running = [p for p, (bound, _) in pods.items() if bound]
    assert sorted(p.split("-worker")[0] for p in running) == \
        ["default/train-a", "default/train-a", "default/train-b", "default/train-b"]


def test_coscheduling_runs_one_job_fully(tmp_path: Path) -> None:
    pods = _simulate(tmp_path, "--config", str(EXAMPLE / "scheduler-config.yaml"))
    running = sorted(p for p, (bound, _) in pods.items() if bound)
    assert running == [f"default/train-a-worker-{i}" for i in range(4)]
    assert sorted(pods[p][1] for p in running) == ["gpu-a", "gpu-a", "gpu-b", "gpu-b"]


def test_the_second_job_runs_once_the_first_completes(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((EXAMPLE / "workload.yaml").read_text()))
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"].startswith("train-a"):
            d["metadata"]["annotations"]["kubeberth.io/duration-seconds"] = "100"
    wl = _write(tmp_path, "wl.yaml", docs)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(wl), "-q", "-o", str(out),
                                   "--config", str(EXAMPLE / "scheduler-config.yaml")])
    assert res.exit_code == 0, res.output
    with (out / "pods.csv").open() as f:
        rows = {r["pod"]: r for r in csv.DictReader(f)}
    b_starts = {float(r["bound"]) for p, r in rows.items() if "train-b" in p and r["bound"]}
    a_ends = {float(r["finished"]) for p, r in rows.items() if "train-a" in p}
    assert len(b_starts) == 1 and len(a_ends) == 1
    assert b_starts.pop() >= a_ends.pop()
    assert sum(1 for p, r in rows.items() if "train-b" in p and r["bound"]) == 4


def test_a_bad_pod_group_is_an_input_error(tmp_path: Path) -> None:
    bad = _write(tmp_path, "wl.yaml", [group("job", -1), worker("w0", "job")])
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(bad), "-q", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "wl.yaml:" in res.output and "spec.minMember" in res.output
    assert "minMember is negative (-1)" in res.output


def test_gang_runs_are_deterministic(tmp_path: Path) -> None:
    a = _simulate(tmp_path / "a", "--config", str(EXAMPLE / "scheduler-config.yaml"))
    b = _simulate(tmp_path / "b", "--config", str(EXAMPLE / "scheduler-config.yaml"))
    assert a == b
    summary = [(tmp_path / d / "out" / "summary.json").read_text() for d in ("a", "b")]
    assert summary[0] == summary[1]
    assert np.array_equal(np.array(sorted(a)), np.array(sorted(b)))


def test_simulate_reports_why_a_short_group_stays_pending(tmp_path: Path) -> None:
    wl = _write(tmp_path, "wl.yaml", [group("job", 3), worker("w0", "job"), worker("w1", "job")])
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(wl), "-c", str(EXAMPLE / "scheduler-config.yaml"),
                                   "-q", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unscheduledPods"] == ["default/w0", "default/w1"]
    assert "pre-filter pod w1 cannot find enough sibling pods, current pods number: 2, " \
           "minMember of group: 3" in summary["pendingReasons"]["default/w1"]
