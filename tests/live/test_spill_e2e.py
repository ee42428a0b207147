"""The live spill taint controller against the embedded API server over HTTP: the taint flips
only after the stabilization duration (and not on a short spike), is held on every kind of
signal fault, and the controller's state comes from the API alone (restart, outside changes,
dry run)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from tests.live.harness import Live, wait_for, write
from tests.live.spillenv import (
    LOW,
    VK,
    FakePrometheus,
    bound_pod,
    gpu_node,
    node_taints,
    spill_config,
    spill_controller,
    vk_node,
)

from kubeberth.live.spill import LiveSpillController, Tick
from kubeberth.spill.promql import free_gpu_query

BUSY = "".join(bound_pod(f"busy-{i}", "gpu-1") for i in range(4))


def streak_start(ticks: list[Tick], threshold: float, above: bool) -> Tick:
    """The first tick of the unbroken above/below streak that ends at the last tick."""
    start = ticks[-1]
    for t in reversed(ticks):
        if t.fault or t.average is None or (t.average > threshold) != above \
                or t.average == threshold:
            break
        start = t
    return start


def flip_tick(ctl: LiveSpillController, direction: str) -> tuple[Tick, list[Tick]]:
    # The controller writes the taint, then records the tick: a test that saw the taint may
    # be a moment ahead of the record.
    wait_for(lambda: any(t.flip == direction for t in list(ctl.ticks)), f"the {direction} tick")
    ticks = list(ctl.ticks)
    idx = next(i for i, t in enumerate(ticks) if t.flip == direction)
    return ticks[idx], ticks[: idx + 1]


def test_api_signal_flips_only_after_stabilization(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node() + BUSY))
    cfg = spill_config(tmp_path, threshold=2, stabilization=1.5)
    ctl = spill_controller(live, cfg)
    wait_for(lambda: len(ctl.ticks) >= 5, "five ticks")
    assert {t.value for t in ctl.ticks} == {0.0}
    assert not any(t.flip for t in ctl.ticks)
    # Three GPUs free up: the average climbs over 2 and stays there.
    for i in range(3):
        live.kubectl("delete", "pod", f"busy-{i}")
    wait_for(lambda: LOW in node_taints(live, VK), "the taint to be added", timeout=20)
    flip, before = flip_tick(ctl, "add")
    start = streak_start(before, 2, above=True)
    assert flip.at - start.at >= 1.5
    assert flip.value == 3.0 and flip.tainted
    assert len(ctl.flips) == 1
    # Demand returns: the taint comes off after the same duration below.
    live.kubectl("apply", "-f", str(write(tmp_path / "more.yaml", "".join(
        bound_pod(f"again-{i}", "gpu-1") for i in range(3)))))
    wait_for(lambda: LOW not in node_taints(live, VK), "the taint to be removed", timeout=20)
    flip, before = flip_tick(ctl, "remove")
    assert flip.at - streak_start(before, 2, above=False).at >= 1.5
    assert [d for _, d in ctl.flips] == ["add", "remove"]
    assert "vk.node.com" in node_taints(live, VK)  # the permanent taint is left alone
    text = ctl.metrics.exposition().decode()
    assert 'kubeberth_spill_taint_flips_total{direction="add"} 1.0' in text
    assert 'kubeberth_spill_taint_flips_total{direction="remove"} 1.0' in text
    assert "kubeberth_spill_signal_stale 0.0" in text


def test_a_short_spike_does_not_flip(live: Live, tmp_path: Path) -> None:
    prom = FakePrometheus()
    try:
        live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
        ctl = spill_controller(live, spill_config(tmp_path, stabilization=3.0),
                               prometheus=prom.url)
        wait_for(lambda: len(ctl.ticks) >= 3, "three ticks")
        prom.value = 10
        n = len(ctl.ticks)
        wait_for(lambda: len(ctl.ticks) >= n + 2, "the spike")
        prom.value = 0
        wait_for(lambda: any(t.average is not None and t.average < 2
                             for t in ctl.ticks[n + 2:]), "the average to drop")
        spike = [t for t in ctl.ticks if t.average is not None and t.average > 2]
        assert spike[-1].at - spike[0].at < 3.0  # the spike was shorter than the duration
        n = len(ctl.ticks)
        wait_for(lambda: len(ctl.ticks) >= n + 16, "the streak's duration to pass")
        assert any(t.average is not None and t.average > 2 for t in ctl.ticks)
        assert ctl.flips == [] and LOW not in node_taints(live, VK)
    finally:
        prom.down()


def test_prometheus_faults_hold_the_taint(live: Live, tmp_path: Path) -> None:
    prom = FakePrometheus()
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
    cfg = spill_config(tmp_path, stabilization=0.8, url=prom.url)
    ctl = spill_controller(live, cfg)
    assert prom.queries == [] or prom.queries[0] == free_gpu_query([VK], cfg.controller
                                                                    .exclude_pods)
    prom.value = 6
    wait_for(lambda: LOW in node_taints(live, VK), "the taint to be added")
    assert prom.queries[-1] == free_gpu_query([VK], cfg.controller.exclude_pods)
    # Every fault: the real value would be 0 (below), but nothing is trusted, nothing flips.
    for mode in ("error", "empty"):
        prom.mode = mode
        n = len(ctl.ticks)
        wait_for(lambda n=n: len(ctl.ticks) >= n + 8, f"ticks with {mode}")
        assert all(t.fault and t.tainted and not t.flip for t in ctl.ticks[n + 1:])
    assert any("prometheus answered HTTP 422: execution: query timed out" in t.fault
               for t in ctl.ticks)
    assert "empty vector" in ctl.ticks[-1].fault
    text = ctl.metrics.exposition().decode()
    assert "kubeberth_spill_signal_stale 1.0" in text
    faults = re.search(r"\nkubeberth_spill_signal_faults_total (\d+)", text)
    assert faults is not None and int(faults.group(1)) >= 14
    age = re.search(r"\nkubeberth_spill_signal_age_seconds (\S+)", text)
    assert age is not None and float(age.group(1)) > 1.0
    assert ctl.ready()  # holding is normal operation: readyz stays
    prom.down()
    n = len(ctl.ticks)
    wait_for(lambda: len(ctl.ticks) >= n + 6, "ticks with Prometheus down")
    assert all("unreachable" in t.fault and t.tainted for t in ctl.ticks[n + 1:])
    assert LOW in node_taints(live, VK) and [d for _, d in ctl.flips] == ["add"]
    # Back, and below: the streak starts only when the signal is back.
    prom2 = FakePrometheus()
    try:
        ctl.prometheus.endpoint = prom2.url + "/api/v1/query"  # type: ignore[union-attr]
        back = len(ctl.ticks)
        wait_for(lambda: LOW not in node_taints(live, VK), "the taint to be removed")
        flip, _ = flip_tick(ctl, "remove")
        first_good = next(t for t in ctl.ticks[back:] if not t.fault)
        assert flip.at - first_good.at >= 0.8
    finally:
        prom2.down()


def test_restart_converges_from_the_api(live: Live, tmp_path: Path) -> None:
    # The taint is on already (a previous controller put it there): a high signal changes
    # nothing, a low one removes it after the duration.
    prom = FakePrometheus()
    try:
        live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node(low=True)))
        prom.value = 5
        ctl = spill_controller(live, spill_config(tmp_path, stabilization=0.6),
                               prometheus=prom.url)
        wait_for(lambda: len(ctl.ticks) >= 8, "eight ticks")
        assert all(t.tainted for t in ctl.ticks) and ctl.flips == []
        # Someone removes the taint by hand: the controller takes it as the state and, the
        # signal having stayed above for longer than the duration, puts it back.
        live.kubectl("taint", "nodes", VK, f"{LOW}:NoSchedule-")
        wait_for(lambda: [d for _, d in ctl.flips] == ["add"], "the taint to be re-added")
        assert LOW in node_taints(live, VK)
    finally:
        prom.down()


def test_missing_vk_node_is_a_fault(live: Live, tmp_path: Path) -> None:
    prom = FakePrometheus()
    try:
        live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4)))
        prom.value = 9
        ctl = spill_controller(live, spill_config(tmp_path, stabilization=0.2),
                               prometheus=prom.url)
        wait_for(lambda: len(ctl.ticks) >= 4, "four ticks")
        assert all("cannot read the taints of node virtual-kubelet" in t.fault
                   for t in ctl.ticks)
        assert ctl.flips == []
    finally:
        prom.down()


def test_dry_run_writes_nothing(live: Live, tmp_path: Path) -> None:
    prom = FakePrometheus()
    try:
        live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
        prom.value = 9
        ctl = spill_controller(live, spill_config(tmp_path, stabilization=0.4),
                               prometheus=prom.url, dry_run=True)
        wait_for(lambda: len(ctl.flips) == 1, "the decision")
        n = len(ctl.ticks)
        wait_for(lambda: len(ctl.ticks) >= n + 5, "more ticks")
        assert len(ctl.flips) == 1  # decided once, not again and again
        assert LOW not in node_taints(live, VK)
    finally:
        prom.down()


def _kubeberth(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubeberth", *args]


def test_command_flips_and_stops_on_sigterm(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
    cfg = write(tmp_path / "spill.yaml", """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller: {intervalSeconds: 0.2, threshold: 2, windowSeconds: 0.4, stabilizationSeconds: 1}
