"""The live scheduler against the embedded API server over real HTTP: same decisions as explain,
gangs all-or-nothing, preemption through the API, watches that break, restarts, 409 races."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from tests.live.harness import GPU, Live, bound, gpus_by_node, node, pod, wait_for, write

from kubeberth.api.objects import ObjectMeta, Pod
from kubeberth.config.manifests import load_manifests
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.handle import WaitingPod
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain
from kubeberth.state.cluster import make_pod_info

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


CLUSTER = (node("a-small", 2, 16) + node("b-large", 8, 64) + node("c-mid", 4, 32)
           + node("d-mid", 4, 32))
# Names sort in manifest order: the API lists pods by name, the manifest loader keeps file
# order, and queue ties are broken by that order in both.
PODS = "".join(pod(f"p{i:02d}", g, c) for i, (g, c) in enumerate(
    [(1, "2"), (4, "8"), (2, "4"), (1, "1"), (3, "6"), (2, "2"), (1, "4"), (2, "8"),
     (1, "2"), (1, "1")]))


@pytest.mark.parametrize("seed", [0, 7])
def test_kubectl_applied_pods_bind_where_explain_says(live: Live, tmp_path: Path,
                                                      seed: int) -> None:
    cluster = write(tmp_path / "cluster.yaml", CLUSTER)
    pods = write(tmp_path / "pods.yaml", PODS)
    live.serve(cluster)
    live.kubectl("apply", "-f", str(pods))
    ctl = live.scheduler(seed=seed)
    wait_for(lambda: len(bound(live)) == 10, "every pod to be bound")
    expected = explain(load_manifests([cluster, pods]), load_scheduler_config(None),
                       in_tree_registry(), seed=seed)
    want = {e["pod"]: e["selectedNode"] for e in expected["pods"]}
    assert bound(live) == want
    # The decision is recorded once the API has answered, just after the test may see it.
    wait_for(lambda: len(ctl.decisions) == 10, "the decisions")
    assert sorted(d.pod for d in ctl.decisions if d.action == "bind") == sorted(want)


def test_gang_binds_all_or_nothing(live: Live) -> None:
    live.serve(EXAMPLES / "gangs" / "cluster.yaml")
    ctl = live.scheduler(EXAMPLES / "gangs" / "scheduler-config.yaml")
    live.kubectl("apply", "-f", str(EXAMPLES / "gangs" / "workload.yaml"))
    wait_for(lambda: len(bound(live)) == 4, "one gang to be bound")
    # The other gang's members have all been tried and wait, none of them bound.
    wait_for(lambda: sum(ctl.sched.queue.pending_pods().values()) == 4
             and ctl.sched.queue.pending_pods()["active"] == 0, "the other gang to wait")
    placed = bound(live)
    groups = {k.split("/")[1].rsplit("-worker", 1)[0] for k in placed}
    assert len(groups) == 1
    group = groups.pop()
    assert sorted(placed) == [f"default/{group}-worker-{i}" for i in range(4)]
    assert gpus_by_node(live) == {"gpu-a": 2, "gpu-b": 2}
    assert all(d.action == "bind" for d in ctl.decisions)


def test_preemption_deletes_the_victim_through_the_api(live: Live, tmp_path: Path) -> None:
    cluster = write(tmp_path / "cluster.yaml", node("only", 4) + """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
