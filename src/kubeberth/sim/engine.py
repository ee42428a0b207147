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

Pods of Deployments, ReplicaSets, StatefulSets and Jobs belong to their owner
(``sim/owners.py``): when one is evicted or preempted the owner creates a replacement under a
new name (a StatefulSet under the same name). Voluntary
disruptions go through :meth:`Simulation.evict`, which answers as the eviction API does with
PodDisruptionBudgets computed from live pods (``state/disruption.py``). Hosts of periodic
policies (the spill controller, a descheduling pass) register with :meth:`Simulation.every`
and change nodes through :meth:`Simulation.update_node`, the path the scheduling queue reacts
to; a node may have a pod start latency (the virtual-kubelet node's model download), during
which its pods are Pending and not Ready.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum

import msgspec

from kubeberth.admission.checks import CheckRegistry
from kubeberth.api.objects import Node, Pod, PodCondition, PodStatus
from kubeberth.config.configmaps import load_config_maps
from kubeberth.config.dra import load_dra
from kubeberth.config.scheduling_crds import load_scheduling_crds
from kubeberth.config.workload_api import load_workload_api
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.interface import ClusterEvent
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.pod_group_cycle import GroupOutcome
from kubeberth.scheduling.scheduler import (
    ASSIGNED_POD_DELETE,
    CycleResult,
    Scheduler,
)
from kubeberth.sim.admission import AdmissionDriver, AdmissionReport
from kubeberth.sim.metrics import GroupRecord, Metrics, PodRecord, fragmentation_cache
from kubeberth.sim.owners import OwnerRuntime
from kubeberth.sim.traces import Scenario, TracePod
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info
from kubeberth.state.disruption import (
    DisruptionBudgets,
    EvictionRequest,
    EvictionVerdict,
    PodView,
)

FLUSH_PERIOD = 30.0  # upstream flushUnschedulablePodsLeftover period
NODE_UPDATE_TAINT = ClusterEvent("Node", "UpdateNodeTaint")
NODE_ADD_EVENT = ClusterEvent("Node", "Add")
CONFIG_MAP_UPDATE = ClusterEvent("ConfigMap", "Update")
NOT_FOUND = 404

# A descheduling pass: the snapshot and the time in, the evictions to request out (pure).
Deschedule = Callable[[ClusterState, float], Iterable[EvictionRequest]]


class Phase(IntEnum):
    COMPLETE = 0
    ARRIVE = 1
    BIND = 2
    TIMER = 3
    CALL = 4  # a host callback: an owner's scale step, a periodic policy tick, an outage
    ADMISSION = 5  # a Kueue requeue or PodsReady deadline: counts as work left


@dataclass(slots=True, frozen=True)
class _Call:
    fn: Callable[[], None]
    late: bool = False  # run after the instant's scheduling (an observer of the settled state)


@dataclass(slots=True)
class EvictionRecord:
    """One eviction request and the eviction API's answer."""

    time: float
    pod: str
    node: str
    plugin: str
    reason: str
    verdict: EvictionVerdict
    replacement: str = ""  # the owner's new pod, when one was created at once


def _set_phase(pod: Pod, phase: str) -> None:
    """Write the phase and the Ready condition the kubelet would report (Ready iff Running), so
    policies reading the snapshot (a descheduler, an evictor) see what the cluster shows."""
    pod.status.phase = phase
    ready = "True" if phase == "Running" else "False"
    conds = [c for c in pod.status.conditions if c.type != "Ready"]
    conds.append(PodCondition(type="Ready", status=ready))
    pod.status.conditions = conds


class PodListener:
    """Told when a pod starts or stops occupying a node (the spill node's GPU-hour meter)."""

    def pod_started(self, pi: PodInfo, node: str, now: float) -> None:
        """A pod was bound to ``node``."""

    def pod_stopped(self, pi: PodInfo, node: str, now: float) -> None:
        """A pod left ``node`` (completed, evicted, preempted, deleted)."""


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
    evictions: list[EvictionRecord] = field(default_factory=list)
    replacements: int = 0  # pods owners created to replace deleted ones
    # Hosts attached to the run by name (e.g. "spill": its SpillHost), for the report layer.
    extras: dict[str, object] = field(default_factory=dict)
    admission: AdmissionReport | None = None  # only when the input has Kueue objects


class Simulation:
    def __init__(
        self,
        workload: Scenario,
        config: SchedulerConfiguration,
        registry: Registry,
        *,
        seed: int = 0,
        bind_latency: float = 0.0,
        sample_interval: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        descheduler: Deschedule | None = None,
        deschedule_interval: float = 300.0,
        until: float | None = None,
        admission_checks: CheckRegistry | None = None,
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
        self.snapshot.objects.load(load_scheduling_crds(extras))
        self.snapshot.objects.load_workload_api(load_workload_api(extras))
        self.snapshot.dra.load(load_dra(extras))
        for node in workload.nodes:
            self.snapshot.add_node(node)
        config_maps = load_config_maps(extras)
        for cm in config_maps:
            if cm.at == 0:
                self.snapshot.set_config_map(cm.key, cm.data)
        self.scheduler = Scheduler(
            config, registry, self.snapshot, clock=lambda: self.now, seed=seed,
            binder=self._binder, evictor=self._evict)
        self.bind_latency = bind_latency
        # Each trace pod's PodInfo, made once: the fragmentation target reads them now, the
        # pod's arrival takes its own (keyed by the TracePod's identity).
        self._infos = {id(tp): make_pod_info(tp.pod, self.snapshot.priority_classes)
                       for tp in workload.pods}
        self.metrics = Metrics(frag=fragmentation_cache(list(self._infos.values())))
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
        self.owners = OwnerRuntime(self, [dataclasses.replace(o) for o in workload.owners])
        self.kueue = AdmissionDriver.build([tp.pod for tp in workload.pods], extras, self,
                                           self.owners, admission_checks)
        # A queue-labelled Job starts suspended: its pods are created once Kueue admits it.
        initial = [tp for tp in workload.pods
                   if self.kueue is None or not self.kueue.held_back(tp.pod)]
        for tp in initial:
            self._push(tp.arrival, Phase.ARRIVE, tp)
        for cm in config_maps:
            if cm.at > 0:
                self.call_at(cm.at, functools.partial(self.update_config_map, cm.key, cm.data),
                             counts=True)
        # Owners, evictions, node start latency, periodic hosts.
        self.until = until
        self.start_latency: dict[str, float] = {}
        self.listeners: list[PodListener] = []
        self.evictions: list[EvictionRecord] = []
        self.extras: dict[str, object] = {}
        self._ready_at: dict[str, float] = {}
        self._busy: dict[int, bool] = {}
        self._adopt_initial_pods(initial)
        self.descheduler = descheduler
        if descheduler is not None:
            self.every(deschedule_interval, self._deschedule_pass, first=deschedule_interval)
        if self.kueue is not None:
            self.kueue.start()

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
        if self.owners.owner_of(victim.key) is not None:
            # An owned pod is deleted; its owner creates a replacement under a new name.
            self.metrics.preemptions += 1
            self.metrics.pods[victim.key].preempted += 1
            if self.kueue is not None:
                self.kueue.pod_stopped(victim.key)
            self._delete(victim, succeeded=False)
            return
        self._evict_running(victim, victim.pod)

    def _evict_running(self, victim: PodInfo, recreated: Pod) -> None:
        """Delete a running pod; its owner re-creates it at once as ``recreated``."""
        self._stopped(victim)
        victim.pod.status = PodStatus()
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
        if self.kueue is not None:
            self.kueue.pod_stopped(victim.key)
        fresh = make_pod_info(msgspec.structs.replace(recreated),
                              self.snapshot.priority_classes, seq=victim.seq)
        fresh.arrival = victim.arrival
        self.snapshot.objects.pod_deleted(victim.key)
        self.snapshot.objects.pod_created(fresh)
        self.scheduler.add(fresh)

    # ---- event handlers --------------------------------------------------------------------
    def _arrive(self, tp: TracePod) -> None:
        pod = tp.pod if self.kueue is None else self.kueue.arrived(tp.pod, self.now)
        pi = self._infos.pop(id(tp), None)
        if pi is None or pi.pod is not pod:
            pi = make_pod_info(pod, self.snapshot.priority_classes)
        pi.seq = self._seq
        pi.arrival = self.now
        prev = self.metrics.pods.get(pi.key)
        self._durations[pi.key] = tp.duration
        self._specs[pi.key] = tp
        record = self.metrics.pods[pi.key] = PodRecord(pi.key, self.now)
        if prev is not None:
            # A StatefulSet re-created a deleted pod under its name: the pod's record goes on.
            record.preempted = prev.preempted
        self.snapshot.objects.pod_created(pi)
        group = self.snapshot.objects.native_group(pi)
        if group is not None:
            rec = self.metrics.groups.get(group.key)
            if rec is None:
                rec = self.metrics.groups[group.key] = GroupRecord(
                    group.key, group.policy, group.min_count)
            rec.pods.append(pi.key)
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
        # On a node with a start latency the pod is Pending (not Ready) until it has passed,
        # and its run time starts then.
        latency = self.start_latency.get(node, 0.0)
        self._ready_at[pi.key] = self.now + latency
        _set_phase(pi.pod, "Running" if latency == 0 else "Pending")
        if latency > 0:
            self.call_at(self.now + latency, functools.partial(self._became_ready, pi))
        run = self.owners.owner_of(pi.key)
        if run is not None and run.kind == "StatefulSet" and run.spec.ordered:
            # OrderedReady waits for this pod to be Running and Ready before the next one.
            self.call_at(self.now + latency, functools.partial(self.owners.pod_ready, pi.key),
                         counts=True)
        for listener in self.listeners:
            listener.pod_started(pi, node, self.now)
        if self.kueue is not None:
            self.kueue.pod_bound(pi.key, self.now)
        duration = self._durations.get(pi.key)
        if duration is not None:
            token = self._seq + 1
            self._completion_token[pi.key] = token
            self._push(self.now + latency + duration, Phase.COMPLETE, _Completion(pi, token))

    def _became_ready(self, pi: PodInfo) -> None:
        """A pod on a node with a start latency is up (unless it left meanwhile)."""
        if pi.node >= 0 and self._ready_at.get(pi.key) == self.now:
            _set_phase(pi.pod, "Running")

    def _complete(self, pi: PodInfo, token: int) -> None:
        if self._completion_token.get(pi.key) != token:
            return  # preempted and re-created since this completion was planned
        del self._completion_token[pi.key]
        self._progressed()
        self._stopped(pi)
        self.snapshot.remove_pod(pi)
        self.snapshot.objects.pod_deleted(pi.key)
        self.metrics.pods[pi.key].finished = self.now
        _set_phase(pi.pod, "Succeeded")
        self.scheduler.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        self.owners.pod_gone(pi.key, succeeded=True)
        if self.kueue is not None:
            self.kueue.pod_finished(pi.key, self.now)

    def _bind(self, res: CycleResult) -> None:
        st = self.scheduler.bind(res)
        if st.ok:
            if res.bound_by:  # an extender bound it; _binder was not called
                res.pod.start_time = self.now
            self._started(res.pod, res.node or "")
        else:
            self.metrics.attempts["error"] += 1

    def _record(self, res: CycleResult) -> None:
        self._tick += 1
        self._last_attempt[res.pod.key] = self._tick
        rec = self.metrics.pods.get(res.pod.key)
        if rec is not None:
            rec.attempts += 1
            rec.reason = res.message if res.outcome in ("unschedulable", "error") else ""
        if res.outcome in ("assumed", "waiting"):
            self.metrics.attempts["scheduled"] += 1
        elif res.outcome == "unschedulable":
            self.metrics.attempts["unschedulable"] += 1
        else:
            self.metrics.attempts["error"] += 1

    def _group_cycle(self, out: GroupOutcome) -> None:
        rec = self.metrics.groups.get(out.group.key)
        if rec is None:
            return
        rec.cycles += 1
        if out.result != "Scheduled":
            return
        rec.scheduled_cycles += 1
        rec.placement = out.chosen or ""
        chosen = next((p for p in out.placements if p.name == out.chosen), None)
        if chosen is not None and chosen.total is not None:
            rec.scores.append(chosen.total)
        held = sum(1 for m in out.members if m.outcome in ("assumed", "waiting"))
        if out.group.gang and len(out.scheduled_before) + held < out.group.min_count:
            rec.partial += 1

    def _release_waiting(self) -> None:
        """Bind pods a Permit plugin has just allowed; requeue those rejected or timed out.
        Unreserving one pod may reject its waiting siblings (Coscheduling), so resolve until
        nothing more is decided."""
        for res in self.scheduler.settle_waiting(self.now):
            if res.outcome == "assumed":
                self._bind(res)
                continue
            rec = self.metrics.pods.get(res.pod.key)
            if rec is not None:
                rec.reason = res.message
            if self.kueue is not None:
                self.kueue.permit_rejected(res.pod.key, self.now)
            if self._first_release is None:
                self._tick += 1
                self._first_release = self._tick

    def _schedule_all(self) -> None:
        sched = self.scheduler
        sched.queue.flush_backoff_completed()
        self._release_waiting()
        # Pods attempted at this instant since the cluster last changed. On a real clock a
        # scheduler whose attempts keep failing spins, each cycle taking time, until something
        # changes; on the virtual clock, which stands still while it works, the same attempts
        # would repeat forever (Coscheduling's Permit re-activating a gang's members in turn).
        # So a pod attempted again with nothing bound, finished or evicted in between pauses the
        # loop until the next event.
        tried: set[str] = set()
        progress = self._progress
        while True:
            res = sched.schedule_one()
            if res is None:
                break
            if self._progress != progress:
                tried.clear()
                progress = self._progress
            spinning = res.pod.key in tried and res.outcome in ("unschedulable", "error")
            tried.add(res.pod.key)
            self._decisions += 1
            if res.group is not None and res.opens_group:
                self._group_cycle(res.group)
            self._record(res)
            self.scheduler.activate_requested(res.state)
            if res.outcome == "assumed":
                if self.bind_latency > 0:
                    self._push(self.now + self.bind_latency, Phase.BIND, res)
                else:
                    self._bind(res)
            self._release_waiting()
            sched.queue.flush_backoff_completed()
            if spinning:
                break
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
            if self.kueue is not None:
                self.kueue.sample(self._next_sample)
            self._next_sample += self.sample_interval

    # ---- main loop -------------------------------------------------------------------------
    def run(self) -> SimResult:
        total = len(self.workload.pods)
        arrived = 0
        heap = self._heap
        while heap:
            t = heap[0][0]
            if self.until is not None and t > self.until:
                break
            self._sample_until(t)
            self.now = t
            self._armed.discard(t)
            late: list[_Call] = []
            while heap and heap[0][0] == t:
                _, phase, _, payload = heapq.heappop(heap)
                if phase not in (Phase.TIMER, Phase.CALL):
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
                elif phase == Phase.CALL:
                    assert isinstance(payload, _Call)
                    if payload.late:
                        late.append(payload)
                    else:
                        payload.fn()
            if t % FLUSH_PERIOD == 0:
                self.scheduler.queue.flush_unschedulable_left_over()
            if self.kueue is not None:
                self.kueue.step(t)
            self._schedule_all()
            if late:
                for call in late:
                    call.fn()
                if self.kueue is not None:
                    self.kueue.step(t)
                self._schedule_all()
            if self.progress is not None:
                self.progress(arrived, total)
            if not self._work_left() and not self._until_ahead():
                break
        if self.until is not None and self.now < self.until:
            self.now = self.until  # the run covers the whole span it was asked for
        self._sample_until(self.now)
        self.metrics.sample(self.now, self.snapshot, self.scheduler.queue.pending_counts())
        report = None
        if self.kueue is not None:
            self.kueue.sample(self.now)
            report = self.kueue.report(self.now)
            for key, rec in self.metrics.pods.items():
                if rec.bound is None and self.kueue.waiting_for_admission(key):
                    rec.reason = self.kueue.reason(key)
        unscheduled = sorted(k for k, r in self.metrics.pods.items()
                             if r.bound is None and k not in self._ignored
                             and r.deleted is None)
        unmodelled = sorted({n for fw in self.scheduler.frameworks.values()
                             for n in fw.unmodelled})
        return SimResult(self.metrics, self.now, self._decisions, unscheduled,
                         sorted(self._ignored), unmodelled, self.evictions,
                         self.owners.replacements, self.extras, report)

    def _until_ahead(self) -> bool:
        """With ``until``, periodic hosts (descheduling passes, the spill controller, Kueue
        timers) keep running to it after the workload has settled: a pass waiting for a pod
        to grow old enough still happens."""
        return self.until is not None and bool(self._heap) and self._heap[0][0] <= self.until

    def _work_left(self) -> bool:
        """Stop once nothing can arrive, complete or bind any more and every pending pod has
        been tried since the last progress (bind, completion, eviction) and since the first
        Permit reservation released after it: further retries would see the same cluster, or
        the same pods taking turns holding the same reservations (a Permit livelock upstream
        would loop in forever), and change no outcome."""
        if self._non_timer_events or any(self._busy.values()):
            return True
        if self._first_release is None and len(self.scheduler.handle.waiting_pods):
            return True  # let a Permit timeout release capacity at least once
        since = max(self._progress, self._first_release or 0)
        for key, rec in self.metrics.pods.items():
            if rec.bound is None and key not in self._ignored_set and rec.deleted is None \
                    and self._last_attempt.get(key, 0) <= since \
                    and not (self.kueue is not None and self.kueue.waiting_for_admission(key)):
                return True
        return False

    # ---- owners ----------------------------------------------------------------------------
    def _adopt_initial_pods(self, pods: list[TracePod]) -> None:
        """Tell each owner which of the workload's pods it created (the expanded ones), and
        plan its scale steps and its deletion."""
        by_controller = {(r.spec.namespace, r.spec.controller_kind, r.spec.controller_name): r
                         for r in self.owners.runs.values()}
        by_name = [r for r in self.owners.runs.values() if r.kind in ("StatefulSet", "DaemonSet")]
        for tp in pods:
            for ref in tp.pod.metadata.owner_references:
                run = by_controller.get((tp.pod.metadata.namespace or "default", ref.kind,
                                         ref.name))
                if ref.controller and run is not None:
                    self.owners.adopt(run, tp.pod)
            # Pods given without an ownerReference are a StatefulSet's by name, a DaemonSet's
            # by its template labels and the node they are for.
            for run in by_name:
                if tp.pod.key not in self.owners.pod_owner and run.spec.claims(tp.pod):
                    self.owners.adopt(run, tp.pod)
        for run in self.owners.runs.values():
            spec = run.spec
            for when, replicas in spec.schedule:
                self.call_at(max(when, spec.arrival),
                             functools.partial(self.owners.scale, spec, replicas), counts=True)
            if spec.kind == "DaemonSet":
                self.call_at(spec.arrival, functools.partial(self.owners.start, spec),
                             counts=True)
            if spec.lifetime is not None:
                self.call_at(spec.arrival + spec.lifetime,
                             functools.partial(self.owners.delete, spec), counts=True)

    def create_owned_pod(self, pod: Pod, duration: float | None) -> str:
        """OwnerHost: a controller creates a pod now (it arrives in this instant)."""
        tp = TracePod(pod, self.now, duration)
        self._arrive(tp)
        return pod.key

    def delete_owned_pod(self, key: str) -> bool:
        """OwnerHost: a controller deletes its own pod (scale-down, owner deleted)."""
        pi = self.snapshot.objects.pods.get(key)
        if pi is None:
            return True
        return self._delete(pi, succeeded=None)

    def daemon_nodes(self) -> list[Node]:
        """OwnerHost: the nodes present now, in order."""
        snap = self.snapshot
        return [snap.nodes[i] for i in range(snap.num_nodes) if snap.present[i]]

    def pod_rank(self, key: str) -> tuple[int, int, int, float, float]:
        """OwnerHost: scale-down ranking inputs for one pod."""
        pi = self.snapshot.objects.pods.get(key)
        if pi is None:
            return (0, 0, 0, 0.0, 0.0)
        view = self.pod_view(pi)
        assigned = int(bool(pi.pod.spec.node_name))
        phase = 2 if view.phase == "Running" else 0
        ready_since = self._ready_at.get(key, 0.0) if view.ready else 0.0
        return (assigned, phase, int(view.ready), ready_since, pi.arrival)

    # ---- pods leaving ----------------------------------------------------------------------
    def pod_view(self, pi: PodInfo) -> PodView:
        """The pod as the disruption arithmetic reads it: Running and Ready once bound and
        past its node's start latency."""
        bound = bool(pi.pod.spec.node_name) and pi.node >= 0
        running = bound and self.now >= self._ready_at.get(pi.key, self.now)
        controller = next(((r.kind, r.name) for r in pi.pod.metadata.owner_references
                           if r.controller), None)
        return PodView(pi.namespace, pi.name, pi.labels, "Running" if running else "Pending",
                       running, controller)

    def _stopped(self, pi: PodInfo) -> None:
        self.snapshot.dra.pod_deleted(pi.key)  # a running pod's claims go with it
        if pi.node >= 0 and pi.pod.spec.node_name:
            node = self.snapshot.node_names[pi.node]
            for listener in self.listeners:
                listener.pod_stopped(pi, node, self.now)

    def _delete(self, pi: PodInfo, succeeded: bool | None) -> bool:
        """Delete a pod now. ``succeeded`` False tells its owner it failed (eviction,
        preemption), None that the owner itself deleted it. A pod mid-binding (assumed, or
        waiting at Permit) cannot be deleted in this instant: returns False."""
        key = pi.key
        if pi.node >= 0 and not pi.pod.spec.node_name:
            return False
        if pi.node >= 0:
            self._stopped(pi)
            self.snapshot.remove_pod(pi)
            self._completion_token.pop(key, None)
            self.scheduler.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        else:
            self.scheduler.queue.delete(key)
            self.scheduler.handle.nominator.remove(pi)
        self._progressed()
        self.snapshot.objects.pod_deleted(key)
        rec = self.metrics.pods.get(key)
        if rec is not None:
            rec.deleted = self.now
        if succeeded is not None:
            self.owners.pod_gone(key, succeeded=succeeded)
        if self.kueue is not None:
            self.kueue.pod_deleted(key, self.now)
        return True

    def delete_pods_on(self, node: str) -> list[str]:
        """Delete every pod bound to ``node`` without the eviction API (the taint manager
        after a node stayed unreachable); owners replace theirs. Returns the deleted keys."""
        idx = self.snapshot.node_index[node]
        gone: list[str] = []
        for pi in list(self.snapshot.pods_on_node[idx].values()):
            if self._delete(pi, succeeded=False):
                gone.append(pi.key)
        return gone

    def evict(self, key: str, *, plugin: str = "", reason: str = "") -> EvictionVerdict:
        """The eviction API: delete the pod unless a PodDisruptionBudget forbids it, computed
        from the pods that exist now. An owned pod is replaced by its owner at once."""
        pi = self.snapshot.objects.pods.get(key)
        if pi is None:
            verdict = EvictionVerdict(False, NOT_FOUND, f'pods "{key}" not found')
            self.evictions.append(EvictionRecord(self.now, key, "", plugin, reason, verdict))
            return verdict
        node = self.snapshot.node_names[pi.node] if pi.node >= 0 else ""
        budgets = self.disruption_budgets(pi.namespace)
        verdict = budgets.check(self.pod_view(pi))
        record = EvictionRecord(self.now, key, node, plugin, reason, verdict)
        self.evictions.append(record)
        if verdict.allowed:
            before = self.owners.replacements
            run = self.owners.owner_of(key)
            if not self._delete(pi, succeeded=False):
                record.verdict = EvictionVerdict(False, 409, "the pod is being bound")
                return record.verdict
            if run is not None and self.owners.replacements > before and run.live:
                record.replacement = next(reversed(run.live))
        return record.verdict

    def disruption_budgets(self, namespace: str | None = None) -> DisruptionBudgets:
        """Every PDB (of ``namespace``, or all) with its status computed from live pods."""
        pdbs = [p for p in self.snapshot.pdbs
                if namespace is None or (p.metadata.namespace or "default") == namespace]
        if not pdbs:
            return DisruptionBudgets([])
        views = [self.pod_view(pi) for pi in self.snapshot.objects.pods.values()
                 if namespace is None or pi.namespace == namespace]
        return DisruptionBudgets.compute(pdbs, views, self.owners.scale_of)

    def refresh_pdb_status(self) -> None:
        """Write the computed statuses into the snapshot's PDBs (what the disruption
        controller keeps up to date), for policies that read ``pdb.status``."""
        for st in self.disruption_budgets().statuses:
            status = st.pdb.status
            status.current_healthy = st.current_healthy
            status.desired_healthy = st.desired_healthy
            status.expected_pods = st.expected_pods
            status.disruptions_allowed = st.disruptions_allowed
            status.disrupted_pods = {}

    # ---- nodes and periodic hosts ----------------------------------------------------------
    def add_node(self, node: Node) -> None:
        """A node joins the cluster now."""
        self.snapshot.add_node(node)
        self._progressed()
        self.scheduler.queue.move_all_to_active_or_backoff(NODE_ADD_EVENT)
        self.owners.nodes_changed()

    def update_node(self, node: Node) -> None:
        """Replace a node's object (taints, conditions); pending pods rejected by a plugin
        interested in taint changes are moved back as upstream's node-update event does."""
        self.snapshot.update_node(node)
        self._progressed()
        self.scheduler.queue.move_all_to_active_or_backoff(NODE_UPDATE_TAINT)
        self.owners.nodes_changed()

    def update_config_map(self, key: str, data: dict[str, str] | None) -> None:
        """Replace (or, with None, delete) the ConfigMap ``namespace/name`` now; pending pods
        rejected by a plugin that reads ConfigMaps (NetworkCapacity's slots) are moved back."""
        self.snapshot.set_config_map(key, data)
        self._progressed()
        self.scheduler.queue.move_all_to_active_or_backoff(CONFIG_MAP_UPDATE)

    def call_at(self, when: float, fn: Callable[[], None], *, counts: bool = False,
                late: bool = False) -> None:
        """Run ``fn`` at virtual time ``when``. ``counts``: the call is part of the workload
        (an owner's scale step) and keeps the run going until it has happened. ``late``: run
        it after that instant's arrivals, completions and scheduling, so it observes the
        settled cluster (the cluster then gets another scheduling pass)."""
        self._seq += 1
        if counts:
            self._non_timer_events += 1

            def wrapped() -> None:
                self._non_timer_events -= 1
                fn()

            heapq.heappush(self._heap, (when, int(Phase.CALL), self._seq,
                                        _Call(wrapped, late)))
            return
        heapq.heappush(self._heap, (when, int(Phase.CALL), self._seq, _Call(fn, late)))

    def every(self, interval: float, fn: Callable[[], bool], *, first: float = 0.0) -> None:
        """Run ``fn`` every ``interval`` seconds from ``first``, each time after that instant's
        scheduling (it observes the settled cluster). While its last call returned True (it
        may still act without outside events, e.g. a stabilization timer runs) the run does
        not end."""
        slot = len(self._busy)
        self._busy[slot] = False
        first = max(first, self.now)

        def tick() -> None:
            self._busy[slot] = fn()
            self.call_at(self.now + interval, tick, late=True)

        self.call_at(first, tick, late=True)

    def _deschedule_pass(self) -> bool:
        """One descheduling pass on the current snapshot; busy while it evicts something."""
        assert self.descheduler is not None
        self.refresh_pdb_status()
        evicted = False
        for req in list(self.descheduler(self.snapshot, self.now)):
            evicted |= self.evict(req.pod, plugin=req.plugin, reason=req.reason).allowed
        return evicted

    # ---- Kueue admission host (sim/admission.py calls these) --------------------------------
    def ungate_pod(self, key: str, pod: Pod) -> None:
        qpi = self.scheduler.queue.get(key)
        if qpi is None:
            return
        old = qpi.info
        fresh = make_pod_info(pod, self.snapshot.priority_classes, seq=old.seq)
        fresh.arrival = old.arrival
        self.snapshot.objects.pod_deleted(key)
        self.snapshot.objects.pod_created(fresh)
        self.scheduler.queue.update(old, fresh)

    def evict_pod(self, key: str, recreated: Pod) -> None:
        pi = self.snapshot.objects.pods.get(key)
        if pi is not None and self.owners.owner_of(key) is not None:
            # An owned pod is deleted; its owner creates the replacement (a new Workload).
            if pi.node >= 0 and pi.pod.spec.node_name:
                self.metrics.preemptions += 1
                self.metrics.pods[key].preempted += 1
            self._delete(pi, succeeded=False)
            return
        running = self.snapshot.pods.get(key)
        rec = self.metrics.pods.get(key)
        if running is not None and rec is not None and rec.bound is not None:
            self._evict_running(running, recreated)
            return
        qpi = self.scheduler.queue.get(key)
        if qpi is None:
            return
        self.scheduler.queue.delete(key)
        fresh = make_pod_info(recreated, self.snapshot.priority_classes, seq=qpi.info.seq)
        fresh.arrival = qpi.info.arrival
        self.snapshot.objects.pod_deleted(key)
        self.snapshot.objects.pod_created(fresh)
        self.scheduler.add(fresh)

    def wake_at(self, when: float) -> None:
        if when > self.now:
            self._push(when, Phase.ADMISSION, None)
