"""DRA scenarios through ``kubeberth explain`` and the upstream oracle (kube-scheduler v1.37.2's
DynamicResources plugin and structured allocator), compared pod by pod and node by node.

The oracle runs the scheduling cycle's filters and scores but not Reserve, so a claim it
allocates for one pod is not in use for the next: each scenario here has at most one pod whose
allocation could matter to a later one, and earlier use comes from claims already allocated in
the manifests. kubeberth's reasons say which request failed and why after upstream's words, so
they are compared by prefix (a documented deviation, docs/dra.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.oracle.harness import run_kubeberth, run_oracle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dra"
CLASS = yaml.safe_load((EXAMPLES / "class.yaml").read_text())


def docs(*names: str) -> list[dict[str, Any]]:
    out = [CLASS]
    for name in names:
        out += [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    return out


def held(name: str, pool: str, devices: list[str], node: str) -> list[dict[str, Any]]:
    """A running pod and its claim, allocated the given devices."""
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": len(devices)}}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "r", "driver": "gpu.nvidia.com", "pool": pool,
                                     "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": f"default/{name}"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
         "spec": {"nodeName": node, "resourceClaims": [{"name": "r", "resourceClaimName": name}],
                  "containers": [{"name": "c", "image": "x"}]}}]


def pending(name: str, requests: list[dict[str, Any]], constraints: list[Any] | None = None,
            claim_name: str | None = None) -> list[dict[str, Any]]:
    """A pending pod with a claim of its own (or one naming ``claim_name``)."""
    out: list[dict[str, Any]] = []
    if claim_name is None:
        claim_name = f"{name}-claim"
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": claim_name, "namespace": "default"},
                    "spec": {"devices": {"requests": requests,
                                         "constraints": constraints or []}}})
    out.append({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"resourceClaims": [{"name": "c", "resourceClaimName": claim_name}],
                         "containers": [{"name": "c", "image": "x",
                                         "resources": {"claims": [{"name": "c"}]}}]}})
    return out


def gpus(count: int | None = None, mode: str | None = None,
         selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": "gpus", "exactly": exactly}


H100 = 'device.attributes["gpu.nvidia.com"].productName == "H100"'
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "h100-example": docs("h100/cluster.yaml", "h100/workload.yaml"),
    "nvlink-example": docs("nvlink/cluster.yaml", "nvlink/running.yaml", "nvlink/workload.yaml"),
    "mig-counters-exhausted": docs("mig/cluster.yaml")
    + held("two-slices", "mig-node", ["gpu-0-mig-3g-0", "gpu-0-mig-3g-1"], "mig-node")
    + pending("third", [{"name": "slice", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
            "expression": 'device.attributes["gpu.nvidia.com"].profile == "3g.20gb"'}}]}}]),
    "mig-whole-gpu-blocked-by-a-slice": docs("mig/cluster.yaml")
    + held("one-slice", "mig-node", ["gpu-0-mig-3g-2"], "mig-node")
    + pending("whole", [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
            "expression": 'device.attributes["gpu.nvidia.com"].profile == "full"'}}]}}]),
    "first-available-falls-back": docs("h100/cluster.yaml") + pending("fallback", [{
        "name": "gpu", "firstAvailable": [
            {"name": "two-h100", "deviceClassName": "gpu.nvidia.com", "count": 2,
             "selectors": [{"cel": {"expression": H100}}]},
            {"name": "two-any", "deviceClassName": "gpu.nvidia.com", "count": 2}]}]),
    "all-mode-and-exact-count": docs("nvlink/cluster.yaml", "nvlink/running.yaml")
    + pending("all", [gpus(mode="All")]) + pending("five", [gpus(count=5)])
    + pending("four", [gpus(count=4, selector='device.capacity["gpu.nvidia.com"].memory'
                                               '.compareTo(quantity("80Gi")) >= 0')]),
    "allocated-claim-pins-its-node": docs("h100/cluster.yaml")
    + held("pinned", "a100-2", ["gpu-0"], "a100-2")
    + pending("sharer", [], claim_name="pinned"),
    "missing-class": docs("h100/cluster.yaml") + pending("lost", [
        {"name": "gpu", "exactly": {"deviceClassName": "tpu.example.com"}}]),
}


def view(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in data["pods"]:
        nodes = {name: n["filter"].get("DynamicResources") for name, n in p["nodes"].items()}
        out[p["pod"]] = {"result": p["result"], "selectedNode": p.get("selectedNode"),
                         "nodes": nodes}
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_dra_scenario_agrees_with_upstream(name: str, tmp_path: Path) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(yaml.safe_dump_all(SCENARIOS[name], sort_keys=False))
    kb = view(run_kubeberth(manifests, None))
    oracle = view(run_oracle(manifests, None))
    assert kb.keys() == oracle.keys()
    for pod, mine in kb.items():
        theirs = oracle[pod]
        assert (mine["result"], mine["selectedNode"]) == \
            (theirs["result"], theirs["selectedNode"]), pod
        assert mine["nodes"].keys() == theirs["nodes"].keys(), pod
        for node, verdict in mine["nodes"].items():
            other = theirs["nodes"][node]
            assert (verdict is None) == (other is None), (pod, node)
            if verdict is None:
                continue
            assert verdict["code"] == other["code"], (pod, node, verdict, other)
            assert len(verdict["reasons"]) == len(other["reasons"]), (pod, node)
            for mine_r, theirs_r in zip(verdict["reasons"], other["reasons"], strict=True):
                assert mine_r.startswith(theirs_r), (pod, node, mine_r, theirs_r)
