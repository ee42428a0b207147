"""Operating the live scheduler: leader election through a Lease, /healthz, /readyz and
/metrics with upstream series names, and the command (exit codes, SIGTERM)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
from lightkube.resources.coordination_v1 import Lease
from tests.live.harness import Live, bound, node, pod, wait_for, write

from kubeberth.live.leader import LeaderElector, LeaseTiming
from kubeberth.live.metrics import HealthServer
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry


def _candidate(live: Live, identity: str) -> LiveScheduler:
    client = live.client()
    elector = LeaderElector(client, "kubeberth-scheduler", "kube-system", identity,
                            timing=LeaseTiming(1.0, 0.6, 0.05))
    ctl = LiveScheduler(load_scheduler_config(None), in_tree_registry(), client,
                        elector=elector)
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    live.controllers.append((ctl, thread, []))
    wait_for(ctl.ready, f"{identity}'s caches")
    return ctl


def _elector(ctl: LiveScheduler) -> LeaderElector:
    assert ctl.elector is not None
    return ctl.elector


def test_only_the_leader_binds_and_a_standby_takes_over(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 8)))
    one = _candidate(live, "one")
    wait_for(_elector(one).leading.is_set, "the first candidate to lead")
    two = _candidate(live, "two")
    live.kubectl("apply", "-f", str(write(tmp_path / "a.yaml", pod("a1", 1) + pod("a2", 1))))
    wait_for(lambda: len(bound(live)) == 2, "the leader to bind")
    wait_for(lambda: len(one.decisions) == 2, "the leader's decisions")
    assert not _elector(two).leading.is_set()
    assert two.decisions == []
    lease = live.client().get(Lease, "kubeberth-scheduler", namespace="kube-system")
    assert lease.spec is not None and lease.spec.holderIdentity == "one"
    # The leader dies without releasing the Lease: the standby waits out the duration.
    _elector(one)._release = lambda: None  # type: ignore[method-assign]
    live.stop_controller(one)
    wait_for(_elector(two).leading.is_set, "the standby to take over", timeout=10)
    live.kubectl("apply", "-f", str(write(tmp_path / "b.yaml", pod("b1", 1))))
    wait_for(lambda: len(bound(live)) == 3, "the new leader to bind")
    wait_for(lambda: len(two.decisions) == 1, "the decision")
    assert [d.pod for d in two.decisions] == ["default/b1"]
    assert _elector(two).transitions == 1


def test_health_and_metrics_endpoints(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 2)))
    ctl = live.scheduler()
    health = HealthServer("127.0.0.1", 0, healthy=ctl.healthy, ready=ctl.ready,
                          metrics=ctl.metrics.exposition).start()
    try:
        base = f"http://127.0.0.1:{health.port}"
        live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml",
                                              pod("p1", 1) + pod("p2", 1) + pod("p3", 1))))
        wait_for(lambda: len(bound(live)) == 2, "two pods to bind")
        wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 1,
                 "the third to be unschedulable")
        assert httpx.get(f"{base}/healthz").text == "ok"
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert httpx.get(f"{base}/nope").status_code == 404
        text = httpx.get(f"{base}/metrics").text
        assert 'scheduler_schedule_attempts_total{profile="default-scheduler",' \
               'result="scheduled"} 2.0' in text
        assert re.search(r'scheduler_schedule_attempts_total\{profile="default-scheduler",'
                         r'result="unschedulable"\} [1-9]', text)
        wait_for(lambda: 'scheduler_pending_pods{queue="unschedulable"} 1.0'
                 in httpx.get(f"{base}/metrics").text, "the pending gauge")
        assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 2.0' in text
        # One node: Score never runs (a single feasible node is taken as is, as upstream).
        for point in ("PreFilter", "Filter", "Reserve", "Permit", "Bind"):
            assert (f'scheduler_framework_extension_point_duration_seconds_count{{'
                    f'extension_point="{point}",profile="default-scheduler",'
                    f'status="Success"}}') in text
        ctl.stop.set()
        wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 503, "unhealthy")
    finally:
        health.stop()


def _kubeberth(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubeberth", *args]


def test_command_schedules_and_stops_on_sigterm(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4)))
    proc = subprocess.Popen(
        _kubeberth("scheduler", "--kubeconfig", str(live.kubeconfig), "--metrics-port", "0",
                   "--leader-elect-lease-duration", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "profiles default-scheduler" in banner
        url = re.search(r"http://\S+/metrics", banner)
        assert url is not None
        live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("p1", 2))))
        wait_for(lambda: bound(live) == {"default/p1": "n1"}, "the command to bind")
        assert "scheduler_schedule_attempts_total" in httpx.get(url.group(0)).text
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "bound default/p1 to n1" in out
    assert out.rstrip().endswith("kubeberth scheduler stopped")
    # A clean stop gives the Lease up.
    lease = live.client().get(Lease, "kubeberth-scheduler", namespace="kube-system")
    assert lease.spec is not None and not lease.spec.holderIdentity


def test_command_dry_run_logs_without_binding(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4)))
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("p1", 2))))
    proc = subprocess.Popen(
        _kubeberth("scheduler", "--kubeconfig", str(live.kubeconfig), "--metrics-port", "0",
                   "--dry-run", "--no-leader-elect"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "dry run" in proc.stdout.readline()
        line = ""
        while "would bind" not in line:
            line = proc.stdout.readline()
            assert line, "the command ended before deciding"
        assert "dry-run: would bind default/p1 to n1" in line
        assert bound(live) == {}
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0


def test_bad_input_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path / "sched.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\n"
                "kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n"
                "  plugins: {score: {enabled: [{name: NoSuchPlugin}]}}\n")
    unreachable = write(tmp_path / "unreachable", """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    proc = subprocess.run(_kubeberth("scheduler", "--config", str(bad), "--kubeconfig",
                                     str(unreachable)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "NoSuchPlugin" in proc.stderr and "sched.yaml" in proc.stderr
    proc = subprocess.run(_kubeberth("scheduler", "--kubeconfig", str(tmp_path / "missing")),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "missing" in proc.stderr and "Traceback" not in proc.stderr
    for text in ("not: a kubeconfig\n", "a: 1\n---\nb: 2\n", "[unclosed\n"):
        kube = write(tmp_path / "kubeconfig", text)
        proc = subprocess.run(_kubeberth("scheduler", "--kubeconfig", str(kube)),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert "kubeconfig" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(_kubeberth("scheduler", "--kubeconfig", str(kube),
                                     "--leader-elect-lease-duration", "0"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    proc = subprocess.run(_kubeberth("scheduler", "--kubeconfig", str(kube),
                                     "--bind-workers", "-1"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--bind-workers" in proc.stderr and "Traceback" not in proc.stderr
