"""``kubeberth admission``: Kueue's admission run as a controller on a Kubernetes API.

The policy is :mod:`kubeberth.admission`, the code ``kubeberth admit`` and the simulator
run; this module is only its host on a live cluster, doing what Kueue's controllers do around
its scheduler:
- the job and pod integrations: a Job or a pod labelled ``kueue.x-k8s.io/queue-name`` gets a
  Workload (owned by it, podSets from its template, priority from its (Workload)PriorityClass),
  built by the same loader that ``kubeberth admit`` uses on manifests;
- the scheduler: admission cycles on one consistent view of the cache, until a cycle changes
  nothing, as ``kubeberth admit`` does; an admitted Workload gets ``status.admission`` and the
  QuotaReserved/Admitted conditions through ``workloads/status``, then its Job is started
  (unsuspended, the flavor's node labels and tolerations injected in the pod template) or its
  pods ungated (same injection); a preempted Workload gets Evicted/Preempted conditions and its
  Job is suspended again (its original template restored) or its pods deleted; once the Job has
  no active pod its quota is released and it queues again;
- the workload controller: a Job that completed or failed finishes its Workload (quota
  released); ClusterQueue and LocalQueue status report pending and admitted counts and usage.

State comes from the API alone: the Workloads' ``status.admission`` is the quota in use, so a
restarted controller (or a new leader) never admits anything twice. Every write carries the
resourceVersion it was computed from; a 409 re-reads the object and tries again. Informer
threads only queue events; the control loop applies them and runs a round after a short quiet
period (debounce), and again when a requeue backoff (``requeueState.requeueAt``) expires.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
from lightkube import ApiError, Client, operators
from lightkube.core.exceptions import LoadResourceError
from lightkube.core.resource import Resource
from lightkube.core.resource_registry import resource_registry
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Event, Namespace, Pod
from lightkube.resources.scheduling_v1 import PriorityClass
from lightkube.types import PatchType
from prometheus_client import Counter, Gauge, Histogram

from kubeberth.admission import AdmissionState
from kubeberth.admission.check_states import (
    DEACTIVATED_BY_CHECK,
    EVICTED_BY_CHECK,
    is_admitted,
    required_checks,
)
from kubeberth.admission.checks import CheckRegistry, in_tree, unmodelled
from kubeberth.admission.driver import Cycle, settle
from kubeberth.admission.model import (
    ADMISSION_GATE,
    JOB_MIN_PARALLELISM_ANNOTATION,
    POD_PRIORITY_CLASS_SOURCE,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    WORKLOAD_PRIORITY_CLASS_SOURCE,
    AdmissionCheckState,
    KueueConfiguration,
    KueueObjects,
    Workload,
    load_kueue,
    read_check_states,
)
from kubeberth.admission.preemption import Target
from kubeberth.admission.quota import Snapshot, admitted_info
from kubeberth.api import objects as kb
from kubeberth.api.errors import InputError
from kubeberth.api.quantity import format_milli
from kubeberth.api.times import format_time, parse_time
from kubeberth.config.kueue_versions import V1BETA1, convert
from kubeberth.config.manifests import Manifests, decode_object
from kubeberth.config.workload_api import load_workload_api
from kubeberth.config.yamlsrc import Document, Source
from kubeberth.live.controller import INVALID_OBJECT, Controller
from kubeberth.live.events import EventRecorder
from kubeberth.live.informer import SYNC, NativePodGroup
from kubeberth.live.leader import LeaderElector
from kubeberth.live.metrics import ControllerMetrics

log = logging.getLogger("kubeberth.admission")

Obj = dict[str, Any]
T = TypeVar("T")
GROUP = "kueue.x-k8s.io"
NATIVE = "NativePodGroup"  # scheduling.k8s.io/v1beta1 PodGroup
COMPONENT = "kueue-admission"  # the Events' reporting component (Kueue: kueue-admission)
DEBOUNCE = 0.05  # quiet time before a round
MAX_DELAY = 1.0  # a round runs at the latest this long after the first pending event
RETRIES = 5
CONFIG_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue",
                "WorkloadPriorityClass", "AdmissionCheck")
PREEMPTION_MESSAGES = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


@dataclass(slots=True)
class KueueResources:
    """The lightkube resource classes of one served Kueue version."""

    version: str
    by_kind: dict[str, type[Resource]]

    @classmethod
    def of(cls, version: str) -> KueueResources:
        cohort_version = "v1alpha1" if version == "v1beta1" else version
        return cls(version, {
            "ResourceFlavor": create_global_resource(GROUP, version, "ResourceFlavor",
                                                    "resourceflavors"),
            "ClusterQueue": create_global_resource(GROUP, version, "ClusterQueue",
                                                  "clusterqueues"),
            "Cohort": create_global_resource(GROUP, cohort_version, "Cohort", "cohorts"),
            "LocalQueue": create_namespaced_resource(GROUP, version, "LocalQueue",
                                                     "localqueues"),
            "WorkloadPriorityClass": create_global_resource(
                GROUP, version, "WorkloadPriorityClass", "workloadpriorityclasses"),
            "Workload": create_namespaced_resource(GROUP, version, "Workload", "workloads"),
            "AdmissionCheck": create_global_resource(GROUP, version, "AdmissionCheck",
                                                    "admissionchecks"),
        })


def served_version(client: Client) -> str:
    """v1beta1 when the API serves it (the fields kubeberth writes are v1beta1's), else
    v1beta2 (Kueue releases that dropped v1beta1). An API that cannot be asked (unreachable,
    forbidden) is assumed to serve v1beta1; the informers keep retrying."""
    for version in ("v1beta1", "v1beta2"):
        res = KueueResources.of(version).by_kind["ResourceFlavor"]
        try:
            next(iter(client.list(res, chunk_size=1)), None)  # type: ignore[type-var]
            return version
        except ApiError as err:
            if err.status.code != 404:
                log.warning("cannot list ResourceFlavors (%s): assuming Kueue v1beta1",
                            err.status.message)
                return "v1beta1"
        except httpx.HTTPError as err:
            log.warning("cannot reach the API (%s): assuming Kueue v1beta1", err)
            return "v1beta1"
    return "v1beta1"


class AdmissionEvents(EventRecorder):
    """Events about any object (Kueue posts them on Workloads and Jobs)."""

    def object_event(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        meta = obj.get("metadata", {})
        now = dt.datetime.now(dt.UTC)
        suffix = f"{time.time_ns():x}{next(self._ids):x}"
        self._queue.put(Event(
            metadata=ObjectMeta(name=f"{meta.get('name', '')}.{suffix}",
                                namespace=meta.get("namespace") or "default"),
            involvedObject=ObjectReference(kind=obj.get("kind"), namespace=meta.get("namespace"),
                                           name=meta.get("name"), uid=meta.get("uid") or None,
                                           apiVersion=obj.get("apiVersion"),
                                           resourceVersion=meta.get("resourceVersion")),
            reason=reason, message=message[:1024], type=kind, count=1,
            firstTimestamp=now, lastTimestamp=now,
            source=EventSource(component=COMPONENT), reportingComponent=COMPONENT))


class AdmissionMetrics(ControllerMetrics):
    """Kueue's series, under Kueue's names and labels, in a registry of the controller."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.attempts = Counter("kueue_admission_attempts", "The total number of attempts to "
                                "admit workloads.", ["result"], registry=r)
        self.attempt_duration = Histogram("kueue_admission_attempt_duration_seconds",
                                          "The latency of an admission attempt.", ["result"],
                                          registry=r)
        self.pending = Gauge("kueue_pending_workloads", "The number of pending workloads, per "
                             "cluster_queue and status.", ["cluster_queue", "status"],
                             registry=r)
        self.quota_reserved = Counter("kueue_quota_reserved_workloads", "The total number of "
                                      "quota reserved workloads per cluster_queue.",
                                      ["cluster_queue"], registry=r)
        self.admitted = Counter("kueue_admitted_workloads", "The total number of admitted "
                                "workloads per cluster_queue.", ["cluster_queue"], registry=r)
        self.admitted_active = Gauge("kueue_admitted_active_workloads", "The number of admitted "
                                     "Workloads that are active, per cluster_queue.",
                                     ["cluster_queue"], registry=r)
        self.wait_time = Histogram("kueue_admission_wait_time_seconds", "The time between a "
                                   "workload was created or requeued until admission, per "
                                   "cluster_queue.", ["cluster_queue"], registry=r)
        self.evicted = Counter("kueue_evicted_workloads", "The number of evicted workloads per "
                               "cluster_queue and reason.", ["cluster_queue", "reason"],
                               registry=r)
        self.preempted = Counter("kueue_preempted_workloads", "The number of preempted "
                                 "workloads per preempting_cluster_queue and reason.",
                                 ["preempting_cluster_queue", "reason"], registry=r)
        frl = ["cohort", "cluster_queue", "flavor", "resource"]
        self.usage = Gauge("kueue_cluster_queue_resource_usage", "The resource usage of a "
                           "cluster_queue, per flavor and resource.", frl, registry=r)
        self.reservation = Gauge("kueue_cluster_queue_resource_reservation", "The resources "
                                 "reserved by a cluster_queue, per flavor and resource.", frl,
                                 registry=r)
        self.nominal = Gauge("kueue_cluster_queue_nominal_quota", "The nominal quota of a "
                             "cluster_queue, per flavor and resource.", frl, registry=r)
        self.status = Gauge("kueue_cluster_queue_status", "The status of a cluster_queue "
                            "(pending, active or terminated).", ["cluster_queue", "status"],
                            registry=r)
        self.not_modelled = Gauge("kubeberth_admission_check_not_modelled", "1 for each "
                                  "AdmissionCheck whose controllerName no check plugin "
                                  "models: workloads wait on it until its controller sets "
                                  "their state.", ["admission_check", "controller_name"],
                                  registry=r)


