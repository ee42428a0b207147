"""The spill node and its controller inside a run: spilling, taint flips through the node-update
path, start latency, outages, metering, a descheduling hook bringing work back under PDBs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from kubeberth.api.selectors import tolerated
from kubeberth.live.prometheus import spill_signal
from kubeberth.report.output import write_outputs
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.spill import SpillHost
from kubeberth.sim.traces import load_workload
from kubeberth.spill.config import Outage, SpillConfig, load_spill_config
from kubeberth.spill.vk import LOW_GPU_TAINT
from kubeberth.state.cluster import ClusterState

EXAMPLE = Path(__file__).parents[2] / "examples" / "spill"


def config(**controller: object) -> SpillConfig:
    cfg = load_spill_config(EXAMPLE / "spill.yaml")
    vn = msgspec.structs.replace(cfg.virtual_node, outages=[])
    return msgspec.structs.replace(cfg, virtual_node=vn, controller=msgspec.structs.replace(
        cfg.controller, **controller))


@dataclass(frozen=True)
class Evict:
    pod: str
    plugin: str
    reason: str


def back_from_vk(min_age: float) -> object:
    """A stand-in descheduling pass (the real Descheduler plugs into the same hook): pods on
    a node whose NoSchedule taints they do not tolerate, older than ``min_age``."""
    def run(snap: ClusterState, now: float) -> Iterable[Evict]:
        for idx in snap.node_ids():
            taints = [t for t in snap.taints[int(idx)] if t.effect == "NoSchedule"]
            for pi in snap.pods_on_node[int(idx)].values():
                if now - pi.start_time >= min_age and any(
                        not tolerated(pi.pod.spec.tolerations, t) for t in taints):
                    yield Evict(pi.key, "RemovePodsViolatingNodeTaints", "untolerated taint")
    return run


def simulate(cfg: SpillConfig, descheduler: object = None, until: float | None = None
             ) -> tuple[Simulation, SpillHost]:
    wl = load_workload([EXAMPLE / "cluster.yaml"], [EXAMPLE / "workload.yaml"])
    sim = Simulation(wl, load_scheduler_config(None), in_tree_registry(), sample_interval=60.0,
                     descheduler=descheduler, deschedule_interval=60.0,  # type: ignore[arg-type]
                     until=until)
    host = SpillHost(cfg, spill_signal(cfg))
    host.attach(sim)
    return sim, host


def test_work_spills_when_full_and_flips_follow_the_signal() -> None:
    sim, host = simulate(config())
    res = sim.run()
    flips = [(t, d) for t, d in host.flips]
    # Free 6 > 4 from the start: tainted after 300 s; the burst at 600 fills the cluster,
    # the average falls below 4 at 690 and stays: untainted 300 s later; the scale-down at
    # 3600 frees GPUs again.
    assert flips == [(300.0, "add"), (990.0, "remove"), (4080.0, "add")]
    vk = [k for k, r in res.metrics.pods.items() if r.node == "virtual-kubelet"]
    # The four pods the cluster could not hold bound on VK the instant the taint went.
    assert len(vk) == 4 and all(res.metrics.pods[k].bound == 990.0 for k in vk)
    s = host.summary(res.end_time)
    # Four 1-GPU pods billed from 990 until the scale-down deleted them at 3600.
    assert s["gpuHours"] == pytest.approx(4 * (3600 - 990) / 3600)
    assert s["cost"] == pytest.approx(s["gpuHours"] * 3.2)
    assert s["secondsTainted"] + s["secondsUntainted"] == pytest.approx(res.end_time)


def test_start_latency_delays_readiness_and_completion() -> None:
    sim, _ = simulate(config())
    seen: list[tuple[str, bool]] = []

    def probe() -> None:
        for pi in sim.snapshot.pods_on_node[sim.snapshot.node_index["virtual-kubelet"]].values():
            view = sim.pod_view(pi)
            seen.append((view.phase, view.ready))
            # The snapshot's pod shows the same, for policies that read only the snapshot.
            ready = next(c.status for c in pi.pod.status.conditions if c.type == "Ready")
            assert (pi.pod.status.phase, ready == "True") == (view.phase, view.ready)

    sim.call_at(990.0 + 60.0, probe)   # downloading the model
    sim.call_at(990.0 + 200.0, probe)  # past the 180 s start latency
    sim.run()
    assert seen[:4] == [("Pending", False)] * 4 and seen[4:] == [("Running", True)] * 4


def test_descheduling_hook_brings_pods_back_without_breaking_the_pdb() -> None:
    sim, host = simulate(config(), descheduler=back_from_vk(min_age=600.0))
    etl = next(r.spec for r in sim.owners.runs.values() if r.kind == "Job")
    # Demand drops at 1500: the ETL Job is deleted and its 6 GPUs are free.
    sim.call_at(1500.0, lambda: sim.owners.delete(etl), counts=True)
    ready_counts: list[int] = []

    def probe() -> bool:
        if 1200.0 <= sim.now < 3600.0:
            ready_counts.append(sum(
                1 for pi in sim.snapshot.objects.pods.values()
                if pi.namespace == "serving" and sim.pod_view(pi).ready))
        return False

    sim.every(10.0, probe)
    res = sim.run()
    # The drop makes the taint come back; once the pods are home the cluster is full again
    # and the taint goes away after its stabilization.
    assert [d for t, d in host.flips if 1500 < t < 3600] == ["add", "remove"]
    vk = [k for k, r in res.metrics.pods.items() if r.node == "virtual-kubelet"]
    assert len(vk) == 4 and all(res.metrics.pods[k].deleted is not None for k in vk)
    evicted = [e for e in res.evictions if e.verdict.allowed]
    refused = [e for e in res.evictions if not e.verdict.allowed]
    assert sorted(e.pod for e in evicted) == sorted(vk)
    # minAvailable 80% of 14 = 12: two at a time, the rest refused with 429 until the
    # replacements are Ready in the cluster.
    assert refused and all(e.verdict.code == 429 and e.verdict.pdb == "serving/infer"
                           for e in refused)
    assert min(ready_counts) >= 12
    for e in evicted:
        assert e.replacement and res.metrics.pods[e.replacement].node in ("gpu-a", "gpu-b")
    # Work came back before the burst ended: less than the run without the drop.
    assert host.summary(res.end_time)["gpuHours"] < 4 * (3600 - 990) / 3600


def test_taint_on_blocks_spill_and_removal_requeues_pending_pods() -> None:
    sim, host = simulate(config(stabilization_seconds=0, threshold=100))
    res = sim.run()
    # Threshold 100: the average is always below, the taint never goes on; with
    # stabilization 0 nothing waits, so the burst's overflow spills at once (t=600).
    assert host.flips == []
    vk = [r for r in res.metrics.pods.values() if r.node == "virtual-kubelet"]
    assert len(vk) == 4 and all(r.bound == 600.0 for r in vk)


def test_outage_longer_than_lost_after_deletes_pods_and_owners_replace_them() -> None:
    cfg = config()
    vn = msgspec.structs.replace(cfg.virtual_node, outages=[
        Outage(start_seconds=1500, duration_seconds=900)])
    sim, host = simulate(msgspec.structs.replace(cfg, virtual_node=vn))
    res = sim.run()
    assert host.lost_in_outages == 4
    lost = [k for k, r in res.metrics.pods.items() if r.deleted == 1800.0]
    assert len(lost) == 4
    # Replacements arrived at 1800; the node is NotReady and tainted unreachable until 2400.
    fresh = [r for r in res.metrics.pods.values() if r.arrival == 1800.0]
    assert len(fresh) == 4 and all(r.bound is not None and r.bound >= 2400.0 for r in fresh)


def test_outputs_include_spill_files(tmp_path: Path) -> None:
    sim, _ = simulate(config())
    data = write_outputs(sim.run(), tmp_path, {"workload": "spill"})
    assert data["spill"]["podsSpilled"] == 4
    header = (tmp_path / "spill.csv").read_text().splitlines()[0]
    assert header.startswith("time,free_gpus,free_gpus_avg,threshold,tainted,fault")
    prom = (tmp_path / "spill_metrics.prom").read_text()
    assert 'kubeberth_spill_taint_flips_total{direction="add"} 2.0' in prom
    assert "kubeberth_spill_gpu_hours_total" in prom
    assert "_created" not in prom
    again = tmp_path / "again"
    sim, _ = simulate(config())
    write_outputs(sim.run(), again, {"workload": "spill"})
    assert (again / "spill_metrics.prom").read_bytes() == prom.encode()


def test_low_gpu_taint_is_on_the_node_when_tainted() -> None:
    sim, host = simulate(config(), until=400.0)
    sim.run()
    node = sim.snapshot.nodes[sim.snapshot.node_index["virtual-kubelet"]]
    assert host.state.tainted and any(t.key == LOW_GPU_TAINT.key for t in node.spec.taints)


def test_prometheus_source_down_holds_and_reports_every_tick() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = config()
    signal = msgspec.structs.replace(cfg.controller.signal, source="prometheus",
                                     url=f"http://127.0.0.1:{port}", timeout_seconds=2.0)
    cfg = msgspec.structs.replace(cfg, controller=msgspec.structs.replace(
        cfg.controller, signal=signal))
    sim, host = simulate(cfg, until=600.0)
    res = sim.run()
    s = host.summary(res.end_time)
    assert s["taintFlips"] == 0 and not s["taintedAtEnd"]
    assert s["faultTicks"] == len(host.rows) > 0
    (message,) = s["faults"]
    assert message.startswith("prometheus unreachable")
    assert all(row[1] == "" and row[5] for row in host.rows)


def test_short_outage_keeps_pods_and_blocks_new_ones() -> None:
    cfg = config()
    vn = msgspec.structs.replace(cfg.virtual_node, outages=[
        Outage(start_seconds=900, duration_seconds=200)])  # shorter than lostAfterSeconds
    sim, host = simulate(msgspec.structs.replace(cfg, virtual_node=vn))
    res = sim.run()
    assert host.lost_in_outages == 0
    vk = [r for r in res.metrics.pods.values() if r.node == "virtual-kubelet"]
    # The taint came off at 990 but the node was unreachable until 1100: pods bound then.
    assert len(vk) == 4 and all(r.bound == 1100.0 for r in vk)


def test_vk_pod_in_its_start_latency_is_evicted_without_the_pdb() -> None:
    sim, _ = simulate(config())
    verdicts: list[tuple[bool, str]] = []

    def evict_one() -> None:
        idx = sim.snapshot.node_index["virtual-kubelet"]
        key = sorted(sim.snapshot.pods_on_node[idx])[0]
        v = sim.evict(key, plugin="Test")
        verdicts.append((v.allowed, v.pdb))

    sim.call_at(1030.0, evict_one, counts=True)  # bound at 990, Ready at 1170
    sim.run()
    # Pending: deleted without a PDB check (minAvailable 80% of 14 would refuse a Ready pod).
    assert verdicts == [(True, "")]


def test_run_ends_when_a_descheduler_never_evicts() -> None:
    """With the taint on and pods left on VK that nothing will evict, the run still ends when
    the workload does (no endless controller ticks)."""
    sim, host = simulate(config(), descheduler=lambda snap, now: [])
    res = sim.run()
    assert res.end_time == 4800.0 and host.state.tainted
