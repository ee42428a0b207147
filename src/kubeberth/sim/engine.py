"""The discrete-event replay: a heapq of ``(time, phase, sequence)`` events on a virtual clock.

Pods arrive at their trace times, the scheduler drains its active queue after each batch of
simultaneous events, bound pods complete after their durations, and timers fire exactly when the
queue's backoff expires, a Permit wait times out, or the 30-second flush of pods left
unschedulable for five minutes is due. Phases order simultaneous events: completions free
capacity before arrivals are considered, so a replay never depends on heap insertion luck.

Preemption victims are deleted and, as the controller that owns a trace pod would, re-created
at once with their full duration (the work they had done is lost); pods that name a node in
``spec.nodeName`` are placed there without scheduling, as the kubelet would admit them.
Nothing here knows plugin internals: the simulator only applies the scheduler's decisions.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import msgspec

from kubeberth.config.types import SchedulerConfiguration
from kubeberth.framework.registry import Registry
from kubeberth.framework.scheduler import (
    ASSIGNED_POD_DELETE,
    CycleResult,
    Scheduler,
)
from kubeberth.framework.status import SUCCESS, Status
from kubeberth.sim.metrics import Metrics, PodRecord, fragmentation_cache
from kubeberth.sim.traces import TracePod, Workload
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info

FLUSH_PERIOD = 30.0  # upstream flushUnschedulablePodsLeftover period


class Phase(IntEnum):
    COMPLETE = 0
    ARRIVE = 1
    BIND = 2
    TIMER = 3


@dataclass(slots=True, frozen=True)
class _Completion:
    """A planned completion; stale once the pod was preempted (its token no longer matches)."""

    pod: PodInfo
    token: int


@dataclass(slots=True)
class SimResult:
    metrics: Metrics
    end_time: float
    decisions: int
    unscheduled: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    unmodelled_plugins: list[str] = field(default_factory=list)


class Simulation:
    def __init__(
        self,
        workload: Workload,
        config: SchedulerConfiguration,
        registry: Registry,
        *,
        seed: int = 0,
        bind_latency: float = 0.0,
        sample_interval: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.workload = workload
        self.now = 0.0
        self.snapshot = ClusterState()
        extras = workload.extras
        for pc in extras.priority_classes:
            self.snapshot.priority_classes[pc.metadata.name] = pc
        for ns in extras.namespaces:
            self.snapshot.namespaces[ns.metadata.name] = ns
        self.snapshot.pdbs = list(extras.pdbs)
        for node in workload.nodes:
            self.snapshot.add_node(node)
        self.scheduler = Scheduler(
            config, registry, self.snapshot, clock=lambda: self.now, seed=seed,
            binder=self._binder, evictor=self._evict)
        self.bind_latency = bind_latency
        self.metrics = Metrics(frag=fragmentation_cache(
            [make_pod_info(tp.pod) for tp in workload.pods]))
        self.progress = progress
        self._heap: list[tuple[float, int, int, object]] = []
        self._non_timer_events = 0
        self._seq = 0
        self._durations: dict[str, float | None] = {}
        self._specs: dict[str, TracePod] = {}
        self._completion_token: dict[str, int] = {}
        self._armed: set[float] = set()
        self._ignored: list[str] = []
        self._ignored_set: set[str] = set()
        self._decisions = 0
        # Progress bookkeeping for the end-of-run test: a counter orders attempts and changes.
        self._tick = 0
        self._last_attempt: dict[str, int] = {}
        self._progress = 0  # tick of the last bind, completion or eviction
        self._first_release: int | None = None  # first Permit release since then
        horizon = max((tp.arrival + (tp.duration or 0.0) for tp in workload.pods), default=0.0)
        self.sample_interval = sample_interval or max(1.0, math.ceil(horizon / 2000.0))
        self._next_sample = 0.0
        for tp in workload.pods:
            self._push(tp.arrival, Phase.ARRIVE, tp)

    # ---- heap ------------------------------------------------------------------------------
    def _push(self, when: float, phase: Phase, payload: object) -> None:
        self._seq += 1
        if phase != Phase.TIMER:
            self._non_timer_events += 1
        heapq.heappush(self._heap, (when, int(phase), self._seq, payload))

    def _arm(self, when: float | None) -> None:
        """Wake up at ``when``; everything due at or before now has just been handled."""
        if when is None or when <= self.now or when in self._armed:
            return
        self._armed.add(when)
        self._push(when, Phase.TIMER, None)

    # ---- host callbacks --------------------------------------------------------------------
    def _binder(self, pod: PodInfo, node: str) -> Status:
        pod.start_time = self.now
        return SUCCESS

    def _evict(self, victim: PodInfo, preemptor: PodInfo) -> None:
        self.snapshot.remove_pod(victim)
        self._progressed()
        self._completion_token.pop(victim.key, None)
        self.metrics.preemptions += 1
        rec = self.metrics.pods[victim.key]
        rec.preempted += 1
        rec.bound = None
        rec.node = ""
        victim.pod.spec.node_name = ""
        self.scheduler.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        fresh = make_pod_info(msgspec.structs.replace(victim.pod),
                              self.snapshot.priority_classes, seq=victim.seq)
        fresh.arrival = victim.arrival
        self.scheduler.add(fresh)

    # ---- event handlers --------------------------------------------------------------------
    def _arrive(self, tp: TracePod) -> None:
        pi = make_pod_info(tp.pod, self.snapshot.priority_classes, seq=self._seq)
        pi.arrival = self.now
        self._durations[pi.key] = tp.duration
        self._specs[pi.key] = tp
        self.metrics.pods[pi.key] = PodRecord(pi.key, self.now)
        if tp.pod.spec.node_name:
            idx = self.snapshot.node_index.get(tp.pod.spec.node_name)
            if idx is None or not self.snapshot.present[idx]:
                self._ignore(pi.key)
                return
            self.snapshot.add_pod(pi, idx)
            self._started(pi, tp.pod.spec.node_name)
            return
        if not self.scheduler.responsible_for(pi):
            self._ignore(pi.key)
            return
        self.scheduler.add(pi)

    def _progressed(self) -> None:
        """A bind, completion or eviction: the cluster changed in a way that may let any
        pending pod fit."""
        self._tick += 1
        self._progress = self._tick
        self._first_release = None

    def _ignore(self, key: str) -> None:
        self._ignored.append(key)
        self._ignored_set.add(key)

    def _started(self, pi: PodInfo, node: str) -> None:
        self._progressed()
        pi.start_time = self.now
        rec = self.metrics.pods[pi.key]
        rec.bound = self.now
        rec.node = node
        duration = self._durations.get(pi.key)
        if duration is not None:
            token = self._seq + 1
            self._completion_token[pi.key] = token
            self._push(self.now + duration, Phase.COMPLETE, _Completion(pi, token))

    def _complete(self, pi: PodInfo, token: int) -> None:
        if self._completion_token.get(pi.key) != token:
            return  # preempted and re-created since this completion was planned
        del self._completion_token[pi.key]
        self._progressed()
        self.snapshot.remove_pod(pi)
        self.metrics.pods[pi.key].finished = self.now
        self.scheduler.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)

    def _bind(self, res: CycleResult) -> None:
        st = self.scheduler.bind(res)
        if st.ok:
            self._started(res.pod, res.node or "")
        else:
            self.metrics.attempts["error"] += 1

    def _record(self, res: CycleResult) -> None:
        self._tick += 1
        self._last_attempt[res.pod.key] = self._tick
        rec = self.metrics.pods.get(res.pod.key)
        if rec is not None:
            rec.attempts += 1
        if res.outcome in ("assumed", "waiting"):
            self.metrics.attempts["scheduled"] += 1
        elif res.outcome == "unschedulable":
            self.metrics.attempts["unschedulable"] += 1
        else:
            self.metrics.attempts["error"] += 1

    def _release_waiting(self) -> None:
        """Bind pods a Permit plugin has just allowed; requeue those rejected or timed out."""
        for res in self.scheduler.resolve_waiting(self.now):
            if res.outcome == "assumed":
                self._bind(res)
            elif self._first_release is None:
                self._tick += 1
                self._first_release = self._tick

    def _schedule_all(self) -> None:
        sched = self.scheduler
        sched.queue.flush_backoff_completed()
        self._release_waiting()
        while True:
            res = sched.schedule_one()
            if res is None:
                break
            self._decisions += 1
            self._record(res)
            if res.outcome == "assumed":
                if self.bind_latency > 0:
                    self._push(self.now + self.bind_latency, Phase.BIND, res)
                else:
                    self._bind(res)
            self._release_waiting()
            sched.queue.flush_backoff_completed()
        self._arm(sched.queue.next_backoff_expiry())
        self._arm(sched.next_permit_deadline())
        oldest = sched.queue.oldest_unschedulable_timestamp()
        if oldest is not None:
            # The first 30-second flush tick at which the pod has waited strictly longer.
            due = oldest + sched.queue.max_in_unschedulable
            self._arm((math.floor(due / FLUSH_PERIOD) + 1) * FLUSH_PERIOD)

    def _sample_until(self, t: float) -> None:
        q = self.scheduler.queue
        while self._next_sample < t:
            self.metrics.sample(self._next_sample, self.snapshot, q.pending_counts())
            self._next_sample += self.sample_interval

    # ---- main loop -------------------------------------------------------------------------
    def run(self) -> SimResult:
        total = len(self.workload.pods)
        arrived = 0
        heap = self._heap
        while heap:
            t = heap[0][0]
            self._sample_until(t)
            self.now = t
            self._armed.discard(t)
            while heap and heap[0][0] == t:
                _, phase, _, payload = heapq.heappop(heap)
                if phase != Phase.TIMER:
                    self._non_timer_events -= 1
                if phase == Phase.ARRIVE:
                    assert isinstance(payload, TracePod)
                    self._arrive(payload)
                    arrived += 1
                elif phase == Phase.COMPLETE:
                    assert isinstance(payload, _Completion)
                    self._complete(payload.pod, payload.token)
                elif phase == Phase.BIND:
                    assert isinstance(payload, CycleResult)
                    self._bind(payload)
            if t % FLUSH_PERIOD == 0:
                self.scheduler.queue.flush_unschedulable_left_over()
            self._schedule_all()
            if self.progress is not None:
                self.progress(arrived, total)
            if not self._work_left():
                break
        self._sample_until(self.now)
        self.metrics.sample(self.now, self.snapshot, self.scheduler.queue.pending_counts())
        unscheduled = sorted(k for k, r in self.metrics.pods.items()
                             if r.bound is None and k not in self._ignored)
        unmodelled = sorted({n for fw in self.scheduler.frameworks.values()
                             for n in fw.unmodelled})
        return SimResult(self.metrics, self.now, self._decisions, unscheduled,
                         sorted(self._ignored), unmodelled)

    def _work_left(self) -> bool:
        """Stop once nothing can arrive, complete or bind any more and every pending pod has
        been tried since the last progress (bind, completion, eviction) and since the first
        Permit reservation released after it: further retries would see the same cluster, or
        the same pods taking turns holding the same reservations (a Permit livelock upstream
        would loop in forever), and change no outcome."""
        if self._non_timer_events:
            return True
        if self._first_release is None and len(self.scheduler.handle.waiting_pods):
            return True  # let a Permit timeout release capacity at least once
        since = max(self._progress, self._first_release or 0)
        for key, rec in self.metrics.pods.items():
            if rec.bound is None and key not in self._ignored_set \
                    and self._last_attempt.get(key, 0) <= since:
                return True
        return False
