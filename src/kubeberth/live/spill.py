"""``kubeberth spill-controller``: the spill taint controller run against a Kubernetes API.

Every ``intervalSeconds`` it takes one reading of free in-cluster GPUs, feeds it to the same
pure policy the simulator ticks (:func:`kubeberth.spill.policy.step`: moving
average, threshold, stabilization) and applies a flip by patching the virtual-kubelet node's
``spec.taints`` (adding or removing ``vk.node.com/low-gpu-usage=true:NoSchedule``).

The reading comes either from Prometheus (the production PromQL of
:mod:`kubeberth.spill.promql`, one instant query per tick) or from the API itself:
informer caches of nodes and pods, turned into a ClusterState holding only Running pods, read
by the simulator's :class:`ClusterSignal` (the quantity the PromQL defines). A fault — Prometheus
unreachable, an error answer, an empty vector, a stale sample, the API's watch down — holds the
taint as it is, breaks the streak, is counted and shows in the staleness gauges; ``/readyz``
stays up, since holding is the intended behaviour.

State comes from the API alone: whether the taint is on is read from the node every tick, so a
restarted controller (or a new leader) carries on from what the cluster says, and a taint
someone else added or removed is taken as the current state. The patch is a JSON patch that
tests the node's ``resourceVersion`` first, so a concurrent change is a conflict, re-read and
retried, never overwritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.core.resource import Resource
from lightkube.resources.core_v1 import Node as KNode
from lightkube.resources.core_v1 import Pod as KPod
from lightkube.types import PatchType
from prometheus_client import Counter, Gauge

from kubeberth.api.errors import InputError
from kubeberth.live.cache import Store, decode
from kubeberth.live.controller import INVALID_OBJECT, Controller
from kubeberth.live.events import EventRecorder
from kubeberth.live.leader import LeaderElector
from kubeberth.live.metrics import ControllerMetrics
from kubeberth.live.prometheus import PrometheusSignal
from kubeberth.spill.config import SpillConfig
from kubeberth.spill.policy import ADD, ControllerState, StepResult, step
from kubeberth.spill.promql import configured_query
from kubeberth.spill.signal import ClusterSignal, Reading
from kubeberth.spill.vk import LOW_GPU_TAINT
from kubeberth.state.cluster import ClusterState, make_pod_info

log = logging.getLogger("kubeberth.spill")

API_RESOURCES: dict[str, type[Resource]] = {"Node": KNode, "Pod": KPod}
PATCH_ATTEMPTS = 3


class SpillMetrics(ControllerMetrics):
    """The simulator's controller series plus the live path's fault and staleness gauges."""

    def __init__(self, threshold: float) -> None:
        super().__init__()
        r = self.registry
        self.flips = Counter("kubeberth_spill_taint_flips", "Taint changes on the VK node.",
                             ["direction"], registry=r)
        self.seconds = Counter("kubeberth_spill_state_seconds", "Seconds spent with the "
                               "low-gpu-usage taint on or off.", ["state"], registry=r)
        self.faults = Counter("kubeberth_spill_signal_faults", "Controller ticks whose signal "
                              "was missing or stale.", registry=r)
        self.patch_errors = Counter("kubeberth_spill_taint_update_errors", "Failed attempts to "
                                    "patch the VK node's taints.", registry=r)
        self.free = Gauge("kubeberth_spill_free_gpus", "Last free in-cluster GPU reading.",
                          registry=r)
        self.average = Gauge("kubeberth_spill_free_gpus_average", "Moving average of the "
                             "free-GPU signal.", registry=r)
        self.threshold = Gauge("kubeberth_spill_threshold", "The controller's threshold.",
                               registry=r)
        self.taint = Gauge("kubeberth_spill_taint", "1 while the low-gpu-usage taint is on.",
                           registry=r)
        self.stale = Gauge("kubeberth_spill_signal_stale", "1 while the last reading was a "
                           "fault (the taint is held).", registry=r)
        self.age = Gauge("kubeberth_spill_signal_age_seconds", "Seconds since the last good "
                         "reading (since start when there was none).", registry=r)
        self.threshold.set(threshold)


@dataclass(slots=True, frozen=True)
class Tick:
    """One controller tick, for logs and tests."""

    at: float  # wall time
    value: float | None
    average: float | None
    tainted: bool  # after the tick
    flip: str | None
    fault: str = ""


class ApiSignal:
    """Free in-cluster GPUs computed from informer caches as the production query defines it:
    only Running pods count (a bound pod still starting does not), read by ClusterSignal."""

    def __init__(self, cache: Store, broken: Callable[[], list[str]], cfg: SpillConfig,
                 refuse: Callable[[str, str, Any, Exception, str], None]) -> None:
        self.cache = cache
        self.broken = broken
        self.refuse = refuse
        self.signal = ClusterSignal.for_config(cfg)

    def read(self, now: float) -> Reading:
        broken = self.broken()
        if broken:
            return Reading(None, now, "signal from the API is stale: the watch of "
                           + ", ".join(broken) + " is down")
        objects = self.cache.snapshot()
        state = ClusterState()
        for node in objects["Node"]:
            try:
                state.add_node(node)
            except InputError as err:  # checked before anything is added
                self.refuse("Node", node.metadata.name, node, err, INVALID_OBJECT)
        for pod in objects["Pod"]:
            node_name = pod.spec.node_name
            if pod.status.phase != "Running" or node_name not in state.node_index \
                    or not state.present[state.node_index[node_name]]:
                continue
            if pod.spec.priority is None:
                # The signal ignores priority; a class the cache does not know must not stop it.
                pod = msgspec.structs.replace(
                    pod, spec=msgspec.structs.replace(pod.spec, priority=0))
            try:
                info = make_pod_info(pod)
            except InputError as err:
                self.refuse("Pod", pod.key, pod, err, INVALID_OBJECT)
                continue
            state.add_pod(info, state.node_index[node_name])
        return self.signal.read(state, now)


class LiveSpillController(Controller[SpillMetrics]):
    """Reads the signal every interval, steps the policy, patches the VK node's taints."""

    name = "spill-controller"
    component = "kubeberth-spill-controller"
    max_wait = 0.5

    def __init__(self, cfg: SpillConfig, client: Client, *, prometheus: str | None = None,
                 dry_run: bool = False, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, watch_timeout: int = 300,
                 elector: LeaderElector | None = None) -> None:
        sig = cfg.controller.signal
        url = prometheus or (sig.url if sig.source == "prometheus" else "")
        # Its only Events are the Warnings on the nodes and pods its informers cannot read:
        # none with the Prometheus signal (no informers) or in a dry run (no writes).
        super().__init__(client, SpillMetrics(cfg.controller.threshold), clock=clock,
                         elector=elector, watch_timeout=watch_timeout,
                         recorder=EventRecorder(client) if not (dry_run or url) else None)
        self.cfg = cfg
        self.args = cfg.controller
        self.node_name = cfg.virtual_node.name
        self.dry_run = dry_run
        self.wall = wall
        self.ticks: list[Tick] = []
        self.flips: list[tuple[float, str]] = []
        self.cache = Store(API_RESOURCES)
        self.prometheus: PrometheusSignal | None = None
        if url:
            self.prometheus = PrometheusSignal(url, configured_query(cfg), sig.timeout_seconds)
        else:
            for kind, res in API_RESOURCES.items():
                self.watch(kind, res, decode=decode)
            self.api_signal = ApiSignal(self.cache, self.broken, cfg, self.refuse)
        self.state = ControllerState()
        self._next_tick: float | None = None
        self._last_good: float | None = None
        self._last_tick: float | None = None
        self._began = wall()

    @property
    def source(self) -> str:
        return f"prometheus {self.prometheus.endpoint}" if self.prometheus else "the API"

    # ---- lifecycle -------------------------------------------------------------------------
    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        self.cache.apply(kind, type_, data)

    def on_synced(self) -> None:
        log.info("signal from %s; VK node %s", self.source, self.node_name)

    def standby(self) -> None:
        # A new leader starts its streaks afresh from the API's taint state.
        self.state = ControllerState()
        self._next_tick = None

    def wait_time(self) -> float:
        if self._next_tick is None:
            return 0.0
        return min(self.max_wait, max(0.0, self._next_tick - self.clock()))

    def work(self) -> bool:
        now = self.clock()
        if self._next_tick is None or now >= self._next_tick:
            self.tick()
            interval = self.args.interval_seconds
            self._next_tick = (now if self._next_tick is None else self._next_tick) + interval
            if self._next_tick < now:  # a slow tick: do not try to catch up
                self._next_tick = now + interval
        return False

    # ---- one tick --------------------------------------------------------------------------
    def read(self, now: float) -> Reading:
        if self.prometheus is not None:
            return self.prometheus.read(ClusterState(), now)
        return self.api_signal.read(now)

    def tick(self) -> Tick:
        now = self.wall()
        observed = self._observed_taint()
        # The API is the truth; a dry run writes nothing, so after its first read it follows
        # its own (unwritten) decisions.
        if observed is not None and observed != self.state.tainted \
                and not (self.dry_run and self.ticks):
            if self.ticks:
                log.info("the low-gpu-usage taint is %s on %s: changed outside the "
                         "controller", "on" if observed else "off", self.node_name)
            self.state = replace(self.state, tainted=observed)
        reading = self.read(now)
        if observed is None:
            # The VK node is missing or unreadable: nothing to flip, and nothing trusted.
            reading = Reading(None, now, reading.fault or
                              f"cannot read the taints of node {self.node_name}")
        decision = step(self.args, self.state, reading, now)
        tainted_before = self.state.tainted
        self.state = decision.state
        if decision.flip is not None and not self._apply(decision):
            # Not written: keep believing the API (the streak stays, so the next tick retries).
            self.state = replace(decision.state, tainted=tainted_before)
        self._account(now, reading, decision)
        tick = Tick(now, reading.value if not decision.fault else None, decision.average,
                    self.state.tainted, decision.flip if self.state.tainted != tainted_before
                    else None, decision.fault)
        self.ticks.append(tick)
        return tick

    def _observed_taint(self) -> bool | None:
        """Whether the VK node carries the taint now (read from the API), None if unreadable."""
        try:
            node = self.client.get(KNode, self.node_name)
        except ApiError as err:
            log.warning("reading node %s: %s", self.node_name, err.status.message)
            return None
        except httpx.HTTPError as err:
            log.warning("reading node %s: %s", self.node_name, err)
            return None
        taints = (node.spec.taints if node.spec else None) or []
        return any(t.key == LOW_GPU_TAINT.key and t.effect == LOW_GPU_TAINT.effect
                   for t in taints)

    def _apply(self, decision: StepResult) -> bool:
        """Write the flip (a JSON patch guarded by the node's resourceVersion); True when the
        node now says what the decision wants."""
        want = decision.flip == ADD
        verb = "add" if want else "remove"
        taint = f"{LOW_GPU_TAINT.key}={LOW_GPU_TAINT.value}:{LOW_GPU_TAINT.effect}"
        if self.dry_run:
            log.info("dry-run: would %s %s on %s (average %.3g, threshold %g)", verb, taint,
                     self.node_name, decision.average or 0.0, self.args.threshold)
            return True
        for _ in range(PATCH_ATTEMPTS):
            try:
                node = self.client.get(KNode, self.node_name)
                current = [t.to_dict() for t in ((node.spec.taints if node.spec else None)
                                                 or [])]
                kept = [t for t in current if not (t.get("key") == LOW_GPU_TAINT.key
                                                   and t.get("effect") == LOW_GPU_TAINT.effect)]
                if want:
                    kept.append({"key": LOW_GPU_TAINT.key, "value": LOW_GPU_TAINT.value,
                                 "effect": LOW_GPU_TAINT.effect})
                rv = node.metadata.resourceVersion if node.metadata else None
                ops: list[dict[str, Any]] = [
                    {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                    {"op": "add", "path": "/spec/taints", "value": kept}]
                self.client.patch(KNode, self.node_name, ops, patch_type=PatchType.JSON)
            except ApiError as err:
                self.metrics.patch_errors.inc()
                if err.status.code in (409, 422):
                    continue  # changed under us: read again
                log.warning("patching node %s: %s", self.node_name, err.status.message)
                return False
            except httpx.HTTPError as err:
                self.metrics.patch_errors.inc()
                log.warning("patching node %s: %s", self.node_name, err)
                return False
            log.info("%s %s on %s (average %.3g, threshold %g, stable for %gs)",
                     "added" if want else "removed", taint, self.node_name,
                     decision.average or 0.0, self.args.threshold,
                     self.args.stabilization_seconds)
            return True
        log.warning("patching node %s: the node kept changing; retrying next tick",
                    self.node_name)
        return False

    def _account(self, now: float, reading: Reading, decision: StepResult) -> None:
        m = self.metrics
        if self._last_tick is not None:
            m.seconds.labels(state="tainted" if self.state.tainted else "untainted").inc(
                max(0.0, now - self._last_tick))
        self._last_tick = now
        if decision.fault:
            m.faults.inc()
            m.stale.set(1)
            log.warning("signal fault, holding the taint %s: %s",
                        "on" if self.state.tainted else "off", decision.fault)
        else:
            m.stale.set(0)
            self._last_good = now
            if reading.value is not None:
                m.free.set(reading.value)
        m.age.set(now - (self._last_good if self._last_good is not None else self._began))
        if decision.average is not None:
            m.average.set(decision.average)
        m.taint.set(1 if self.state.tainted else 0)
        if decision.flip is not None and self.state.tainted == (decision.flip == ADD):
            m.flips.labels(direction=decision.flip).inc()
            self.flips.append((now, decision.flip))
