"""The bundled GPU-count priorities example through ``kubeberth simulate``: an 8-GPU pod
preempts the small pods of one node, and they re-place on the other nodes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpu-priorities"


def simulate(tmp: Path, workload: Path) -> tuple[dict[str, dict[str, str]], dict[str, object]]:
    out = tmp / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(workload), "-q", "-o", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "pods.csv").open() as f:
        pods = {r["pod"].split("/", 1)[1]: r for r in csv.DictReader(f)}
    return pods, json.loads((out / "summary.json").read_text())


def test_the_eight_gpu_pod_defragments_one_node(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, EXAMPLE / "workload.yaml")
    home = pods["pretrain"]["node"]
    assert home and pods["pretrain"]["bound"] == "30.0"
    # It runs alone on its node; everything else runs elsewhere.
    assert [name for name, r in pods.items() if r["node"] == home] == ["pretrain"]
    assert all(r["bound"] for r in pods.values())
    preempted = sorted(name for name, r in pods.items() if r["preempted"] == "1")
    assert preempted, "the 8-GPU pod must have preempted the pods on its node"
    assert summary["pods"]["preemptions"] == len(preempted)  # type: ignore[index]
    for name in preempted:
        assert pods[name]["node"] != home and pods[name]["bound"] == "30.0"
    # Only lower-priority (fewer-GPU) pods were victims, never the 4-GPU one here.
    assert all(not name.startswith("eval") for name in preempted)


def test_without_the_priority_the_eight_gpu_pod_never_schedules(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((EXAMPLE / "workload.yaml").read_text()))
    for d in docs:
        if d["metadata"]["name"] == "pretrain":
            d["spec"]["priorityClassName"] = "gpu-1"
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump_all(docs))
    pods, summary = simulate(tmp_path, wl)
    assert pods["pretrain"]["bound"] == ""
    assert summary["pods"]["preemptions"] == 0  # type: ignore[index]
    assert summary["unscheduledPods"] == ["default/pretrain"]
