"""The four-queue spill example through ``kubeberth simulate``: queue waits, borrowing and
preemptions show in summary.json and queues.csv.

The bundled workload takes minutes on the 1,523-node cluster, so the test runs the same
generator at a fifth of the pods against the example's queues with a fifth of the GPU quota:
the same contention, on the same cluster and virtual node."""

from __future__ import annotations

import base64
import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "four-queues"
NODES = ROOT / "src" / "kubeberth" / "sim" / "data" / "openb_node_list_all_node.csv.gz"
SCALE = 0.2


def scaled_queues(path: Path) -> Path:
    docs = list(yaml.safe_load_all((EXAMPLE / "kueue.yaml").read_text()))
    for doc in docs:
        if doc["kind"] != "ClusterQueue" or doc["metadata"]["name"] == "inference-vk":
            continue
        for rg in doc["spec"]["resourceGroups"]:
            for fl in rg["flavors"]:
                for res in fl["resources"]:
                    if res["name"] == "nvidia.com/gpu":
                        for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                            if key in res:
                                res[key] = str(round(int(res[key]) * SCALE))
    path.write_text(yaml.safe_dump_all(docs))
    return path


def run(tmp: Path, out: str) -> dict[str, Any]:
    workload = tmp / "workload.yaml"
    if not workload.exists():
        gen = subprocess.run([sys.executable, str(EXAMPLE / "generate.py"), "--scale",
                              str(SCALE)], check=True, capture_output=True, text=True)
        workload.write_text(gen.stdout)
    queues = scaled_queues(tmp / "kueue.yaml")
    res = CliRunner().invoke(app, [
        "simulate", "--cluster", str(NODES), "--cluster", str(EXAMPLE / "vk-node.yaml"),
        "-w", str(queues), "-w", str(workload), "-q", "-o", str(tmp / out)])
    assert res.exit_code == 0, res.output
    assert "Kueue admission" in res.output
    summary: dict[str, Any] = json.loads((tmp / out / "summary.json").read_text())
    return summary


def test_four_queues_show_waits_borrowing_and_preemptions(tmp_path: Path) -> None:
    summary = run(tmp_path, "out")
    adm = summary["admission"]
    cqs = adm["clusterQueues"]
    assert sorted(cqs) == ["inference", "inference-vk", "low-priority", "training"]
    # Borrowing: low-priority has no quota, so everything it ran was borrowed.
    assert cqs["low-priority"]["admitted"] > 0
    assert cqs["low-priority"]["borrowedGpuHours"] > 0
    # Preemption: the low-priority borrowers were reclaimed.
    assert adm["preemptions"] > 0
    assert cqs["low-priority"]["preempted"] > 0
    assert set(cqs["low-priority"]["preemptionReasons"]) <= {
        "InCohortReclamation", "InCohortReclaimWhileBorrowing"}
    # Waits: somebody queued for quota.
    assert max(c["waitAdmitSeconds"].get("p99", 0) for c in cqs.values()) > 0
    # The virtual-kubelet queue never lends or borrows, and its pods land on the virtual node.
    assert cqs["inference-vk"]["borrowedGpuHours"] == 0
    assert cqs["inference-vk"]["preempted"] == 0
    with (tmp_path / "out" / "pods.csv").open() as f:
        pods = list(csv.DictReader(f))
    vk = [p for p in pods if p["pod"].startswith("inference/vk-")]
    assert vk and all(p["node"] == "virtual-kubelet-0" for p in vk)
    assert all(p["node"] != "virtual-kubelet-0" for p in pods
               if not p["pod"].startswith("inference/vk-"))
    with (tmp_path / "out" / "queue_timeseries.csv").open() as f:
        series = list(csv.DictReader(f))
    assert {r["cluster_queue"] for r in series} == set(cqs)
    assert max(float(r["dominant_share"]) for r in series
               if r["cluster_queue"] == "low-priority") > 0
    # The report shows the queues: waits, borrowing and preemptions by reason.
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Kueue admission per queue</h2>" in html
    assert "<caption>preemptions by reason</caption>" in html
    svgs = [base64.b64decode(m).decode() for m in re.findall(
        r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)]
    assert any("low-priority borrowed" in svg for svg in svgs)  # the borrowed-GPU line


def test_four_queues_is_deterministic(tmp_path: Path) -> None:
    run(tmp_path, "a")
    run(tmp_path, "b")
    for name in ("summary.json", "timeseries.csv", "pods.csv", "queues.csv",
                 "queue_timeseries.csv", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