@dataclass(slots=True, frozen=True)
class AdmissionDecision:
    """One decision applied (or, with ``--dry-run``, only logged)."""

    workload: str
    # "create", "admit", "preempt", "release", "finish", "start", "stop", "suspend", "pending"
    action: str
    detail: str = ""


@dataclass(slots=True)
class _View:
    """The admission view of one round: objects decoded from the cache."""

    objs: KueueObjects
    raw: dict[str, Obj] = field(default_factory=dict)  # workload key -> Workload object


def _key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _doc(data: Obj) -> Document:
    text = json.dumps(data)
    return Document(data=json.loads(text), source=Source(f"{data.get('kind')} {_key(data)}",
                                                         text, is_json=True),
                    index=0, line=None)


def _decode_as(cls: type[T], data: Obj) -> T:
    """An API object as kubeberth's typed object, validated as the manifest loader does."""
    obj = decode_object(_doc(data))
    if not isinstance(obj, cls):
        raise InputError(f"expected a {cls.__name__}", field="kind", expected=cls.__name__)
    return obj


def _cond(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _true(obj: Obj, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return c is not None and c.get("status") == "True"


def _rv(obj: Obj) -> int:
    try:
        return int(obj.get("metadata", {}).get("resourceVersion") or 0)
    except ValueError:  # opaque versions (not etcd's integers): trust the watch order
        return -1


def _set_conditions(obj: Obj, changes: list[Obj], now: float) -> list[Obj]:
    """The conditions list with ``changes`` applied as apimachinery's SetStatusCondition:
    the transition time moves only when the status changes."""
    out = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
    stamp = format_time(now)
    for ch in changes:
        cur = next((c for c in out if c.get("type") == ch["type"]), None)
        if cur is None:
            out.append({**ch, "lastTransitionTime": stamp})
            continue
        if cur.get("status") != ch["status"]:
            cur["lastTransitionTime"] = stamp
        cur.update({k: v for k, v in ch.items()})
    return out


ADMITTED: Obj = {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted"}


def _released(message: str) -> list[Obj]:
    """The conditions of a Workload whose quota reservation is unset after an eviction
    (Kueue's UnsetQuotaReservationWithCondition)."""
    return [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
             "message": message},
            {"type": "Admitted", "status": "False", "reason": "NoReservation",
             "message": "The workload has no reservation"}]


def _check_json(state: AdmissionCheckState) -> Obj:
    """One ``status.admissionChecks`` entry as Kueue writes it."""
    out: Obj = {"name": state.name, "state": state.state, "message": state.message,
                "lastTransitionTime": format_time(state.last_transition or 0.0)}
    if state.requeue_after_seconds is not None:
        out["requeueAfterSeconds"] = state.requeue_after_seconds
    if state.retry_count:
        out["retryCount"] = state.retry_count
    return out


def _checks_body(cur: Obj, states: tuple[AdmissionCheckState, ...]) -> list[Obj]:
    """The new ``status.admissionChecks``: each entry as admission left it, over what the
    API holds of it (fields admission does not model, such as podSetUpdates, are kept)."""
    have = {c.get("name"): c for c in (cur.get("status") or {}).get("admissionChecks") or []
            if isinstance(c, dict)}
    out = []
    for state in states:
        entry = {k: v for k, v in (have.get(state.name) or {}).items()
                 if k not in ("requeueAfterSeconds", "retryCount")}
        out.append({**entry, **_check_json(state)})
    return out


def _queued(state: AdmissionState, key: str) -> Workload | None:
    """The workload ``key`` as queued (or left out of the queues) in ``state``."""
    queued = next((e.wl for e, _active in state.queues.pending() if e.key == key), None)
    if queued is None and key in state.queues.unqueued:
        return state.queues.unqueued[key][0]
    return queued


def _normalise(kind: str, data: Obj, version: str) -> Obj:
    """Field names of the version read. The embedded server stores one object for every
    version without conversion, so a ClusterQueue written as v1beta1 may be read as v1beta2
    (``cohort`` vs ``cohortName``); a converting API server makes this a no-op."""
    if kind != "ClusterQueue":
        return data
    spec = data.get("spec") or {}
    want, other = ("cohort", "cohortName") if version == "v1beta1" else ("cohortName", "cohort")
    if other in spec and want not in spec:
        data = copy.deepcopy(data)
        data["spec"][want] = data["spec"].pop(other)
    return data


class LiveAdmission(Controller[AdmissionMetrics]):
    """Informers, admission rounds and their API writes; :meth:`run` until ``stop`` is set."""

    name = "admission"
    component = COMPONENT
    recorder: AdmissionEvents | None

    def __init__(self, client: Client, *, config: KueueConfiguration | None = None,
                 dry_run: bool = False, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, version: str | None = None,
                 metrics: AdmissionMetrics | None = None, watch_timeout: int = 300,
                 elector: LeaderElector | None = None, events: bool = True,
                 checks: CheckRegistry | None = None) -> None:
        super().__init__(client, metrics or AdmissionMetrics(), clock=clock, elector=elector,
                         recorder=AdmissionEvents(client) if events and not dry_run else None,
                         watch_timeout=watch_timeout)
        self.config = config or KueueConfiguration()
        # The admission-check controllers kubeberth plays (in-tree, entry points, --plugin).
        self.checks = in_tree() if checks is None else checks
        self.dry_run = dry_run
        self.wall = wall
        self.version = version or served_version(client)
        self.kueue = KueueResources.of(self.version)
        # Sent with every Kueue patch: the version of the URL. (The embedded server checks a
        # patched object's apiVersion against its default version, whatever version the
        # object was created in; a real API server accepts the URL's version.)
        self._api_version = f"{GROUP}/{self.version}"
        resources: dict[str, type[Resource]] = {
            **self.kueue.by_kind, "Namespace": Namespace, "PriorityClass": PriorityClass}
        for kind, res in resources.items():
            self.watch(kind, res)
        for kind, res in (("Job", Job), ("Pod", Pod)):
            self.watch(kind, res, labels={QUEUE_LABEL: operators.exists()})
        # Native PodGroups that queue-labelled pods join (KEP-13150's proposal); an API that
        # does not serve them reads as empty.
        self.watch(NATIVE, NativePodGroup)
        self.cache: dict[str, dict[str, Obj]] = {
            kind: {} for kind in (*resources, "Job", "Pod", NATIVE)}
        self.decisions: list[AdmissionDecision] = []
        self.conflicts = 0
        self.rounds = 0
        self._dirty_since: float | None = None
        self._last_event = 0.0
        self._next_wake: float | None = None
        # Validation verdicts per (kind, key, resourceVersion, priority classes' versions).
        self._verdicts: dict[tuple[str, str, str, str], str] = {}
        self._seen: set[tuple[str, str, str, str]] = set()
        self._logged: set[tuple[str, str, str]] = set()
        # Parameters kinds of modelled AdmissionChecks, (apiGroup, kind) -> the cache kind
        # their informer fills, or None when the API does not serve them.
        self._parameters: dict[tuple[str, str], str | None] = {}
        # AdmissionChecks whose controller is not modelled, as reported (name, controller).
        self._not_modelled: set[tuple[str, str]] = set()

    # ---- lifecycle -------------------------------------------------------------------------
    def on_synced(self) -> None:
        self._dirty_since = self.clock()
        log.info("caches synced: %d workloads, %d cluster queues",
                 len(self.cache["Workload"]), len(self.cache["ClusterQueue"]))

    def work(self) -> bool:
        if self._due():
            self.round()
        return False

    def _due(self) -> bool:
        now = self.clock()
        if self._next_wake is not None and self.wall() >= self._next_wake:
            self._next_wake = None
            return True
        if self._dirty_since is None:
            return False
        return now - self._last_event >= DEBOUNCE or now - self._dirty_since >= MAX_DELAY

    def wait_time(self) -> float:
        if self._dirty_since is not None:
            return DEBOUNCE / 2
        if self._next_wake is not None:
            return max(0.0, min(self.max_wait, self._next_wake - self.wall()))
        return self.max_wait

    # ---- the cache -------------------------------------------------------------------------
    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        store = self.cache[kind]
        if type_ == SYNC:
            store.clear()
            for key, item in data.items():
                store[key] = _normalise(kind, item, self.version)
        elif type_ == "DELETED":
            store.pop(data[0], None)
        else:
            self._remember(kind, _normalise(kind, data[1], self.version))
        if kind == "AdmissionCheck":
            # A changed check may name parameters now served: ask discovery again.
            self._parameters = {k: v for k, v in self._parameters.items() if v is not None}
        self._touch()

    def _remember(self, kind: str, obj: Obj) -> None:
        """Keep the newer of the cached and the given object (a write's answer may arrive
        before the watch has delivered older versions)."""
        store = self.cache[kind]
        key = _key(obj)
        old = store.get(key)
        if old is not None and old["metadata"].get("uid") == obj["metadata"].get("uid") and \
                0 <= _rv(obj) < _rv(old):
            return
        store[key] = obj

    def _touch(self) -> None:
        now = self.clock()
        self._last_event = now
        if self._dirty_since is None:
            self._dirty_since = now

    # ---- a round ---------------------------------------------------------------------------
    def round(self) -> None:
        """Workloads for new Jobs and pods, finished and evicted workloads, then admission
        cycles until nothing changes, then queue status and metrics."""
        self._dirty_since = None
        self.rounds += 1
        now = self.wall()
        self._seen = set()
        try:
            if self._watch_parameters():
                # Nothing is decided on a half-read config: the round runs again once the
                # new informers have listed (the loop waits for them).
                self._touch()
                return
            self._create_workloads()
            self._lifecycle(now)
            view = self._view()
            if view is not None:
                objs = self._admit(view, now)
                self._queue_status(objs)
        except (ApiError, httpx.HTTPError) as err:
            log.warning("round interrupted by an API error (retried next round): %s", err)
            self._touch()
        # Forget verdicts on objects that changed or went away.
        self._verdicts = {k: v for k, v in self._verdicts.items() if k in self._seen}

    def _log_once(self, action: str, key: str, message: str) -> bool:
        """Log a dry run's decision the first time it is taken (rounds repeat it)."""
        if (action, key, message) in self._logged:
            return False
        self._logged.add((action, key, message))
        log.info("%s", message)
        return True

    def _decide(self, decision: AdmissionDecision, dry_run_message: str) -> bool:
        """Record a decision; True when it is to be written (a dry run only logs it, once)."""
        if self.dry_run:
            if self._log_once(decision.action, decision.workload, dry_run_message):
                self.decisions.append(decision)
            return False
        self.decisions.append(decision)
        return True

    # Parameters of the admission checks kubeberth models (their controllers' own informers).

    def _watch_parameters(self) -> bool:
        """Start an informer for each parameters kind a modelled AdmissionCheck references,
        as each Kueue check controller watches its own parameters; True when one started."""
        started = False
        for ac in sorted(self.cache["AdmissionCheck"].values(), key=_key):
            spec = ac.get("spec") or {}
            ref = spec.get("parameters")
            if not isinstance(ref, dict) or \
                    self.checks.get(str(spec.get("controllerName") or "")) is None:
                continue
            group_kind = (str(ref.get("apiGroup") or ""), str(ref.get("kind") or ""))
            if group_kind in self._parameters:
                continue
            res = self._discover(*group_kind)
            if res is None:
                self._parameters[group_kind] = None
                continue
            kind = f"parameters:{group_kind[1]}.{group_kind[0]}"
            self.cache[kind] = {}
            self._parameters[group_kind] = kind
            self.watch(kind, res).start()
            log.info("watching %s for the parameters of AdmissionCheck %s", kind, _key(ac))
            started = True
        return started

    def _discover(self, group: str, kind: str) -> type[Resource] | None:
        """The resource of ``kind`` in ``group`` (its preferred version), from the API's
        discovery documents; None (logged) when the API does not serve it. Other HTTP errors
        interrupt the round, which is retried."""
        http: Any = self.client._client._client  # lightkube's HTTP client (base URL set)
        version, path = "v1", "/api/v1"
        if group:
            resp = http.get(f"/apis/{group}")
            if resp.status_code == 404:
                log.warning("AdmissionCheck parameters: API group %r is not served", group)
                return None
            resp.raise_for_status()
            version = str(resp.json()["preferredVersion"]["version"])
            path = f"/apis/{group}/{version}"
        resp = http.get(path)
        resp.raise_for_status()
        for r in resp.json().get("resources") or []:
            if r.get("kind") == kind and "/" not in str(r.get("name", "")):
                try:  # a built-in kind, or one made before
                    known: type[Resource] = resource_registry.load(
                        f"{group}/{version}" if group else version, kind)
                    return known
                except LoadResourceError:
                    make = create_namespaced_resource if r.get("namespaced") else \
                        create_global_resource
                    return make(group, version, kind, str(r["name"]))
        log.warning("AdmissionCheck parameters: kind %s is not served in API group %r", kind,
                    group)
        return None

    # Workloads for Jobs and pods (Kueue's job and pod integrations).

    def _priority_docs(self) -> tuple[list[Document], list[Any]]:
        wpcs = [_doc(self._as(self.kueue.by_kind["WorkloadPriorityClass"], o))
                for o in self.cache["WorkloadPriorityClass"].values()]
        pcs = []
        for o in self.cache["PriorityClass"].values():
            try:
                pcs.append(_decode_as(kb.PriorityClass, self._as(PriorityClass, o)))
            except InputError as err:
                log.warning("ignoring PriorityClass %s: %s", _key(o), err)
        return wpcs, pcs

    def _as(self, res: type[Resource], obj: Obj) -> Obj:
        """The object with its apiVersion and kind (list items may come without)."""
        info = res._api_info.resource
        api = f"{info.group}/{info.version}" if info.group else info.version
        return {**obj, "apiVersion": obj.get("apiVersion") or api,
                "kind": obj.get("kind") or info.kind}

    def _owner_uids(self) -> set[str]:
        return {ref.get("uid") for wl in self.cache["Workload"].values()
                for ref in wl["metadata"].get("ownerReferences") or []}

    def _records(self) -> list[tuple[Workload, list[Obj]]]:
        """(Workload record, its owner objects) for every queue-labelled Job and
        pod (or complete pod group), as ``kubeberth admit`` builds them from manifests."""
        wpcs, pcs = self._priority_docs()
        owned = self._owner_uids()
        out: list[tuple[Workload, list[Obj]]] = []
        for job in sorted(self.cache["Job"].values(), key=_key):
            if job["metadata"].get("uid") in owned:
                continue  # its Workload exists
            obj = self._as(Job, job)
            try:
                objs = load_kueue(Manifests(priority_classes=pcs, other=[*wpcs, _doc(obj)]))
            except InputError as err:
                self._verdict("Job", obj, str(err))
                continue
            out.extend((wl, [obj]) for wl in objs.workloads)
        pods = []
        raw_pods: dict[str, Obj] = {}
        for p in sorted(self.cache["Pod"].values(), key=_key):
            obj = self._as(Pod, p)
            if any(r.get("controller") and r.get("kind") == "Job"
                   for r in obj["metadata"].get("ownerReferences") or []):
                continue  # the Job's workload covers it
            if obj["metadata"].get("deletionTimestamp") or obj["metadata"].get("uid") in owned:
                continue
            try:
                pod = _decode_as(kb.Pod, obj)
            except InputError as err:
                self._verdict("Pod", obj, str(err))
                continue
            pods.append(pod)
            raw_pods[_key(obj)] = obj
        if pods:
            try:
                objs = load_kueue(Manifests(pods=pods, priority_classes=pcs, other=wpcs,
                                            workload_api=self._native_groups()))
            except InputError as err:
                log.warning("queue-labelled pods: %s", err)
                return out
            for wl in objs.workloads:
                out.append((wl, [raw_pods[k] for k in sorted(wl.pods) if k in raw_pods]))
        return out

    def _native_groups(self) -> list[Document]:
        """The native PodGroups, each read alone first: a bad one is refused by itself."""
        out = []
        for o in sorted(self.cache[NATIVE].values(), key=_key):
            doc = _doc(self._as(NativePodGroup, o))
            try:
                load_workload_api(Manifests(workload_api=[doc]))
            except InputError as err:
                self._verdict(NATIVE, o, str(err))
                continue
            out.append(doc)
        return out

    def _verdict_key(self, kind: str, obj: Obj) -> tuple[str, str, str, str]:
        context = ",".join(sorted(str(o["metadata"].get("resourceVersion", "")) for k in (
            "WorkloadPriorityClass", "PriorityClass") for o in self.cache[k].values()))
        return kind, _key(obj), str(obj["metadata"].get("resourceVersion", "")), context

    def _verdict(self, kind: str, obj: Obj, message: str) -> None:
        """Record (and log once) why an object is left out; "" records a valid one."""
        key = self._verdict_key(kind, obj)
        self._seen.add(key)
        if key not in self._verdicts and message:
            self.refuse(kind, _key(obj), obj, message, INVALID_OBJECT)
        self._verdicts[key] = message

    def _create_workloads(self) -> None:
        owned = self._owner_uids()
        for wl, owners in self._records():
            if not owners or all(o["metadata"].get("uid") in owned for o in owners):
                continue
            if wl.key in self.cache["Workload"]:
                continue
            body = self._workload_object(wl, owners)
            if self.dry_run:
                self._log_once("create", wl.key, f"dry-run: would create Workload {wl.key}")
                continue
            res = self.kueue.by_kind["Workload"]
            try:
                created = self.client.create(res.from_dict(body))  # type: ignore[attr-defined]
            except ApiError as err:
                if err.status.code != 409:
                    log.warning("creating Workload %s: %s", wl.key, err.status.message)
                continue
            self._remember("Workload", created.to_dict())
            self.decisions.append(AdmissionDecision(wl.key, "create", owners[0]["kind"]))
            log.info("created Workload %s for %s %s", wl.key, owners[0]["kind"],
                     ", ".join(_key(o) for o in owners))
            if self.recorder is not None:
                self.recorder.object_event(owners[0], "Normal", "CreatedWorkload",
                                           f"Created Workload: {wl.key}")

    def _workload_object(self, wl: Workload, owners: list[Obj]) -> Obj:
        """The Workload Kueue's integration writes for ``wl``'s owners."""
        first = owners[0]
        podsets = []
        by_podset: dict[str, Obj] = {}
        if first["kind"] == "Job":
            by_podset = {ps.name: first["spec"]["template"] for ps in wl.podsets}
        else:
            for pod in owners:
                member_of = wl.pods.get(_key(pod))
                if member_of is not None and member_of not in by_podset:
                    labels = pod["metadata"].get("labels") or {}
                    by_podset[member_of] = {"metadata": {"labels": labels}, "spec": pod["spec"]}
        for ps in wl.podsets:
            template = copy.deepcopy(by_podset[ps.name])
            tspec = template.setdefault("spec", {})
            gates = [g for g in tspec.get("schedulingGates") or [] if g.get("name") !=
                     ADMISSION_GATE]
            if gates:
                tspec["schedulingGates"] = gates
            else:
                tspec.pop("schedulingGates", None)
            tmeta = template.get("metadata") or {}
            template["metadata"] = {k: v for k, v in tmeta.items()
                                    if k in ("labels", "annotations")}
            item: Obj = {"name": ps.name, "count": ps.count, "template": template}
            if ps.min_count is not None:
                item["minCount"] = ps.min_count
            podsets.append(item)
        labels = first["metadata"].get("labels") or {}
        spec: Obj = {"queueName": wl.queue_name, "podSets": podsets, "priority": wl.priority}
        if wl.priority_class:
            spec["priorityClassName"] = wl.priority_class
            spec["priorityClassSource"] = (WORKLOAD_PRIORITY_CLASS_SOURCE
                                           if labels.get(PRIORITY_CLASS_LABEL)
                                           else POD_PRIORITY_CLASS_SOURCE)
        refs = [{"apiVersion": o["apiVersion"], "kind": o["kind"],
                 "name": o["metadata"]["name"], "uid": o["metadata"].get("uid"),
                 "controller": o is first, "blockOwnerDeletion": True} for o in owners]
        meta: Obj = {"name": wl.name, "namespace": wl.namespace, "ownerReferences": refs,
                     "labels": {f"{GROUP}/job-uid": str(first["metadata"].get("uid", ""))}}
        if wl.source == "PodGroup":
            meta["labels"] = {}
        # Built in v1beta1's words, written in the served version (Kueue's conversion).
        return convert({"apiVersion": V1BETA1, "kind": "Workload", "metadata": meta,
                        "spec": spec}, f"{GROUP}/{self.version}")

    # Finished, evicted and started workloads (the jobframework reconciler).

    def _owners_of(self, wl: Obj) -> tuple[str, list[Obj]]:
        refs = wl["metadata"].get("ownerReferences") or []
        ns = wl["metadata"].get("namespace", "")
        kinds = {r.get("kind") for r in refs}
        if "Job" in kinds:
            out = [j for r in refs if r.get("kind") == "Job"
                   for j in [self.cache["Job"].get(f"{ns}/{r.get('name')}")]
                   if j is not None and j["metadata"].get("uid") == r.get("uid")]
            return "Job", out
        if "Pod" in kinds:
            out = [p for r in refs if r.get("kind") == "Pod"
                   for p in [self.cache["Pod"].get(f"{ns}/{r.get('name')}")]
                   if p is not None and p["metadata"].get("uid") == r.get("uid")]
            return "Pod", out
        return "", []

    def _lifecycle(self, now: float) -> None:
        for key, wl in sorted(self.cache["Workload"].items()):
            if _true(wl, "Finished"):
                continue
            kind, owners = self._owners_of(wl)
            admission = (wl.get("status") or {}).get("admission")
            finished = self._owner_finished(kind, owners)
            if finished is not None:
                self._finish(key, wl, finished, now)
                continue
            if not admission and kind == "Job" and owners and \
                    not owners[0]["spec"].get("suspend"):
                # A queued Job must not run before admission (Kueue suspends it).
                self._patch(Job, owners[0], {"spec": {"suspend": True}}, key, "suspend")
                continue
            if not admission:
                continue
            if _true(wl, "Evicted"):
                # A Workload no Job or pod owns has nothing to stop: released at once.
                if not kind or (owners and self._stop_owners(key, wl, kind, owners)):
                    self._release(key, wl, now)
            elif not owners:
                continue
            elif _true(wl, "Admitted"):
                self._start_owners(key, wl, kind, owners)

    def _owner_finished(self, kind: str, owners: list[Obj]) -> tuple[str, str] | None:
        if kind == "Job" and owners:
            job = owners[0]
            if _true(job, "Complete"):
                return "Succeeded", "Job finished successfully"
            if _true(job, "Failed"):
                c = _cond(job, "Failed") or {}
                return "Failed", str(c.get("message") or "Job failed")
        if kind == "Pod" and owners:
            phases = [(o.get("status") or {}).get("phase") for o in owners]
            if all(p in ("Succeeded", "Failed") for p in phases):
                if all(p == "Succeeded" for p in phases):
                    return "Succeeded", "Pods succeeded"
                return "Failed", "Pods failed"
        return None

    def _finish(self, key: str, wl: Obj, why: tuple[str, str], now: float) -> None:
        reason, message = why
        self._log_once("finish", key, f"{'dry-run: ' if self.dry_run else ''}workload {key} "
                                      f"finished ({reason})")
        if self.dry_run:
            return
        if self._write_status(key, lambda cur: {"conditions": _set_conditions(cur, [
                {"type": "Finished", "status": "True", "reason": reason,
                 "message": message}], now)}):
            self.decisions.append(AdmissionDecision(key, "finish", reason))

    def _release(self, key: str, wl: Obj, now: float) -> None:
        """The evicted workload's Job has stopped: unset its quota reservation; it queues
        again (Kueue's UnsetQuotaReservationWithCondition)."""
        evicted = _cond(wl, "Evicted") or {}
        message = str(evicted.get("message") or "")
        if self.dry_run:
            return

        def change(cur: Obj) -> Obj | None:
            if not (cur.get("status") or {}).get("admission"):
                return None
            return {"admission": None, "conditions": _set_conditions(cur, _released(message),
                                                                     now)}

        if self._write_status(key, change):
            self.decisions.append(AdmissionDecision(key, "release"))
            log.info("workload %s stopped after eviction: quota released, queued again", key)

    def _start_owners(self, key: str, wl: Obj, kind: str, owners: list[Obj]) -> None:
        """Kueue's "start": unsuspend the Job with its flavors' node labels and tolerations,
        or ungate the pods with them."""
        admission = wl["status"]["admission"]
        if kind == "Job":
            job = owners[0]
            if not job["spec"].get("suspend"):
                return
            ps = (wl["spec"].get("podSets") or [{}])[0].get("name", "main")
            tspec = job["spec"]["template"].get("spec") or {}
            selector, tolerations = self._injected(tspec, admission, ps)
            patch: Obj = {"spec": {"suspend": False, "template": {"spec": {
                "nodeSelector": selector, "tolerations": tolerations}}}}
            count = next((a.get("count") for a in admission.get("podSetAssignments") or []
                          if a.get("name", "main") == ps), None)
            if count is not None and count != job["spec"].get("parallelism", 1):
                patch["spec"]["parallelism"] = count  # partial admission
            if self._patch(Job, job, patch, key, "start"):
                log.info("started Job %s (workload %s admitted)", _key(job), key)
                if self.recorder is not None:
                    self.recorder.object_event(job, "Normal", "Started",
                                               f"Admitted by clusterQueue "
                                               f"{admission.get('clusterQueue')}")
            return
        pods_of = self._pod_podsets(wl, owners)
        for pod in owners:
            gates = pod["spec"].get("schedulingGates") or []
            if not any(g.get("name") == ADMISSION_GATE for g in gates):
                continue
            selector, tolerations = self._injected(pod["spec"], admission,
                                                   pods_of.get(_key(pod), "main"))
            patch = {"spec": {"schedulingGates": [g for g in gates
                                                  if g.get("name") != ADMISSION_GATE],
                              "nodeSelector": selector, "tolerations": tolerations}}
            if self._patch(Pod, pod, patch, key, "start"):
                log.info("ungated pod %s (workload %s admitted)", _key(pod), key)

    def _pod_podsets(self, wl: Obj, pods: list[Obj]) -> dict[str, str]:
        """Which podSet each pod of a pod-based workload belongs to."""
        podsets = wl["spec"].get("podSets") or []
        if len(podsets) == 1:
            return {_key(p): podsets[0].get("name", "main") for p in pods}
        wpcs, pcs = self._priority_docs()
        try:
            typed = [_decode_as(kb.Pod, self._as(Pod, p)) for p in pods]
            objs = load_kueue(Manifests(pods=typed, priority_classes=pcs, other=wpcs))
        except InputError:
            return {}
        return {k: v for w in objs.workloads for k, v in w.pods.items()}

    def _injected(self, spec: Obj, admission: Obj, podset: str) -> tuple[Obj, list[Obj]]:
        """nodeSelector and tolerations of a pod spec once its podSet is admitted: the
        flavors' node labels (a key the pod already selects is kept) and tolerations
        appended, as ``admitted_pod`` does for the simulator."""
        selector = dict(spec.get("nodeSelector") or {})
        tolerations = list(spec.get("tolerations") or [])
        for psa in admission.get("podSetAssignments") or []:
            if psa.get("name", "main") != podset:
                continue
            for name in sorted(set((psa.get("flavors") or {}).values())):
                flavor = self.cache["ResourceFlavor"].get(name)
                if flavor is None:
                    continue
                fspec = flavor.get("spec") or {}
                for k, v in (fspec.get("nodeLabels") or {}).items():
                    selector.setdefault(k, v)
                tolerations.extend(t for t in fspec.get("tolerations") or []
                                   if t not in tolerations)
        return selector, tolerations

    def _stop_owners(self, key: str, wl: Obj, kind: str, owners: list[Obj]) -> bool:
        """Kueue's "stop": suspend the Job and restore its template's node selection, or
        delete the pods. True once nothing of the workload runs any more."""
        if kind == "Job":
            job = owners[0]
            if not job["spec"].get("suspend"):
                original = ((wl["spec"].get("podSets") or [{}])[0].get("template") or {}).get(
                    "spec") or {}
                cur = job["spec"]["template"].get("spec") or {}
                selector: Obj | None = None  # merge patch: null removes the field
                if original.get("nodeSelector"):
                    selector = {k: None for k in cur.get("nodeSelector") or {}}
                    selector.update(original["nodeSelector"])
                patch: Obj = {"spec": {"suspend": True, "template": {"spec": {
                    "nodeSelector": selector,
                    "tolerations": original.get("tolerations") or None}}}}
                if JOB_MIN_PARALLELISM_ANNOTATION in (job["metadata"].get("annotations") or {}):
                    # Partial admission may have cut the parallelism: back to the podSet's.
                    patch["spec"]["parallelism"] = (wl["spec"].get("podSets") or [{}])[0].get(
                        "count", 1)
                if self._patch(Job, job, patch, key, "stop") and self.recorder is not None:
                    evicted = _cond(wl, "Evicted") or {}
                    self.recorder.object_event(job, "Normal", "Stopped",
                                               str(evicted.get("message") or "Evicted"))
                return False
            return not (job.get("status") or {}).get("active")
        if self.dry_run:
            return False
        for pod in owners:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.client.delete(Pod, pod["metadata"]["name"],
                                   namespace=pod["metadata"]["namespace"])
                log.info("deleted pod %s of preempted workload %s", _key(pod), key)
            except ApiError as err:
                if err.status.code != 404:
                    log.warning("deleting pod %s: %s", _key(pod), err.status.message)
        return False  # the Workload goes with its pods (owner references)

    # The admission cycles.

    def _view(self) -> _View | None:
        """Kueue's objects and every live Workload, decoded as ``kubeberth admit`` decodes
        manifests; an object that does not decode is left out with a warning."""
        docs: list[Document] = []
        for kind in CONFIG_KINDS:
            res = self.kueue.by_kind[kind]
            for obj in sorted(self.cache[kind].values(), key=_key):
                d = _doc(self._as(res, obj))
                if self._valid(kind, d, []):
                    docs.append(d)
        for params in sorted(k for k in self._parameters.values() if k is not None):
            # Only an AdmissionCheck reads these (the first of the kind and name is its own).
            docs.extend(_doc(o) for o in sorted(self.cache[params].values(), key=_key))
        wpcs = [d for d in docs if d.kind == "WorkloadPriorityClass"]
        _, pcs = self._priority_docs()
        raw: dict[str, Obj] = {}
        wres = self.kueue.by_kind["Workload"]
        for key, wl in sorted(self.cache["Workload"].items()):
            if _true(wl, "Finished") or wl["metadata"].get("deletionTimestamp"):
                continue
            d = _doc(self._as(wres, wl))
            if self._valid("Workload", d, wpcs, pcs):
                docs.append(d)
                raw[key] = wl
        namespaces = []
        for o in self.cache["Namespace"].values():
            try:
                namespaces.append(_decode_as(kb.Namespace, self._as(Namespace, o)))
            except InputError:
                continue
        try:
            objs = load_kueue(Manifests(namespaces=namespaces, priority_classes=pcs,
                                        other=docs))
        except InputError as err:
            self._log_once("invalid", "", f"Kueue objects rejected, no admission: {err}")
            return None
        objs.config = self.config
        if self.dry_run:
            known = {w.key for w in objs.workloads}
            objs.workloads += [w for w, owners in self._records()
                               if owners and w.key not in known]
        return _View(objs, raw)

    def _valid(self, kind: str, doc: Document, wpcs: list[Document],
               pcs: list[Any] | None = None) -> bool:
        key = self._verdict_key(kind, doc.data)
        known = self._verdicts.get(key)
        if known is not None:
            self._seen.add(key)
            return not known
        try:
            load_kueue(Manifests(priority_classes=pcs or [], other=[*wpcs, doc]))
        except InputError as err:
            self._verdict(kind, doc.data, str(err))
            return False
        self._verdict(kind, doc.data, "")
        return True

    def _admit(self, view: _View, now: float) -> KueueObjects:
        """Admission cycles until nothing changes, each cycle's decisions written as it
        ends; then the admission checks' states and Admitted written, and the pending reasons.
        Returns the objects as admission read them (AdmissionChecks' Active decided)."""
        state = AdmissionState.from_objects(view.objs, self.checks)
        self._report_not_modelled(state)
        for key, wl in state.admitted.items():
            raw = view.raw.get(key)
            if raw is not None and _true(raw, "Evicted"):
                reason = str((_cond(raw, "Preempted") or {}).get("reason") or "")
                state.evicting[key] = Target(admitted_info(wl), reason)
        reasons: dict[str, tuple[str, str]] = {}

        def write(cycle: Cycle, _final: bool) -> AdmissionState:
            """Write the cycle's reservations, preemptions and check-based evictions; a
            reservation not written holds no quota."""
            result, nxt = cycle.result, cycle.state
            for a in result.admitted:
                key = a.workload.key
                reasons.pop(key, None)
                held = nxt.admitted.get(key)  # None: a check sent it back at once
                if not self._write_admission(a.workload, None if held is None else held.checks,
                                             held is not None and cycle.starts(key), now):
                    nxt.admitted.pop(key, None)
                    nxt.queues.remove(key)
            for p in result.preempted:
                self._preempt(p.workload, p.by, p.reason, result.state, now)
            for na in result.not_admitted:
                reasons[na.workload] = (na.reason, na.message)
            for key, message in cycle.checks.evicted:
                self._check_evict(key, EVICTED_BY_CHECK, message, result.state, nxt, now)
            for key, message in cycle.checks.deactivated:
                self._check_evict(key, DEACTIVATED_BY_CHECK, message, result.state, nxt, now)
            return nxt

        settled = settle(state, now, after=write)
        for cycle in settled.cycles:
            outcome = "success" if cycle.result.admitted else "inadmissible"
            self.metrics.attempts.labels(result=outcome).inc()
            self.metrics.attempt_duration.labels(result=outcome).observe(cycle.seconds)
        state = settled.state
        self._sync_checks(state, now)
        for e, _active in state.queues.pending():
            if e.cluster_queue in state.inactive:
                # Heads of an inactive ClusterQueue are never popped: say why they wait.
                reasons[e.key] = ("Inadmissible", state.inactive[e.cluster_queue])
        for key, (_wl, reason, message) in state.queues.unqueued.items():
            reasons[key] = (reason, message)
        self._next_wake = settled.wake_at(now)
        self._metrics(state)  # before the last writes, which a client may be waiting for
        for key, (reason, message) in sorted(reasons.items()):
            self._pending(key, reason, message, view, now)
        return state.objs

    def _report_not_modelled(self, state: AdmissionState) -> None:
        """An AdmissionCheck whose controller no plugin models is read and not modelled: said
        once in the log and as a Warning Event on each ClusterQueue naming it, and kept in
        the ``kubeberth_admission_check_not_modelled`` gauge while it exists."""
        current = {(ac.name, ac.controller_name) for ac in unmodelled(state.checks)}
        for name, controller in sorted(self._not_modelled - current):
            self.metrics.not_modelled.remove(name, controller)
        for name, controller in sorted(current - self._not_modelled):
            self.metrics.not_modelled.labels(admission_check=name,
                                             controller_name=controller).set(1)
            message = (f"AdmissionCheck {name} (controllerName {controller}) is read and not "
                       "modelled by kubeberth: its workloads wait on it until that controller "
                       "sets their check state (--plugin module:attr loads a check plugin)")
            log.warning("%s", message)
            res = self.kueue.by_kind["ClusterQueue"]
            for cq_name, cq in sorted(state.objs.cluster_queues.items()):
                raw = self.cache["ClusterQueue"].get(cq_name)
                if name in cq.admission_checks and raw is not None and \
                        self.recorder is not None:
                    self.recorder.object_event(self._as(res, raw), "Warning",
                                               "AdmissionCheckNotModelled", message)
        self._not_modelled = current

    def _write_admission(self, wl: Workload, checks: tuple[AdmissionCheckState, ...] | None,
                         admitted: bool, now: float) -> bool:
        """Reserve quota (``status.admission``, QuotaReserved) with the admission checks'
        states; Admitted too, and the owners started, when no check is left to wait for."""
        assert wl.admission is not None
        adm = wl.admission
        flavors = "; ".join(f"{psa.name}: " + ", ".join(f"{r}={f}" for r, f in
                                                        sorted(psa.flavors.items()))
                            for psa in adm.podset_assignments)
        if not self._decide(AdmissionDecision(wl.key, "admit", f"{adm.cluster_queue} {flavors}"),
                            f"dry-run: would admit {wl.key} in ClusterQueue "
                            f"{adm.cluster_queue} ({flavors})"):
            return True
        body = {"clusterQueue": adm.cluster_queue, "podSetAssignments": [
            {"name": psa.name, "count": psa.count, "flavors": dict(sorted(psa.flavors.items())),
             "resourceUsage": {r: format_milli(r, v)
                               for r, v in sorted(psa.resource_usage.items())}}
            for psa in adm.podset_assignments]}

        def change(cur: Obj) -> Obj | None:
            if (cur.get("status") or {}).get("admission") or _true(cur, "Finished"):
                return None  # admitted meanwhile (another writer): never twice
            changes = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": f"Quota reserved in ClusterQueue {adm.cluster_queue}"}]
            if admitted:
                changes.append(ADMITTED)
            for ctype in ("Evicted", "Preempted"):
                prev = _cond(cur, ctype)
                if prev is not None and prev.get("status") == "True":
                    changes.append({"type": ctype, "status": "False",
                                    "reason": "QuotaReserved",
                                    "message": f"Previously: {prev.get('message', '')}"})
            status: Obj = {"admission": body, "conditions": _set_conditions(cur, changes, now),
                           "requeueState": None}
            if checks:
                status["admissionChecks"] = _checks_body(cur, checks)
            return status

        written = self._write_status(wl.key, change)
        if written is None:
            return False
        log.info("%s %s in ClusterQueue %s (%s)%s", "admitted" if admitted else
                 "reserved quota for", wl.key, adm.cluster_queue, flavors,
                 "" if admitted else ": waiting for its admission checks")
        cq = adm.cluster_queue
        self.metrics.quota_reserved.labels(cluster_queue=cq).inc()
        created = wl.creation_time if wl.creation_time > 0 else now
        self.metrics.wait_time.labels(cluster_queue=cq).observe(max(0.0, now - created))
        if self.recorder is not None:
            self.recorder.object_event(written, "Normal", "QuotaReserved",
                                       f"Quota reserved in ClusterQueue {cq}, wait time since "
                                       f"queued was {max(0.0, now - created):.0f}s")
        if admitted:
            self._admitted(wl.key, written, cq, now)
        return True

    def _admitted(self, key: str, written: Obj, cq: str, now: float) -> None:
        """The Workload is Admitted (quota reserved, every check Ready): start its owners."""
        self.metrics.admitted.labels(cluster_queue=cq).inc()
        if self.recorder is not None:
            reserved = _cond(written, "QuotaReserved") or {}
            since = parse_time(str(reserved.get("lastTransitionTime") or format_time(now)),
                               "QuotaReserved.lastTransitionTime")
            self.recorder.object_event(written, "Normal", "Admitted",
                                       f"Admitted by ClusterQueue {cq}, wait time since "
                                       f"reservation was {max(0.0, now - since):.0f}s")
        kind, owners = self._owners_of(written)
        if owners:
            self._start_owners(key, written, kind, owners)

    def _sync_checks(self, state: AdmissionState, now: float) -> None:
        """Kueue's workload controller: each Workload holding quota gets the check states
        admission arrived at, and Admitted once every check it needs is Ready (never taken
        back here: only an eviction does). A Workload whose checks another controller changed
        since they were read is left to the next round."""
        for key, wl in sorted(state.admitted.items()):
            raw = self.cache["Workload"].get(key)
            if wl.admission is None or key in state.evicting or raw is None or \
                    not (raw.get("status") or {}).get("admission"):
                continue
            cq = wl.admission.cluster_queue
            required = required_checks(state.objs.cluster_queues.get(cq), wl.admission)
            admitted = not required or (is_admitted(wl.checks) and
                                        [c.name for c in wl.checks] == required)
            status = raw.get("status") or {}
            try:
                have = read_check_states(status)
            except InputError:
                continue  # changed into something unreadable since the view: next round
            seen = status.get("admissionChecks")
            stale_checks = [_check_json(c) for c in have] != [_check_json(c) for c in wl.checks]
            admit = admitted and not _true(raw, "Admitted")
            if not stale_checks and not admit:
                continue
            states = ", ".join(f"{c.name}={c.state}" for c in wl.checks)
            if not self._decide(AdmissionDecision(key, "checks", states),
                                f"dry-run: {key} admission checks {states}"
                                + (": would admit" if admit else "")):
                continue

            def change(cur: Obj, wl: Workload = wl, seen: Any = seen,
                       admit: bool = admit) -> Obj | None:
                status = cur.get("status") or {}
                if not status.get("admission") or status.get("admissionChecks") != seen:
                    return None
                out: Obj = {"admissionChecks": _checks_body(cur, wl.checks)}
                if admit:
                    out["conditions"] = _set_conditions(cur, [ADMITTED], now)
                return out

            written = self._write_status(key, change)
            if written is not None:
                log.info("%s admission checks: %s%s", key, states,
                         "; admitted" if admit else "")
                if admit:
                    self._admitted(key, written, cq, now)

    def _check_evict(self, key: str, reason: str, message: str, before: AdmissionState,
                     after: AdmissionState, now: float) -> None:
        """A Retry check evicts the workload (requeued, after the Retry's delay); a Rejected
        one deactivates it (``spec.active: false``). Its checks go back to Pending. A workload
        not yet started gives its quota back at once; one that runs keeps it (still held in
        ``after``) until its Job is suspended or its pods are gone."""
        wl = _queued(after, key)
        held = before.admitted.get(key)
        raw = self.cache["Workload"].get(key)
        if wl is None or held is None or raw is None:
            return
        running = _true(raw, "Admitted")
        if running:
            after.queues.remove(key)
            after.admitted[key] = held
            after.evicting[key] = Target(admitted_info(held), "")
        deactivate = reason == DEACTIVATED_BY_CHECK
        action = "deactivate" if deactivate else "evict"
        if not self._decide(AdmissionDecision(key, action, message),
                            f"dry-run: would {action} {key}: {message}"):
            return
        requeue_at = wl.requeue_at if wl.requeue_at is not None and wl.requeue_at > now \
            else None

        def change(cur: Obj) -> Obj | None:
            status = cur.get("status") or {}
            if not status.get("admission") or _true(cur, "Evicted"):
                return None
            changes = [{"type": "Evicted", "status": "True", "reason": reason,
                        "message": message}]
            out: Obj = {"admissionChecks": _checks_body(cur, wl.checks)}
            if not running:
                out["admission"] = None
                changes += _released(message)
            if requeue_at is not None:
                out["requeueState"] = {**(status.get("requeueState") or {}),
                                       "requeueAt": format_time(requeue_at)}
            out["conditions"] = _set_conditions(cur, changes, now)
            return out

        written = self._write_status(key, change)
        if written is None:
            return
        log.info("%s %s: %s", "deactivated" if deactivate else "evicted", key, message)
        cq = held.admission.cluster_queue if held.admission else ""
        self.metrics.evicted.labels(cluster_queue=cq, reason=reason).inc()
        if self.recorder is not None:
            if deactivate:
                cause = message.removeprefix("The workload is deactivated due to ")
                self.recorder.object_event(written, "Warning", "AdmissionCheckRejected",
                                           f"Deactivated due to {cause}")
            else:
                self.recorder.object_event(written, "Normal", f"EvictedDueTo{reason}", message)
        if deactivate:
            # spec.active: false, as Kueue sets it on a workload a check rejected.
            self._write_workload(key, lambda cur: None if (cur.get("spec") or {}).get(
                "active") is False else {"spec": {"active": False}}, status=False)

    def _preempt(self, key: str, by: str, reason: str, state: AdmissionState,
                 now: float) -> None:
        preemptor = next((e.wl for e, _ in state.queues.pending() if e.key == by),
                         state.admitted.get(by))
        uid = preemptor.uid if preemptor is not None else ""
        message = (f"Preempted to accommodate a workload (UID: {uid}) due to "
                   f"{PREEMPTION_MESSAGES.get(reason, reason)}")
        victim = state.admitted.get(key)
        cq = victim.admission.cluster_queue if victim and victim.admission else ""
        by_cq = next((e.cluster_queue for e, _ in state.queues.pending() if e.key == by), "")
        if not self._decide(AdmissionDecision(key, "preempt", f"{by} {reason}"),
                            f"dry-run: would preempt {key} for {by} ({reason})"):
            return

        def change(cur: Obj) -> Obj | None:
            if _true(cur, "Evicted") or not (cur.get("status") or {}).get("admission"):
                return None
            return {"conditions": _set_conditions(cur, [
                {"type": "Evicted", "status": "True", "reason": "Preempted",
                 "message": message},
                {"type": "Preempted", "status": "True", "reason": reason,
                 "message": message}], now)}

        written = self._write_status(key, change)
        if written is None:
            return
        log.info("preempting %s for %s (%s)", key, by, reason)
        self.metrics.evicted.labels(cluster_queue=cq, reason="Preempted").inc()
        self.metrics.preempted.labels(preempting_cluster_queue=by_cq, reason=reason).inc()
        if self.recorder is not None:
            self.recorder.object_event(written, "Normal", "Preempted", message)
        kind, owners = self._owners_of(written)
        if not kind or (owners and self._stop_owners(key, written, kind, owners)):
            self._release(key, self.cache["Workload"].get(key, written), now)

    def _pending(self, key: str, reason: str, message: str, view: _View, now: float) -> None:
        raw = self.cache["Workload"].get(key) or view.raw.get(key)
        if raw is None:
            return
        cur = _cond(raw, "QuotaReserved")
        if (raw.get("status") or {}).get("admission"):
            return
        if cur is not None and (cur.get("status"), cur.get("reason"), cur.get("message")) == \
                ("False", reason, message):
            return
        if not self._decide(AdmissionDecision(key, "pending", f"{reason}: {message}"),
                            f"dry-run: {key} stays pending: {reason}: {message}"):
            return

        def change(c: Obj) -> Obj | None:
            if (c.get("status") or {}).get("admission"):
                return None
            return {"conditions": _set_conditions(c, [
                {"type": "QuotaReserved", "status": "False", "reason": reason,
                 "message": message}], now)}

        if self._write_status(key, change) is not None:
            log.info("%s pending: %s: %s", key, reason, message)
            if self.recorder is not None:
                self.recorder.object_event(raw, "Normal", "Pending", message or reason)

    # API writes with optimistic concurrency.

    def _write_status(self, key: str, change: Callable[[Obj], Obj | None]) -> Obj | None:
        """Merge-patch ``change(current)`` into the Workload's status (see
        :meth:`_write_workload`)."""
        return self._write_workload(key, change, status=True)

    def _write_workload(self, key: str, change: Callable[[Obj], Obj | None], *,
                        status: bool) -> Obj | None:
        """Merge-patch ``change(current)`` into the Workload's status (``status``) or into
        the Workload, guarded by the resourceVersion it was computed from; a 409 re-reads and
        retries. None when there is nothing to write (``change`` returned None), the Workload
        is gone, or retries ran out."""
        res = self.kueue.by_kind["Workload"]
        target = res.Status if status else res  # type: ignore[attr-defined]
        what = "status" if status else "spec"
        cur = self.cache["Workload"].get(key)
        ns, name = key.split("/", 1)
        for _attempt in range(RETRIES):
            if cur is None:
                return None
            body = change(cur)
            if body is None:
                return None
            patch = {"apiVersion": self._api_version, **({"status": body} if status else body),
                     "metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}}
            try:
                obj: Any = self.client.patch(target, name, patch, namespace=ns,
                                             patch_type=PatchType.MERGE)
            except ApiError as err:
                if err.status.code == 409:
                    self.conflicts += 1
                    cur = self._reread(res, "Workload", ns, name)
                    continue
                if err.status.code != 404:
                    log.warning("writing Workload %s %s: %s", key, what, err.status.message)
                return None
            data: Obj = obj.to_dict()
            self._remember("Workload", _normalise("Workload", data, self.version))
            return data
        log.warning("writing Workload %s %s: still conflicting after %d attempts", key, what,
                    RETRIES)
        return None

    def _patch(self, res: type[Resource], obj: Obj, patch: Obj, key: str, action: str) -> bool:
        """Merge-patch a Job or pod, guarded by its resourceVersion; a 409 re-reads the
        object and reapplies the patch while the reason for it still holds."""
        kind = "Job" if res is Job else "Pod"
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        if self.dry_run:
            if self._log_once(action, key, f"dry-run: would {action} {kind} {ns}/{name}"):
                self.decisions.append(AdmissionDecision(key, action, f"{kind} {ns}/{name}"))
            return False
        self.decisions.append(AdmissionDecision(key, action, f"{kind} {ns}/{name}"))
        cur: Obj | None = obj
        for _attempt in range(RETRIES):
            if cur is None:
                return False
            body = {**patch, "metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}}
            try:
                new: Any = self.client.patch(res, name, body,  # type: ignore[type-var]
                                             namespace=ns, patch_type=PatchType.MERGE)
            except ApiError as err:
                if err.status.code == 409:
                    self.conflicts += 1
                    cur = self._reread(res, kind, ns, name)
                    continue
                if err.status.code != 404:
                    log.warning("%s %s %s/%s: %s", action, kind, ns, name, err.status.message)
                return False
            self._remember(kind, new.to_dict())
            return True
        return False

    def _reread(self, res: type[Resource], kind: str, ns: str, name: str) -> Obj | None:
        try:
            obj: Obj = self.client.get(res, name, namespace=ns).to_dict()  # type: ignore
        except ApiError as err:
            if err.status.code == 404:
                self.cache[kind].pop(f"{ns}/{name}", None)
            return None
        obj = _normalise(kind, obj, self.version)
        self._remember(kind, obj)
        return obj

    # Queue status and metrics.

    def _queue_status(self, objs: KueueObjects) -> None:
        """ClusterQueue and LocalQueue status as Kueue's queue controllers keep it, over the
        objects as admission read them (``objs``: AdmissionChecks' Active decided)."""
        if self.dry_run:
            return
        snap = Snapshot(objs)
        pending: dict[str, int] = {}
        lq_pending: dict[str, int] = {}
        reserving: dict[str, int] = {}
        lq_reserving: dict[str, int] = {}
        admitted: dict[str, int] = {}
        lq_admitted: dict[str, int] = {}
        usage: dict[str, dict[tuple[str, str], int]] = {}
        lq_usage: dict[str, dict[tuple[str, str], int]] = {}
        for wl in objs.workloads:
            lq = f"{wl.namespace}/{wl.queue_name}"
            if wl.admission is not None:
                cq = wl.admission.cluster_queue
                reserving[cq] = reserving.get(cq, 0) + 1
                lq_reserving[lq] = lq_reserving.get(lq, 0) + 1
                required = required_checks(objs.cluster_queues.get(cq), wl.admission)
                if not required or (is_admitted(wl.checks) and
                                    [c.name for c in wl.checks] == required):
                    admitted[cq] = admitted.get(cq, 0) + 1
                    lq_admitted[lq] = lq_admitted.get(lq, 0) + 1
                for fr, v in admitted_info(wl).usage.items():
                    usage.setdefault(cq, {})[fr] = usage.get(cq, {}).get(fr, 0) + v
                    lq_usage.setdefault(lq, {})[fr] = lq_usage.get(lq, {}).get(fr, 0) + v
            else:
                lqo = objs.local_queues.get(lq)
                if lqo is not None:
                    pending[lqo.cluster_queue] = pending.get(lqo.cluster_queue, 0) + 1
                    lq_pending[lq] = lq_pending.get(lq, 0) + 1
        for name, spec in sorted(objs.cluster_queues.items()):
            snap_cq = snap.cluster_queues.get(name)
            active = snap_cq is None or snap_cq.active
            flavors = []
            for rg in spec.resource_groups:
                for fq in rg.flavors:
                    flavors.append({"name": fq.name, "resources": [
                        {"name": r, "total": format_milli(r, usage.get(name, {}).get(
                            (fq.name, r), 0)),
                         "borrowed": format_milli(r, max(0, usage.get(name, {}).get(
                             (fq.name, r), 0) - q.nominal))}
                        for r, q in fq.resources.items()]})
            status = {"pendingWorkloads": pending.get(name, 0),
                      "reservingWorkloads": reserving.get(name, 0),
                      "admittedWorkloads": admitted.get(name, 0),
                      "flavorsReservation": flavors, "flavorsUsage": flavors,
                      "conditions": [{"type": "Active", "status": "True" if active else "False",
                                      "reason": "Ready" if active or snap_cq is None
                                      else snap_cq.inactive_cause,
                                      "message": "Can admit new workloads" if active else
                                      (snap_cq.inactive_reason if snap_cq else "")}]}
            self._queue_write("ClusterQueue", name, status)
        for key, lqo in sorted(objs.local_queues.items()):
            used = lq_usage.get(key, {})
            fl: dict[str, list[Obj]] = {}
            for (flavor, r), v in sorted(used.items()):
                fl.setdefault(flavor, []).append({"name": r, "total": format_milli(r, v)})
            flist = [{"name": f, "resources": rs} for f, rs in fl.items()]
            exists = lqo.cluster_queue in objs.cluster_queues
            status = {"pendingWorkloads": lq_pending.get(key, 0),
                      "reservingWorkloads": lq_reserving.get(key, 0),
                      "admittedWorkloads": lq_admitted.get(key, 0),
                      "flavorsReservation": flist, "flavorUsage": flist,
                      "conditions": [{"type": "Active", "status": "True" if exists else "False",
                                      "reason": "Ready" if exists else "ClusterQueueDoesNotExist",
                                      "message": "Can submit new workloads to localQueue"
                                      if exists else "Can't submit new workloads to "
                                      "clusterQueue"}]}
            self._queue_write("LocalQueue", key, status)

    def _queue_write(self, kind: str, key: str, status: Obj) -> None:
        cur = self.cache[kind].get(key)
        if cur is None:
            return
        old = copy.deepcopy(cur.get("status") or {})
        for c in old.get("conditions") or []:
            c.pop("lastTransitionTime", None)
        if old == status:
            return
        conds = _set_conditions(cur, status["conditions"], self.wall())
        res = self.kueue.by_kind[kind]
        ns, _, name = key.rpartition("/")
        patch = {"apiVersion": self._api_version, "status": {**status, "conditions": conds},
                 "metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}}
        try:
            obj = self.client.patch(res.Status, name, patch,  # type: ignore[attr-defined]
                                    namespace=ns or None, patch_type=PatchType.MERGE)
        except ApiError as err:
            if err.status.code == 409:
                self.conflicts += 1
                self._touch()  # the watch brings the newer object; the next round rewrites
            return
        self._remember(kind, obj.to_dict())

    def _metrics(self, state: AdmissionState) -> None:
        m = self.metrics
        pend: dict[tuple[str, str], int] = {}
        for name in state.objs.cluster_queues:
            pend[(name, "active")] = 0
            pend[(name, "inadmissible")] = 0
        for e, active in state.queues.pending():
            k = (e.cluster_queue, "active" if active else "inadmissible")
            pend[k] = pend.get(k, 0) + 1
        for (cq_name, st), n in pend.items():
            m.pending.labels(cluster_queue=cq_name, status=st).set(n)
        running: dict[str, int] = {name: 0 for name in state.objs.cluster_queues}
        used: dict[tuple[str, str, str], int] = {}
        for wl in state.admitted.values():
            info = admitted_info(wl)
            running[info.cluster_queue] = running.get(info.cluster_queue, 0) + 1
            for (flavor, res), v in info.usage.items():
                fr = (info.cluster_queue, flavor, res)
                used[fr] = used.get(fr, 0) + v
        for cq_name, n in running.items():
            m.admitted_active.labels(cluster_queue=cq_name).set(n)
        for name, cq in sorted(state.objs.cluster_queues.items()):
            active = name not in state.inactive
            for st in ("pending", "active", "terminated"):
                m.status.labels(cluster_queue=name, status=st).set(
                    1 if st == ("active" if active else "pending") else 0)
            cohort = cq.cohort
            for rg in cq.resource_groups:
                for fq in rg.flavors:
                    for res, q in fq.resources.items():
                        labels = {"cohort": cohort, "cluster_queue": name, "flavor": fq.name,
                                  "resource": res}
                        value = used.get((name, fq.name, res), 0) / 1000
                        m.usage.labels(**labels).set(value)
                        m.reservation.labels(**labels).set(value)
                        m.nominal.labels(**labels).set(q.nominal / 1000)


__all__ = ["AdmissionDecision", "AdmissionMetrics", "LiveAdmission", "served_version"]
