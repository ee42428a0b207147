"""``kubeberth snapshot`` against both API servers (tests/realcluster/conftest.py): what a real
kube-apiserver adds to objects (defaults, a service-account token volume, default tolerations,
system priority classes and namespaces) does not change a decision: ``explain -f snap/`` and
``admit -f snap/`` decide as on the manifests that were applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.live.harness import node, pod
from tests.realcluster.cluster import Api, wait_for
from typer.testing import CliRunner

from kubeberth.cli.main import app

NODES = node("gpu-a", 4) + node("gpu-b", 8) + node("gpu-c", 2)
BOUND = """\
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: default}
spec:
  nodeName: gpu-b
  containers:
  - name: main
    image: busybox
    resources:
      requests: {cpu: "4", memory: 4Gi, nvidia.com/gpu: "6"}
      limits: {nvidia.com/gpu: "6"}
---
"""
PENDING = "".join(pod(f"p{i}", g, c) for i, (g, c) in enumerate(
    [(2, "2"), (4, "8"), (1, "1"), (2, "4"), (1, "2")]))


def _run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_snapshot_decides_as_the_manifests(api: Api, tmp_path: Path) -> None:
    api.apply(NODES + BOUND + PENDING)
    wait_for(lambda: api.pods()["default/running"]["status"].get("phase") == "Running",
             "the bound pod to run")
    manifests = tmp_path / "all.yaml"
    manifests.write_text(NODES + BOUND + PENDING)
    snap = tmp_path / "snap"
    _run("snapshot", "--kubeconfig", str(api.kubeconfig), "--out-dir", str(snap), "-q")

    def decisions(path: Path) -> list[tuple[Any, ...]]:
        data = json.loads(_run("explain", "-f", str(path), "-o", "json").stdout)
        return [(p["pod"], p["result"], p.get("selectedNode")) for p in data["pods"]]

    want = decisions(manifests)
    assert sum(1 for d in want if d[1] == "Scheduled") >= 3
    assert decisions(snap) == want
    text = (snap / "23-pods.yaml").read_text()
    assert "managedFields" not in text and "resourceVersion" not in text
