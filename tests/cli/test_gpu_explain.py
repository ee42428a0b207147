"""GPU shares and models in manifests, through `kubeberth explain` and back."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gpu"

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubeberth.io/gpu-model: T4}}
status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "2",
                       kubeberth.io/gpu-milli: "2000"}}
"""
CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled: [{name: GpuDevices}, {name: BestFitScore}]
"""


def share_pod(name: str, milli: int, *, node: str = "", index: str = "") -> str:
    annotations = f"annotations: {{kubeberth.io/gpu-index: \"{index}\"}}" if index else ""
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, {annotations}}}
spec:
  nodeName: "{node}"
  containers: [{{name: c, resources: {{requests: {{cpu: "1", kubeberth.io/gpu-milli: "{milli}"}},
                                      limits: {{kubeberth.io/gpu-milli: "{milli}"}}}}}}]
"""


def explain(tmp_path: Path, manifests: str) -> dict[str, object]:
    (tmp_path / "m.yaml").write_text(manifests)
    (tmp_path / "c.yaml").write_text(CONFIG)
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "m.yaml"), "-c",
                                   str(tmp_path / "c.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.output
    data: dict[str, object] = json.loads(res.output)
    return data


def test_example_places_share_and_model_constrained_pods() -> None:
    res = CliRunner().invoke(app, ["explain", "-f", str(EXAMPLE / "cluster.yaml"), "-c",
                                   str(EXAMPLE / "scheduler.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.output
    pods = {p["pod"]: p for p in json.loads(res.output)["pods"]}
    assert pods["default/two-v100"]["selectedNode"] == "v100-node"
    assert len(pods["default/two-v100"]["gpuDevices"]) == 2
    t4 = pods["default/two-v100"]["nodes"]["t4-node"]["filter"]["GpuDevices"]
    assert t4["code"] == "UnschedulableAndUnresolvable"
    assert pods["default/share-400"]["result"] == "Scheduled"
    assert len(pods["default/share-400"]["gpuDevices"]) == 1


def test_devices_round_trip(tmp_path: Path) -> None:
    first = explain(tmp_path, NODE + share_pod("a", 700))
    entry = first["pods"][0]  # type: ignore[index]
    assert entry["result"] == "Scheduled" and entry["gpuDevices"] == [0]
    # Write the decision back: bound on its device, a 500m pod now needs the other device.
    index = "-".join(str(d) for d in entry["gpuDevices"])
    second = explain(tmp_path, NODE + share_pod("a", 700, node="n1", index=index)
                     + share_pod("b", 500))
    b = second["pods"][0]  # type: ignore[index]
    assert b["pod"] == "default/b" and b["gpuDevices"] == [1]
    # Held on device 1 instead, the same pod leaves device 0 for b.
    third = explain(tmp_path, NODE + share_pod("a", 700, node="n1", index="1")
                    + share_pod("b", 500))
    assert third["pods"][0]["gpuDevices"] == [0]  # type: ignore[index]


def test_a_share_that_fits_no_device_is_reported(tmp_path: Path) -> None:
    data = explain(tmp_path, NODE + share_pod("x", 700, node="n1", index="0")
                   + share_pod("y", 700, node="n1", index="1") + share_pod("z", 400))
    z = data["pods"][0]  # type: ignore[index]
    assert z["result"] == "Unschedulable"
    assert z["nodes"]["n1"]["filter"]["GpuDevices"]["reasons"] == [
        "node(s) had no GPU device with enough free capacity"]


def test_bad_gpu_request_exits_2(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(NODE + share_pod("bad", 1500))
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "m.yaml")])
    assert res.exit_code == 2
    assert "kubeberth.io/gpu-milli" in res.output


def test_share_pods_fit_a_node_advertising_only_whole_gpus(tmp_path: Path) -> None:
    node = NODE.replace(',\n                       kubeberth.io/gpu-milli: "2000"', "")
    assert "gpu-milli" not in node
    out = explain(tmp_path, node + share_pod("a", 700) + share_pod("b", 700)
                  + share_pod("c", 300))
    pods = {p["pod"]: p for p in out["pods"]}  # type: ignore[attr-defined]
    assert pods["default/a"]["gpuDevices"] == [0]
    assert pods["default/b"]["gpuDevices"] == [1]
    assert pods["default/c"]["result"] == "Scheduled"
    fit = pods["default/c"]["nodes"]["n1"]["filter"]
    assert fit["NodeResourcesFit"]["code"] == "Success"
