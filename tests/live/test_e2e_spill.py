"""The must-show end-to-end run: `kubeberth serve` and the four live controllers as separate
processes, kubectl applying the spill scenario of the `kubeberth up` demo bundle, and the same
inputs through `kubeberth simulate`.

Live, over HTTP: the queue-labelled gang, Job and Deployment pods are admitted by Kueue
(`admission`), the gang is bound all together (`scheduler`, Coscheduling), the scale-up spills
to the virtual-kubelet node, and when the ETL Job completes the spill controller taints the
VK node low-usage after its stabilization, the descheduler evicts the VK pods within the PDB
and the Deployment's replacements run in the cluster.

What must match the simulator (decisions, not timing): admitted workloads per ClusterQueue and
their flavor, the gang's members bound together and in the cluster, which pods went to the VK
node (the two the scale-up created) and that exactly those were evicted, each replaced in the
cluster, never more than the PDB allows at once, and the taint's flips (added, then removed).
What may differ: times (wall clock against virtual time), pod names drawn at random (the
ReplicaSet's suffixes) and the GPU node each pod lands on (it depends on the order in which
Kueue's admissions reach the scheduler, which the simulator makes at one instant). The live
spill controller starts once the first wave is bound: in the simulator that wave binds at t=0,
before any stabilization could elapse on the empty cluster, and starting it first live would
let the empty cluster's free GPUs taint the VK node before the scale-up.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest
from tests.live.harness import KUBECTL, wait_for
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.cli.up import demo_dir

VK = "virtual-kubelet"
LOW = "vk.node.com/low-gpu-usage"
CLUSTER_NODES = {"gpu-a", "gpu-b"}
ETL_SECONDS = 30  # live: long enough for the scale-up to spill before the Job ends, under load
FLAVOR = {"training": "in-cluster", "low-priority": "in-cluster",
          "inference-vk": "virtual-kubelet"}
SPILL = """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
virtualNode:
  name: virtual-kubelet
  labels: {type: virtual-kubelet, kubernetes.io/role: agent}
  capacity: {cpu: "4000", memory: 32Ti, nvidia.com/gpu: 512, pods: "5000"}
  startLatencySeconds: 0
controller:
  intervalSeconds: 0.2
  threshold: 4
  windowSeconds: 0.6
  stabilizationSeconds: 1.5
  signal: {source: cluster}
"""


class Proc:
    """A kubeberth command as a process, its output in a file."""

    def __init__(self, tmp: Path, name: str, *args: str) -> None:
        self.name = name
        self.log = tmp / f"{name}.log"
        self._out: IO[str] = self.log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "kubeberth", *args],
                                     stdout=self._out, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONHASHSEED": "0"})

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._out.close()
        return code


class Kubectl:
    def __init__(self, tmp: Path, kubeconfig: Path) -> None:
        if not Path(KUBECTL).exists():
            pytest.skip("kubectl is not installed (expected at /usr/bin/kubectl)")
        self.kubeconfig = kubeconfig
        self.env = {"HOME": str(tmp), "PATH": "/usr/bin:/bin",
                    "KUBECACHEDIR": str(tmp / "kubecache")}

    def __call__(self, *args: str) -> str:
        proc = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
                              capture_output=True, text=True, timeout=60, env=self.env)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self("get", *args, "-o", "json"))["items"]
        return items


def running(pods: list[dict[str, Any]], prefix: str = "") -> dict[str, str]:
    """Running, not terminating pods (whose name starts with ``prefix``) -> node."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods
            if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"].startswith(prefix)}


def admitted(log: str) -> dict[str, tuple[str, str]]:
    """Workloads the admission controller admitted: ns/name -> (ClusterQueue, GPU flavor)."""
    return {m[1]: (m[2], m[3]) for m in re.finditer(
        r"admitted (\S+) in ClusterQueue (\S+) \(.*nvidia\.com/gpu=([\w-]+)", log)}


