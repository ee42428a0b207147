"""The queue manager on its own: ordering, heads, requeue by strategy, parking, cloning."""

from __future__ import annotations

from kubeberth.admission.flavors import (
    FlavorAssigner,
    GranularMode,
    is_preferred,
    should_try_next_flavor,
)
from kubeberth.admission.model import (
    ClusterQueue,
    KueueObjects,
    LocalQueue,
    PodSet,
    Workload,
)
from kubeberth.admission.queue import Entry, QueueManager

NOW = 1000.0


def _objs(strategy: str = "BestEffortFIFO") -> KueueObjects:
    objs = KueueObjects()
    objs.cluster_queues["cq"] = ClusterQueue("cq", queueing_strategy=strategy)
    objs.cluster_queues["other"] = ClusterQueue("other")
    objs.local_queues["default/q"] = LocalQueue("default", "q", "cq")
    objs.local_queues["default/o"] = LocalQueue("default", "o", "other")
    return objs


def _wl(name: str, priority: int = 0, created: float = 0.0, queue: str = "q",
        **kw: object) -> Workload:
    return Workload("default", name, queue, [PodSet("main", 1, {"cpu": 1000})],
                    priority=priority, creation_time=created, **kw)  # type: ignore[arg-type]


def _qm(*wls: Workload, strategy: str = "BestEffortFIFO") -> QueueManager:
    objs = _objs(strategy)
    qm = QueueManager.build(objs)
    for wl in wls:
        qm.add(wl, objs)
    return qm


def test_heads_one_per_queue_by_priority_then_age() -> None:
    qm = _qm(_wl("old", created=1), _wl("young", created=2), _wl("vip", priority=9, created=3),
             _wl("elsewhere", queue="o"))
    assert [e.key for e in qm.heads(NOW)] == ["default/vip", "default/elsewhere"]
    assert [e.key for e in qm.heads(NOW)] == ["default/old"]
    assert [e.key for e in qm.heads(NOW)] == ["default/young"]
    assert qm.heads(NOW) == []


def test_heads_skip_inactive_queues_and_backoff() -> None:
    qm = _qm(_wl("waiting", created=1, requeue_at=NOW + 10), _wl("ready", created=2),
             _wl("elsewhere", queue="o"))
    assert [e.key for e in qm.heads(NOW, frozenset({"other"}))] == ["default/ready"]
    assert [e.key for e in qm.heads(NOW + 10)] == ["default/waiting", "default/elsewhere"]


def test_requeue_strict_fifo_keeps_head_in_front() -> None:
    qm = _qm(_wl("a", created=1), _wl("b", created=2), strategy="StrictFIFO")
    (head,) = qm.heads(NOW)
    qm.requeue(head, "Generic")
    assert [e.key for e in qm.heads(NOW)] == ["default/a"]


def test_requeue_best_effort_parks_unless_immediate() -> None:
    qm = _qm(_wl("a", created=1), _wl("b", created=2))
    (head,) = qm.heads(NOW)
    qm.requeue(head, "Generic")
    assert [(e.key, active) for e, active in qm.pending()] == [("default/b", True),
                                                                ("default/a", False)]
    (nxt,) = qm.heads(NOW)
    qm.requeue(nxt, "PendingPreemption")
    assert [(e.key, active) for e, active in qm.pending()] == [("default/b", True),
                                                                ("default/a", False)]
    assert qm.requeue_inadmissible(["cq"])
    assert not qm.requeue_inadmissible(["cq"])
    assert [e.key for e, active in qm.pending() if active] == ["default/a", "default/b"]


def test_unqueued_reasons() -> None:
    objs = _objs()
    objs.local_queues["default/ghost"] = LocalQueue("default", "ghost", "missing")
    qm = QueueManager.build(objs)
    qm.add(_wl("no-lq", queue="nope"), objs)
    qm.add(_wl("no-cq", queue="ghost"), objs)
    qm.add(_wl("off", active=False), objs)
    assert {k: v[2] for k, v in qm.unqueued.items()} == {
        "default/no-lq": "LocalQueue nope doesn't exist",
        "default/no-cq": "ClusterQueue missing doesn't exist",
        "default/off": "The workload is deactivated"}
    qm.remove("default/off")
    assert "default/off" not in qm.unqueued


def test_clone_is_independent() -> None:
    qm = _qm(_wl("a"))
    copy = qm.clone()
    (head,) = copy.heads(NOW)
    head.last_tried[("main", "cpu")] = 3
    assert [e.key for e, _ in qm.pending()] == ["default/a"]
    assert qm.pending()[0][0].last_tried == {}


def test_eviction_time_orders_after_pods_ready_timeout() -> None:
    qm = _qm(_wl("timed-out", created=1, pods_ready_evicted_at=50.0), _wl("later", created=20))
    assert [e.key for e in qm.heads(NOW)] == ["default/later"]


def test_entry_copy() -> None:
    e = Entry(_wl("a"), "cq", {("main", "cpu"): 1}, "WaitingForQuota", "m")
    c = e.copy()
    c.last_tried.clear()
    assert e.last_tried == {("main", "cpu"): 1} and c.key == "default/a"


def test_preference_orders_grades() -> None:
    from kubeberth.admission.model import FlavorFungibility

    fit_borrow = GranularMode(4, 1)
    preempt_local = GranularMode(2, 0)
    default = FlavorFungibility()
    assert is_preferred(fit_borrow, preempt_local, default)
    pob = FlavorFungibility(preference="PreemptionOverBorrowing")
    assert is_preferred(preempt_local, fit_borrow, pob)
    no_candidates = GranularMode(1, 0)
    assert is_preferred(GranularMode(2, 5), no_candidates, pob)
    assert not is_preferred(GranularMode(0, 0), no_candidates, default)
    assert should_try_next_flavor(no_candidates, default)
    assert not should_try_next_flavor(fit_borrow, default)
    assert should_try_next_flavor(fit_borrow, FlavorFungibility(when_can_borrow="TryNextFlavor"))
    assert should_try_next_flavor(preempt_local, default)
    assert not should_try_next_flavor(preempt_local,
                                      FlavorFungibility(when_can_preempt="MayStopSearch"))


def test_scan_progress_starts_after_last_tried_flavor() -> None:
    from kubeberth.admission.model import FlavorQuotas, ResourceFlavor, ResourceGroup, ResourceQuota
    from kubeberth.admission.quota import Snapshot

    objs = KueueObjects(flavors={"a": ResourceFlavor("a"), "b": ResourceFlavor("b")})
    objs.cluster_queues["cq"] = ClusterQueue("cq", resource_groups=[ResourceGroup(["cpu"], [
        FlavorQuotas("a", {"cpu": ResourceQuota(4000)}),
        FlavorQuotas("b", {"cpu": ResourceQuota(4000)})])])
    snap = Snapshot(objs)
    podsets = [PodSet("main", 1, {"cpu": 1000})]

    def oracle(*_: object) -> tuple[str, int]:
        return "Preempt", 0

    cq = snap.cluster_queues["cq"]
    fresh = FlavorAssigner(podsets, cq, snap.flavors, oracle).assign()
    assert fresh.flavors() == {"main": {"cpu": "a"}}
    assert fresh.tried_indexes() == {("main", "cpu"): 0}
    resumed = FlavorAssigner(podsets, cq, snap.flavors, oracle,
                             last_tried={("main", "cpu"): 0}).assign()
    assert resumed.flavors() == {"main": {"cpu": "b"}}
    # The last flavor was tried: the next attempt starts over.
    assert resumed.tried_indexes() == {("main", "cpu"): -1}
