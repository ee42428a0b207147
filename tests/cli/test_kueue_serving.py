"""Kueue's serving workloads (Kueue's own samples, unchanged): a queue-labelled Deployment's
pods are plain pods, one Workload each; a queue-labelled StatefulSet is one Workload of
``replicas`` pods. ``admit`` admits them, ``explain`` shows their pods gated, ``simulate``
runs the Deployment's pods through Kueue and refuses the StatefulSet in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.admission.model import load_kueue
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests

SETUP = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 250m}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}
"""
NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
# kubernetes-sigs/kueue site/static/examples/serving-workloads/sample-deployment.yaml and
# sample-statefulset.yaml (v0.19.0, 911a822a49bcfd99c9c62203a009efa4130ad604), unchanged.
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx
    kueue.x-k8s.io/queue-name: user-queue
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: registry.k8s.io/nginx-slim:0.27
          ports:
            - containerPort: 80
          resources:
            requests:
              cpu: "100m"
"""
STATEFUL_SET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: nginx-statefulset
  labels:
    app: nginx
    kueue.x-k8s.io/queue-name: user-queue
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: registry.k8s.io/nginx-slim:0.27
          ports:
            - containerPort: 80
          resources:
            requests:
              cpu: "100m"
  serviceName: "nginx"
"""


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in (("setup.yaml", SETUP), ("node.yaml", NODE),
                       ("deploy.yaml", DEPLOYMENT), ("sts.yaml", STATEFUL_SET)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_admit_deployment_pods_are_plain_pod_workloads(files: Path) -> None:
    code, out, err = run("admit", "-f", str(files / "setup.yaml"), "-f",
                         str(files / "deploy.yaml"), "-o", "json")
    assert code == 0, err
    rows = json.loads(out)["workloads"]
    # 250m of quota: two of the three 100m pods are admitted, one at a time as plain pods.
    assert len(rows) == 3 and all(r["name"].startswith("default/pod-nginx-deployment-")
                                  for r in rows)
    assert sorted(r["state"] for r in rows) == ["Admitted", "Admitted", "Inadmissible"]


def test_admit_statefulset_is_one_workload_admitted_whole(files: Path) -> None:
    code, out, err = run("admit", "-f", str(files / "setup.yaml"), "-f",
                         str(files / "sts.yaml"), "-o", "json")
    assert code == 0, err
    (row,) = json.loads(out)["workloads"]
    # 3 x 100m do not fit in 250m: the whole set waits, no pod of it is admitted alone.
    assert (row["name"], row["state"]) == ("default/statefulset-nginx-statefulset",
                                           "Inadmissible")
    (wl,) = load_kueue(load_manifests([files / "setup.yaml", files / "sts.yaml"])).workloads
    assert [(ps.name, ps.count, ps.requests) for ps in wl.podsets] == [
        ("main", 3, {"cpu": 100})]
    assert (wl.queue_name, wl.source) == ("user-queue", "StatefulSet")


def test_explain_shows_their_pods_gated(files: Path) -> None:
    code, out, err = run("explain", "-f", str(files / "node.yaml"), "-f",
                         str(files / "deploy.yaml"), "-f", str(files / "sts.yaml"), "-o", "json")
    assert code == 0, err
    pods = json.loads(out)["pods"]
    assert {p["result"] for p in pods} == {"SchedulingGated"}
    names = sorted(p["pod"] for p in pods)
    # OrderedReady: a gated nginx-statefulset-0 is not Ready, so it is the only one.
    assert names[-1] == "default/nginx-statefulset-0" and len(names) == 4


def test_simulate_runs_deployment_pods_through_kueue(files: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, err = run("simulate", "--cluster", str(files / "node.yaml"), "-w",
                            str(files / "setup.yaml"), "-w", str(files / "deploy.yaml"),
                            "-o", "json", "--out-dir", str(out), "-q")
    assert code == 0, err
    summary = json.loads(stdout)
    queue = summary["admission"]["clusterQueues"]["cluster-queue"]
    assert (queue["workloads"], queue["admitted"], queue["pending"]) == (3, 2, 1)
    (reason,) = summary["pendingReasons"].values()
    assert reason.startswith("waiting for Kueue admission")


def test_simulate_refuses_a_queue_labelled_statefulset_in_words(files: Path) -> None:
    code, _, err = run("simulate", "--cluster", str(files / "node.yaml"), "-w",
                       str(files / "setup.yaml"), "-w", str(files / "sts.yaml"), "-q")
    assert code == 2
    assert "a queue-labelled StatefulSet is not simulated with Kueue yet" in err
    assert "metadata.labels.kueue.x-k8s.io/queue-name" in err and "Traceback" not in err
