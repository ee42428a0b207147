"""A bound pod without status.startTime is read as started now (upstream's GetPodStartTime),
so preemption evicts it before an older pod of the same priority."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app

MANIFESTS = """\
apiVersion: v1
kind: Node
metadata: {name: a}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: old}
spec: {nodeName: a, containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
status: {phase: Running, startTime: "2024-01-01T00:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: new}
spec: {nodeName: a, containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: high}
spec: {priority: 100, containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
"""


def test_the_pod_without_a_start_time_is_the_victim(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFESTS)
    result = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "m.yaml"), "-o", "json"])
    assert result.exit_code == 0, result.output
    (pod,) = json.loads(result.stdout)["pods"]
    assert pod["nominatedNode"] == "a" and pod["victims"] == ["default/new"]
