"""`kubeberth explain` with extenders configured: verdicts in JSON, and the table still renders."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.live.extender import ExtenderServer, ExtenderService, make_app
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
"""

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, resources: {requests: {cpu: "4", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers: [{name: c, resources: {requests: {cpu: "64", memory: 1Gi}}}]
"""


def test_explain_reports_extender_filter_score_and_binding(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "pods.yaml").write_text(PODS)
    service = ExtenderService(load_scheduler_config(None), in_tree_registry(),
                              load_manifests([tmp_path / "cluster.yaml"]))
    with ExtenderServer(make_app(service)) as server:
        (tmp_path / "sched.yaml").write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"extenders:\n- urlPrefix: {server.url}\n  filterVerb: filter\n"
            "  prioritizeVerb: prioritize\n  bindVerb: bind\n  weight: 2\n"
            "  nodeCacheCapable: true\n")
        args = ["explain", "-f", str(tmp_path / "cluster.yaml"), "-f",
                str(tmp_path / "pods.yaml"), "--config", str(tmp_path / "sched.yaml")]
        res = CliRunner().invoke(app, [*args, "-o", "json"])
        assert res.exit_code == 0, res.stderr
        web, big, huge = json.loads(res.stdout)["pods"]
        table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "default/web" in table.stdout
    assert web["selectedNode"] == "n2"
    assert web["extenders"] == {"ignoredErrors": {}, "boundBy": server.url}
    n2 = web["nodes"]["n2"]
    assert n2["extenders"][server.url] == {"filter": {"code": "Success", "reasons": []},
                                           "score": {"raw": 10, "weighted": 200}}
    assert n2["total"] == sum(s["weighted"] for s in n2["score"].values()) + 200
    # n1 failed in-tree, so the extender never saw it: no verdict of its own.
    assert big["nodes"]["n1"]["extenders"] == {}
    assert big["selectedNode"] == "n2"
    # No node passed the in-tree filters: no extender ran, the fields are there all the same.
    assert huge["result"] == "Unschedulable"
    assert huge["extenders"] == {"ignoredErrors": {}, "boundBy": None}
    assert all(n["extenders"] == {} for n in huge["nodes"].values())