def simulate(tmp: Path, demo: Path, workload: Path, spill: Path) -> Path:
    """`kubeberth simulate` on the same inputs; the kubectl scale-up becomes the
    Deployment's replicas schedule (the scale-down at 60 s only ends the run)."""
    text = workload.read_text()
    sim_workload = tmp / "sim-workload.yaml"
    sim_workload.write_text(text.replace(
        "metadata: {name: infer, namespace: serving}",
        "metadata: {name: infer, namespace: serving, "
        "annotations: {kubeberth.io/replicas-schedule: \"5=3,60=1\"}}"))
    out = tmp / "sim"
    res = CliRunner().invoke(app, [
        "simulate", "--cluster", str(demo / "nodes.yaml"), "-w", str(demo / "kueue.yaml"),
        "-w", str(sim_workload), "-c", str(demo / "scheduler-config.yaml"),
        "--spill-config", str(spill), "--deschedule-policy", str(demo / "descheduler.yaml"),
        "--descheduling-interval", "1", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    return out


def test_serve_four_controllers_kubectl_spill_and_return_as_simulated(tmp_path: Path) -> None:
    demo = demo_dir()
    kubeconfig = tmp_path / "kubeconfig"
    spill = tmp_path / "spill.yaml"
    spill.write_text(SPILL)
    workload = tmp_path / "workload.yaml"
    text = (demo / "workload.yaml").read_text()
    assert 'kubeberth.io/duration-seconds: "60"' in text
    workload.write_text(text.replace('kubeberth.io/duration-seconds: "60"',
                                     f'kubeberth.io/duration-seconds: "{ETL_SECONDS}"'))
    procs: list[Proc] = []
    try:
        serve = Proc(tmp_path, "serve", "serve", "--port", "0", "--kubeconfig-out",
                     str(kubeconfig), "-f", str(demo / "nodes.yaml"),
                     "-f", str(demo / "vk-node.yaml"), "-f", str(demo / "kueue.yaml"))
        procs.append(serve)
        wait_for(lambda: "listening on" in serve.text(), "the API server", timeout=60)
        common = ("--kubeconfig", str(kubeconfig), "--metrics-port", "0",
                  "--leader-elect-lease-duration", "3")
        sched = Proc(tmp_path, "scheduler", "scheduler", "--config",
                     str(demo / "scheduler-config.yaml"), *common)
        admission = Proc(tmp_path, "admission", "admission", *common)
        desched = Proc(tmp_path, "descheduler", "descheduler", "--policy",
                       str(demo / "descheduler.yaml"), "--descheduling-interval", "1s",
                       *common)
        procs += [sched, admission, desched]
        for p in (sched, admission, desched):
            wait_for(lambda p=p: "synced" in p.text() or "metrics on" in p.text(),
                     f"the {p.name} to start", timeout=60)
        kubectl = Kubectl(tmp_path, kubeconfig)
        assert {n["metadata"]["name"] for n in kubectl.items("nodes")} == \
            CLUSTER_NODES | {"cpu-a", VK}

        # First wave: the gang, the ETL Job and one serving replica fill the 16 GPUs.
        kubectl("apply", "-f", str(workload))
        wait_for(lambda: len(running(kubectl.items("pods", "-A"))) == 8,
                 "the first wave to run", timeout=60)
        first = running(kubectl.items("pods", "-A"))
        assert set(first.values()) <= CLUSTER_NODES
        trainers = {n: node for n, node in first.items() if n.startswith("trainer-")}
        assert len(trainers) == 4
        # All-or-nothing: three members waited at Permit (reserved, not bound) until the
        # fourth was reserved; only then was any member bound.
        slog = sched.text()
        first_bind = slog.index("bound train/trainer-")
        waited = set(re.findall(r"train/(trainer-\d): waiting at Permit", slog[:first_bind]))
        assert len(waited) == 3, slog
        assert len(re.findall(r"bound train/trainer-", slog)) == 4

        spillctl = Proc(tmp_path, "spill-controller", "spill-controller", "--config",
                        str(spill), *common)
        procs.append(spillctl)
        wait_for(lambda: "metrics on" in spillctl.text(), "the spill controller", timeout=60)

        # The burst: the cluster is full, so the scale-up's two new replicas spill.
        original = {n for n in first if n.startswith("infer-")}
        kubectl("scale", "deployment", "infer", "-n", "serving", "--replicas", "3")
        wait_for(lambda: len([n for n, node in running(kubectl.items(
            "pods", "-n", "serving")).items() if node == VK]) == 2, "two pods on VK",
            timeout=60)
        on_vk = {n for n, node in running(kubectl.items("pods", "-n", "serving")).items()
                 if node == VK}
        assert not on_vk & original
        assert LOW not in kubectl("get", "node", VK, "-o", "jsonpath={.spec.taints}")

        # The PDB (maxUnavailable 1) holds while the pods come back: sample what runs.
        lowest = [3]
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.is_set():
                lowest[0] = min(lowest[0], len(running(kubectl.items("pods", "-n",
                                                                      "serving"))))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # The ETL Job completes; the taint goes on, the VK pods are evicted and replaced in
        # the cluster, then (2 GPUs free) the taint comes off again.
        wait_for(lambda: "removed " + LOW in spillctl.text(), "the taint to come and go",
                 timeout=90)
        wait_for(lambda: (lambda r: len(r) == 3 and VK not in r.values())(
            running(kubectl.items("pods", "-n", "serving"))), "three replicas in the cluster",
            timeout=30)
        stop_sampling.set()
        sampler.join(timeout=10)
        final = running(kubectl.items("pods", "-n", "serving"))
        assert set(final.values()) <= CLUSTER_NODES and original <= set(final)
        assert lowest[0] >= 2  # never more than one replica missing
        jobs = kubectl.items("jobs", "-n", "data")
        assert jobs[0]["status"].get("succeeded") == 3
        live_log = {p.name: p.text() for p in procs}
    finally:
        codes = {p.name: p.stop() for p in reversed(procs)}
    assert codes == dict.fromkeys(codes, 0), codes

    # The live decisions, from the controllers' logs.
    live_admitted = admitted(live_log["admission"])
    live_evicted = re.findall(r"evicted serving/(\S+) from (\S+) \(RemovePodsViolatingNode"
                              r"Taints", live_log["descheduler"])
    live_flips = re.findall(r"(added|removed) " + re.escape(LOW), live_log["spill-controller"])
    assert all(FLAVOR[cq] == flavor for cq, flavor in live_admitted.values())
    assert {w for w, (cq, _) in live_admitted.items() if cq == "training"} == \
        {f"train/pod-trainer-{i}" for i in range(4)}
    assert sorted(p for p, _ in live_evicted) == sorted(on_vk)
    assert {node for _, node in live_evicted} == {VK}

    # The simulator, same inputs.
    out = simulate(tmp_path, demo, workload, spill)
    summary = json.loads((out / "summary.json").read_text())
    sim_pods = {r["pod"]: r for r in csv.DictReader((out / "pods.csv").open())}
    sim_evictions = list(csv.DictReader((out / "evictions.csv").open()))

    # Admission: the same number of workloads per ClusterQueue, each with its one flavor.
    sim_cq = {cq: q["admitted"] for cq, q in summary["admission"]["clusterQueues"].items()
              if q["admitted"]}
    assert Counter(cq for cq, _ in live_admitted.values()) == Counter(sim_cq)
    assert sim_cq == {"training": 4, "low-priority": 1, "inference-vk": 5}
    # The gang: all four members bound at one instant, in the cluster, in both.
    sim_trainers = {p: r for p, r in sim_pods.items() if p.startswith("train/trainer-")}
    assert len({r["bound"] for r in sim_trainers.values()}) == 1
    assert {r["node"] for r in sim_trainers.values()} <= CLUSTER_NODES
    assert len(trainers) == len(sim_trainers)
    # Spill: the scale-up's pods, and only those, went to the VK node.
    sim_vk = {p for p, r in sim_pods.items() if r["node"] == VK}
    assert len(sim_vk) == len(on_vk) == 2
    assert all(float(sim_pods[p]["arrival"]) == 5.0 for p in sim_vk)
    # Return: exactly the VK pods evicted, within the PDB, each replaced in the cluster.
    assert sorted(r["pod"] for r in sim_evictions) == sorted(sim_vk)
    assert all(r["allowed"] == "1" and r["node"] == VK for r in sim_evictions)
    assert all(sim_pods[r["replacement"]]["node"] in CLUSTER_NODES for r in sim_evictions)
    assert len({r["time"] for r in sim_evictions}) == len(sim_evictions)  # one per pass
    assert len(live_evicted) == len(sim_evictions)
    # The taint: added once the Job's GPUs are free, removed once the pods are back.
    assert [f["taint"] for f in summary["spill"]["flips"]] == live_flips == ["added", "removed"]
