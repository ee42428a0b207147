"""Documented flags of the live commands, each run as a user runs it (``python -m kubeberth`` in
a process, against the embedded API server) and checked by what it changes, so a flag that did
nothing fails: ``admission --dry-run``, ``--metrics-address`` and the leader-election Lease
names; ``spill-controller --dry-run``; ``scheduler --plugin``; ``extender --host``, ``--seed``,
``--plugin`` and the old ``--tls-key`` spelling; ``up --tls-cert-file`` and
``--tls-private-key-file``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from lightkube.resources.coordination_v1 import Lease
from tests.live.harness import KUBECTL, Live, bound, node, wait_for, write
from tests.live.spillenv import LOW, VK, gpu_node, node_taints, vk_node
from tests.live.test_admission_e2e import CLUSTER, KUEUE, job, workloads
from tests.paths import EXAMPLES

NODENUMBER = EXAMPLES / "nodenumber"


@contextmanager
def kubeberth(tmp_path: Path, name: str, *args: str,
              env: dict[str, str] | None = None) -> Iterator[Path]:
    """``python -m kubeberth ARGS`` with stdout and stderr in a log file; SIGTERM at the end,
    which every live command must survive with exit 0."""
    log = tmp_path / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubeberth", *args], stdout=out,
                                stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        try:
            yield log
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def logged(log: Path, pattern: str) -> re.Match[str]:
    """Wait for ``pattern`` in the log and return its match."""
    wait_for(lambda: re.search(pattern, log.read_text()) is not None, f"{pattern!r} in the log",
             timeout=60)
    found = re.search(pattern, log.read_text())
    assert found is not None
    return found


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and 127.0.0.2."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,IP:127.0.0.2"], check=True,
                   capture_output=True)
    return cert, key


def test_admission_dry_run_metrics_address_and_lease_names(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE + """\
apiVersion: v1
kind: Namespace
metadata: {name: elections}
""")))
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml", job("a", "team-a", 1))))
    with kubeberth(tmp_path, "admission", "admission", "--kubeconfig", str(live.kubeconfig),
                   "--dry-run", "--metrics-address", "127.0.0.2", "--metrics-port", "0",
                   "--leader-elect-resource-name", "my-admission",
                   "--leader-elect-resource-namespace", "elections") as log:
        # --metrics-address: health and metrics on 127.0.0.2, as the banner says.
        url = logged(log, r"metrics on (http://127\.0\.0\.2:\d+)/metrics")[1]
        wait_for(lambda: httpx.get(f"{url}/readyz").status_code == 200, "/readyz")
        # The leader-election names: the Lease is the one named, where it was named.
        wait_for(lambda: _holder(live, "my-admission", "elections") != "", "the Lease")
        # --dry-run: the decision is logged, nothing is written.
        logged(log, r"dry-run: would create Workload team-a/job-a")
        assert workloads(live) == {}
    # Stopped: the Lease is given up.
    assert _holder(live, "my-admission", "elections") == ""


def _holder(live: Live, name: str, namespace: str) -> str:
    try:
        lease = live.client().get(Lease, name, namespace=namespace)
    except Exception:  # not created yet
        return ""
    return (lease.spec.holderIdentity if lease.spec else None) or ""


def test_spill_controller_dry_run_logs_without_tainting(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
    cfg = write(tmp_path / "spill.yaml", """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller: {intervalSeconds: 0.2, threshold: 2, windowSeconds: 0.4, stabilizationSeconds: 0.4}
""")
    with kubeberth(tmp_path, "spill", "spill-controller", "--config", str(cfg), "--kubeconfig",
                   str(live.kubeconfig), "--metrics-port", "0", "--no-leader-elect",
                   "--dry-run") as log:
        # Four GPUs free, above the threshold of 2 for longer than 0.4 s: the flip is decided.
        logged(log, rf"dry-run: would add {re.escape(LOW)}=\S* on {VK}")
        assert LOW not in node_taints(live, VK)


def test_scheduler_plugin_runs_the_out_of_tree_plugin(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", "".join(node(f"node{i}", 1) for i in (1, 2, 3))))
    config = str(NODENUMBER / "scheduler-config.yaml")
    env = {"PYTHONPATH": os.pathsep.join([str(NODENUMBER), os.environ.get("PYTHONPATH", "")])}
    with kubeberth(tmp_path, "scheduler", "scheduler", "--config", config, "--plugin",
                   "nodenumber:NodeNumber", "--kubeconfig", str(live.kubeconfig),
                   "--metrics-port", "0", "--no-leader-elect", env=env) as log:
        logged(log, r"profiles default-scheduler")
        live.kubectl("apply", "-f", str(write(tmp_path / "pods.yaml", _pod("pod2") + _pod("pod3"))))
        # NodeNumber's preference (same last digit) is the only score that differs.
        wait_for(lambda: bound(live) == {"default/pod2": "node2", "default/pod3": "node3"},
                 "NodeNumber's placements")
    # Without --plugin the configuration names a plugin nobody registered: exit 2.
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "scheduler", "--config", config,
                           "--kubeconfig", str(live.kubeconfig), "--no-leader-elect"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert proc.returncode == 2 and "NodeNumber" in proc.stderr, proc.stderr


def _pod(name: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
---
"""


