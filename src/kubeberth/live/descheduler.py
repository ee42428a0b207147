"""``kubeberth descheduler``: the DeschedulerPolicy run as a controller on a Kubernetes API.

Every ``--descheduling-interval`` the controller copies its informer caches (nodes, pods,
namespaces, PodDisruptionBudgets, priority classes and the pods' owners: Deployments,
ReplicaSets, Jobs) at one instant, builds the same :class:`Snapshot` ``kubeberth deschedule``
builds from manifest files, and runs one pass of the same policy code
(:mod:`kubeberth.descheduling.registry`) against the wall clock. It then applies the pass's
evictions in order through the ``pods/<name>/eviction`` subresource (policy/v1 ``Eviction``),
as upstream's pod evictor does: the API checks the pod's PodDisruptionBudget once more, and a
429 (the budget changed since the snapshot) skips that pod and is counted; nothing is retried
within the pass, the next pass judges afresh. Each eviction posts upstream's ``Normal`` Event on
the pod. ``--dry-run`` computes and logs the same evictions and writes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.core.resource import Resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace as KNamespace
from lightkube.resources.core_v1 import Node as KNode
from lightkube.resources.core_v1 import Pod as KPod
from lightkube.resources.policy_v1 import PodDisruptionBudget as KPodDisruptionBudget
from lightkube.resources.scheduling_v1 import PriorityClass as KPriorityClass
from prometheus_client import Counter, Histogram
from prometheus_client.core import Metric

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod, PriorityClass
from kubeberth.config.manifests import Manifests
from kubeberth.descheduling.framework import Eviction, PassResult, Snapshot, make_pod_view
from kubeberth.descheduling.policy import DeschedulerPolicy
from kubeberth.descheduling.registry import DeschedulerRegistry, build_descheduler
from kubeberth.live.cache import TYPED_KINDS, Store, decode, document
from kubeberth.live.controller import INVALID_OBJECT, Controller
from kubeberth.live.events import EventRecorder
from kubeberth.live.leader import LeaderElector
from kubeberth.live.metrics import ControllerMetrics

log = logging.getLogger("kubeberth.descheduler")

# What the descheduler reads, by kind.
DESCHEDULER_RESOURCES: dict[str, type[Resource]] = {
    "Node": KNode,
    "Pod": KPod,
    "Namespace": KNamespace,
    "PriorityClass": KPriorityClass,
    "PodDisruptionBudget": KPodDisruptionBudget,
    "Deployment": Deployment,
    "ReplicaSet": ReplicaSet,
    "Job": Job,
}
OWNER_KINDS = ("Deployment", "ReplicaSet", "Job")
# Upstream's event recorder reports as this component.
COMPONENT = "sigs.k8s.io.descheduler"
# Upstream's loop-duration buckets.
_LOOP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500)


class EvictedPods:
    """Upstream's eviction counter under both its names: ``descheduler_pods_evicted`` (what
    component-base exports, no suffix; deprecated in 0.34) and ``descheduler_pods_evicted_total``
    (its successor), one sample of each per label set, in one counter family. prometheus_client's
    Counter would only produce the suffixed name."""

    LABELS = ("result", "strategy", "profile", "namespace", "node")
    HELP = ("Number of total evicted pods, by the result, by the strategy, by the namespace, "
            "by the node name. 'error' result means a pod could not be evicted")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, ...], int] = {}

    def inc(self, **labels: str) -> None:
        key = tuple(labels[k] for k in self.LABELS)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def describe(self) -> list[Metric]:
        return [Metric("descheduler_pods_evicted", self.HELP, "counter")]

    def collect(self) -> list[Metric]:
        metric = Metric("descheduler_pods_evicted", self.HELP, "counter")
        with self._lock:
            counts = sorted(self.counts.items())
        for key, value in counts:
            labels = dict(zip(self.LABELS, key, strict=True))
            metric.add_sample("descheduler_pods_evicted", labels, float(value))
            metric.add_sample("descheduler_pods_evicted_total", labels, float(value))
        return [metric]


class DeschedulerMetrics(ControllerMetrics):
    """Upstream's series, in a registry private to the controller."""

    def __init__(self) -> None:
        super().__init__()
        self.evicted = EvictedPods()
        self.registry.register(self.evicted)
        help_ = "Time taken to complete a full descheduling cycle"
        self.loop = Histogram("descheduler_loop_duration_seconds", help_,
                              buckets=_LOOP_BUCKETS, registry=self.registry)
        self.loop_legacy = Histogram("descheduler_descheduler_loop_duration_seconds", help_,
                                     buckets=_LOOP_BUCKETS, registry=self.registry)
        self.skipped = Counter("kubeberth_descheduler_pods_skipped", "Pods a plugin chose that "
                               "the evictor, a limit or a PodDisruptionBudget refused in the "
                               "pass, by the strategy.", ["strategy", "profile"],
                               registry=self.registry)
        self.passes = Counter("kubeberth_descheduler_passes", "Descheduling passes, by outcome "
                              "(run, skipped: fewer than two ready nodes).", ["outcome"],
                              registry=self.registry)


