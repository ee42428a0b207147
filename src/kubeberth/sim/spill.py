"""The spill node and its taint controller inside a simulation run, with their accounting.

``SpillHost`` adds the virtual-kubelet node to the simulated cluster, ticks the taint
controller every ``intervalSeconds`` (reading the signal, calling the pure
``plugins.spill.controller.step`` and applying a flip through the simulator's node-update
path, which the scheduling queue reacts to), plays the node's outage windows (NotReady and
tainted unreachable; pods still there after ``lostAfterSeconds`` are deleted, as the taint
manager deletes pods that do not tolerate ``node.kubernetes.io/unreachable:NoExecute``) and
meters what runs there: GPU-hours from bind to the pod's end (the model download is billed)
and their cost. It also keeps the controller's metrics, both as rows for the run's outputs and
in a per-run prometheus_client registry for exposition.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from kubeberth.api.resources import GPU, GPU_MILLI
from kubeberth.sim.engine import PodListener
from kubeberth.spill.config import SpillConfig, validate
from kubeberth.spill.policy import ADD, ControllerState, step
from kubeberth.spill.signal import ClusterSignal, SignalSource
from kubeberth.spill.vk import (
    LOW_GPU_TAINT,
    UNREACHABLE_TAINT,
    virtual_node,
    with_ready,
    with_taint,
    without_taint,
)
from kubeberth.state.cluster import PodInfo

if TYPE_CHECKING:
    from kubeberth.sim.engine import SimResult, Simulation

SPILL_COLUMNS = ("time", "free_gpus", "free_gpus_avg", "threshold", "tainted", "fault",
                 "vk_pods", "vk_gpus", "spill_gpu_hours", "spill_cost")


def pod_gpus(pi: PodInfo) -> float:
    """GPUs a pod holds: whole GPUs, else its share of one."""
    whole = pi.requests.get(GPU, 0)
    if whole:
        return whole / 1000.0
    return pi.requests.get(GPU_MILLI, 0) / 1000.0 / 1000.0


def cluster_signal(cfg: SpillConfig) -> SignalSource:
    """The signal computed from the simulated cluster. A ``prometheus`` source is an HTTP client,
    which the simulator never makes: its caller passes one (``kubeberth.live.prometheus``)."""
    c = cfg.controller
    if c.signal.source == "prometheus":
        raise ValueError("a spill config with a prometheus signal needs its source passed in")
    return ClusterSignal.for_config(cfg)


class SpillHost(PodListener):
    """One VK node and its controller in one run."""

    def __init__(self, cfg: SpillConfig, source: SignalSource | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.virtual_node.name
        self.source = source if source is not None else cluster_signal(cfg)
        self.state = ControllerState()
        self.rows: list[tuple[Any, ...]] = []
        self.flips: list[tuple[float, str]] = []
        self.faults: Tally[str] = Tally()
        self.fault_ticks = 0
        self.lost_in_outages = 0
        self._running: dict[str, tuple[float, float]] = {}  # pod -> (since, gpus)
        self._gpu_seconds = 0.0
        self._pods_ever: set[str] = set()
        self._in_outage = False
        self._last_tick: float | None = None
        self._seconds = {"tainted": 0.0, "untainted": 0.0}
        self._sim: Simulation | None = None
        self.registry = CollectorRegistry()
        self._m_flips = Counter("kubeberth_spill_taint_flips", "Taint changes on the VK node.",
                                ["direction"], registry=self.registry)
        self._m_seconds = Counter("kubeberth_spill_state_seconds",
                                  "Seconds spent with the low-gpu-usage taint on or off.",
                                  ["state"], registry=self.registry)
        self._m_faults = Counter("kubeberth_spill_signal_faults",
                                 "Controller ticks whose signal was missing or stale.",
                                 registry=self.registry)
        self._m_free = Gauge("kubeberth_spill_free_gpus", "Last free in-cluster GPU reading.",
                             registry=self.registry)
        self._m_avg = Gauge("kubeberth_spill_free_gpus_average",
                            "Moving average of the free-GPU signal.", registry=self.registry)
        self._m_threshold = Gauge("kubeberth_spill_threshold", "The controller's threshold.",
                                  registry=self.registry)
        self._m_taint = Gauge("kubeberth_spill_taint", "1 while the low-gpu-usage taint is on.",
                              registry=self.registry)
        self._m_vk_pods = Gauge("kubeberth_spill_pods_on_virtual_node", "Pods on the VK node.",
                                registry=self.registry)
        self._m_gpu_hours = Counter("kubeberth_spill_gpu_hours", "GPU-hours used on the VK node.",
                                    registry=self.registry)
        self._m_threshold.set(cfg.controller.threshold)

    # ---- wiring ------------------------------------------------------------------------------
    def attach(self, sim: Simulation) -> None:
        self._sim = sim
        vn = self.cfg.virtual_node
        sim.add_node(virtual_node(vn))
        sim.metrics.exclude_nodes.append(sim.snapshot.node_index[self.name])
        sim.start_latency[self.name] = vn.start_latency_seconds
        sim.listeners.append(self)
        sim.every(self.cfg.controller.interval_seconds, self.tick)
        for outage in vn.outages:
            start, end = outage.start_seconds, outage.start_seconds + outage.duration_seconds
            sim.call_at(start, self._outage_start)
            if vn.lost_after_seconds < outage.duration_seconds:
                sim.call_at(start + vn.lost_after_seconds, self._outage_lose_pods)
            sim.call_at(end, self._outage_end)
        sim.extras["spill"] = self

    def _node_update(self, change: str) -> None:
        sim = self._sim
        assert sim is not None
        node = sim.snapshot.nodes[sim.snapshot.node_index[self.name]]
        if change == "taint":
            node = with_taint(node, LOW_GPU_TAINT)
        elif change == "untaint":
            node = without_taint(node, LOW_GPU_TAINT)
        elif change == "down":
            node = with_ready(with_taint(node, UNREACHABLE_TAINT), False)
        else:
            node = with_ready(without_taint(node, UNREACHABLE_TAINT), True)
        sim.update_node(node)

    def _outage_start(self) -> None:
        self._in_outage = True
        self._node_update("down")

    def _outage_lose_pods(self) -> None:
        if self._in_outage and self._sim is not None:
            self.lost_in_outages += len(self._sim.delete_pods_on(self.name))

    def _outage_end(self) -> None:
        self._in_outage = False
        self._node_update("up")

    # ---- the controller tick -------------------------------------------------------------
    def tick(self) -> bool:
        sim = self._sim
        assert sim is not None
        now = sim.now
        self._account_state(now)
        c = self.cfg.controller
        reading = self.source.read(sim.snapshot, now)
        decision = step(c, self.state, reading, now)
        self.state = decision.state
        if decision.fault:
            self.fault_ticks += 1
            self.faults[decision.fault] += 1
            self._m_faults.inc()
        elif reading.value is not None:
            self._m_free.set(reading.value)
        if decision.average is not None:
            self._m_avg.set(decision.average)
        if decision.flip is not None:
            self.flips.append((now, decision.flip))
            self._m_flips.labels(direction=decision.flip).inc()
            self._node_update("taint" if decision.flip == ADD else "untaint")
        self._m_taint.set(1 if self.state.tainted else 0)
        self._m_vk_pods.set(len(self._running))
        self.rows.append((
            now, "" if decision.fault or reading.value is None else round(reading.value, 6),
            "" if decision.average is None else round(decision.average, 6), c.threshold,
            int(self.state.tainted), decision.fault, len(self._running),
            round(sum(g for _, g in self._running.values()), 6),
            round(self.gpu_hours(now), 6), round(self.cost(now), 6)))
        return self._busy()

    def _busy(self) -> bool:
        """Whether the controller may still act without outside events: a streak is running
        towards a flip (it ends within ``stabilizationSeconds``: flipped or broken). Waiting
        for a Descheduler's minPodAge is not counted, since nothing bounds it; give ``until``."""
        st = self.state
        if not st.tainted and st.above_since is not None:
            return True
        return st.tainted and st.below_since is not None

    def _account_state(self, now: float) -> None:
        if self._last_tick is not None:
            label = "tainted" if self.state.tainted else "untainted"
            self._seconds[label] += now - self._last_tick
            self._m_seconds.labels(state=label).inc(now - self._last_tick)
        self._last_tick = now

    # ---- metering ----------------------------------------------------------------------------
    def pod_started(self, pi: PodInfo, node: str, now: float) -> None:
        if node == self.name:
            self._running[pi.key] = (now, pod_gpus(pi))
            self._pods_ever.add(pi.key)

    def pod_stopped(self, pi: PodInfo, node: str, now: float) -> None:
        if node == self.name and pi.key in self._running:
            since, gpus = self._running.pop(pi.key)
            self._gpu_seconds += gpus * (now - since)
            self._m_gpu_hours.inc(gpus * (now - since) / 3600.0)

    def gpu_hours(self, now: float) -> float:
        open_seconds = sum(g * (now - t) for t, g in self._running.values())
        return (self._gpu_seconds + open_seconds) / 3600.0

    def cost(self, now: float) -> float:
        return self.gpu_hours(now) * self.cfg.virtual_node.price_per_gpu_hour

    # ---- outputs -----------------------------------------------------------------------------
    def summary(self, end: float) -> dict[str, Any]:
        """The ``spill`` section of summary.json (see docs/spill.md)."""
        self._account_state(end)
        c = self.cfg.controller
        return {
            "virtualNode": self.name,
            "podsSpilled": len(self._pods_ever),
            "podsOnVirtualNodeAtEnd": len(self._running),
            "podsLostInOutages": self.lost_in_outages,
            "gpuHours": round(self.gpu_hours(end), 6),
            "cost": round(self.cost(end), 6),
            "pricePerGpuHour": self.cfg.virtual_node.price_per_gpu_hour,
            "taintFlips": len(self.flips),
            "flips": [{"time": t, "taint": "added" if d == ADD else "removed"}
                      for t, d in self.flips],
            "secondsTainted": round(self._seconds["tainted"], 6),
            "secondsUntainted": round(self._seconds["untainted"], 6),
            "taintedAtEnd": self.state.tainted,
            "faultTicks": self.fault_ticks,
            "faults": dict(sorted(self.faults.items())),
            "controller": {"intervalSeconds": c.interval_seconds, "threshold": c.threshold,
                           "windowSeconds": c.window_seconds,
                           "stabilizationSeconds": c.stabilization_seconds,
                           "signal": c.signal.source},
        }

    def exposition(self) -> bytes:
        """The controller's metrics in the Prometheus text format, without the ``_created``
        series: they carry the wall-clock time the counter was made, which a replay on a virtual
        clock must not write (the same inputs give the same bytes)."""
        lines = generate_latest(self.registry).decode().splitlines(keepends=True)
        return "".join(line for line in lines if not _is_created(line)).encode()


