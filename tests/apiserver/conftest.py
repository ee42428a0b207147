"""Fixtures: an embedded server on loopback (manual clock), kubectl and HTTP clients for it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.config.manifests import load_manifests

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: gpu-a, labels: {pool: gpu, node-role.kubernetes.io/worker: ""}}
status:
  allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-b, labels: {pool: gpu}}
status:
  allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: cpu-a, labels: {pool: cpu}}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""


def pod_body(name: str, *, gpus: int = 0, labels: dict[str, str] | None = None,
             duration: float | None = None, node: str = "",
             namespace: str = "default") -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if duration is not None:
        meta["annotations"] = {"kubeberth.io/duration-seconds": str(duration)}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


PodBody = Callable[..., dict[str, Any]]


@pytest.fixture
def make_pod() -> PodBody:
    """pod_body(name, gpus=, labels=, duration=, node=, namespace=) -> a Pod manifest dict."""
    return pod_body


@pytest.fixture
def kubectl_bin() -> str:
    if not Path(KUBECTL).exists():
        pytest.skip("kubectl is not installed (expected at /usr/bin/kubectl)")
    return KUBECTL


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return path


@pytest.fixture
def server(cluster_file: Path) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(manifests=load_manifests(cluster_file), clock=ManualClock(),
                        bookmark_interval=0.2, history=200) as srv:
        yield srv


@pytest.fixture
def http(server: EmbeddedServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


@pytest.fixture
def kubeconfig(server: EmbeddedServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path, kubectl_bin: str) -> Kubectl:

    def run(*args: str, input: str | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "KUBECACHEDIR":
               str(tmp_path / "cache")}
        proc = subprocess.run([kubectl_bin, "--kubeconfig", str(kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=timeout, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    return run
