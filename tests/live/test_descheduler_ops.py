"""Operating the live descheduler: leader election (only the holder evicts), the command
(banner, --once, --dry-run, SIGTERM, exit codes) and bad input refused before anything runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from lightkube.resources.coordination_v1 import Lease
from tests.live.harness import Live, wait_for, write
from tests.live.spillenv import LOW, POLICY, VK, descheduler, running_on, spilled


def _kubeberth(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubeberth", *args]


def test_only_the_leader_evicts_and_a_standby_takes_over(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    one = descheduler(live, tmp_path, identity="one")
    assert one.elector is not None
    wait_for(one.elector.leading.is_set, "the first candidate to lead")
    two = descheduler(live, tmp_path, identity="two")
    assert two.elector is not None
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: len(running_on(live, "gpu-1", "llm")) == 2, "the leader to evict")
    assert sorted(o.pod for o in one.outcomes) == on_vk
    assert two.outcomes == [] and two.passes == 0
    assert not two.elector.leading.is_set()
    # The leader dies without giving the Lease up: the standby waits out the duration, then
    # passes at once.
    one.elector._release = lambda: None  # type: ignore[method-assign]
    live.stop_controller(one)  # type: ignore[arg-type]
    wait_for(two.elector.leading.is_set, "the standby to take over", timeout=10)
    wait_for(lambda: two.passes >= 1, "the new leader's pass")
    assert two.outcomes == []  # nothing left to evict
    lease = live.client().get(Lease, "kubeberth-descheduler", namespace="kube-system")
    assert lease.spec is not None and lease.spec.holderIdentity == "two"


def test_command_evicts_and_stops_on_sigterm(live: Live, tmp_path: Path) -> None:
    spilled(live, tmp_path)
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    policy = write(tmp_path / "policy.yaml", POLICY)
    proc = subprocess.Popen(
        _kubeberth("descheduler", "--policy", str(policy), "--kubeconfig", str(live.kubeconfig),
                   "--metrics-port", "0", "--descheduling-interval", "1s",
                   "--leader-elect-lease-duration", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "kubeberth descheduler: 1 profile(s), a pass every 1s" in banner
        url = re.search(r"http://\S+/metrics", banner)
        assert url is not None
        wait_for(lambda: len(running_on(live, "gpu-1", "llm")) == 2, "the command to evict")
        wait_for(lambda: "result=\"success\"" in httpx.get(url.group(0)).text, "the metric")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert re.search(r"evicted default/llm-\S+ from virtual-kubelet "
                     r"\(RemovePodsViolatingNodeTaints: ", out)
    assert out.rstrip().endswith("kubeberth descheduler stopped")
    lease = live.client().get(Lease, "kubeberth-descheduler", namespace="kube-system")
    assert lease.spec is not None and not lease.spec.holderIdentity


def test_command_once_dry_run_logs_and_exits(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    policy = write(tmp_path / "policy.yaml", POLICY)
    proc = subprocess.run(
        _kubeberth("descheduler", "--policy", str(policy), "--kubeconfig", str(live.kubeconfig),
                   "--metrics-port", "0", "--once", "--dry-run", "--no-leader-elect"),
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "one pass (dry run: nothing is written)" in proc.stdout
    for pod in on_vk:
        assert f"dry-run: would evict {pod} from virtual-kubelet" in proc.stdout
    assert running_on(live, VK, "llm") == on_vk


def test_zero_interval_is_one_pass(live: Live, tmp_path: Path) -> None:
    spilled(live, tmp_path, replicas=1)
    ctl = descheduler(live, tmp_path, interval=0, wait_ready=False)
    wait_for(ctl.stop.is_set, "the controller to finish")
    assert ctl.passes == 1


BAD_POLICIES = {
    "unknown plugin": ("""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: p
    pluginConfig:
      - name: NoSuchPlugin
        args: {}
    plugins:
      deschedule:
        enabled: [NoSuchPlugin]
""", "NoSuchPlugin"),
    "bad args": ("""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: p
    pluginConfig:
      - name: LowNodeUtilization
        args:
          thresholds: {cpu: 80}
          targetThresholds: {cpu: 50}
    plugins:
      balance:
        enabled: [LowNodeUtilization]
""", "policy.yaml:8: field profiles[0].pluginConfig[0]"),
    "half-written file": ("""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: p
    pluginConfig:
      - name: RemovePodsViolatingNodeTaints
        args: {includedTaints: [
""", "policy.yaml"),
}


def test_bad_policy_or_flags_exit_2_before_connecting(tmp_path: Path) -> None:
    unreachable = write(tmp_path / "kubeconfig", """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    for text, needle in BAD_POLICIES.values():
        policy = write(tmp_path / "policy.yaml", text)
        proc = subprocess.run(_kubeberth("descheduler", "--policy", str(policy),
                                         "--kubeconfig", str(unreachable)),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert needle in proc.stderr and "policy.yaml" in proc.stderr
    good = write(tmp_path / "policy.yaml", POLICY)
    for flag in ("soon", "-5m"):
        proc = subprocess.run(_kubeberth("descheduler", "--policy", str(good), "--kubeconfig",
                                         str(unreachable), "--descheduling-interval", flag),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert "--descheduling-interval" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(_kubeberth("descheduler", "--policy", str(tmp_path / "missing.yaml")),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "missing.yaml" in proc.stderr