def _is_created(line: str) -> bool:
    words = line.split(None, 3)
    name = words[2] if line.startswith("#") and len(words) > 2 else line.split("{", 1)[0]
    return name.split(" ", 1)[0].endswith("_created")


def sweep_grid(cfg: SpillConfig, thresholds: Sequence[float], windows: Sequence[float],
               stabilizations: Sequence[float]) -> list[SpillConfig]:
    """Every combination of the given knob values (in that nesting order), the rest of
    ``cfg`` unchanged; each is validated."""
    out: list[SpillConfig] = []
    for th in thresholds:
        for win in windows:
            for stab in stabilizations:
                ctl = msgspec.structs.replace(cfg.controller, threshold=th, window_seconds=win,
                                              stabilization_seconds=stab)
                out.append(validate(msgspec.structs.replace(cfg, controller=ctl)))
    return out


def sweep_row(cfg: SpillConfig, result: SimResult, host: SpillHost) -> dict[str, Any]:
    """One line of the knob comparison: thrash (flips) against responsiveness (how long pods
    waited to be placed) and money."""
    s = host.summary(result.end_time)
    waits = result.metrics.wait_percentiles()
    c = cfg.controller
    return {
        "threshold": c.threshold, "windowSeconds": c.window_seconds,
        "stabilizationSeconds": c.stabilization_seconds,
        "taintFlips": s["taintFlips"], "secondsTainted": s["secondsTainted"],
        "podsSpilled": s["podsSpilled"], "gpuHours": s["gpuHours"], "cost": s["cost"],
        "waitMeanSeconds": waits.get("mean", 0.0), "waitP95Seconds": waits.get("p95", 0.0),
        "neverScheduled": len(result.unscheduled),
        "evictions": sum(1 for e in result.evictions if e.verdict.allowed),
    }
