"""`kubeberth up` as a user runs it: a process that serves the demo cluster with the four
controllers, tells how to reach it, admits and binds the demo workload, and stops cleanly on
SIGTERM; bad flags and a busy port exit 2 without a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import yaml
from tests.live.harness import KUBECTL, wait_for

from kubeberth.cli.up import CLUSTER_FILES, demo_dir
from kubeberth.config.manifests import load_manifests
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.spill.config import load_spill_config

DEMO_NODES = {"gpu-a", "gpu-b", "cpu-a", "virtual-kubelet"}


def _up(tmp: Path, out: IO[str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kubeberth", "up", *args], stdout=out,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HOME": str(tmp)})


def _kubectl(tmp: Path, kubeconfig: Path, *args: str) -> str:
    if not Path(KUBECTL).exists():
        pytest.skip("kubectl is not installed (expected at /usr/bin/kubectl)")
    proc = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60,
                          env={"HOME": str(tmp), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_up_serves_the_demo_with_four_controllers_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    with log.open("w") as out:
        proc = _up(tmp_path, out, "--port", "0")
        try:
            wait_for(lambda: "-o wide -w" in log.read_text(), "up's hints", timeout=90)
            text = log.read_text()
            # No --kubeconfig-out: the documented default path under $HOME.
            kubeconfig = tmp_path / ".kube" / "kubeberth-up.yaml"
            assert f"kubectl --kubeconfig {kubeconfig} get nodes" in text
            # Secure by default: HTTPS, a generated token, a private kubeconfig.
            config = yaml.safe_load(kubeconfig.read_text())
            assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
            assert config["users"][0]["user"]["token"] not in text
            assert kubeconfig.stat().st_mode & 0o077 == 0
            workload = demo_dir() / "workload.yaml"
            assert f"apply -f {workload}" in text
            ports = dict(re.findall(r"^\s+([\w-]+)\s+metrics on http://127\.0\.0\.1:(\d+)/",
                                    text, re.M))
            assert set(ports) == {"scheduler", "admission", "descheduler", "spill-controller"}
            assert len(set(ports.values())) == 4
            for port in ports.values():
                wait_for(lambda port=port: httpx.get(
                    f"http://127.0.0.1:{port}/readyz").status_code == 200, "readyz")
            metrics = httpx.get(f"http://127.0.0.1:{ports['scheduler']}/metrics").text
            assert "scheduler_pending_pods" in metrics

            nodes = _kubectl(tmp_path, kubeconfig, "get", "nodes", "-o", "name")
            assert {n.removeprefix("node/") for n in nodes.split()} == DEMO_NODES
            # Every controller acts through the API: leader Leases taken, then the demo
            # workload is admitted by Kueue and bound by the scheduler.
            leases = _kubectl(tmp_path, kubeconfig, "get", "leases", "-n", "kube-system",
                              "-o", "name")
            assert {"lease.coordination.k8s.io/kubeberth-" + n for n in ports} <= \
                set(leases.split())
            _kubectl(tmp_path, kubeconfig, "apply", "-f", str(workload))

            def pods() -> list[dict[str, Any]]:
                items: list[dict[str, Any]] = json.loads(_kubectl(
                    tmp_path, kubeconfig, "get", "pods", "-A", "-o", "json"))["items"]
                return items

            wait_for(lambda: sum(p["status"].get("phase") == "Running"
                                 for p in pods()) == 8, "the demo's pods to run", timeout=60)
            assert {p["spec"]["nodeName"] for p in pods()} <= {"gpu-a", "gpu-b"}
            workloads = json.loads(_kubectl(tmp_path, kubeconfig, "get", "workloads", "-A",
                                            "-o", "json"))["items"]
            assert len(workloads) == 6  # 4 gang pods, the Job, 1 serving pod
            for w in workloads:
                conds = {c["type"]: c["status"] for c in w["status"]["conditions"]}
                assert conds.get("Admitted") == "True", w["metadata"]["name"]
        finally:
            code = _stop(proc)
    text = log.read_text()
    assert code == 0, text
    assert "kubeberth up: stopped" in text and "Traceback" not in text
    assert "HTTP Request" not in text  # httpx's per-request lines are kept out


def test_up_kubeconfig_out_and_token(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    kubeconfig = tmp_path / "kb.yaml"
    with log.open("w") as out:
        proc = _up(tmp_path, out, "--port", "0", "--kubeconfig-out", str(kubeconfig),
                   "--token", "s3cret")
        try:
            wait_for(lambda: "-o wide -w" in log.read_text(), "up's hints", timeout=90)
            assert f"kubectl --kubeconfig {kubeconfig} get nodes" in log.read_text()
            config = yaml.safe_load(kubeconfig.read_text())
            assert config["users"][0]["user"]["token"] == "s3cret"
            url = config["clusters"][0]["cluster"]["server"]
            http = httpx.Client(base_url=url, verify=False, timeout=10)
            assert http.get("/api/v1/nodes").status_code == 401
            ok = http.get("/api/v1/nodes", headers={"Authorization": "Bearer s3cret"})
            assert {n["metadata"]["name"] for n in ok.json()["items"]} == DEMO_NODES
            # The controllers present the token too: they take their Leases.
            wait_for(lambda: len(http.get(
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                headers={"Authorization": "Bearer s3cret"}).json()["items"]) >= 4, "leases")
        finally:
            code = _stop(proc)
    assert code == 0, log.read_text()


def _run_up(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubeberth", "up", *args], capture_output=True,
                          text=True, timeout=90, env={**os.environ, "HOME": str(tmp)})


def test_up_bad_flags_exit_2(tmp_path: Path) -> None:
    res = _run_up(tmp_path, "--port", "many")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--port" in res.stderr
    res = _run_up(tmp_path, "--no-such-flag")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    (tmp_path / "dir").mkdir()
    res = _run_up(tmp_path, "--port", "0", "--kubeconfig-out", str(tmp_path / "dir"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--kubeconfig-out" in res.stderr and "Traceback" not in res.stderr


def test_up_port_in_use_exits_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _run_up(tmp_path, "--port", str(port))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr
    assert "--port" in res.stderr and "Traceback" not in res.stderr


def test_demo_bundle_ships_in_the_package_and_loads() -> None:
    demo = demo_dir()
    assert demo.is_dir() and demo.parent.name == "live"
    manifests = load_manifests([demo / f for f in CLUSTER_FILES])
    assert {n.metadata.name for n in manifests.nodes} == DEMO_NODES
    vk = next(n for n in manifests.nodes if n.metadata.name == "virtual-kubelet")
    spill = load_spill_config(demo / "spill.yaml")
    assert spill.controller.signal.source == "cluster"  # no Prometheus needed
    assert spill.virtual_node.name == vk.metadata.name
    assert spill.virtual_node.labels == dict(vk.metadata.labels)
    assert [(t.key, t.value, t.effect) for t in vk.spec.taints] == \
        [("vk.node.com", "true", "NoSchedule")]
    sched = load_scheduler_config(demo / "scheduler-config.yaml")
    assert "Coscheduling" in str(sched)
    policy = load_descheduler_policy(demo / "descheduler.yaml")
    assert "vk.node.com/low-gpu-usage" in str(policy)
    kinds = {d.kind for d in manifests.other}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor"} <= kinds