@dataclass(slots=True, frozen=True)
class Outcome:
    """What became of one eviction the pass asked for."""

    pod: str
    node: str
    plugin: str
    result: str  # "evicted", "dry-run", "pdb" (429), "gone" (404), "error"
    detail: str = ""


def snapshot_of(objects: dict[str, list[Any]], now: float) -> Snapshot:
    """The cached objects (typed, and the owners as dicts) as the Snapshot ``kubeberth
    deschedule`` builds from files."""
    m = Manifests(nodes=objects.get("Node", []), pods=objects.get("Pod", []),
                  priority_classes=objects.get("PriorityClass", []),
                  namespaces=objects.get("Namespace", []),
                  pdbs=objects.get("PodDisruptionBudget", []))
    m.other = [document(obj) for kind in OWNER_KINDS for obj in objects.get(kind, [])]
    return Snapshot.from_manifests(m, now)


class LiveDescheduler(Controller[DeschedulerMetrics]):
    """Informer caches, one pass per interval, evictions through the API."""

    name = "descheduler"
    component = COMPONENT
    max_wait = 0.5  # the loop wakes at least this often to check stop and leadership

    def __init__(self, policy: DeschedulerPolicy, client: Client, *, interval: float = 300.0,
                 once: bool = False, dry_run: bool = False,
                 registry: DeschedulerRegistry | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 metrics: DeschedulerMetrics | None = None, watch_timeout: int = 300,
                 elector: LeaderElector | None = None, events: bool = True) -> None:
        self.descheduler = build_descheduler(policy, registry)  # validated before anything runs
        super().__init__(client, metrics or DeschedulerMetrics(), clock=clock, elector=elector,
                         recorder=EventRecorder(client) if events and not dry_run else None,
                         watch_timeout=watch_timeout)
        self.interval = interval
        self.once = once
        self.dry_run = dry_run
        self.wall = wall
        self.cache = Store(DESCHEDULER_RESOURCES)
        for kind, res in DESCHEDULER_RESOURCES.items():
            self.watch(kind, res, decode=decode if kind in TYPED_KINDS else None)
        self.outcomes: list[Outcome] = []
        # Pods this controller evicted (key -> uid) that the cache may still show until the
        # watch reports the deletion: later passes leave them out, so none is evicted twice.
        self._evicted: dict[str, str] = {}
        self.passes = 0
        self._next_pass: float | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        self.cache.apply(kind, type_, data)

    def standby(self) -> None:
        self._next_pass = None  # a new leader passes at once

    def wait_time(self) -> float:
        if self._next_pass is None:
            return 0.0
        return min(self.max_wait, max(0.0, self._next_pass - self.clock()))

    def work(self) -> bool:
        """A pass when one is due; with ``once`` (or a zero interval, as upstream) the first
        pass is the last."""
        now = self.clock()
        if self._next_pass is None or now >= self._next_pass:
            self.run_once()
            if self.once or self.interval <= 0:
                return True
            self._next_pass = now + self.interval
        return False

    # ---- one pass --------------------------------------------------------------------------
    def plan(self) -> PassResult:
        """One pass of the policy over the caches as they are now (writes nothing)."""
        objects = self.cache.snapshot()
        uids = {p.key: p.metadata.uid for p in objects["Pod"]}
        self._evicted = {k: u for k, u in self._evicted.items() if uids.get(k) == u}
        now = self.wall()
        classes = {pc.metadata.name: pc for pc in objects["PriorityClass"]}
        objects["Pod"] = [p for p in objects["Pod"]
                          if p.key not in self._evicted and self._judgeable(p, classes, now)]
        return self.descheduler.run_pass(snapshot_of(objects, now))

    def _judgeable(self, pod: Pod, classes: dict[str, PriorityClass], now: float) -> bool:
        """Whether the policy can read ``pod`` (its PriorityClass exists, its times parse); a
        pod it cannot is refused and left out of the pass, never abandoning the pass."""
        try:
            make_pod_view(pod, now, classes)
        except InputError as err:
            self.refuse("Pod", pod.key, pod, err, INVALID_OBJECT)
            return False
        return True

    def run_once(self) -> list[Outcome]:
        started = time.perf_counter()
        try:
            result = self.plan()
        except InputError as err:
            # An object the policy cannot judge (a pod naming a missing PriorityClass): the
            # pass is abandoned, not half applied; the next one tries again.
            log.error("descheduling pass abandoned: %s", err)
            self.metrics.passes.labels(outcome="error").inc()
            return []
        self.passes += 1
        if result.cycle_skipped:
            log.info("descheduling cycle skipped: %s", result.cycle_skipped)
            self.metrics.passes.labels(outcome="skipped").inc()
        else:
            self.metrics.passes.labels(outcome="run").inc()
        for d in result.skipped:
            self.metrics.skipped.labels(strategy=d.plugin, profile=d.profile).inc()
            log.info("not evicting %s from %s (%s): %s", d.pod, d.node, d.plugin, d.reason)
        outcomes = self.apply(result.evictions)
        elapsed = time.perf_counter() - started
        self.metrics.loop.observe(elapsed)
        self.metrics.loop_legacy.observe(elapsed)
        log.info("descheduling pass: %d evicted, %d refused by the API, %d skipped by the "
                 "policy", sum(o.result in ("evicted", "dry-run") for o in outcomes),
                 sum(o.result not in ("evicted", "dry-run") for o in outcomes),
                 len(result.skipped))
        return outcomes

    def apply(self, evictions: list[Eviction]) -> list[Outcome]:
        """Evict in the pass's order; each pod once, none retried."""
        done = []
        for d in evictions:
            if self.stop.is_set():
                break
            outcome = self._evict(d)
            done.append(outcome)
            self.outcomes.append(outcome)
            ns, _, _ = d.pod.partition("/")
            ok = outcome.result in ("evicted", "dry-run")
            self.metrics.evicted.inc(result="success" if ok else "error", strategy=d.plugin,
                                     profile=d.profile, namespace=ns, node=d.node)
        return done

    def _evict(self, d: Eviction) -> Outcome:
        ns, _, name = d.pod.partition("/")
        if self.dry_run:
            log.info("dry-run: would evict %s from %s (%s: %s)", d.pod, d.node, d.plugin,
                     d.reason)
            return Outcome(d.pod, d.node, d.plugin, "dry-run")
        eviction = KPod.Eviction(metadata=ObjectMeta(name=name, namespace=ns))
        try:
            # The API answers a Success Status, which lightkube 1.0.1 fails to decode as an
            # Eviction after the pod was evicted: that one error means success.
            with contextlib.suppress(msgspec.ValidationError):
                self.client.create(eviction, name=name, namespace=ns)
        except ApiError as err:
            code = err.status.code
            result = {429: "pdb", 404: "gone"}.get(code or 0, "error")
            message = err.status.message or ""
            causes = (err.status.details.causes if err.status.details else None) or []
            detail = "; ".join([message, *(c.message or "" for c in causes)]).strip("; ")
            log.warning("eviction of %s from %s refused (%s): %s", d.pod, d.node, code, detail)
            return Outcome(d.pod, d.node, d.plugin, result, detail)
        except httpx.HTTPError as err:
            log.warning("eviction of %s from %s failed: %s", d.pod, d.node, err)
            return Outcome(d.pod, d.node, d.plugin, "error", str(err))
        log.info("evicted %s from %s (%s: %s)", d.pod, d.node, d.plugin, d.reason)
        pod = self.cache.get("Pod", d.pod)
        uid = pod.metadata.uid if pod is not None else ""
        self._evicted[d.pod] = uid
        if self.recorder is not None:
            # Upstream: type Normal, reason = the strategy, "pod evicted from <node> node by
            # sigs.k8s.io/descheduler".
            self.recorder.pod_event(COMPONENT, ns, name, uid, "Normal", d.plugin,
                                    f"pod evicted from {d.node} node by "
                                    "sigs.k8s.io/descheduler")
        return Outcome(d.pod, d.node, d.plugin, "evicted")
