"""``kubeberth scheduler``: the simulator's Scheduler run as a controller on a Kubernetes API.

The same :class:`~kubeberth.scheduling.scheduler.Scheduler` (profiles, queue, plugins) that the
simulator and ``explain`` drive is fed by informers instead of a trace, and its three host
callables reach the API over HTTP through lightkube:
- ``binder`` posts ``pods/<name>/binding``; a 409 (bound by someone else, being deleted) or a
  404 makes the binding cycle fail, so the framework forgets the assumed pod, and the
  controller reads the pod back and accounts it where the API says it is: a pod is never bound
  twice, because only the API's answer counts. An answer that leaves the outcome unknown (a
  5xx, a dropped connection) is read back the same way, so a binding written but unanswered
  is accounted before the next pod is placed. As upstream binds on a goroutine per pod, the
  round trip runs on a bounded pool of worker threads (``bind_workers``) while the control
  loop schedules the next pod; the answer comes back through the event queue and the loop ends
  the binding cycle (PostBind, or Unreserve + forget + requeue with backoff);
- ``evictor`` deletes a preemption victim (``DELETE pods/<name>``); the victim's capacity is
  released when the watch reports the deletion, as upstream's scheduler cache does;
- ``nominate`` writes ``status.nominatedNodeName`` through the ``status`` subresource.

A pod the framework assumed stays accounted on its node until the watch confirms the binding
(or shows it elsewhere, or gone). Permit waits (Coscheduling's gangs) are resolved on the
controller's monotonic clock. Everything that reads or changes the snapshot runs on one
control-loop thread; the informer and binding threads only queue events, so the policy code
sees one consistent snapshot, as it does in the simulator. An assumed pod stays accounted on
its node while its binding is in flight, so no later cycle overcommits that node. State comes
from the API alone: a restarted controller lists, finds the pods already bound and schedules
only the pending ones.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.core.resource import Resource
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap as KConfigMap
from lightkube.resources.core_v1 import Pod as KPod
from lightkube.types import PatchType

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod, PodDisruptionBudget
from kubeberth.api.times import parse_time_or_none
from kubeberth.config.manifests import Manifests
from kubeberth.config.scheduling_crds import load_scheduling_crds
from kubeberth.config.workload_api import load_workload_api
from kubeberth.live.cache import TYPED_KINDS, decode, document
from kubeberth.live.controller import INVALID_OBJECT, Controller
from kubeberth.live.events import EventRecorder
from kubeberth.live.informer import SCHEDULER_RESOURCES, SYNC, NativePodGroup
from kubeberth.live.leader import LeaderElector
from kubeberth.live.metrics import SchedulerMetrics
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.interface import ClusterEvent
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.pod_group_cycle import UNSCHEDULABLE_VERDICT, GroupOutcome
from kubeberth.scheduling.scheduler import ASSIGNED_POD_DELETE, NODE_ADD, CycleResult, Scheduler
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info

log = logging.getLogger("kubeberth.scheduler")
_T = TypeVar("_T")

FLUSH_PERIOD = 30.0  # upstream flushUnschedulablePodsLeftover period
NODE_UPDATES = (ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("Node", "UpdateNodeTaint"),
                ClusterEvent("Node", "UpdateNodeAllocatable"))
POD_GROUP_UPDATE = ClusterEvent("PodGroup", "Update")
POD_GROUP_ADD = ClusterEvent("PodGroup", "Add")
NATIVE = "NativePodGroup"  # scheduling.k8s.io/v1beta1 PodGroup, apart from Coscheduling's
# A group cycle's result (explain's podGroups[].result) as the PodGroupInitiallyScheduled
# condition upstream writes: (status, reason); anything else is a SchedulerError.
GROUP_CONDITION = {"Scheduled": ("True", "Scheduled"),
                   UNSCHEDULABLE_VERDICT: ("False", "Unschedulable")}
CONFIG_MAP_UPDATE = ClusterEvent("ConfigMap", "Update")
TERMINAL = ("Succeeded", "Failed")
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
BINDER = "LiveBinder"
BOUND = "BindingResult"  # the event a binding worker queues for the control loop
BIND_WORKERS = 16
CONFLICT = "conflict"  # the API refused a binding (404/409)
UNKNOWN = "unknown"  # no answer says whether a binding was written (5xx, dropped connection)


@dataclass(slots=True, frozen=True)
class SchedulingDecision:
    """One decision the controller applied (or, with ``--dry-run``, only logged)."""

    pod: str
    action: str  # "bind", "preempt" (victim deleted), "nominate", "conflict"
    node: str
    detail: str = ""


def _epoch(stamp: str | None) -> float:
    """status.startTime; a pod without one counts as started now, as upstream's
    GetPodStartTime has it."""
    when = parse_time_or_none(stamp)
    return time.time() if when is None else when


def pod_group(obj: dict[str, Any]) -> dict[str, Any]:
    """A PodGroup as the informer hands it on: the API's dict, once Coscheduling's loader has
    read it alone (a bad one is refused by itself, never failing every group's reload)."""
    load_scheduling_crds(Manifests(other=[document(obj)]))
    return obj


def native_pod_group(obj: dict[str, Any]) -> dict[str, Any]:
    """A native PodGroup as the informer hands it on, once read alone (a bad one is refused
    by itself with a Warning Event, never failing every group's reload)."""
    load_workload_api(Manifests(workload_api=[document(obj)]))
    return obj


def group_condition(out: GroupOutcome, current: list[dict[str, Any]], generation: int,
                    now: str) -> list[dict[str, Any]] | None:
    """The conditions after a group cycle, as upstream's updatePodGroupCondition sets
    PodGroupInitiallyScheduled; None when nothing changes. Once True it never goes back to
    False, and lastTransitionTime moves only when the status does."""
    status, reason = GROUP_CONDITION.get(out.result, ("False", "SchedulerError"))
    old = next((c for c in current if c.get("type") == INITIALLY_SCHEDULED), None)
    if old is not None and old.get("status") == "True" and status != "True":
        return None
    new = {"type": INITIALLY_SCHEDULED, "status": status, "reason": reason,
           "message": out.message, "observedGeneration": generation,
           "lastTransitionTime": now}
    if old is not None:
        if all(old.get(k) == new[k] for k in ("status", "reason", "message",
                                               "observedGeneration")):
            return None
        if old.get("status") == status:
            new["lastTransitionTime"] = old.get("lastTransitionTime", now)
    return [c for c in current if c.get("type") != INITIALLY_SCHEDULED] + [new]


def _store(objects: dict[str, _T], key: str, obj: _T | None) -> None:
    """An informer event on a cache kept by key: the object as it now is, None once deleted."""
    if obj is None:
        objects.pop(key, None)
    else:
        objects[key] = obj


def reads_config_maps(sched: Scheduler) -> bool:
    """Whether a plugin of some profile registered ConfigMap events (it reads one)."""
    return any(ev.resource == "ConfigMap" for fw in sched.frameworks.values()
               for events in fw.enqueue_events().values() for ev in events)


class LiveScheduler(Controller[SchedulerMetrics]):
    """Informers, the Scheduler and the API round trips; :meth:`run` until ``stop`` is set."""

    name = "scheduler"

    def __init__(self, config: SchedulerConfiguration, registry: Registry, client: Client, *,
                 seed: int = 0, dry_run: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 metrics: SchedulerMetrics | None = None, watch_timeout: int = 300,
                 elector: LeaderElector | None = None, events: bool = True,
                 bind_workers: int = BIND_WORKERS) -> None:
        if bind_workers < 0:
            raise InputError(f"{bind_workers} binding workers", field="bind_workers",
                             expected="0 (bind on the control loop) or more threads")
        # Events and PodScheduled conditions are writes: a dry run makes none.
        super().__init__(client, metrics or SchedulerMetrics(), clock=clock, elector=elector,
                         recorder=EventRecorder(client) if events and not dry_run else None,
                         watch_timeout=watch_timeout)
        self.dry_run = dry_run
        self.snap = ClusterState()
        self.sched = Scheduler(config, registry, self.snap, clock=clock, seed=seed,
                               binder=self._bind_api, evictor=self._evict_api,
                               nominate=self._nominate_api)
        for fw in self.sched.frameworks.values():
            self.metrics.instrument(fw)
        self.component = config.profiles[0].scheduler_name if config.profiles else self.name
        readers = {"PodGroup": pod_group, NATIVE: native_pod_group}
        for kind, res in self.resources().items():
            self.watch(kind, res, decode=decode if kind in TYPED_KINDS else readers.get(kind))
        self.pods: dict[str, PodInfo] = {}
        self.pod_groups: dict[str, dict[str, Any]] = {}
        self.native_groups: dict[str, dict[str, Any]] = {}
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.decisions: list[SchedulingDecision] = []
        self.conflicts = 0
        self._seq = 0
        self._first_seen: dict[str, float] = {}
        # Pods whose binding failed with an answer to check against the API (a 404/409, or a
        # 5xx or dropped connection that leaves unknown whether the binding was written).
        self._recheck: set[str] = set()
        self._next_flush = clock() + FLUSH_PERIOD
        self._lock = threading.Lock()
        # Bindings in flight on the worker pool, by pod key (0 workers: bind in the loop).
        self.binding: dict[str, CycleResult] = {}
        self._pool = ThreadPoolExecutor(max_workers=bind_workers,
                                        thread_name_prefix="bind") if bind_workers else None

    def resources(self) -> dict[str, type[Resource]]:
        """What to list and watch: SCHEDULER_RESOURCES, plus ConfigMaps only when a plugin of
        some profile registered ConfigMap events (it reads one, e.g. NetworkCapacity's slots),
        so a scheduler without such a plugin needs no access to ConfigMaps."""
        out: dict[str, type[Resource]] = dict(SCHEDULER_RESOURCES)
        if reads_config_maps(self.sched):
            out["ConfigMap"] = KConfigMap
        return out

    # ---- lifecycle -------------------------------------------------------------------------
    def on_synced(self) -> None:
        log.info("caches synced: %d nodes, %d pods", len(self.snap.node_ids()), len(self.pods))

    def work(self) -> bool:
        self.step()
        return False

    def wait_time(self) -> float:
        now = self.clock()
        due = [self._next_flush, self.sched.queue.next_backoff_expiry(),
               self.sched.next_permit_deadline()]
        soonest = min(d for d in due if d is not None)
        return max(0.0, min(self.max_wait, soonest - now))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # let posted bindings finish; their events go

    # ---- scheduling ------------------------------------------------------------------------
    def step(self) -> None:
        """Schedule every pod the queue offers now, binding each before the next, as the
        simulator does with no bind latency; informer events are applied between pods."""
        q = self.sched.queue
        now = self.clock()
        if now >= self._next_flush:
            q.flush_unschedulable_left_over()
            self._next_flush = now + FLUSH_PERIOD
        q.flush_backoff_completed()
        self._release_waiting()
        while not self.stop.is_set():
            self.drain(0.0)
            res = self.sched.schedule_one()
            if res is None:
                break
            if res.group is not None and res.opens_group:
                self._write_group_condition(res.group)
            self._record(res)
            self.sched.activate_requested(res.state)
            if res.outcome == "assumed":
                self._bind(res)
            self._release_waiting()
            q.flush_backoff_completed()
        self.metrics.set_pending(q.pending_pods())

    def _record(self, res: CycleResult) -> None:
        result = {"assumed": "scheduled", "waiting": "scheduled",
                  "unschedulable": "unschedulable"}.get(res.outcome, "error")
        self.metrics.attempts.labels(result=result, profile=res.profile).inc()
        if res.outcome in ("unschedulable", "error"):
            log.info("%s: %s", res.pod.key, res.message)
            self._failed(res)
        elif res.outcome == "waiting":
            log.info("%s: waiting at Permit on %s", res.pod.key, res.node)

    def _failed(self, res: CycleResult) -> None:
        """Upstream handleSchedulingFailure's writes: a FailedScheduling event and the
        PodScheduled=False condition (written only when it changes)."""
        pi = res.pod
        reason = "Unschedulable" if res.outcome == "unschedulable" else "SchedulerError"
        if self.recorder is None or self.pods.get(pi.key) is not pi:
            return  # dry run, or the pod is gone or already replaced by a newer version
        self.recorder.pod_event(res.profile, pi.namespace, pi.name, pi.pod.metadata.uid,
                                "Warning", "FailedScheduling", res.message)
        current = next((c for c in pi.pod.status.conditions if c.type == "PodScheduled"), None)
        if current is not None and (current.status, current.reason, current.message) == \
                ("False", reason, res.message):
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": reason,
                     "message": res.message,
                     "lastTransitionTime": dt.datetime.now(dt.UTC).strftime(
                         "%Y-%m-%dT%H:%M:%SZ")}
        try:
            self.client.patch(KPod.Status, pi.name, {"status": {"conditions": [condition]}},
                              namespace=pi.namespace, patch_type=PatchType.STRATEGIC)
        except ApiError as err:
            if err.status.code != 404:
                log.warning("updating %s's PodScheduled condition: %s", pi.key,
                            err.status.message)
        except httpx.HTTPError as err:
            log.warning("updating %s's PodScheduled condition: %s", pi.key, err)

    def _write_group_condition(self, out: GroupOutcome) -> None:
        """PodGroupInitiallyScheduled on the native PodGroup, as upstream's scheduler writes it
        after each group cycle (kubectl's Status column reads it)."""
        obj = self.native_groups.get(out.group.key)
        if obj is None or self.dry_run:
            return
        meta = obj.get("metadata") or {}
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = group_condition(out, list((obj.get("status") or {}).get("conditions")
                                               or []), int(meta.get("generation") or 0), now)
        if conditions is None:
            return
        try:
            self.client.patch(NativePodGroup.Status, out.group.name,
                              {"status": {"conditions": conditions}},
                              namespace=out.group.namespace, patch_type=PatchType.MERGE)
        except ApiError as err:
            if err.status.code != 404:
                log.warning("updating pod group %s's condition: %s", out.group.key,
                            err.status.message)
        except httpx.HTTPError as err:
            log.warning("updating pod group %s's condition: %s", out.group.key, err)

    def _release_waiting(self) -> None:
        """Bind the pods Permit has allowed; rejected or timed-out ones are requeued by the
        framework. Unreserving one may reject its siblings: resolve until nothing changes."""
        for res in self.sched.settle_waiting(self.clock()):
            if res.outcome == "assumed":
                self._bind(res)
            else:
                log.info("%s: %s", res.pod.key, res.message)
                self._failed(res)

    def _bind(self, res: CycleResult) -> None:
        """Run the binding cycle: in the loop without workers (or in a dry run, which posts
        nothing), else up to the binder here and the API round trip on a worker."""
        if self._pool is None or self.dry_run:
            self._bound(res, self.sched.bind(res))
            return
        st, host_bind = self.sched.begin_binding(res)
        if not (st.ok and host_bind):
            self._bound(res, self.sched.finish_binding(res, st))
            return
        self.binding[res.pod.key] = res
        self._pool.submit(self._bind_on_worker, res)

    def _bind_on_worker(self, res: CycleResult) -> None:
        try:
            st, outcome = self._post_binding(res.pod, res.node or "")
        except Exception as err:  # a bug, not an API answer: the controller stops
            log.exception("binding %s to %s", res.pod.key, res.node)
            st, outcome = Status(Code.ERROR, (f"binding failed: {err!r}",), BINDER), ""
            self.abort(err)
        self.enqueue(BOUND, "", (res, st, outcome))

    def _binding_done(self, res: CycleResult, st: Status, outcome: str) -> None:
        """A worker's answer, on the control loop: finish the binding cycle."""
        pi = res.pod
        if self.binding.get(pi.key) is res:
            del self.binding[pi.key]
        if outcome == CONFLICT:
            self.conflicts += 1
        st = self.sched.finish_binding(res, st)
        if self.pods.get(pi.key) is not pi:
            # Forgotten meanwhile (deleted, or the watch showed it bound elsewhere): its
            # accounting is gone already and the queue, told of the deletion while the pod
            # was in flight, does not requeue it (upstream skips a pod gone or assigned).
            return
        if outcome:
            self._recheck.add(pi.key)
        self._bound(res, st)

    def _bound(self, res: CycleResult, st: Status) -> None:
        key = res.pod.key
        if st.ok:
            started = self._first_seen.pop(key, None)
            if started is not None:
                attempts = str(min(res.qpi.attempts, 15))
                self.metrics.sli.labels(attempts=attempts).observe(self.clock() - started)
            return
        self.metrics.attempts.labels(result="error", profile=res.profile).inc()
        if key in self._recheck:
            self._recheck.discard(key)
            self._reconcile(res.pod)

    def _reconcile(self, pi: PodInfo) -> None:
        """After a rejected or unanswered binding, believe the API: read the pod and apply
        what it says (bound, here or elsewhere, or still pending)."""
        try:
            obj = self.client.get(KPod, pi.name, namespace=pi.namespace)
        except ApiError as err:
            if err.status.code == 404:
                self.apply_event("Pod", "DELETED", (pi.key, None))
            return
        except httpx.HTTPError:
            return
        raw = obj.to_dict()
        try:
            pod = decode(raw)
        except Exception as err:  # poison, as the informer refuses it: the pod is unread
            self.refuse("Pod", pi.key, raw, err)
            self.apply_event("Pod", "DELETED", (pi.key, None))
            return
        self.apply_event("Pod", "MODIFIED", (pi.key, pod))

    # ---- host callables (the API round trips) ----------------------------------------------
    def _bind_api(self, pi: PodInfo, node: str) -> Status:
        """The framework's binder, on the control loop (dry run, or no binding workers)."""
        if self.dry_run:
            self.decisions.append(SchedulingDecision(pi.key, "bind", node, "dry-run"))
            log.info("dry-run: would bind %s to %s", pi.key, node)
            return SUCCESS
        st, outcome = self._post_binding(pi, node)
        if outcome == CONFLICT:
            self.conflicts += 1
        if outcome:
            self._recheck.add(pi.key)
        return st

    def _post_binding(self, pi: PodInfo, node: str) -> tuple[Status, str]:
        """Post the binding; the status, and what to check after a failure: CONFLICT (the API
        refused it: 404/409), UNKNOWN (a 5xx or a dropped connection: it may have been
        written) or "". Safe on a worker thread: it reads ``pi`` and only appends to
        ``decisions``."""
        binding = KPod.Binding(metadata=ObjectMeta(name=pi.name, namespace=pi.namespace),
                               target=ObjectReference(kind="Node", name=node))
        try:
            # The API answers a Success Status, which lightkube 1.0.1 fails to decode as a
            # Binding after the binding has succeeded: that one error means success.
            with contextlib.suppress(msgspec.ValidationError):
                self.client.create(binding, name=pi.name, namespace=pi.namespace)
        except ApiError as err:
            code = err.status.code or 0
            outcome = CONFLICT if code in (404, 409) else UNKNOWN if code >= 500 else ""
            if outcome == CONFLICT:
                self.decisions.append(SchedulingDecision(pi.key, "conflict", node,
                                               err.status.message or ""))
                log.info("binding %s to %s rejected: %s", pi.key, node, err.status.message)
            return Status(Code.ERROR, (f"binding rejected: {err.status.message}",),
                          BINDER), outcome
        except httpx.HTTPError as err:
            return Status(Code.ERROR, (f"binding failed: {err}",), BINDER), UNKNOWN
        self.decisions.append(SchedulingDecision(pi.key, "bind", node))
        log.info("bound %s to %s", pi.key, node)
        if self.recorder is not None:
            self.recorder.pod_event(pi.pod.spec.scheduler_name, pi.namespace, pi.name,
                                    pi.pod.metadata.uid, "Normal", "Scheduled",
                                    f"Successfully assigned {pi.key} to {node}")
        return SUCCESS, ""

    def _evict_api(self, victim: PodInfo, preemptor: PodInfo) -> None:
        node = self.snap.node_names[victim.node] if victim.node >= 0 else ""
        self.decisions.append(SchedulingDecision(victim.key, "preempt", node, preemptor.key))
        waiting = self.sched.handle.waiting_pods.get(victim.key)
        if waiting is not None:
            # Upstream rejects a victim waiting at Permit in place: it was never bound.
            log.info("preempting %s (waiting at Permit) for %s", victim.key, preemptor.key)
            waiting.reject("DefaultPreemption", "preempted")
            return
        if self.dry_run:
            log.info("dry-run: would preempt %s on %s for %s", victim.key, node, preemptor.key)
            return
        log.info("preempting %s on %s for %s", victim.key, node, preemptor.key)
        if self.recorder is not None:
            self.recorder.pod_event(preemptor.pod.spec.scheduler_name, victim.namespace,
                                    victim.name, victim.pod.metadata.uid, "Normal",
                                    "Preempted", f"Preempted by pod {preemptor.pod.metadata.uid}"
                                                 f" on node {node}")
        try:
            self.client.delete(KPod, victim.name, namespace=victim.namespace)
        except ApiError as err:
            if err.status.code != 404:
                log.warning("deleting victim %s: %s", victim.key, err.status.message)
        except httpx.HTTPError as err:
            log.warning("deleting victim %s: %s", victim.key, err)

    def _nominate_api(self, pi: PodInfo, node: str | None) -> None:
        self.decisions.append(SchedulingDecision(pi.key, "nominate", node or ""))
        if self.dry_run:
            return
        try:
            self.client.patch(KPod.Status, pi.name,
                              {"status": {"nominatedNodeName": node}},
                              namespace=pi.namespace, patch_type=PatchType.MERGE)
        except ApiError as err:
            if err.status.code != 404:
                log.warning("nominating %s: %s", pi.key, err.status.message)
        except httpx.HTTPError as err:
            log.warning("nominating %s: %s", pi.key, err)

    # ---- informer events -> ClusterState and queue -----------------------------------------
    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        if kind == BOUND:
            self._binding_done(*data)
            return
        with self._lock:
            if type_ == SYNC:
                self._sync(kind, data)
            else:
                self._event(kind, *data)

    def _event(self, kind: str, key: str, obj: Any) -> None:
        """One object changed (``obj``, typed for the typed kinds) or was deleted (None)."""
        deleted = obj is None
        if kind in ("Pod", "Node"):
            apply, gone = ((self._pod, self._pod_gone) if kind == "Pod"
                           else (self._node, self._node_gone))
            if deleted:
                gone(key)
                return
            try:
                apply(obj)
            except InputError:
                gone(key)  # refused: as if absent, like an object the list leaves out
                raise
        elif kind == "PriorityClass":
            _store(self.snap.priority_classes, key, obj)
        elif kind == "Namespace":
            _store(self.snap.namespaces, key, obj)
        elif kind == "PodDisruptionBudget":
            _store(self.pdbs, key, obj)
            self.snap.pdbs = [self.pdbs[k] for k in sorted(self.pdbs)]
        elif kind == "PodGroup":
            _store(self.pod_groups, key, obj)
            self._reload_pod_groups()
        elif kind == NATIVE:
            added = key not in self.native_groups
            _store(self.native_groups, key, obj)
            self._reload_native_groups(POD_GROUP_ADD if added else POD_GROUP_UPDATE)
        elif kind == "ConfigMap":
            # The API server guarantees string values; a plugin validates their content and
            # answers a malformed one with an Error status, never acting on part of it.
            raw = {} if deleted else obj.get("data") or {}
            self.snap.set_config_map(key, None if deleted else
                                     {str(k): str(v) for k, v in raw.items()})
            self.sched.queue.move_all_to_active_or_backoff(CONFIG_MAP_UPDATE)

    def _sync(self, kind: str, objects: dict[str, Any]) -> None:
        """A fresh list: objects missing from it were deleted while the watch was down."""
        if kind == "Pod":
            for key in [k for k in self.pods if k not in objects]:
                self._pod_gone(key)
        elif kind == "Node":
            for idx in self.snap.node_ids().tolist():
                if self.snap.node_names[idx] not in objects:
                    self._node_gone(self.snap.node_names[idx])
        elif kind == "PriorityClass":
            self.snap.priority_classes.clear()
        elif kind == "Namespace":
            self.snap.namespaces.clear()
        elif kind == "PodDisruptionBudget":
            self.pdbs.clear()
        elif kind == "PodGroup":
            self.pod_groups.clear()
        elif kind == NATIVE:
            self.native_groups.clear()
        elif kind == "ConfigMap":
            for key in [k for k in self.snap.config_maps if k not in objects]:
                self.snap.set_config_map(key, None)
        for key, obj in objects.items():
            try:
                self._event(kind, key, obj)
            except InputError as err:
                self.refuse(kind, key, obj, err, INVALID_OBJECT)
        if kind == "PodDisruptionBudget":
            self.snap.pdbs = [self.pdbs[k] for k in sorted(self.pdbs)]
        if kind == "PodGroup":
            self._reload_pod_groups()
        if kind == NATIVE:
            self._reload_native_groups(POD_GROUP_ADD)

    def _reload_native_groups(self, event: ClusterEvent) -> None:
        docs = [document(d) for _, d in sorted(self.native_groups.items())]
        self.snap.objects.load_workload_api(load_workload_api(Manifests(workload_api=docs)))
        self.sched.queue.move_all_to_active_or_backoff(event)

    def _reload_pod_groups(self) -> None:
        docs = [document(d) for _, d in sorted(self.pod_groups.items())]
        crds = load_scheduling_crds(Manifests(other=docs))
        objects = self.snap.objects
        objects.pod_groups.clear()
        objects.pod_group_created.clear()
        objects.load(crds)
        self.sched.queue.move_all_to_active_or_backoff(POD_GROUP_UPDATE)

    def _node(self, node: Node) -> None:
        name = node.metadata.name
        idx = self.snap.node_index.get(name)
        if idx is not None and self.snap.present[idx]:
            self.snap.update_node(node)
            for event in NODE_UPDATES:
                self.sched.queue.move_all_to_active_or_backoff(event)
            return
        idx = self.snap.add_node(node)
        # Pods seen bound to this node before it was: account them now.
        for pi in self.pods.values():
            if pi.node < 0 and pi.pod.spec.node_name == name:
                self.snap.add_pod(pi, idx)
        self.sched.queue.move_all_to_active_or_backoff(NODE_ADD)

    def _node_gone(self, name: str) -> None:
        idx = self.snap.node_index.get(name)
        if idx is None or not self.snap.present[idx]:
            return
        self.snap.remove_node(name)

    def _new_info(self, pod: Pod, seq: int | None = None) -> PodInfo:
        if seq is None:
            self._seq += 1
            seq = self._seq
        pi = make_pod_info(pod, self.snap.priority_classes, seq=seq)
        pi.start_time = _epoch(pod.status.start_time)
        return pi

    def _pod(self, pod: Pod) -> None:
        key = pod.key
        old = self.pods.get(key)
        if old is not None and old.pod.metadata.uid != pod.metadata.uid:
            self._pod_gone(key)  # deleted and re-created under the same name
            old = None
        if pod.status.phase in TERMINAL or (pod.metadata.deletion_timestamp
                                            and not pod.spec.node_name):
            if old is not None:
                self._pod_gone(key)
            return
        node = pod.spec.node_name
        if node:
            if old is not None and old.node >= 0 and self.snap.node_names[old.node] == node:
                old.pod = pod  # the binding (ours or not) confirmed; keep the accounting
                return
            if old is not None:
                self._forget(old)  # bound by someone else, or not where we assumed it
            pi = self._new_info(pod)
            self.pods[key] = pi
            self.snap.objects.pod_created(pi)
            idx = self.snap.node_index.get(node)
            if idx is not None and self.snap.present[idx]:
                self.snap.add_pod(pi, idx)
            return
        if old is not None:
            if old.node >= 0:
                # Assumed by this controller (waiting at Permit, or bound and the watch not
                # yet caught up): keep the assumption, take the newer object.
                old.pod = pod
                if self.dry_run:
                    old.pod.spec.node_name = self.snap.node_names[old.node]
                return
            new = self._new_info(pod, old.seq)
            new.arrival = old.arrival
            self.pods[key] = new
            self.snap.objects.pod_deleted(key)
            self.snap.objects.pod_created(new)
            if self.sched.responsible_for(new):
                self.sched.queue.update(old, new)
            return
        pi = self._new_info(pod)
        pi.arrival = self.clock()
        self.pods[key] = pi
        self.snap.objects.pod_created(pi)
        if self.sched.responsible_for(pi):
            self._first_seen[key] = pi.arrival
            self.sched.add(pi)

    def _forget(self, pi: PodInfo) -> None:
        """Stop scheduling or accounting a pod this controller had queued or assumed."""
        key = pi.key
        wp = self.sched.handle.waiting_pods.get(key)
        if wp is not None:
            wp.reject(BINDER, "the pod was bound or deleted elsewhere")
        self.sched.queue.delete(key)
        self.sched.handle.nominator.remove(pi)
        self._first_seen.pop(key, None)
        if pi.node >= 0 and wp is None:
            self.snap.remove_pod(pi)
        self.snap.objects.pod_deleted(key)
        self.pods.pop(key, None)

    def _pod_gone(self, key: str) -> None:
        pi = self.pods.get(key)
        if pi is None:
            return
        was_on_node = pi.node >= 0
        self._forget(pi)
        if was_on_node:
            self.sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
