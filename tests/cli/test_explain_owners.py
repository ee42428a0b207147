"""`kubeberth explain` on Deployments, ReplicaSets and Jobs: their pods are explained as their
controllers would create them, topped up to the desired count, never twice."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "16", memory: 32Gi, pods: "110"}}
"""
TEMPLATE = """\
    metadata: {labels: {app: %(app)s}}
    spec:
      restartPolicy: %(restart)s
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""


def deployment(name: str, replicas: int) -> str:
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
""" + TEMPLATE % {"app": name, "restart": "Always"}


def job(name: str, extra: str = "", labels: str = "{}") -> str:
    return f"""---
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: default, labels: {labels}}}
spec:
  parallelism: 2
  completions: 3{extra}
  template:
""" + TEMPLATE % {"app": name, "restart": "Never"}


def pod(name: str, app: str, node: str = "", phase: str = "") -> str:
    status = f"\nstatus: {{phase: {phase}}}" if phase else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {app}}}}}
spec:
  nodeName: "{node}"
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]{status}
"""


def explained(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "m.yaml").write_text(NODE + text)
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "m.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.output
    return [p["pod"] for p in json.loads(res.output)["pods"]]


def test_a_deployment_s_pods_are_explained(tmp_path: Path) -> None:
    pods = explained(tmp_path, deployment("web", 3))
    assert len(pods) == 3 and all(p.startswith("default/web-") for p in pods)
    assert len(set(pods)) == 3


def test_pods_already_in_the_manifests_count(tmp_path: Path) -> None:
    pods = explained(tmp_path, deployment("web", 3) + pod("web-a", "web", node="n1")
                     + pod("web-b", "web"))
    # web-b is pending and explained; one more pod tops the Deployment up to three.
    assert pods[0] == "default/web-b" and len(pods) == 2
    assert pods[1].startswith("default/web-") and pods[1] != "default/web-b"


def test_a_replica_set_under_a_deployment_in_the_manifests_is_left_to_it(tmp_path: Path) -> None:
    rs = """---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-6d4cf56db6
  namespace: default
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u1,
                     controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
""" + TEMPLATE % {"app": "web", "restart": "Always"}
    assert len(explained(tmp_path, deployment("web", 2) + rs)) == 2


def test_jobs_top_up_to_parallelism_within_completions(tmp_path: Path) -> None:
    pods = explained(tmp_path, job("etl") + pod("etl-done", "etl", node="n1", phase="Succeeded")
                     + pod("etl-done2", "etl", node="n1", phase="Succeeded"))
    assert len(pods) == 1  # 3 completions, 2 succeeded: one more pod, not parallelism's two
    assert pods == [p for p in pods if p.startswith("default/etl-")]


def test_suspended_and_queued_jobs_create_no_pods(tmp_path: Path) -> None:
    assert explained(tmp_path, job("held", extra="\n  suspend: true")) == []
    assert explained(tmp_path, job("queued", labels="{kueue.x-k8s.io/queue-name: q}")) == []
