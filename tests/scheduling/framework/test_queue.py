"""The scheduling queue: ordering, backoff, event-driven moves, gating, flushes, determinism."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.paths import SHARED

from kubeberth.api.errors import InputError
from kubeberth.api.objects import ObjectMeta, Pod, PodSchedulingGate, PodSpec
from kubeberth.scheduling.framework.interface import ClusterEvent, QueuedPodInfo
from kubeberth.scheduling.framework.queue import (
    WILDCARD_EVENT,
    SchedulingQueue,
    backoff_duration,
    pod_updated,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.state.cluster import PodInfo, make_pod_info

CASES = SHARED / "conformance" / "kube-scheduler" \
    / "cases.yaml"
NODE_ADD = ClusterEvent("Node", "Add")
NODE_DELETE = ClusterEvent("Node", "Delete")
NODE_TAINT = ClusterEvent("Node", "UpdateNodeTaint")
POD_DELETE = ClusterEvent("Pod", "Delete")
EVENTS: dict[str, list[ClusterEvent]] = {
    "Fit": [NODE_ADD, POD_DELETE],
    "Taints": [ClusterEvent("Node", "Update")],
    "Never": [],
    "Gate": [ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")],
}


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sort_key(qpi: QueuedPodInfo) -> tuple[Any, ...]:
    """PrioritySort: higher priority first, then earlier timestamp."""
    return (-qpi.info.priority, qpi.timestamp)


def pod(name: str, priority: int = 0, *, gated: bool = False,
        labels: Mapping[str, str] | None = None) -> PodInfo:
    gates = [PodSchedulingGate(name="example.com/wait")] if gated else []
    return make_pod_info(Pod(metadata=ObjectMeta(name=name, namespace="default",
                                                 labels=dict(labels or {})),
                             spec=PodSpec(priority=priority, scheduling_gates=gates)))


def scheduling_gates(pi: PodInfo) -> Status:
    """The SchedulingGates PreEnqueue plugin."""
    if pi.pod.spec.scheduling_gates:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("waiting for gates",),
                      "SchedulingGates")
    return SUCCESS


def make_queue(clock: Clock, **kwargs: Any) -> SchedulingQueue:
    kwargs.setdefault("events_by_plugin", EVENTS)
    return SchedulingQueue(sort_key, clock=clock, **kwargs)


def drain(q: SchedulingQueue) -> list[str]:
    names = []
    while (qpi := q.pop()) is not None:
        names.append(qpi.info.name)
        q.done(qpi.info.key)
    return names


def fail(q: SchedulingQueue, *plugins: str, pending: tuple[str, ...] = ()) -> QueuedPodInfo:
    """Pop the head and hand it back as rejected by ``plugins`` (an error when none)."""
    qpi = q.pop()
    assert qpi is not None
    cycle = q.scheduling_cycle
    qpi.unschedulable_plugins = set(plugins)
    qpi.pending_plugins = set(pending)
    assert q.add_unschedulable_if_not_present(qpi, cycle)
    return qpi


# ---- ordering --------------------------------------------------------------------------------
def test_pops_by_priority_then_timestamp() -> None:
    clock = Clock()
    q = make_queue(clock)
    for t, (name, prio) in enumerate([("low", 0), ("high-late", 10), ("mid", 5), ("high", 10)]):
        clock.now = 10.0 - t  # later adds get earlier timestamps
        q.add(pod(name, prio))
    assert drain(q) == ["high", "high-late", "mid", "low"]


def test_equal_keys_pop_in_insertion_order() -> None:
    q = make_queue(Clock())
    for name in ("c", "a", "b"):
        q.add(pod(name))
    assert drain(q) == ["c", "a", "b"]


def test_pop_counts_attempts_and_cycles() -> None:
    clock = Clock(5.0)
    q = make_queue(clock)
    q.add(pod("a"))
    clock.now = 9.0
    qpi = q.pop()
    assert qpi is not None
    assert (qpi.attempts, qpi.initial_attempt_timestamp, qpi.timestamp) == (1, 5.0, 5.0)
    assert q.pop() is None
    assert q.scheduling_cycle == 1


def test_update_in_active_queue_reorders() -> None:
    q = make_queue(Clock())
    q.add(pod("a", 1))
    q.add(pod("b", 2))
    old = q.get("default/a")
    assert old is not None
    q.update(old.info, pod("a", 3))
    assert drain(q) == ["a", "b"]


# ---- backoff ---------------------------------------------------------------------------------
def test_backoff_doubles_and_caps() -> None:
    got = [backoff_duration(n, 1.0, 10.0) for n in range(8)]
    assert got == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert [backoff_duration(n, 0.5, 3.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_duration(10_000, 1.0, 10.0) == 10.0
    assert make_queue(Clock(), pod_initial_backoff=2, pod_max_backoff=5).backoff_duration(3) \
        == 5.0


def test_conformance_derived_backoff_01() -> None:
    if not CASES.exists():
        pytest.skip("../shared/conformance is not present")
    with CASES.open() as f:
        cases = yaml.load(f, Loader=yaml.CSafeLoader)["cases"]
    case = next(c for c in cases if c["id"] == "derived-backoff-01")
    cfg = case["config"]
    q = make_queue(Clock(), pod_initial_backoff=cfg["podInitialBackoffSeconds"],
                   pod_max_backoff=cfg["podMaxBackoffSeconds"])
    expect = case["expect"]
    versions = expect.get("by_version", {})
    expect = versions.get("newest-upstream", versions.get("current-upstream", expect))
    table = expect["backoff_seconds_by_failure_count"]
    assert len(table) == 7
    for count, seconds in table.items():
        assert q.backoff_duration(int(count)) == seconds, count


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"pod_initial_backoff": -1.0}, "podInitialBackoffSeconds"),
    ({"pod_initial_backoff": float("nan")}, "podInitialBackoffSeconds"),
    ({"pod_initial_backoff": 5.0, "pod_max_backoff": 2.0}, "podMaxBackoffSeconds"),
    ({"max_in_unschedulable": 0.0}, "podMaxInUnschedulablePodsDuration"),
])
def test_bad_durations_are_input_errors(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InputError) as err:
        make_queue(Clock(), **kwargs)
    assert err.value.field == field


def test_backoff_expiry_moves_pod_to_active() -> None:
    clock = Clock(100.25)
    q = make_queue(clock, pop_from_backoff=False)
    q.add(pod("a"))
    qpi = fail(q)  # an error: straight to the backoff queue
    assert q.pending_pods() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}
    assert q.next_backoff_expiry() == 101.25
    assert q.pop() is None  # backing-off pods are not popped with the feature off
    clock.now = 101.0
    assert q.flush_backoff_completed() == 0
    clock.now = 101.25
    assert q.flush_backoff_completed() == 1
    assert q.next_backoff_expiry() is None
    assert q.pop() is qpi
    assert qpi.attempts == 2


def test_backoff_expiry_is_aligned_to_whole_seconds() -> None:
    clock = Clock(100.25)
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q)
    # Expiry 101.25 truncates to 101; the pod backs off through that whole second.
    assert q.next_backoff_expiry() == 102.0
    clock.now = 101.9
    assert q.flush_backoff_completed() == 0
    clock.now = 102.0
    assert q.flush_backoff_completed() == 1


def test_backoff_grows_with_consecutive_failures() -> None:
    clock = Clock()
    q = make_queue(clock, pop_from_backoff=False)
    q.add(pod("a"))
    waits = []
    for _ in range(6):
        fail(q)
        expiry = q.next_backoff_expiry()
        assert expiry is not None
        waits.append(expiry - clock.now)
        clock.now = expiry
        q.flush_backoff_completed()
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_error_count_resets_after_an_unschedulable_failure() -> None:
    clock = Clock()
    q = make_queue(clock, pop_from_backoff=False)
    q.add(pod("a"))
    for _ in range(3):  # three errors: 1, 2, 4 s
        fail(q)
        clock.now = q.next_backoff_expiry() or clock.now
        q.flush_backoff_completed()
    fail(q, "Fit")
    assert q.pending_counts() == (0, 0, 1)
    q.move_all_to_active_or_backoff(NODE_ADD)
    # First unschedulable failure: backoff by the unschedulable count (1), not attempts (4).
    assert q.next_backoff_expiry() == clock.now + 1.0


def test_zero_max_backoff_disables_backoff() -> None:
    q = make_queue(Clock(), pod_initial_backoff=0.0, pod_max_backoff=0.0)
    q.add(pod("a"))
    fail(q)
    assert q.pending_counts() == (1, 0, 0)


def test_pop_from_backoff_when_active_queue_is_empty() -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    qpi = q.pop()
    assert qpi is not None
    q.move_all_to_active_or_backoff(NODE_ADD)  # a move request while "a" is in flight
    qpi.unschedulable_plugins = {"Fit"}
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert q.pending_counts() == (1, 1, 0)
    assert drain(q) == ["b", "a"]  # activeQ first, then the backing-off pod


def test_error_backoff_is_not_popped_early() -> None:
    q = make_queue(Clock())
    q.add(pod("a"))
    fail(q)
    assert q.pop() is None
    assert len(q) == 1


def test_backoff_queue_ties_follow_queue_sort() -> None:
    clock = Clock()
    q = make_queue(clock)
    for name, prio in (("lo", 1), ("hi", 9)):
        q.add(pod(name, prio))
    held = [q.pop(), q.pop()]
    q.move_all_to_active_or_backoff(NODE_ADD)
    for qpi in reversed(held):  # "lo" enters the backoff queue first
        assert qpi is not None
        qpi.unschedulable_plugins = {"Fit"}
        q.add_unschedulable_if_not_present(qpi, 1)
    assert drain(q) == ["hi", "lo"]


# ---- events ----------------------------------------------------------------------------------
def test_unschedulable_pods_move_only_on_matching_events() -> None:
    clock = Clock()
    q = make_queue(clock, pop_from_backoff=False)
    for name in ("fit", "taints", "never"):
        q.add(pod(name))
    fail(q, "Fit")
    fail(q, "Taints")
    fail(q, "Never")
    assert q.pending_counts() == (0, 0, 3)
    assert q.move_all_to_active_or_backoff(NODE_DELETE) == 0
    assert q.move_all_to_active_or_backoff(NODE_TAINT) == 1  # "Update" covers UpdateNodeTaint
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 1
    assert q.pending_counts() == (0, 2, 1)
    clock.now = 5.0
    q.flush_backoff_completed()
    assert drain(q) == ["taints", "fit"]  # equal keys: order of arrival in activeQ
    assert q.move_all_to_active_or_backoff(WILDCARD_EVENT) == 1


def test_expired_backoff_goes_straight_to_active() -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q, "Fit")
    clock.now = 30.0
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.pending_counts() == (1, 0, 0)


def test_unregistered_plugin_moves_on_any_event_of_interest() -> None:
    q = make_queue(Clock())
    q.add(pod("a"))
    fail(q, "Unknown")
    assert q.move_all_to_active_or_backoff(ClusterEvent("PersistentVolume", "Add")) == 0
    assert q.move_all_to_active_or_backoff(NODE_DELETE) == 0
    assert q.move_all_to_active_or_backoff(POD_DELETE) == 1


def test_without_an_event_registry_every_event_moves() -> None:
    q = make_queue(Clock(), events_by_plugin=None)
    q.add(pod("a"))
    fail(q, "Fit")
    assert q.move_all_to_active_or_backoff(ClusterEvent("Namespace", "Add")) == 1


def test_pending_plugin_skips_backoff() -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    fail(q, "Taints", pending=("Fit",))
    fail(q, "Taints")
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.pending_counts() == (1, 0, 1)
    assert drain(q) == ["a"]


def test_move_request_cycle_rule() -> None:
    q = make_queue(Clock(), pop_from_backoff=False)
    for name in ("a", "b", "c", "d"):
        q.add(pod(name))
    # "a": a registered event arrives while it is in flight -> backoff.
    a = q.pop()
    assert a is not None
    q.move_all_to_active_or_backoff(NODE_ADD)
    a.unschedulable_plugins = {"Never"}
    q.add_unschedulable_if_not_present(a, q.scheduling_cycle)
    assert q.pending_counts() == (3, 1, 0)
    # "b": the last move request came before its cycle -> unschedulable.
    fail(q, "Never")
    assert q.pending_counts() == (2, 1, 1)
    # "c": an event nobody registered does not count as a move request.
    c = q.pop()
    assert c is not None
    q.move_all_to_active_or_backoff(ClusterEvent("StorageClass", "Add"))
    c.unschedulable_plugins = {"Never"}
    q.add_unschedulable_if_not_present(c, q.scheduling_cycle)
    assert q.pending_counts() == (1, 1, 2)
    # "d": an event that moves no pod is still a move request for the pods in flight.
    d = q.pop()
    assert d is not None
    cycle = q.scheduling_cycle
    q.move_all_to_active_or_backoff(POD_DELETE)
    d.unschedulable_plugins = {"Never"}
    q.add_unschedulable_if_not_present(d, cycle)
    assert q.pending_counts() == (0, 2, 2)


def test_requeue_refused_when_already_queued() -> None:
    q = make_queue(Clock())
    q.add(pod("a"))
    qpi = q.pop()
    assert qpi is not None
    q.add(pod("a"))  # a new incarnation arrived while the old one was in flight
    assert not q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert q.pending_counts() == (1, 0, 0)


# ---- leftover flush --------------------------------------------------------------------------
def test_unschedulable_leftover_flush_after_five_minutes() -> None:
    clock = Clock(10.0)
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    fail(q, "Never")
    clock.now = 100.0
    fail(q, "Never")
    assert q.oldest_unschedulable_timestamp() == 10.0
    clock.now = 310.0
    assert q.flush_unschedulable_left_over() == 0  # exactly 5 minutes is not longer
    clock.now = 310.5
    assert q.flush_unschedulable_left_over() == 1
    assert q.oldest_unschedulable_timestamp() == 100.0
    assert q.pending_counts() == (1, 0, 1)
    assert drain(q) == ["a"]
    clock.now = 401.0
    assert q.flush_unschedulable_left_over() == 1
    assert drain(q) == ["b"]
    assert q.oldest_unschedulable_timestamp() is None


# ---- gating ----------------------------------------------------------------------------------
def test_gated_pod_is_not_popped_until_its_gate_clears() -> None:
    clock = Clock()
    q = make_queue(clock, pre_enqueue=scheduling_gates)
    waiting = pod("a", gated=True)
    q.add(waiting)
    assert q.pop() is None
    assert q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    (gated,) = q.gated_pods()
    assert (gated.gated, gated.gating_plugin) == (True, "SchedulingGates")
    assert "SchedulingGates" in gated.unschedulable_plugins
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 0
    clock.now = 1000.0
    q.flush_unschedulable_left_over()  # re-checked, still gated
    assert q.activate(["default/a"]) == 0
    assert q.pop() is None
    assert q.oldest_unschedulable_timestamp() is None  # gated pods are never due a retry
    relabelled = pod("a", gated=True, labels={"x": "y"})
    q.update(waiting, relabelled)
    assert q.pop() is None
    q.update(relabelled, pod("a"))
    qpi = q.pop()
    assert qpi is not None
    assert (qpi.gated, qpi.initial_attempt_timestamp, qpi.timestamp) == (False, 1000.0, 0.0)


def test_gated_pod_moves_on_its_gating_plugin_events_only() -> None:
    gate_open = {"a": False}

    def gate(pi: PodInfo) -> Status:
        if gate_open[pi.name]:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, ("closed",), "Gate")

    q = make_queue(Clock(), pre_enqueue=gate)
    q.add(pod("a"))
    gate_open["a"] = True
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 0  # not the gate's event
    assert q.move_all_to_active_or_backoff(
        ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")) == 1
    assert drain(q) == ["a"]


def test_pre_enqueue_runs_before_the_backoff_queue() -> None:
    gate_open = {"a": True}

    def gate(pi: PodInfo) -> Status:
        return SUCCESS if gate_open[pi.name] else Status(Code.UNSCHEDULABLE, (), "Gate")

    q = make_queue(Clock(), pre_enqueue=gate)
    q.add(pod("a"))
    gate_open["a"] = False
    fail(q)  # an error: would enter the backoff queue, but PreEnqueue now rejects it
    assert q.pending_pods()["gated"] == 1


# ---- activate, update, delete ----------------------------------------------------------------
def test_activate_moves_unschedulable_and_backoff_pods() -> None:
    q = make_queue(Clock(), pop_from_backoff=False)
    q.add(pod("a"))
    q.add(pod("b"))
    fail(q, "Never")
    fail(q)
    assert q.pending_counts() == (0, 1, 1)
    assert q.activate(["default/a", "default/b", "default/missing"]) == 2
    assert drain(q) == ["a", "b"]


def test_activate_in_flight_pod_requeues_it() -> None:
    q = make_queue(Clock(), pop_from_backoff=False)
    q.add(pod("a"))
    qpi = q.pop()
    assert qpi is not None
    q.activate(["default/a"])
    qpi.unschedulable_plugins = {"Never"}
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert q.pending_counts() == (0, 1, 0)


def test_update_of_in_flight_pod_is_used_on_requeue() -> None:
    q = make_queue(Clock(), pop_from_backoff=False)
    old = pod("a", 1)
    q.add(old)
    qpi = q.pop()
    assert qpi is not None
    newer = pod("a", 1, labels={"tier": "gold"})
    q.update(old, newer)
    qpi.unschedulable_plugins = {"Never"}
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert qpi.info is newer
    assert q.pending_counts() == (0, 1, 0)


def test_update_without_scheduling_change_keeps_pod_unschedulable() -> None:
    q = make_queue(Clock(), pop_from_backoff=False)
    old = pod("a")
    q.add(old)
    fail(q, "Never")
    status_only = make_pod_info(Pod(metadata=old.pod.metadata, spec=old.pod.spec))
    status_only.pod.status.phase = "Pending"
    assert not pod_updated(old.pod, status_only.pod)
    q.update(old, status_only)
    assert q.pending_counts() == (0, 0, 1)
    q.update(status_only, pod("a", labels={"k": "v"}))
    assert q.pending_counts() == (0, 1, 0)


def test_update_of_unknown_pod_adds_it() -> None:
    q = make_queue(Clock())
    q.update(pod("a"), pod("a", 3))
    qpi = q.pop()
    assert qpi is not None and qpi.info.priority == 3


def test_delete_drops_queued_and_in_flight_pods() -> None:
    q = make_queue(Clock())
    for name in ("a", "b", "c"):
        q.add(pod(name))
    fail(q, "Never")
    qpi = q.pop()
    assert qpi is not None
    q.delete("default/a")
    q.delete("default/b")
    q.delete("default/c")
    assert len(q) == 0
    assert not q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert len(q) == 0
    assert q.pop() is None


def test_re_adding_a_queued_pod_replaces_it() -> None:
    q = make_queue(Clock())
    q.add(pod("a", 1))
    q.add(pod("a", 7))
    assert len(q) == 1
    qpi = q.pop()
    assert qpi is not None and qpi.info.priority == 7


# ---- determinism and the property test -------------------------------------------------------
Op = tuple[str, int]
OPS = st.one_of(
    st.tuples(st.sampled_from(["add", "delete", "activate", "update", "gate", "ungate"]),
              st.integers(0, 5)),
    st.tuples(st.sampled_from(["pop-fit", "pop-never", "pop-error", "pop-pending", "pop-bind",
                               "pop-hold", "resolve"]), st.just(0)),
    st.tuples(st.sampled_from(["event-node-add", "event-node-taint", "event-pod-delete",
                               "event-other", "flush-backoff", "flush-leftover"]), st.just(0)),
    st.tuples(st.just("advance"), st.integers(0, 400)),
)


class Harness:
    """Drives a queue with an op list and checks its invariants after every step."""

    def __init__(self, pop_from_backoff: bool) -> None:
        self.clock = Clock()
        self.closed: set[str] = set()
        self.q = make_queue(self.clock, pre_enqueue=self.gate,
                            pop_from_backoff=pop_from_backoff)
        self.pods: dict[str, PodInfo] = {}
        self.live: set[str] = set()  # added, not yet bound or deleted
        self.held: list[QueuedPodInfo] = []
        self.bound: list[str] = []
        self.adds = self.deletes = 0
        self.log: list[tuple[str, float]] = []

    def gate(self, pi: PodInfo) -> Status:
        return Status(Code.UNSCHEDULABLE, (), "Gate") if pi.name in self.closed else SUCCESS

    def pop(self) -> QueuedPodInfo | None:
        qpi = self.q.pop()
        if qpi is not None:
            key = qpi.info.key
            assert key in self.live, f"popped {key}, which is not pending"
            assert all(h.info.key != key for h in self.held), f"popped in-flight {key}"
            self.log.append((key, self.clock.now))
        return qpi

    def finish(self, qpi: QueuedPodInfo, how: str) -> None:
        key = qpi.info.key
        if how == "bind":
            self.q.done(key)
            self.live.discard(key)
            self.bound.append(key)
            return
        qpi.unschedulable_plugins = {"fit": {"Fit"}, "never": {"Never"}, "error": set(),
                                     "pending": {"Taints"}}[how]
        qpi.pending_plugins = {"Fit"} if how == "pending" else set()
        self.q.add_unschedulable_if_not_present(qpi, self.q.scheduling_cycle)

    def step(self, op: str, arg: int) -> None:
        q = self.q
        name = f"p{arg}"
        key = f"default/{name}"
        if op == "add" and key not in self.live:
            self.pods[key] = pod(name, arg % 3)
            self.live.add(key)
            self.adds += 1
            q.add(self.pods[key])
        elif op == "delete" and key in self.live:
            q.delete(key)
            self.live.discard(key)
            self.deletes += 1
            self.held = [h for h in self.held if h.info.key != key]
        elif op == "activate":
            q.activate([key])
        elif op == "update" and key in self.live:
            new = pod(name, arg % 3, labels={"v": str(self.clock.now)})
            q.update(self.pods[key], new)
            self.pods[key] = new
        elif op == "gate":
            self.closed.add(name)
        elif op == "ungate":
            self.closed.discard(name)
        elif op.startswith("pop-"):
            qpi = self.pop()
            if qpi is not None:
                if op == "pop-hold":
                    self.held.append(qpi)
                else:
                    self.finish(qpi, op[4:])
        elif op == "resolve" and self.held:
            self.finish(self.held.pop(0), "never")
        elif op.startswith("event-"):
            q.move_all_to_active_or_backoff({
                "event-node-add": NODE_ADD, "event-node-taint": NODE_TAINT,
                "event-pod-delete": POD_DELETE,
                "event-other": ClusterEvent("StorageClass", "Add")}[op])
        elif op == "flush-backoff":
            q.flush_backoff_completed()
        elif op == "flush-leftover":
            q.flush_unschedulable_left_over()
        elif op == "advance":
            self.clock.now += arg
        self.check()

    def check(self) -> None:
        q = self.q
        counts = q.pending_pods()
        assert len(q) == sum(counts.values())
        assert all(v >= 0 for v in counts.values())
        assert len(q) == len(self.live) - len(self.held)
        if q.next_backoff_expiry() is not None:
            assert counts["backoff"] > 0

    def drain(self) -> None:
        """Resolve held pods, open every gate, then keep time and events coming: every pending
        pod must be bound."""
        while self.held:
            self.finish(self.held.pop(0), "never")
            self.check()
        self.closed.clear()
        for _ in range(20):
            if not self.live:
                break
            self.clock.now += 400.0
            self.q.flush_unschedulable_left_over()
            self.q.flush_backoff_completed()
            self.q.move_all_to_active_or_backoff(NODE_ADD)
            while (qpi := self.pop()) is not None:
                self.finish(qpi, "bind")
            self.check()
        assert not self.live, f"never popped: {sorted(self.live)}"
        assert len(self.q) == 0


def run(ops: list[Op], pop_from_backoff: bool) -> Harness:
    h = Harness(pop_from_backoff)
    for op, arg in ops:
        h.step(op, arg)
    h.drain()
    return h


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=80), st.booleans())
def test_every_pending_pod_is_eventually_popped_exactly_once_per_queueing(
        ops: list[Op], pop_from_backoff: bool) -> None:
    h = run(ops, pop_from_backoff)
    assert len(h.bound) + h.deletes == h.adds
    # Same operations, same pops: the queue is deterministic.
    assert run(ops, pop_from_backoff).log == h.log


def test_same_operations_give_the_same_pop_order() -> None:
    def scenario() -> list[str]:
        clock = Clock()
        q = make_queue(clock)
        order: list[str] = []
        for i in range(30):
            clock.now = i // 4
            q.add(pod(f"p{i}", i % 3))
        for i in range(30):
            qpi = q.pop()
            assert qpi is not None
            order.append(qpi.info.name)
            if i % 2:
                q.done(qpi.info.key)
            else:
                qpi.unschedulable_plugins = {"Fit"} if i % 4 else set()
                q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
        clock.now = 50.0
        q.move_all_to_active_or_backoff(NODE_ADD)
        q.flush_backoff_completed()
        order.extend(drain(q))
        return order

    first = scenario()
    assert first == scenario()
    assert len(first) == 45