""")
    proc = subprocess.Popen(
        _kubeberth("spill-controller", "--config", str(cfg), "--kubeconfig",
                   str(live.kubeconfig), "--metrics-port", "0",
                   "--leader-elect-lease-duration", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "node virtual-kubelet, signal from the API, threshold 2" in banner
        url = re.search(r"http://\S+/metrics", banner)
        assert url is not None
        wait_for(lambda: LOW in node_taints(live, VK), "the command to taint (4 GPUs free)")
        base = url.group(0).removesuffix("/metrics")
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert 'kubeberth_spill_taint_flips_total{direction="add"} 1.0' in \
            httpx.get(url.group(0)).text
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"added {LOW}=true:NoSchedule on virtual-kubelet" in out
    assert out.rstrip().endswith("kubeberth spill-controller stopped")


def test_bad_config_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path / "spill.yaml", """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller: {windowSeconds: 10, intervalSeconds: 30}
""")
    proc = subprocess.run(_kubeberth("spill-controller", "--config", str(bad)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "spill.yaml:3" in proc.stderr and "controller.windowSeconds" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run(_kubeberth("spill-controller", "--prometheus", "localhost:9090"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--prometheus" in proc.stderr


def test_only_the_leader_writes(live: Live, tmp_path: Path) -> None:
    prom = FakePrometheus()
    try:
        live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
        cfg = spill_config(tmp_path, stabilization=0.6)
        one = spill_controller(live, cfg, prometheus=prom.url, identity="one")
        assert one.elector is not None
        wait_for(one.elector.leading.is_set, "the first candidate to lead")
        two = spill_controller(live, cfg, prometheus=prom.url, identity="two")
        assert two.elector is not None
        prom.value = 8
        wait_for(lambda: LOW in node_taints(live, VK), "the leader to taint")
        # The patch lands before the tick records its flip.
        wait_for(lambda: [d for _, d in one.flips] == ["add"], "the leader's flip")
        assert two.ticks == [] and not two.elector.leading.is_set()
        # The leader dies holding the Lease; the standby takes over and carries on from the
        # node's state: already tainted, nothing to write until the signal drops.
        one.elector._release = lambda: None  # type: ignore[method-assign]
        live.stop_controller(one)  # type: ignore[arg-type]
        wait_for(two.elector.leading.is_set, "the standby to take over", timeout=10)
        wait_for(lambda: len(two.ticks) >= 5, "the new leader's ticks")
        assert all(t.tainted for t in two.ticks) and two.flips == []
        prom.value = 0
        wait_for(lambda: LOW not in node_taints(live, VK), "the new leader to remove it")
        wait_for(lambda: [d for _, d in two.flips] == ["remove"], "the new leader's flip")
    finally:
        prom.down()


def test_api_signal_survives_dropped_watches_and_410(live: Live, tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node() + BUSY),
                     history=3)
    ctl = spill_controller(live, spill_config(tmp_path, stabilization=0.6))
    wait_for(lambda: len(ctl.ticks) >= 3, "three ticks")
    assert ctl.cache is not None
    lists = sum(inf.stats.lists for inf in ctl.informers)

    def drop() -> None:
        srv.api.store.compact()
        srv.api.store.close_watches()
        # Deletions while the streams are down, more changes than the history holds.
        for i in range(4):
            srv.api.delete(srv.api.pods, "default", f"busy-{i}", {"gracePeriodSeconds": 0})

    srv.call(drop)
    wait_for(lambda: LOW in node_taints(live, VK), "the taint once the re-list shows 4 free")
    assert sum(inf.stats.lists for inf in ctl.informers) > lists
    assert ctl.ticks[-1].value == 4.0 or any(t.value == 4.0 for t in ctl.ticks)
