"""The embedded server's conformance report: one kubectl command table run against the embedded
server and against real kube-apiserver (with kube-controller-manager) on the same objects,
every difference in output listed.

Differences are not failures: docs/apiserver-conformance.md lists each command whose output
differs, with why. The test fails when that list and the observed differences disagree (a new
difference, or a listed one gone), printing both outputs of every command that differs, and
writes the whole report to .cache/realcluster/kubectl-diff.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.apiserver.conftest import CLUSTER
from tests.realcluster.cluster import Api, RealCluster, kubectl, reset, wait_for

from kubeberth.apiserver import EmbeddedServer, ManualClock

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "apiserver-conformance.md"
REPORT = ROOT / ".cache" / "realcluster" / "kubectl-diff.md"

# The kubectl tests' cluster, then what the commands below read.
SETUP = CLUSTER + """\
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default, labels: {app: train}}
spec:
  nodeName: gpu-a
  containers:
  - name: main
    image: trainer:1
    resources:
      requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
      limits: {nvidia.com/gpu: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: idle, namespace: default}
spec:
  nodeName: gpu-b
  containers:
  - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: default}
spec:
  containers:
  - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: train}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
"""

DUPLICATE = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "idle"},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
BAD_QUANTITY = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                           "spec": {"containers": [{"name": "main", "image": "busybox",
                                                    "resources": {"requests": {"cpu": "lots"}}}]}})
UNKNOWN_KIND = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
QUEUE = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a100}\n"
         "spec: {nodeLabels: {gpu: a100}}\n")

# (id, kubectl arguments, stdin). Run in this order on both servers.
TABLE: list[tuple[str, list[str], str | None]] = [
    ("get-nodes", ["get", "nodes"], None),
    ("get-nodes-wide", ["get", "nodes", "-o", "wide"], None),
    ("get-nodes-selector", ["get", "no", "-l", "pool=gpu", "-o", "name"], None),
    ("get-pods", ["get", "pods"], None),
    ("get-pods-wide", ["get", "pods", "-o", "wide"], None),
    ("get-pods-all-namespaces", ["get", "pods", "-A"], None),
    ("get-pod-jsonpath", ["get", "pod", "trainer", "-o",
                          "jsonpath={.spec.nodeName} {.status.phase} {.spec.priority}"], None),
    ("get-missing", ["get", "pod", "nope"], None),
    ("create-twice", ["create", "-f", "-"], DUPLICATE),
    ("apply-bad-quantity", ["apply", "-f", "-"], BAD_QUANTITY),
    ("apply-unknown-kind", ["apply", "-f", "-"], UNKNOWN_KIND),
    ("apply-crd-kind", ["apply", "-f", "-"], QUEUE),
    ("get-crd-kind", ["get", "resourceflavors"], None),
    ("describe-pod", ["describe", "pod", "trainer"], None),
    ("describe-node", ["describe", "node", "gpu-a"], None),
    ("get-pdb", ["get", "pdb"], None),
    ("get-pc", ["get", "pc"], None),
    ("get-deploy-rs", ["get", "deploy,rs"], None),
    ("label", ["label", "node", "gpu-b", "team=ml"], None),
    ("annotate", ["annotate", "pod", "trainer", "note=x"], None),
    ("show-labels", ["get", "nodes", "--show-labels"], None),
    ("taint", ["taint", "nodes", "gpu-b", "gpu=true:NoSchedule"], None),
    ("taint-jsonpath", ["get", "node", "gpu-b", "-o", "jsonpath={.spec.taints}"], None),
    ("untaint", ["taint", "nodes", "gpu-b", "gpu=true:NoSchedule-"], None),
    ("cordon", ["cordon", "cpu-a"], None),
    ("get-cordoned", ["get", "node", "cpu-a"], None),
    ("uncordon", ["uncordon", "cpu-a"], None),
    ("drain-blocked-by-pdb", ["drain", "gpu-a", "--force", "--timeout=3s"], None),
    ("patch-merge", ["patch", "pod", "trainer", "--type=merge", "-p",
                     '{"metadata":{"labels":{"x":"y"}}}'], None),
    ("patch-json", ["patch", "pod", "trainer", "--type=json", "-p",
                    '[{"op":"remove","path":"/metadata/labels/x"}]'], None),
    ("patch-strategic", ["patch", "node", "gpu-b", "-p", '{"spec":{"unschedulable":true}}'],
     None),
    ("scale", ["scale", "deploy", "web", "--replicas=1"], None),
    ("rollout-status", ["rollout", "status", "deploy/web", "--timeout=20s"], None),
    ("logs", ["logs", "trainer"], None),
    ("dry-run-server", ["create", "-f", "-", "--dry-run=server", "-o", "name"],
     DUPLICATE.replace('"idle"', '"dry"')),
    ("delete-pod", ["delete", "pod", "idle", "--timeout=30s"], None),
    ("get-deleted", ["get", "pod", "idle"], None),
    ("auth-can-i", ["auth", "can-i", "delete", "nodes"], None),
    ("api-resources-kueue", ["api-resources", "--api-group=kueue.x-k8s.io"], None),
    ("version-server", ["version", "-o", "json"], None),
]

_NORMALISE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d [+-]\d{4}"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uid>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "<server>"),
    # Ages in tables and describe: 3s, 2m10s, 5h, <invalid>.
    (re.compile(r"(?<![\w.-])(\d+[smhd])+(?![\w.-])|<invalid>"), "<age>"),
    (re.compile(r"(web-)[0-9a-z]{8,10}(-[0-9a-z]{5})?"), r"\1<hash>"),
]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def run_table(api: Api) -> dict[str, str]:
    api.apply(SETUP)
    wait_for(lambda: api.pods().get("default/trainer", {}).get("status", {}).get("phase")
             == "Running", "the bound pod to run")
    wait_for(lambda: api.objects("pdb", "default")["default/train"].get("status", {})
             .get("currentHealthy") == 1, "the budget's status")
    wait_for(lambda: len([k for k in api.pods() if k.startswith("default/web-")]) == 2,
             "the Deployment's pods")
    out = {}
    for key, args, stdin in TABLE:
        proc = kubectl(api.kubeconfig, api.tmp_path, *args, input=stdin, check=False)
        out[key] = normalise(f"exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return out


def listed() -> set[str]:
    """The command ids docs/apiserver-conformance.md lists as differing."""
    return set(re.findall(r"^\| `([a-z-]+)` \|", DOC.read_text(), re.M))


@pytest.mark.slow
def test_kubectl_table_differences_are_the_documented_ones(real_cluster: RealCluster,
                                                           tmp_path: Path) -> None:
    server = EmbeddedServer(clock=ManualClock(), bookmark_interval=0.2)
    server.start()
    (tmp_path / "embedded").mkdir()
    embedded = Api("embedded", tmp_path / "embedded", embedded=server)
    try:
        ours = run_table(embedded)
    finally:
        embedded.close()
        server.stop()
    reset(real_cluster)
    (tmp_path / "real").mkdir()
    real = Api("real", tmp_path / "real", real=real_cluster)
    try:
        theirs = run_table(real)
    finally:
        real.close()
    differ = [key for key, _, _ in TABLE if ours[key] != theirs[key]]
    lines = ["# kubectl: embedded server vs kube-apiserver", ""]
    for key in differ:
        lines += [f"## {key}", "", "embedded:", "```", ours[key], "```", "real:", "```",
                  theirs[key], "```", ""]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines))
    print("\n".join(lines))
    assert set(differ) == listed(), (
        f"differing now: {sorted(differ)}; documented: {sorted(listed())}; the outputs are "
        f"in {REPORT}")