""")
    live.serve(cluster)
    ctl = live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "low.yaml", pod("low", 4, "2", "low"))))
    wait_for(lambda: bound(live) == {"default/low": "only"}, "the low-priority pod to bind")
    live.kubectl("apply", "-f", str(write(tmp_path / "high.yaml",
                                          pod("high", 4, "2", "high"))))
    wait_for(lambda: bound(live) == {"default/high": "only"}, "the preemptor to bind")
    assert "default/low" not in live.pods()
    wait_for(lambda: bool(ctl.decisions) and ctl.decisions[-1].action == "bind",
             "the binding decision")
    actions = [(d.action, d.pod, d.node) for d in ctl.decisions]
    assert ("preempt", "default/low", "only") in actions
    assert ("nominate", "default/high", "only") in actions
    assert actions[-1] == ("bind", "default/high", "only")


def test_watch_410_and_dropped_streams_are_survived(live: Live, tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 8) + node("n2", 8)),
                     history=5)
    ctl = live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "a.yaml",
                                          pod("a1", 4) + pod("a2", 4))))
    wait_for(lambda: len(bound(live)) == 2, "the first pods to bind")
    lists = sum(inf.stats.lists for inf in ctl.informers)

    def drop() -> None:
        srv.api.store.compact()
        srv.api.store.close_watches()

    srv.call(drop)
    # Changes while the streams are down, more than the history holds: a 410 for the resume.
    for i in range(8):
        srv.call(lambda i=i: srv.api.create(srv.api.pods, "default", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"b{i}", "namespace": "default"},
            "spec": {"containers": [{"name": "m", "image": "x", "resources": {
                "requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}))
    srv.call(lambda: srv.api.delete(srv.api.pods, "default", "a1", {"gracePeriodSeconds": 0}))
    wait_for(lambda: len(bound(live)) == 9, "the new pods to bind after the re-list")
    assert sum(inf.stats.lists for inf in ctl.informers) > lists
    assert all(n <= 8 for n in gpus_by_node(live).values())
    wait_for(lambda: "default/a1" not in ctl.pods, "the deletion seen through a re-list")
    assert sum(int(ctl.snap.requested[i, ctl.snap.col(GPU)]) for i in range(2)) == \
        sum(gpus_by_node(live).values()) * 1000


def test_restarted_controller_converges_from_the_api(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4) + node("n2", 4)))
    first = live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "a.yaml", pod("p1", 2) + pod("p2", 2))))
    wait_for(lambda: len(bound(live)) == 2, "the first controller to bind")
    live.stop_controller(first)
    live.kubectl("apply", "-f", str(write(tmp_path / "b.yaml",
                                          pod("p3", 2) + pod("p4", 2) + pod("p5", 2))))
    second = live.scheduler()
    wait_for(lambda: len(bound(live)) == 4, "the second controller to fill the nodes")
    wait_for(lambda: second.sched.queue.pending_pods()["unschedulable"] == 1,
             "the fifth pod to be unschedulable")
    assert gpus_by_node(live) == {"n1": 4, "n2": 4}
    assert {d.pod for d in second.decisions if d.action == "bind"} <= \
        {"default/p3", "default/p4", "default/p5"}
    assert live.placement()["default/p5"] == ""


class RacingClient(Client):
    """A client whose binding posts lose a race: another scheduler binds the pod to
    ``other`` just before this client's binding reaches the server."""

    def __init__(self, live: Live, other: str) -> None:
        super().__init__(config=live.client().config)
        self.live = live
        self.other = other
        self.raced: list[str] = []

    def create(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj).__name__ == "PodBinding":
            name, ns = obj.metadata.name, obj.metadata.namespace
            srv = self.live.server
            assert srv is not None
            srv.call(lambda: srv.api.bind(ns, name, {"target": {"kind": "Node",
                                                                "name": self.other}}))
            self.raced.append(name)
        return super().create(obj, *args, **kwargs)


def test_409_conflict_never_double_binds(live: Live, tmp_path: Path) -> None:
    # "big" is where the scheduler wants the pod; a racing scheduler binds it to "small".
    live.serve(write(tmp_path / "cluster.yaml", node("big", 8) + node("small", 2)))
    client = RacingClient(live, "small")
    ctl = LiveScheduler(load_scheduler_config(None), in_tree_registry(), client)
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    live.controllers.append((ctl, thread, []))
    wait_for(ctl.ready, "caches")
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("p", 2))))
    wait_for(lambda: ctl.conflicts == 1, "the conflict")
    wait_for(lambda: "default/p" in ctl.pods and ctl.pods["default/p"].node >= 0,
             "the pod accounted where the API says")
    assert bound(live) == {"default/p": "small"}
    assert client.raced == ["p"]
    pi = ctl.pods["default/p"]
    assert ctl.snap.node_names[pi.node] == "small"
    assert int(ctl.snap.requested[ctl.snap.node_index["big"], ctl.snap.col(GPU)]) == 0
    assert [d.action for d in ctl.decisions] == ["conflict"]
    # Nothing left to retry: the pod is not in the queue.
    assert sum(ctl.sched.queue.pending_pods().values()) == 0


