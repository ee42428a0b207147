"""What a run reports about the spill node and evictions: GPU metering of whole and shared
GPUs, evictions.csv and the summary sections, owners from both inputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import msgspec
import pytest

from kubeberth.api.objects import Pod
from kubeberth.report.output import summary, write_outputs
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.spill import SpillHost, pod_gpus
from kubeberth.sim.traces import load_workload
from kubeberth.spill.config import SpillConfig, VirtualNode
from kubeberth.state.cluster import make_pod_info

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "2", memory: 8Gi, nvidia.com/gpu: 1, kubeberth.io/gpu-milli: 1000}}
"""

TOLERATE = "tolerations: [{key: vk.node.com, operator: Exists, effect: NoSchedule}]"


def gpu_pod(name: str, requests: str, duration: int, arrival: int = 0) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{kubeberth.io/duration-seconds: "{duration}",
                kubeberth.io/arrival-seconds: "{arrival}"}}
spec:
  {TOLERATE}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{{key: type, operator: In, values: [virtual-kubelet]}}]
  containers:
  - name: c
    resources:
      requests: {requests}
      limits: {requests}
"""


def run(tmp_path: Path, *docs: str, cfg: SpillConfig | None = None
        ) -> tuple[Simulation, SpillHost]:
    (tmp_path / "c.yaml").write_text(NODE)
    (tmp_path / "w.yaml").write_text("---\n".join(docs))
    wl = load_workload([tmp_path / "c.yaml"], [tmp_path / "w.yaml"])
    sim = Simulation(wl, load_scheduler_config(None), in_tree_registry(), sample_interval=60.0)
    vn = VirtualNode(start_latency_seconds=0.0, price_per_gpu_hour=10.0)
    host = SpillHost(cfg or SpillConfig(virtual_node=vn))
    host.attach(sim)
    return sim, host


def test_whole_and_shared_gpus_are_metered(tmp_path: Path) -> None:
    sim, host = run(tmp_path,
                    gpu_pod("two", "{nvidia.com/gpu: 2, kubeberth.io/gpu-milli: 2000}", 3600),
                    gpu_pod("share", "{kubeberth.io/gpu-milli: 250}", 7200))
    res = sim.run()
    s = host.summary(res.end_time)
    assert s["podsSpilled"] == 2 and s["podsOnVirtualNodeAtEnd"] == 0
    assert s["gpuHours"] == pytest.approx(2 * 1 + 0.25 * 2)
    assert s["cost"] == pytest.approx(25.0)


def test_pod_gpus() -> None:
    whole = msgspec.convert({"spec": {"containers": [{"resources": {
        "requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 4}}}]}}, Pod)
    share = msgspec.convert({"spec": {"containers": [{"resources": {
        "requests": {"kubeberth.io/gpu-milli": 300}}}]}}, Pod)
    none = msgspec.convert({"spec": {"containers": [{"resources": {
        "requests": {"cpu": "1"}}}]}}, Pod)
    assert [pod_gpus(make_pod_info(p)) for p in (whole, share, none)] == [4.0, 0.3, 0.0]


def test_billing_includes_the_start_latency(tmp_path: Path) -> None:
    cfg = SpillConfig(virtual_node=VirtualNode(start_latency_seconds=600.0,
                                               price_per_gpu_hour=1.0))
    sim, host = run(tmp_path, gpu_pod("a", "{nvidia.com/gpu: 1}", 3600), cfg=cfg)
    res = sim.run()
    assert res.metrics.pods["default/a"].finished == 4200.0
    assert host.summary(res.end_time)["gpuHours"] == pytest.approx(4200 / 3600)


def test_evictions_csv_and_summary(tmp_path: Path) -> None:
    sim, _ = run(tmp_path, gpu_pod("a", "{nvidia.com/gpu: 1}", 3600))
    sim.call_at(100.0, lambda: sim.evict("default/a", plugin="P", reason="r"), counts=True)
    sim.call_at(200.0, lambda: sim.evict("default/a", plugin="P", reason="again"), counts=True)
    out = tmp_path / "out"
    data = write_outputs(sim.run(), out, {"workload": "t"})
    assert data["evictions"] == {"requested": 2, "evicted": 1, "refusedByCode": {"404": 1},
                                 "replacementsCreated": 0}
    rows = list(csv.DictReader((out / "evictions.csv").open()))
    assert [(r["time"], r["pod"], r["node"], r["allowed"], r["code"]) for r in rows] == [
        ("100.0", "default/a", "virtual-kubelet", "1", "200"),
        ("200.0", "default/a", "", "0", "404")]
    assert json.loads((out / "summary.json").read_text())["spill"]["podsSpilled"] == 1


def test_no_eviction_section_without_evictions(tmp_path: Path) -> None:
    sim, _ = run(tmp_path, gpu_pod("a", "{nvidia.com/gpu: 1}", 60))
    data = summary(sim.run(), {})
    assert "evictions" not in data and "spill" in data


def test_owners_from_cluster_and_workload_inputs(tmp_path: Path) -> None:
    rs = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: sys}
spec:
  replicas: 1
  selector: {matchLabels: {app: sys}}
  template:
    metadata: {labels: {app: sys}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
"""
    (tmp_path / "c.yaml").write_text(NODE + "---\n" + rs)
    (tmp_path / "w.yaml").write_text(rs.replace("sys", "web"))
    wl = load_workload([tmp_path / "c.yaml"], [tmp_path / "w.yaml"])
    assert [o.name for o in wl.owners] == ["sys", "web"]
    assert sorted(tp.pod.metadata.name[:4] for tp in wl.pods) == ["sys-", "web-"]


def test_delete_pods_on_a_node(tmp_path: Path) -> None:
    sim, _ = run(tmp_path, gpu_pod("a", "{nvidia.com/gpu: 1}", 3600),
                 gpu_pod("b", "{nvidia.com/gpu: 1}", 3600))
    gone: list[str] = []
    sim.call_at(10.0, lambda: gone.extend(sim.delete_pods_on("virtual-kubelet")), counts=True)
    res = sim.run()
    assert sorted(gone) == ["default/a", "default/b"]
    assert all(r.deleted == 10.0 for r in res.metrics.pods.values())


def test_allocation_percentages_leave_the_spill_node_out(tmp_path: Path) -> None:
    cpu_pod = """\
apiVersion: v1
kind: Pod
metadata: {name: c, annotations: {kubeberth.io/duration-seconds: "100"}}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""
    sim, _ = run(tmp_path, cpu_pod)
    data = summary(sim.run(), {})
    # One of the small node's two cores, not one of ten thousand.
    assert data["allocationPct"]["cpu"]["peak"] == 50.0