EXTENDER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: NodeNumber, weight: 1}
      - {name: RandomScore, weight: 1}
"""


def test_extender_host_seed_plugin_and_old_tls_key(tmp_path: Path,
                                                   certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    trust = ssl.create_default_context(cafile=str(cert))
    config = write(tmp_path / "config.yaml", EXTENDER_CONFIG)
    env = {"PYTHONPATH": os.pathsep.join([str(NODENUMBER), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "300"}
    common = ("extender", "--config", str(config), "--cluster", str(NODENUMBER / "cluster.yaml"),
              "--plugin", "nodenumber:NodeNumber", "--host", "127.0.0.2", "--port", "0",
              "--tls-cert-file", str(cert))
    picks: dict[int, list[list[int]]] = {}
    for seed in (1, 2):
        with kubeberth(tmp_path, f"extender-{seed}", *common, "--tls-key", str(key),
                       "--seed", str(seed), env=env) as log:
            # --host and TLS (the key given by its old spelling, which warns).
            url = logged(log, r"as an extender at (https://127\.0\.0\.2:\d+)")[1]
            assert "warning: --tls-key is deprecated" in " ".join(log.read_text().split())
            port = int(url.rsplit(":", 1)[1])
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"https://127.0.0.1:{port}/", verify=trust, timeout=5)
            with httpx.Client(base_url=url, verify=trust, timeout=30) as http:
                picks[seed] = [_prioritize(http, f"pod{i % 3 + 1}") for i in range(8)]
    for seed, runs in picks.items():
        # --plugin: NodeNumber scores the node with the pod's digit; RandomScore adds one
        # random node. Each answer is one of those shapes, so both plugins ran.
        for i, scores in enumerate(runs):
            digit = i % 3 + 1
            assert scores[digit - 1] > 0, (seed, i, scores)
    # --seed: RandomScore draws from the seeded generator, so the two seeds' draws differ.
    assert picks[1] != picks[2]


def _prioritize(http: httpx.Client, pod: str) -> list[int]:
    body = {"Pod": {"metadata": {"name": pod, "namespace": "default"},
                    "spec": {"containers": [{"name": "c"}]}},
            "NodeNames": ["node1", "node2", "node3"]}
    answer = http.post("/prioritize", content=json.dumps(body))
    assert answer.status_code == 200, answer.text
    by_host = {h["Host"]: h["Score"] for h in answer.json()}
    return [by_host["node1"], by_host["node2"], by_host["node3"]]


def test_up_serves_https_with_the_tls_flags(tmp_path: Path,
                                            certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    trust = ssl.create_default_context(cafile=str(cert))
    kubeconfig = tmp_path / "kb.yaml"
    # As docs/live.md says: with a token, since kubectl sends one only over HTTPS.
    with kubeberth(tmp_path, "up", "up", "--port", "0", "--kubeconfig-out", str(kubeconfig),
                   "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
                   "--token", "t0k", env={"HOME": str(tmp_path)}) as log:
        logged(log, r"-o wide -w")
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server.startswith("https://127.0.0.1:")
        assert httpx.get(f"{server}/healthz", verify=trust).status_code == 200
        assert "note: kubectl sends the bearer token only over HTTPS" not in log.read_text()
        if not Path(KUBECTL).exists():
            pytest.skip("kubectl is not installed (expected at /usr/bin/kubectl)")
        nodes = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), "get", "nodes", "-o",
                                "name"], capture_output=True, text=True, timeout=60,
                               env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert nodes.returncode == 0, nodes.stderr
        assert "node/gpu-a" in nodes.stdout.split()