def test_dry_run_decides_without_binding(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4)))
    ctl = live.scheduler(dry_run=True)
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml",
                                          pod("p1", 2) + pod("p2", 2) + pod("p3", 2))))
    wait_for(lambda: len([d for d in ctl.decisions if d.action == "bind"]) == 2,
             "two dry-run decisions")
    wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 1,
             "the third pod judged unschedulable on the assumed state")
    assert bound(live) == {}
    assert {d.detail for d in ctl.decisions} == {"dry-run"}


def test_seeded_tie_breaks_match_explain(live: Live, tmp_path: Path) -> None:
    cluster = write(tmp_path / "cluster.yaml", "".join(node(f"n{i}", 8) for i in range(6)))
    pods = write(tmp_path / "pods.yaml", "".join(pod(f"p{i}", 1, "1") for i in range(6)))
    live.serve(cluster)
    live.kubectl("apply", "-f", str(pods))
    wants = []
    for seed in (0, 3):
        expected = explain(load_manifests([cluster, pods]), load_scheduler_config(None),
                           in_tree_registry(), seed=seed)
        wants.append({e["pod"]: e["selectedNode"] for e in expected["pods"]})
    assert wants[0] != wants[1]  # the seed decides: the comparison below means something
    ctl = live.scheduler(seed=3)
    wait_for(lambda: len(bound(live)) == 6, "every pod to be bound")
    assert bound(live) == wants[1]
    wait_for(lambda: len(ctl.decisions) == 6, "the decisions")
    assert {d.action for d in ctl.decisions} == {"bind"}


def test_events_and_pod_scheduled_condition(live: Live, tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 2)))
    ctl = live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("fits", 2) + pod("waits", 2))))
    message = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."

    def condition() -> dict[str, Any] | None:
        conds = live.pods()["default/waits"]["status"].get("conditions", [])
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    wait_for(lambda: (condition() or {}).get("reason") == "Unschedulable", "the condition")
    cond = condition()
    assert cond is not None and cond["status"] == "False"
    assert message in cond["message"]

    def events() -> list[tuple[str, str, str, str]]:
        api = srv.api
        return srv.call(lambda: sorted(
            (e["involvedObject"]["name"], e["type"], e["reason"], e["message"])
            for e in api.store.items(api.events)
            if e.get("source", {}).get("component") == "default-scheduler"))

    wait_for(lambda: len(events()) >= 2, "the scheduler's events")
    got = events()
    assert ("fits", "Normal", "Scheduled", "Successfully assigned default/fits to n1") in got
    assert any(e[:3] == ("waits", "Warning", "FailedScheduling") and message in e[3]
               for e in got)
    described = live.kubectl("describe", "pod", "waits")
    assert "FailedScheduling" in described
    live.stop_controller(ctl)
    assert ctl.recorder is not None and ctl.recorder.posted >= 2


def test_dry_run_writes_no_condition_or_event(live: Live, tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 2)))
    ctl = live.scheduler(dry_run=True)
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("big", 4))))
    wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 1, "the attempt")
    assert ctl.recorder is None
    conds = live.pods()["default/big"]["status"].get("conditions", [])
    assert all(c.get("reason") != "Unschedulable" for c in conds)
    api = srv.api
    assert srv.call(lambda: [e for e in api.store.items(api.events)
                             if e.get("reason") == "FailedScheduling"]) == []


def test_a_victim_waiting_at_permit_is_rejected_not_deleted(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("only", 2)))
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("victim", 2))))
    ctl = LiveScheduler(load_scheduler_config(None), in_tree_registry(), live.client())
    victim = make_pod_info(Pod(metadata=ObjectMeta(name="victim", namespace="default")))
    preemptor = make_pod_info(Pod(metadata=ObjectMeta(name="vip", namespace="default")))
    waiting = WaitingPod(victim, 0, "default-scheduler", deadline=1e9, pending={"Gang"})
    ctl.sched.handle.waiting_pods.add(waiting)
    ctl.sched.evictor(victim, preemptor)
    assert waiting.rejected is not None
    assert waiting.rejected.plugin == "DefaultPreemption"
    assert waiting.rejected.message() == "preempted"
    assert "default/victim" in live.pods()  # nothing was deleted through the API
    assert [(d.action, d.pod) for d in ctl.decisions] == [("preempt", "default/victim")]
    assert ctl.recorder is not None
    ctl.recorder.close()
