"""DRA through `kubeberth explain -o json`: the examples under examples/dra/ and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dra"


def explain(*paths: Path) -> dict[str, Any]:
    args = ["explain", "-o", "json"]
    for p in paths:
        args += ["-f", str(p)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def pods(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["pod"]: p for p in data["pods"]}


def dra_reasons(pod: dict[str, Any]) -> dict[str, list[str]]:
    return {node: e["filter"]["DynamicResources"]["reasons"]
            for node, e in pod["nodes"].items() if "DynamicResources" in e["filter"]}


def devices(pod: dict[str, Any]) -> list[str]:
    (claim,) = pod["resourceClaims"]
    return [d["device"] for d in claim["allocation"]["devices"]]


def test_h100_selector_lands_on_the_only_h100_node() -> None:
    data = explain(EXAMPLES / "class.yaml", EXAMPLES / "h100")
    trainer = pods(data)["default/trainer"]
    assert trainer["result"] == "Scheduled"
    assert trainer["selectedNode"] == "h100-1"
    reasons = dra_reasons(trainer)
    assert reasons["h100-1"] == []
    for node in ("a100-1", "a100-2"):
        assert reasons[node] == ["cannot allocate all claims: claim default/trainer-gpu: request "
                                 "gpu: no device on the node matches the class and selectors"]
    (claim,) = trainer["resourceClaims"]
    assert claim == {"name": "gpu", "claim": "default/trainer-gpu", "reservedFor":
                     ["default/trainer"], "allocation": {"node": "h100-1", "devices": [
                         {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-1",
                          "device": "gpu-0", "adminAccess": False, "consumedCapacity": {}}]}}
    assert "DynamicResources" not in data["unmodelledPlugins"]


def test_nvlink_constraint_needs_four_free_gpus_in_one_domain() -> None:
    data = explain(EXAMPLES / "class.yaml", EXAMPLES / "nvlink")
    by_pod = pods(data)
    job = by_pod["default/nvlink-job"]
    assert job["result"] == "Unschedulable"
    assert dra_reasons(job) == {"dgx-1": [
        "cannot allocate all claims: claim default/nvlink-job-gpus: request gpus: no 4 of the "
        "4 free matching devices share one value of gpu.nvidia.com/nvlinkDomain "
        "(matchAttribute)"]}
    assert job["resourceClaims"][0]["allocation"] is None
    # The node does have four free GPUs: the same claim without the constraint fits.
    other = by_pod["default/any-job"]
    assert other["result"] == "Scheduled"
    assert devices(other) == ["gpu-2", "gpu-3", "gpu-6", "gpu-7"]


def test_mig_slices_share_a_gpu_through_counters_and_a_third_fails() -> None:
    by_pod = pods(explain(EXAMPLES / "class.yaml", EXAMPLES / "mig"))
    assert devices(by_pod["default/inference-a"]) == ["gpu-0-mig-3g-0"]
    assert devices(by_pod["default/inference-b"]) == ["gpu-0-mig-3g-1"]
    third = by_pod["default/inference-c"]
    assert third["result"] == "Unschedulable"
    assert dra_reasons(third) == {"mig-node": [
        "cannot allocate all claims: claim default/inference-c-slice: request slice: 1 "
        "device(s) needed, 3 match, 0 free (gpu-0-mig-3g-0 allocated; gpu-0-mig-3g-1 "
        "allocated; gpu-0-mig-3g-2 counter gpu-0-counters/memory has 0 left, 20Gi needed)"]}


SHARED = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
"""


def pod(name: str, claim: str) -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: gpu, resourceClaimName: {claim}}}]
  containers: [{{name: c, resources: {{claims: [{{name: gpu}}]}}}}]
"""


def test_a_claim_is_allocated_once_and_shared_by_reference(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(SHARED + pod("one", "shared-gpu") + pod("two", "shared-gpu")
                 + pod("lost", "missing"))
    by_pod = pods(explain(EXAMPLES / "class.yaml", EXAMPLES / "h100" / "cluster.yaml", f))
    one, two = by_pod["default/one"], by_pod["default/two"]
    assert one["selectedNode"] == two["selectedNode"]
    node = one["selectedNode"]
    assert two["resourceClaims"][0]["reservedFor"] == ["default/one", "default/two"]
    assert devices(one) == devices(two)
    # The second pod may only go where the claim's devices are.
    for name, reasons in dra_reasons(two).items():
        assert reasons == ([] if name == node else ["resourceclaim not available on the node"])
    lost = by_pod["default/lost"]
    assert lost["result"] == "SchedulingGated"
    assert lost["message"] == "blocked by DynamicResources"
    assert lost["resourceClaims"] == [{"name": "gpu", "claim": "default/missing",
                                       "allocation": None, "reservedFor": [],
                                       "message": 'resourceclaim "missing" not found'}]


def test_bad_cel_is_an_input_error_naming_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(SHARED.replace("{deviceClassName: gpu.nvidia.com}",
                                "{deviceClassName: gpu.nvidia.com, selectors: "
                                "[{cel: {expression: 'device.driver =='}}]}"))
    res = CliRunner().invoke(app, ["explain", "-f", str(f)])
    assert res.exit_code == 2
    assert "bad.yaml" in res.output
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in res.output
    assert "ResourceClaim shared-gpu: the CEL expression" in res.output
    assert "does not compile" in res.output
    assert "Traceback" not in res.output


def test_simulate_frees_a_finished_pods_claims(tmp_path: Path) -> None:
    """In a simulation the third MIG pod waits until the first pod ends and its slice (and
    the GPU's counters) come free."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "mig" / "workload.yaml").read_text()) if d]
    timing = {"inference-a": ("0", "10"), "inference-b": ("0", "100"),
              "inference-c": ("1", "50")}
    for d in docs:
        if d["kind"] == "Pod":
            arrival, duration = timing[d["metadata"]["name"]]
            d["metadata"]["annotations"] = {"kubeberth.io/arrival-seconds": arrival,
                                            "kubeberth.io/duration-seconds": duration}
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    res = CliRunner().invoke(app, [
        "simulate", "--cluster", str(EXAMPLES / "class.yaml"),
        "--cluster", str(EXAMPLES / "mig" / "cluster.yaml"), "-w", str(workload), "-q",
        "--out-dir", str(tmp_path / "out"), "-o", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["pods"]["scheduled"] == 3 and data["pods"]["unscheduled"] == 0
    assert data["attempts"]["unschedulable"] == 1
    assert data["waitSeconds"]["max"] == 9.0
