"""Chaos harness: a `kubeberth serve` and controller commands as real processes on loopback.

Every test owns its processes and ports (port 0, read back from what the commands print), so
tests run in parallel (pytest -n). Processes are killed with SIGKILL to model a crash, stopped
with SIGTERM otherwise; faults in the API server come from ``KUBEBERTH_TEST_FAULTS``
(kubeberth/apiserver/faults.py). The invariants are read from the API afterwards.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from kubeberth.api.quantity import to_milli
from kubeberth.apiserver.faults import ENV as FAULTS_ENV

KUBEBERTH = [sys.executable, "-m", "kubeberth"]
TOKEN = "chaos-token"  # fixed, so a restarted server accepts the controllers' kubeconfig
GPU = "nvidia.com/gpu"
TERMINAL = ("Succeeded", "Failed")
Obj = dict[str, Any]
Workload = create_namespaced_resource("kueue.x-k8s.io", "v1beta1", "Workload", "workloads")


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Proc:
    """One command, its output in a log file."""

    def __init__(self, name: str, args: list[str], log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = args
        self.log = log
        self._out = log.open("a")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, **(env or {})},
                                     start_new_session=True)

    def text(self) -> str:
        return self.log.read_text()

    def wait_for_line(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def seen() -> bool:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.text()[-3000:]}"
            match = re.search(pattern, self.text())
            if match:
                found.append(match)
            return match is not None

        wait_for(seen, f"{self.name} to print {pattern!r}", timeout)
        return found[0]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> None:
        """A crash: SIGKILL, no teardown."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._out.close()

    def stop(self) -> int:
        """SIGTERM and the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._out.close()
        return int(self.proc.returncode)


class Chaos:
    """One API server (restartable on its port) and the controllers started against it."""

    def __init__(self, tmp_path: Path, cluster: str, *, faults: str = "") -> None:
        self.tmp = tmp_path
        self.cluster = tmp_path / "cluster.yaml"
        self.cluster.write_text(cluster)
        self.kubeconfig = tmp_path / "kubeconfig"
        self.faults = faults
        self.port = 0
        self.server: Proc | None = None
        self.procs: list[Proc] = []
        self._client: Client | None = None
        self._starts = 0
        self.serve()

    def _log(self, name: str) -> Path:
        self._starts += 1
        return self.tmp / f"{self._starts:02d}-{name}.log"

    def serve(self) -> None:
        env = {FAULTS_ENV: self.faults} if self.faults else {}
        self.server = Proc("serve", [*KUBEBERTH, "serve", "-f", str(self.cluster),
                                     "--port", str(self.port), "--token", TOKEN,
                                     "--kubeconfig-out", str(self.kubeconfig)],
                           self._log("serve"), env)
        match = self.server.wait_for_line(r"listening on http://127\.0\.0\.1:(\d+)")
        self.port = int(match.group(1))
        wait_for(self.kubeconfig.exists, "the kubeconfig")

    def restart_server(self) -> None:
        assert self.server is not None
        self.server.stop()
        self.serve()

    def start(self, name: str, *args: str) -> Proc:
        """``kubeberth <name> ...`` against the server, health on a free port; returns once
        it serves /healthz (its URL is in :meth:`health_url`)."""
        proc = Proc(name, [*KUBEBERTH, name, "--kubeconfig", str(self.kubeconfig),
                           "--metrics-port", "0", *args], self._log(name))
        self.procs.append(proc)
        proc.wait_for_line(r"metrics on (http://\S+)/metrics")
        return proc

    @staticmethod
    def health_url(proc: Proc) -> str:
        match = re.search(r"metrics on (http://\S+)/metrics", proc.text())
        assert match is not None
        return match.group(1)

    def ready(self, proc: Proc) -> bool:
        try:
            return httpx.get(f"{self.health_url(proc)}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self) -> Client:
        if self._client is None:
            self._client = Client(config=KubeConfig.from_file(str(self.kubeconfig)))
        return self._client

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive():
                proc.kill9()
        if self.server is not None and self.server.alive():
            self.server.stop()

    # ---- reading the cluster ---------------------------------------------------------------
    def pods(self) -> list[Obj]:
        return [p.to_dict() for p in self.client().list(Pod, namespace="*")]

    def nodes(self) -> list[Obj]:
        return [n.to_dict() for n in self.client().list(Node)]

    def events(self) -> list[Obj]:
        return [e.to_dict() for e in self.client().list(Event, namespace="*")]

    def pdbs(self) -> list[Obj]:
        return [p.to_dict() for p in self.client().list(PodDisruptionBudget, namespace="*")]

    def lease_holder(self, name: str) -> str:
        lease = self.client().get(Lease, name, namespace="kube-system")
        return (lease.spec.holderIdentity or "") if lease.spec else ""

    def apply(self, text: str, name: str = "objects.yaml") -> None:
        """Create objects through the API (lightkube, as a client would)."""
        from lightkube import codecs

        path = self.tmp / name
        path.write_text(text)
        client = self.client()
        for obj in codecs.load_all_yaml(path.read_text()):
            client.create(obj)


def _requests(pod: Obj) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in pod["spec"].get("containers") or []:
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            out[name] = out.get(name, 0) + to_milli(name, value)
    return out


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def violations(chaos: Chaos, *, pdb_min: dict[str, int] | None = None) -> list[str]:
    """What the cluster shows that must never be: a pod bound twice, a node over allocatable
    among its Running pods, a PodDisruptionBudget below its minimum, a pod neither bound nor
    pending with a reason (nor refused by the kubelet with one)."""
    out: list[str] = []
    pods = chaos.pods()
    nodes = {n["metadata"]["name"]: n for n in chaos.nodes()}
    scheduled: dict[str, int] = {}
    for e in chaos.events():
        if e.get("reason") == "Scheduled":
            uid = e["involvedObject"].get("uid") or _key(e["involvedObject"])
            scheduled[uid] = scheduled.get(uid, 0) + 1
    for uid, n in scheduled.items():
        if n > 1:
            out.append(f"pod {uid} was bound {n} times")
    used: dict[str, dict[str, int]] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        status = p.get("status") or {}
        if status.get("phase") == "Running" and node:
            for name, milli in _requests(p).items():
                used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0) + milli
        if node or status.get("phase") in TERMINAL:
            if status.get("phase") == "Failed" and not status.get("reason"):
                out.append(f"pod {_key(p)} failed without a reason")
            continue
        cond = next((c for c in status.get("conditions") or []
                     if c.get("type") == "PodScheduled"), None)
        if cond is None or cond.get("status") != "False" or not cond.get("reason"):
            out.append(f"pod {_key(p)} is pending without a reason: {cond}")
    for node, totals in used.items():
        alloc = (nodes[node].get("status") or {}).get("allocatable") or {}
        for name, milli in totals.items():
            if name in alloc and milli > to_milli(name, alloc[name]):
                out.append(f"node {node}: Running pods request {milli} milli {name}, "
                           f"allocatable {alloc[name]}")
    for pdb in chaos.pdbs():
        status = pdb.get("status") or {}
        want = (pdb_min or {}).get(_key(pdb), status.get("desiredHealthy", 0))
        if status.get("currentHealthy", 0) < want:
            out.append(f"PDB {_key(pdb)}: {status.get('currentHealthy')} healthy < {want}")
    return out


def healthy_of(chaos: Chaos, app: str) -> int:
    """Running, not terminating pods labelled app=``app``."""
    return sum(1 for p in chaos.pods()
               if (p["metadata"].get("labels") or {}).get("app") == app
               and (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp"))


def node(name: str, gpus: int, *, cordoned: bool = False, labels: str = "{}") -> str:
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
spec: {{unschedulable: {str(cordoned).lower()}}}
status:
  allocatable: {{cpu: "64", memory: 256Gi, {GPU}: "{gpus}", pods: "110"}}
---
"""


def pod(name: str, gpus: int = 1, *, duration: float | None = None, app: str = "") -> str:
    ann = f", annotations: {{kubeberth.io/duration-seconds: \"{duration}\"}}" \
        if duration is not None else ""
    labels = f", labels: {{app: {app}}}" if app else ""
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default{labels}{ann}}}
spec:
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: "1", memory: 1Gi, {GPU}: "{gpus}"}}
      limits: {{{GPU}: "{gpus}"}}
---
"""
