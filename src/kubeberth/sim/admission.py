"""Kueue in the replay: the driver that runs admission cycles between the simulator's events.

Kueue sits in front of kube-scheduler and holds work back until its Workload is admitted. A
queue-labelled batch/v1 Job is created suspended: its Workload is queued when the Job is
created, and only on admission does the Job start, its pods carrying the assigned flavor's node
labels and tolerations (and partial admission's parallelism); when the Workload is preempted or
evicted the Job is suspended again (its pods deleted) and the Workload goes back to its queue.
Plain pods and pod groups are created with the ``kueue.x-k8s.io/admission`` scheduling gate,
so the scheduler's SchedulingGates PreEnqueue keeps them out of its queue until admission
ungates them with the flavor's labels and tolerations; a pod a controller creates during the
run (a ReplicaSet's replacement or scale-up) gets its own Workload the moment it is created.
A queue-labelled Deployment's pods are such plain pods: Kueue's Deployment webhook puts the
queue name on its pod template. A queue-labelled StatefulSet (one pod-group Workload in Kueue)
is not simulated yet: an input error says so.
Workload objects given without an owner are queued at the start and, once admitted, hold
their quota (nothing runs for them). This module applies the pure policy of
:mod:`kubeberth.admission` to a running simulation: it queues workloads as they
appear, runs admission cycles after each batch of events (arrivals, completions, evictions,
requeue timers) until a cycle changes nothing, starts what is admitted, stops what is
preempted and releases quota when a workload finishes. It also measures what queues are for:
waits to admission and to bind, borrowing, preemptions and gang timeouts.

The engine talks to it through :class:`AdmissionHost` (pod operations, a wake-up and a timed
call) and a handful of hooks, and it starts and suspends Jobs through the run's
:class:`~kubeberth.sim.owners.OwnerRuntime`; with no Kueue objects in the input there is no
driver and the engine runs as before.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from kubeberth.admission import (
    AdmissionState,
    admitted_pod,
    finish_evictions,
    finish_workloads,
    gated_pod,
    mark_pods_ready,
    pods_ready_timeout,
)
from kubeberth.admission.checks import CheckRegistry
from kubeberth.admission.driver import Cycle, settle
from kubeberth.admission.model import (
    QUEUE_LABEL,
    KueueObjects,
    Workload,
    created_pod_workload,
    load_kueue,
    owner_document,
    serving_pod,
)
from kubeberth.admission.quota import Snapshot, admitted_info
from kubeberth.api.objects import Pod
from kubeberth.api.resources import GPU
from kubeberth.config.manifests import Manifests
from kubeberth.sim.owners import OwnerRun, OwnerRuntime

KUEUE_GROUPS = ("kueue.x-k8s.io/", "config.kueue.x-k8s.io/")
MAX_CYCLES_PER_INSTANT = 10_000
QUEUE_SERIES_COLUMNS = ("time", "cluster_queue", "admitted_workloads", "pending_workloads",
                        "gpu_usage", "gpu_borrowed", "dominant_share")
QUEUE_CSV_COLUMNS = ("scope", "name", "workloads", "admitted", "pending", "preempted",
                     "borrowed_gpu_hours", "gang_timeouts", "wait_admit_p50",
                     "wait_admit_p95", "wait_admit_p99", "wait_bind_p50", "wait_bind_p95",
                     "wait_bind_p99")


class AdmissionHost(Protocol):
    """What the driver needs from the simulator."""

    def ungate_pod(self, key: str, pod: Pod) -> None:
        """Replace a gated pending pod by ``pod`` (ungated) and let the scheduler try it."""

    def evict_pod(self, key: str, recreated: Pod) -> None:
        """Evict a running or pending pod; its owner re-creates it at once as ``recreated``."""

    def wake_at(self, when: float) -> None:
        """Run the driver again at ``when`` (a requeue backoff or a PodsReady deadline)."""

    def call_at(self, when: float, fn: Callable[[], None], *, counts: bool = False,
                late: bool = False) -> None:
        """Run ``fn`` at ``when`` (a Job's creation); ``counts``: it keeps the run going."""


@dataclass(slots=True)
class _Tracked:
    """One workload's life in the replay, and what the metrics need from it."""

    wl: Workload
    cluster_queue: str
    originals: dict[str, Pod] = field(default_factory=dict)  # pod key -> pod as submitted
    created: float | None = None  # queued (all its pods exist)
    admitted_at: float | None = None  # current admission
    first_admitted: float | None = None
    started: float | None = None  # first time every pod was bound after an admission
    bound: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    ready: bool = False
    ready_deadline: float | None = None
    job: OwnerRun | None = None  # the Kueue-managed Job behind the workload
    admitted_count: int = 0  # a Job's admitted pod count (PodsReady needs that many)
    admissions: int = 0
    preempted: int = 0
    gang_timeouts: int = 0
    borrowed_milli: int = 0  # GPU milli-units beyond nominal quota this admission added
    borrowed_milli_seconds: float = 0.0
    done: bool = False
    running: bool = False  # Admitted and started (not only holding quota)


def _job_key(pod: Pod) -> str | None:
    """``namespace/name`` of the Job that controls ``pod``, if any."""
    for ref in pod.metadata.owner_references:
        if ref.controller and ref.kind == "Job":
            return f"{pod.metadata.namespace or 'default'}/{ref.name}"
    return None


def _managed_jobs(extras: Manifests) -> set[str]:
    """Jobs Kueue manages: batch/v1 Jobs labelled with a queue name."""
    out: set[str] = set()
    for doc in extras.of_kind("Job"):
        meta = doc.data.get("metadata")
        if not isinstance(meta, dict):
            continue
        labels = meta.get("labels")
        if isinstance(labels, dict) and labels.get(QUEUE_LABEL):
            out.add(f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
    return out


def has_kueue_objects(extras: Manifests) -> bool:
    """Whether the input declares any Kueue object (Kueue is then considered installed)."""
    return any(str(doc.data.get("apiVersion", "")).startswith(KUEUE_GROUPS)
               for doc in extras.modelled())


class AdmissionDriver:
    """Kueue admission applied to a running simulation through an :class:`AdmissionHost`."""

    def __init__(self, objs: KueueObjects, host: AdmissionHost,
                 owners: OwnerRuntime | None = None, extras: Manifests | None = None,
                 checks: CheckRegistry | None = None) -> None:
        self.host = host
        self.objs = objs
        self.owners = owners
        self.classes = list(extras.priority_classes) if extras is not None else []
        pending = [w for w in objs.workloads if w.admission is None]
        self.state = AdmissionState.from_objects(
            replace(objs, workloads=[replace(w, creation_time=0.0, quota_reserved_time=0.0)
                                     for w in objs.workloads if w.admission is not None]),
            checks)
        self.tracked: dict[str, _Tracked] = {}
        self.pod_owner: dict[str, str] = {}
        # Kueue-managed Jobs: Job key -> workload key, and their pods -> workload key.
        self.jobs: dict[str, str] = {}
        self.job_pods: dict[str, str] = {}
        # Queue-labelled Deployments: (namespace, ReplicaSet) -> (queue, Deployment labels).
        self.serving: dict[tuple[str, str], tuple[str, dict[str, str]]] = {}
        for spec in (r.spec for r in owners.runs.values()) if owners is not None else ():
            if spec.kind == "Deployment" and spec.labels.get(QUEUE_LABEL):
                self.serving[(spec.namespace, spec.replica_set)] = (
                    spec.labels[QUEUE_LABEL], spec.labels)
        for wl in objs.workloads:
            self._track(wl)
            if wl.source == "Job" and owners is not None:
                job = f"{wl.namespace}/{wl.name.removeprefix('job-')}"
                run = owners.runs.get(f"Job/{job}")
                if run is not None:
                    run.suspended = True  # Kueue's webhook suspends a queue-labelled Job
                    self.tracked[wl.key].job = run
                    self.jobs[job] = wl.key
        self.gpu_usage: dict[str, dict[str, int]] = {}  # cq -> flavor -> GPU milli in use
        # The quota tree with the admitted workloads, kept up to date for the share series.
        self.quota = Snapshot(self.state.objs)
        for key, wl in sorted(self.state.admitted.items()):
            t = self.tracked[key]
            t.created = t.first_admitted = 0.0
            t.admissions = 1
            self._account(t, wl, 0.0)
            self._add_gpu(wl, 1)
        self._pending = {w.key for w in pending}
        self.reasons: dict[str, str] = {}  # workload -> why it is not admitted
        self.preemptions: list[tuple[float, str, str, str]] = []
        self.series: list[tuple[object, ...]] = []
        self._dirty = True
        self._wakes: set[float] = set()
        self._last_rejection: dict[str, float] = {}
        self._stopping: set[str] = set()  # workloads whose pods the driver itself is stopping
        self.cycles = 0

    @classmethod
    def build(cls, pods: list[Pod], extras: Manifests, host: AdmissionHost,
              owners: OwnerRuntime | None = None,
              checks: CheckRegistry | None = None) -> AdmissionDriver | None:
        """The driver for a run, or None when the input has no Kueue object. The pods of
        queue-labelled Jobs are left to their Job (Kueue's pod integration skips them)."""
        if not has_kueue_objects(extras):
            return None
        jobs = _managed_jobs(extras)
        manifests = replace(extras, pods=[p for p in pods if _job_key(p) not in jobs])
        objs = load_kueue(manifests)
        for wl in objs.workloads:
            if wl.source == "StatefulSet":
                doc = owner_document(extras, "StatefulSet", wl.namespace,
                                     wl.name.removeprefix("statefulset-"))
                raise doc.error(
                    "a queue-labelled StatefulSet is not simulated with Kueue yet",
                    field=f"metadata.labels.{QUEUE_LABEL}",
                    expected="kubeberth admit for its admission, or no queue-name label here")
        return cls(objs, host, owners, extras, checks)

    def _track(self, wl: Workload) -> _Tracked:
        lq = self.objs.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        t = _Tracked(wl, lq.cluster_queue if lq is not None else "")
        self.tracked[wl.key] = t
        for pod_key in wl.pods:
            self.pod_owner[pod_key] = wl.key
        return t

    def held_back(self, pod: Pod) -> bool:
        """A pod of a Kueue-managed Job as the input expanded it: the Job starts suspended,
        so the pod is not created until the Workload is admitted."""
        key = _job_key(pod)
        return key is not None and key in self.jobs

    def start(self) -> None:
        """Queue what exists from the start: Workload objects without an owner now, each
        managed Job's Workload when the Job is created."""
        for key, t in sorted(self.tracked.items()):
            if key not in self._pending:
                continue
            if t.job is not None:
                self.host.call_at(t.job.spec.arrival,
                                  functools.partial(self._queue, key, t.job.spec.arrival),
                                  counts=True)
            elif t.wl.source == "Workload":
                self._queue(key, 0.0)

    def _queue(self, key: str, now: float) -> None:
        """Kueue creates the Workload (the Job, the last pod of a group was created)."""
        t = self.tracked[key]
        self._pending.discard(key)
        t.created = now
        self.state.queues.add(replace(t.wl, creation_time=now), self.state.objs)
        self._dirty = True

    # ---- hooks the engine calls -------------------------------------------------------------
    def manages(self, pod_key: str) -> bool:
        return pod_key in self.pod_owner or pod_key in self.job_pods

    def arrived(self, pod: Pod, now: float) -> Pod:
        """A pod is created: the pod the scheduler gets (gated while its workload is queued)."""
        pod = self._through_deployment_webhook(pod)
        job = _job_key(pod)
        if job is not None and job in self.jobs:
            # Created by a running (admitted) Job: its template already carries the flavor.
            self.job_pods[pod.key] = self.jobs[job]
            return pod
        owner = self.pod_owner.get(pod.key)
        if owner is None:
            wl = created_pod_workload(pod, self.objs, self.classes)
            if wl is None or wl.key in self.tracked:
                return pod
            self._track(wl)
            self._pending.add(wl.key)
            owner = wl.key
        t = self.tracked[owner]
        t.originals[pod.key] = pod
        wl = self.state.admitted.get(owner)
        if wl is not None and wl.admission is not None:
            return self._admitted_pod(t, pod.key, wl)
        if owner in self._pending and len(t.originals) == len(t.wl.pods):
            # Kueue creates the Workload once every pod of its group exists.
            self._queue(owner, now)
        return gated_pod(pod)

    def _through_deployment_webhook(self, pod: Pod) -> Pod:
        """A pod of a queue-labelled Deployment carries what Kueue's webhook put on its
        template (the queue name): a plain pod for the pod integration."""
        for ref in pod.metadata.owner_references:
            hit = self.serving.get((pod.metadata.namespace, ref.name)) \
                if ref.controller and ref.kind == "ReplicaSet" else None
            if hit is not None and QUEUE_LABEL not in pod.metadata.labels:
                return serving_pod(pod, *hit)
        return pod

    def _owner(self, pod_key: str) -> str | None:
        return self.pod_owner.get(pod_key) or self.job_pods.get(pod_key)

    def pod_bound(self, pod_key: str, now: float) -> None:
        owner = self._owner(pod_key)
        if owner is None:
            return
        t = self.tracked[owner]
        if t.job is not None and t.job.suspended:
            # Bound after its Job was suspended (it was mid-binding then): delete it now.
            assert self.owners is not None
            self.owners.reconcile(t.job)
            return
        t.bound.add(pod_key)
        if t.job is not None:
            ready = len(t.bound) + t.job.succeeded >= t.admitted_count
        else:
            ready = len(t.bound | t.finished) == len(t.wl.pods)
        if t.admitted_at is not None and not t.ready and ready:
            t.ready = True
            t.ready_deadline = None
            if t.started is None:
                t.started = now
            self.state = mark_pods_ready(self.state, [owner])
            self._dirty = True

    def pod_finished(self, pod_key: str, now: float) -> None:
        """A pod succeeded."""
        self._pod_ended(pod_key, now)

    def pod_deleted(self, pod_key: str, now: float) -> None:
        """A pod was deleted (evicted, preempted by the scheduler, scaled down, its node lost):
        a Job carries on (its controller replaces the pod); a plain pod's or pod group's
        Workload is finished once none of its pods is left, as Kueue's pod integration
        finishes it (a replacement a controller creates gets a Workload of its own)."""
        owner = self._owner(pod_key)
        if owner is None or owner in self._stopping:
            return
        self._pod_ended(pod_key, now)

    def _pod_ended(self, pod_key: str, now: float) -> None:
        owner = self._owner(pod_key)
        if owner is None:
            return
        t = self.tracked[owner]
        t.bound.discard(pod_key)
        if t.done:
            return
        if t.job is not None:
            self.job_pods.pop(pod_key, None)
            finished = bool(t.job.finished)
        else:
            t.finished.add(pod_key)
            finished = len(t.finished) == len(t.wl.pods)
        if not finished:
            return
        if owner in self.state.admitted:
            self._release(t, now)
        t.done = True
        self._pending.discard(owner)
        self.state = finish_workloads(self.state, [owner])
        self._dirty = True

    def permit_rejected(self, pod_key: str, now: float) -> None:
        """A member of the workload's gang was rejected in Permit (Coscheduling timeout or a
        sibling's failure): one gang timeout per workload and instant."""
        owner = self.pod_owner.get(pod_key)
        if owner is not None and self._last_rejection.get(owner) != now:
            self._last_rejection[owner] = now
            self.tracked[owner].gang_timeouts += 1

    def pod_stopped(self, pod_key: str) -> None:
        """A running pod was evicted (Kueue or scheduler preemption)."""
        owner = self._owner(pod_key)
        if owner is not None:
            self.tracked[owner].bound.discard(pod_key)

    def waiting_for_admission(self, pod_key: str) -> bool:
        """The pod is gated: it waits for Kueue, not for the scheduler."""
        owner = self.pod_owner.get(pod_key)
        return owner is not None and owner not in self.state.admitted \
            and not self.tracked[owner].done

    def reason(self, pod_key: str) -> str:
        owner = self.pod_owner.get(pod_key)
        if owner is None or owner in self.state.admitted:
            return ""
        unqueued = self.state.queues.unqueued.get(owner)
        why = unqueued[2] if unqueued is not None else self.reasons.get(owner, "")
        if not why:
            t = self.tracked[owner]
            why = f"{len(t.wl.pods) - len(t.originals)} pod(s) of the workload do not exist yet"
        return f"waiting for Kueue admission: {why}"

    def step(self, now: float) -> None:
        """React to the events of this instant: PodsReady timeouts, then admission cycles until
        one changes nothing."""
        due = sorted(w for w in self._wakes if w <= now)
        if due:
            self._wakes.difference_update(due)
            self._dirty = True
        self._pods_ready_timeouts(now)
        if not self._dirty:
            return
        self._dirty = False
        settled = settle(self.state, now, max_cycles=MAX_CYCLES_PER_INSTANT,
                         after=functools.partial(self._apply_cycle, now))
        self.cycles += len(settled.cycles)
        self.state = settled.state
        for e, _active in self.state.queues.pending():
            if e.wl.requeue_at is not None and e.wl.requeue_at > now:
                self._wake(e.wl.requeue_at)
        recheck = settled.cycles[-1].checks.recheck_at if settled.cycles else None
        if recheck is not None:
            self._wake(recheck)

    # ---- applying decisions ----------------------------------------------------------------
    def _apply_cycle(self, now: float, cycle: Cycle, _final: bool) -> AdmissionState:
        """Start what a cycle admitted and stop what it preempted or its admission checks
        evicted; the victims' quota is released at once (an eviction takes no time here)."""
        result = cycle.result
        self.state = cycle.state
        for na in result.not_admitted:
            self.reasons[na.workload] = na.message or na.reason
        reserved = {a.workload.key for a in result.admitted}
        for a in result.admitted:
            self._admit(a.workload, now, cycle.starts(a.workload.key))
        for key in cycle.checks.admitted:
            if key not in reserved:
                self._start(self.tracked[key], self.state.admitted[key], now)
        for key, message in cycle.checks.evicted + cycle.checks.deactivated:
            self._check_failed(self.tracked[key], message, now)
        if result.preempted:
            victims = []
            for p in result.preempted:
                self.preemptions.append((now, p.workload, p.by, p.reason))
                victims.append(p.workload)
                self._evict(self.tracked[p.workload], now)
                self.tracked[p.workload].preempted += 1
            self.state = finish_evictions(self.state, victims, now)
            retired = [v for v in victims if self.tracked[v].done]
            if retired:
                self.state = finish_workloads(self.state, retired)
        return self.state

    def _wake(self, when: float) -> None:
        if when not in self._wakes:
            self._wakes.add(when)
            self.host.wake_at(when)

    def _admit(self, wl: Workload, now: float, start: bool) -> None:
        """Quota is reserved; without admission checks to wait for, the workload starts."""
        t = self.tracked[wl.key]
        t.admitted_at = now
        t.admissions += 1
        if t.first_admitted is None:
            t.first_admitted = now
        t.ready = False
        self.reasons.pop(wl.key, None)
        self._account(t, wl, now)
        self._add_gpu(wl, 1)
        if start:
            self._start(t, wl, now)

    def _start(self, t: _Tracked, wl: Workload, now: float) -> None:
        """The workload is Admitted (quota reserved and every admission check Ready)."""
        t.running = True
        cfg = self.objs.config.wait_for_pods_ready
        if cfg.enable:
            t.ready_deadline = now + cfg.timeout_seconds
            self._wake(t.ready_deadline)
        if t.job is not None:
            # Kueue starts the Job: unsuspended, the flavor injected into its pod template,
            # parallelism set to the admitted count.
            assert wl.admission is not None and self.owners is not None
            t.admitted_count = sum(psa.count for psa in wl.admission.podset_assignments)
            podset = t.wl.podsets[0].name
            self.owners.resume(t.job, functools.partial(
                admitted_pod, admission=wl.admission, podset=podset, flavors=self.objs.flavors),
                t.admitted_count)
            return
        for pod_key in sorted(t.wl.pods):
            if pod_key in t.originals and pod_key not in t.finished:
                self.host.ungate_pod(pod_key, self._admitted_pod(t, pod_key, wl))

    def _admitted_pod(self, t: _Tracked, pod_key: str, wl: Workload) -> Pod:
        assert wl.admission is not None
        return admitted_pod(t.originals[pod_key], wl.admission, t.wl.pods[pod_key],
                            self.objs.flavors)

    def _evict(self, t: _Tracked, now: float) -> None:
        """Stop the workload: a Job is suspended (its pods deleted) and requeued; a pod a
        controller owns is deleted (the controller's replacement is a new Workload, this one
        is finished); other pods are evicted and come back gated under the same Workload."""
        self._release(t, now)
        self._stopping.add(t.wl.key)
        if t.job is not None:
            assert self.owners is not None
            self.owners.suspend(t.job)
            # A pod still live was mid-binding: kept, so it is deleted once it is bound.
            self.job_pods = {k: v for k, v in self.job_pods.items()
                             if v != t.wl.key or k in t.job.live}
        else:
            owned = [k for k in sorted(t.wl.pods)
                     if k in t.originals and k not in t.finished and self.owners is not None
                     and self.owners.owner_of(k) is not None]
            for pod_key in sorted(t.wl.pods):
                if pod_key in t.originals and pod_key not in t.finished:
                    self.host.evict_pod(pod_key, gated_pod(t.originals[pod_key]))
            if owned:
                t.finished.update(owned)
                t.done = len(t.finished) == len(t.wl.pods)
        self._stopping.discard(t.wl.key)
        t.bound.clear()

    def _check_failed(self, t: _Tracked, message: str, now: float) -> None:
        """An admission check asked for a retry or rejected the workload: Kueue has released
        its quota (and requeued or deactivated it); what runs of it is stopped."""
        self.reasons[t.wl.key] = message
        if not t.running:
            self._release(t, now)
            return
        self._evict(t, now)
        if t.done:
            self.state = finish_workloads(self.state, [t.wl.key])

    def _release(self, t: _Tracked, now: float) -> None:
        wl = self.state.admitted.get(t.wl.key)
        if wl is not None:
            self._add_gpu(wl, -1)
        if t.admitted_at is not None:
            t.borrowed_milli_seconds += t.borrowed_milli * (now - t.admitted_at)
        t.admitted_at = None
        t.running = False
        t.borrowed_milli = 0
        t.ready = False
        t.ready_deadline = None

    def _pods_ready_timeouts(self, now: float) -> None:
        late = sorted(k for k, t in self.tracked.items()
                      if t.ready_deadline is not None and t.ready_deadline <= now
                      and not t.ready and k in self.state.admitted)
        if not late:
            return
        for key in late:
            t = self.tracked[key]
            t.gang_timeouts += 1
            self._evict(t, now)
        self.state = pods_ready_timeout(self.state, late, now)
        retired = [k for k in late if self.tracked[k].done]
        if retired:
            self.state = finish_workloads(self.state, retired)
        self._dirty = True

    # ---- GPU accounting --------------------------------------------------------------------
    def _gpu_of(self, wl: Workload) -> dict[str, int]:
        out: dict[str, int] = {}
        assert wl.admission is not None
        for psa in wl.admission.podset_assignments:
            flavor = psa.flavors.get(GPU)
            if flavor is not None:
                out[flavor] = out.get(flavor, 0) + psa.resource_usage.get(GPU, 0)
        return out

    def _nominal(self, cq: str, flavor: str) -> int:
        spec = self.objs.cluster_queues.get(cq)
        if spec is None:
            return 0
        for rg in spec.resource_groups:
            for fq in rg.flavors:
                if fq.name == flavor and GPU in fq.resources:
                    return fq.resources[GPU].nominal
        return 0

    def _borrowed(self, cq: str) -> int:
        return sum(max(0, used - self._nominal(cq, f))
                   for f, used in self.gpu_usage.get(cq, {}).items())

    def _account(self, t: _Tracked, wl: Workload, now: float) -> None:
        """The GPUs beyond its ClusterQueue's nominal quota this admission adds: the workload's
        borrowing, integrated over the time it holds the quota."""
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        before = self._borrowed(cq)
        usage = self.gpu_usage.setdefault(cq, {})
        gpu = self._gpu_of(wl)
        after = sum(max(0, usage.get(f, 0) + gpu.get(f, 0) - self._nominal(cq, f))
                    for f in set(usage) | set(gpu))
        t.borrowed_milli = max(0, after - before)
        t.admitted_at = now

    def _add_gpu(self, wl: Workload, sign: int) -> None:
        """Count an admission (sign 1) or a release (-1) in the GPU usage and quota tree."""
        assert wl.admission is not None
        info = admitted_info(wl)
        if info.cluster_queue in self.quota.cluster_queues:
            if sign > 0:
                self.quota.add_workload(info)
            else:
                self.quota.remove_workload(info)
        usage = self.gpu_usage.setdefault(wl.admission.cluster_queue, {})
        for f, v in self._gpu_of(wl).items():
            usage[f] = usage.get(f, 0) + sign * v

    # ---- metrics ---------------------------------------------------------------------------
    def sample(self, now: float) -> None:
        """One row per ClusterQueue: admitted and pending workloads, GPUs in use and borrowed,
        and its dominant resource share (Kueue fair sharing's measure; 0 outside a cohort)."""
        snap = self.quota
        pending: dict[str, int] = {}
        for e, _active in self.state.queues.pending():
            pending[e.cluster_queue] = pending.get(e.cluster_queue, 0) + 1
        admitted: dict[str, int] = {}
        for wl in self.state.admitted.values():
            assert wl.admission is not None
            cq = wl.admission.cluster_queue
            admitted[cq] = admitted.get(cq, 0) + 1
        for name in sorted(self.objs.cluster_queues):
            cqs = snap.cluster_queues.get(name)
            share = 0.0
            if cqs is not None and cqs.parent is not None:
                drs = cqs.dominant_resource_share()
                share = drs.precise_weighted_share()
                if math.isinf(share):
                    share = float(2**63 - 1)
            used = sum(self.gpu_usage.get(name, {}).values())
            self.series.append((now, name, admitted.get(name, 0), pending.get(name, 0),
                                round(used / 1000, 3), round(self._borrowed(name) / 1000, 3),
                                round(share, 4)))

    def report(self, end: float) -> AdmissionReport:
        for t in self.tracked.values():
            if t.admitted_at is not None:
                t.borrowed_milli_seconds += t.borrowed_milli * (end - t.admitted_at)
                t.admitted_at = end
        by_cq: dict[str, list[_Tracked]] = {name: [] for name in sorted(self.objs.cluster_queues)}
        by_prio: dict[int, list[_Tracked]] = {}
        by_lq: dict[str, list[_Tracked]] = {}
        for t in self.tracked.values():
            if t.created is None:
                continue
            by_cq.setdefault(t.cluster_queue, []).append(t)
            by_prio.setdefault(t.wl.priority, []).append(t)
            by_lq.setdefault(f"{t.wl.namespace}/{t.wl.queue_name}", []).append(t)
        reasons: dict[str, dict[str, int]] = {}
        for _, victim, _by, why in self.preemptions:
            cq = self.tracked[victim].cluster_queue
            reasons.setdefault(cq, {})
            reasons[cq][why] = reasons[cq].get(why, 0) + 1
        queues = {name: _group_stats(ts, self.state) | {"preemptionReasons": reasons.get(name, {})}
                  for name, ts in sorted(by_cq.items()) if name}
        prios = {str(p): _group_stats(ts, self.state) for p, ts in sorted(by_prio.items())}
        local = {name: _group_stats(ts, self.state) for name, ts in sorted(by_lq.items())}
        rows: list[tuple[object, ...]] = []
        for scope, groups in (("clusterQueue", queues), ("localQueue", local),
                              ("priority", prios)):
            for name, s in groups.items():
                rows.append((scope, name, s["workloads"], s["admitted"], s["pending"],
                             s["preempted"], s["borrowedGpuHours"], s["gangTimeouts"],
                             *(s["waitAdmitSeconds"].get(q, "") for q in ("p50", "p95", "p99")),
                             *(s["waitBindSeconds"].get(q, "") for q in ("p50", "p95", "p99"))))
        return AdmissionReport(
            summary={"cycles": self.cycles, "clusterQueues": queues, "localQueues": local,
                     "priorities": prios,
                     "preemptions": len(self.preemptions),
                     "borrowedGpuHours": round(sum(s["borrowedGpuHours"]
                                                   for s in queues.values()), 6)},
            rows=rows, series=self.series,
            preemptions=[{"time": at, "workload": v, "by": by, "reason": why}
                         for at, v, by, why in self.preemptions])


@dataclass(slots=True)
class AdmissionReport:
    """What a run with Kueue adds to the outputs: per-queue and per-priority statistics, the
    rows of queues.csv, the per-queue time series and every preemption issued."""

    summary: dict[str, Any]
    rows: list[tuple[object, ...]]
    series: list[tuple[object, ...]]
    preemptions: list[dict[str, Any]]


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    arr = np.array(values, dtype=np.float64)
    out: dict[str, float] = {"count": len(values), "mean": round(float(arr.mean()), 6)}
    for q in (50, 95, 99):
        out[f"p{q}"] = round(float(np.percentile(arr, q)), 6)
    out["max"] = round(float(arr.max()), 6)
    return out


def _group_stats(ts: list[_Tracked], state: AdmissionState) -> dict[str, Any]:
    admit = [t.first_admitted - t.created for t in ts
             if t.first_admitted is not None and t.created is not None]
    bind = [t.started - t.created for t in ts if t.started is not None and t.created is not None]
    return {
        "workloads": len(ts),
        "admitted": sum(1 for t in ts if t.first_admitted is not None),
        "pending": sum(1 for t in ts if t.wl.key not in state.admitted and not t.done),
        "preempted": sum(t.preempted for t in ts),
        "borrowedGpuHours": round(sum(t.borrowed_milli_seconds for t in ts) / 1000 / 3600, 6),
        "gangTimeouts": sum(t.gang_timeouts for t in ts),
        "waitAdmitSeconds": _percentiles(admit),
        "waitBindSeconds": _percentiles(bind),
    }
