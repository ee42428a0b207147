"""kubectl against the embedded server over real HTTP: get, apply, describe, taint, watch."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubeberth.apiserver import EmbeddedServer

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
PodBody = Callable[..., dict[str, Any]]

WORKLOAD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {app: train}
  annotations: {kubeberth.io/duration-seconds: "600"}
spec:
  containers:
  - name: main
    image: trainer:1
    resources:
      requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
      limits: {nvidia.com/gpu: "1"}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: train}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx, resources: {requests: {cpu: 100m}}}
"""


def _bind(server: EmbeddedServer, pod: str, node: str) -> None:
    server.call(lambda: server.api.bind("default", pod, {"target": {"kind": "Node",
                                                                     "name": node}}))
    server.settle()


def test_get_nodes_shows_server_side_columns(kubectl: Kubectl, make_pod: PodBody) -> None:
    out = kubectl("get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert set(rows) == {"gpu-a", "gpu-b", "cpu-a"}
    assert rows["gpu-a"][1:3] == ["Ready", "worker"]
    assert rows["cpu-a"][1:3] == ["Ready", "<none>"]


def test_get_nodes_by_short_name_and_label_selector(kubectl: Kubectl, make_pod: PodBody) -> None:
    out = kubectl("get", "no", "-l", "pool=gpu", "-o", "name").stdout.split()
    assert out == ["node/gpu-a", "node/gpu-b"]


def test_apply_creates_then_configures_without_disabling_validation(
        kubectl: Kubectl, tmp_path: Path, server: EmbeddedServer) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD)
    created = kubectl("apply", "-f", str(path)).stdout
    assert "pod/trainer created" in created
    assert "poddisruptionbudget.policy/train created" in created
    assert "deployment.apps/web created" in created
    again = kubectl("apply", "-f", str(path))
    assert "pod/trainer unchanged" in again.stdout
    assert again.stderr == ""
    path.write_text(WORKLOAD.replace("labels: {app: train}", "labels: {app: train, tier: a}"))
    changed = kubectl("apply", "-f", str(path))
    assert "pod/trainer configured" in changed.stdout
    assert changed.stderr == ""
    labels = json.loads(kubectl("get", "pod", "trainer", "-o", "json").stdout)["metadata"][
        "labels"]
    assert labels == {"app": "train", "tier": "a"}
    server.settle()
    pods = kubectl("get", "pods", "-l", "app=web", "-o", "name").stdout.split()
    assert len(pods) == 2


def test_apply_bad_quantity_is_a_422_naming_the_field(kubectl: Kubectl,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(WORKLOAD.split("---")[0].replace('cpu: "2"', "cpu: 2x"))
    proc = kubectl("apply", "-f", str(path), check=False)
    assert proc.returncode == 1
    assert 'Pod "trainer" is invalid' in proc.stderr
    assert "spec.containers[0].resources.requests.cpu" in proc.stderr
    assert "'2x' is not a quantity" in proc.stderr


def test_apply_unknown_kind_is_reported(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {}\n")
    proc = kubectl("apply", "-f", str(path), check=False)
    assert proc.returncode == 1  # kubectl's own validation finds no schema for it
    assert 'error validating "' in proc.stderr
    proc = kubectl("apply", "--validate=false", "-f", str(path), check=False)
    assert proc.returncode == 1
    assert 'no matches for kind "Service" in version "v1"' in proc.stderr


def test_create_twice_is_already_exists(kubectl: Kubectl, make_pod: PodBody) -> None:
    manifest = json.dumps(make_pod("dup"))
    kubectl("create", "-f", "-", input=manifest)
    proc = kubectl("create", "-f", "-", input=manifest, check=False)
    assert proc.returncode == 1
    assert 'pods "dup" already exists' in proc.stderr


def test_get_missing_pod_is_not_found(kubectl: Kubectl, make_pod: PodBody) -> None:
    proc = kubectl("get", "pod", "nope", check=False)
    assert proc.returncode == 1
    assert 'pods "nope" not found' in proc.stderr


def test_describe_pod_shows_node_status_and_events(kubectl: Kubectl, make_pod: PodBody,
                                                   server: EmbeddedServer) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("desc", gpus=1, duration=60)))
    _bind(server, "desc", "gpu-a")
    out = kubectl("describe", "pod", "desc").stdout
    fields = dict(re.findall(r"^([A-Z][A-Za-z ]+):\s+(.*)$", out, re.M))
    assert fields["Node"] == "gpu-a/"
    assert fields["Status"] == "Running"
    assert fields["QoS Class"] == "Burstable"
    assert re.search(r"^\s+nvidia.com/gpu:\s+1$", out, re.M)
    assert re.search(r"Normal\s+Started\s+\S+\s+kubelet\s+Started container main", out)


def test_get_pods_wide_and_status_columns(kubectl: Kubectl, make_pod: PodBody,
                                          server: EmbeddedServer) -> None:
    for name in ("p1", "p2"):
        kubectl("create", "-f", "-", input=json.dumps(make_pod(name, duration=30)))
    _bind(server, "p1", "gpu-b")
    out = kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    assert out[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["p1"][1:3] == ["1/1", "Running"]
    assert rows["p1"][6] == "gpu-b"
    assert rows["p2"][1:3] == ["0/1", "Pending"]
    server.advance(30)
    rows = {line.split()[0]: line.split() for line in kubectl("get", "pods").stdout.splitlines()}
    assert rows["p1"][1:3] == ["0/1", "Completed"]


def test_taint_and_untaint(kubectl: Kubectl, make_pod: PodBody) -> None:
    assert "node/gpu-a tainted" in kubectl("taint", "nodes", "gpu-a",
                                           "spill=true:NoSchedule").stdout
    kubectl("taint", "nodes", "gpu-a", "other=x:PreferNoSchedule")
    taints = json.loads(kubectl("get", "node", "gpu-a", "-o", "jsonpath={.spec.taints}").stdout)
    assert {(t["key"], t["effect"]) for t in taints} == {("spill", "NoSchedule"),
                                                         ("other", "PreferNoSchedule")}
    assert "untainted" in kubectl("taint", "nodes", "gpu-a", "spill:NoSchedule-").stdout
    taints = json.loads(kubectl("get", "node", "gpu-a", "-o", "jsonpath={.spec.taints}").stdout)
    assert [t["key"] for t in taints] == ["other"]
    proc = kubectl("taint", "nodes", "gpu-a", "other=y:PreferNoSchedule", check=False)
    assert proc.returncode == 1  # kubectl needs --overwrite to change a taint's value


def test_cordon_shows_scheduling_disabled(kubectl: Kubectl, make_pod: PodBody) -> None:
    kubectl("cordon", "cpu-a")
    rows = {line.split()[0]: line.split() for line in kubectl("get", "nodes").stdout
            .splitlines()}
    assert rows["cpu-a"][1] == "Ready,SchedulingDisabled"
    kubectl("uncordon", "cpu-a")
    rows = {line.split()[0]: line.split() for line in kubectl("get", "nodes").stdout
            .splitlines()}
    assert rows["cpu-a"][1] == "Ready"


def test_label_and_annotate(kubectl: Kubectl, make_pod: PodBody) -> None:
    kubectl("label", "node", "cpu-a", "zone=z1")
    kubectl("annotate", "node", "cpu-a", "note=hello")
    node = json.loads(kubectl("get", "node", "cpu-a", "-o", "json").stdout)
    assert node["metadata"]["labels"]["zone"] == "z1"
    assert node["metadata"]["annotations"]["note"] == "hello"
    kubectl("label", "node", "cpu-a", "zone-")
    node = json.loads(kubectl("get", "node", "cpu-a", "-o", "json").stdout)
    assert "zone" not in node["metadata"]["labels"]


def test_delete_pod_waits_for_the_kubelet(kubectl: Kubectl, make_pod: PodBody,
                                          server: EmbeddedServer) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("gone", duration=100)))
    _bind(server, "gone", "gpu-a")
    assert 'pod "gone" deleted' in kubectl("delete", "pod", "gone", timeout=30).stdout
    assert kubectl("get", "pod", "gone", check=False).returncode == 1
    reasons = kubectl("get", "events", "--field-selector", "involvedObject.name=gone",
                      "-o", "jsonpath={.items[*].reason}").stdout.split()
    assert reasons == ["Started", "Killing"]


def test_drain_is_blocked_by_a_pdb(kubectl: Kubectl, make_pod: PodBody, server: EmbeddedServer,
                                   tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD.split("---\napiVersion: apps/v1")[0])
    kubectl("apply", "-f", str(path))
    _bind(server, "trainer", "gpu-a")
    assert kubectl("get", "pdb", "train", "-o",
                   "jsonpath={.status.disruptionsAllowed}").stdout == "0"
    proc = kubectl("drain", "gpu-a", "--force", "--timeout=3s", check=False)
    assert proc.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget" in proc.stderr
    assert kubectl("get", "pod", "trainer", "-o", "name").stdout.strip() == "pod/trainer"


def test_get_columns_of_workload_kinds(kubectl: Kubectl, make_pod: PodBody, server: EmbeddedServer,
                                       tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD)
    kubectl("apply", "-f", str(path))
    server.settle()
    assert kubectl("get", "deploy").stdout.splitlines()[0].split() == [
        "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert kubectl("get", "rs").stdout.splitlines()[0].split() == [
        "NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert kubectl("get", "pdb").stdout.splitlines()[0].split() == [
        "NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert kubectl("get", "pc").stdout.splitlines()[0].split() == [
        "NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]


def test_get_events_watch_streams_new_events(kubectl: Kubectl, make_pod: PodBody, kubectl_bin: str,
                                             kubeconfig: Path,
                                             server: EmbeddedServer, tmp_path: Path) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("watched", duration=5)))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([kubectl_bin, "--kubeconfig", str(kubeconfig), "get", "events", "-w",
                             "--request-timeout=20s"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        events = server.api.events
        while server.call(lambda: server.api.store.watcher_count(events)) == 0:
            assert time.monotonic() < deadline, "kubectl never started watching"
            time.sleep(0.05)
        _bind(server, "watched", "gpu-b")
        while not any("Started" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=5)
    started = [line for line in lines if "Started" in line]
    assert started, lines
    assert "pod/watched" in started[0]
    assert "Started container main" in started[0]


KUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  cohort: lab
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: team, namespace: default}
spec: {clusterQueue: research}
"""


def test_crd_kinds_apply_and_print_columns(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE)
    out = kubectl("apply", "-f", str(path)).stdout
    assert "clusterqueue.kueue.x-k8s.io/research created" in out
    assert kubectl("apply", "-f", str(path)).stdout.count("unchanged") == 3
    rows = kubectl("get", "cq").stdout.splitlines()
    assert rows[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED",
                               "WORKLOADS"]
    assert rows[1].split() == ["research", "lab", "0", "0"]
    assert kubectl("get", "lq").stdout.splitlines()[1].split() == ["team", "research", "0",
                                                                    "0"]
    served = json.loads(kubectl("get", "cq", "research", "-o", "json").stdout)
    assert served["apiVersion"] == "kueue.x-k8s.io/v1beta2"  # the preferred version
    assert served["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"] == 8


JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata:
      annotations: {kubeberth.io/duration-seconds: "60"}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: trainer}]
"""


def _bind_pending(server: EmbeddedServer, node: str) -> None:
    def bind_all() -> None:
        for pod in list(server.api.store.items(server.api.pods)):
            if not pod["spec"].get("nodeName"):
                server.api.bind(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                {"target": {"kind": "Node", "name": node}})

    server.call(bind_all)
    server.settle()


def test_scale_and_rollout_status(kubectl: Kubectl, server: EmbeddedServer,
                                  tmp_path: Path) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text(WORKLOAD.split("---")[2])
    kubectl("apply", "-f", str(path))
    server.settle()
    assert "deployment.apps/web scaled" in kubectl("scale", "deployment", "web",
                                                   "--replicas=3").stdout
    server.settle()
    assert len(kubectl("get", "pods", "-l", "app=web", "-o", "name").stdout.split()) == 3
    _bind_pending(server, "cpu-a")
    out = kubectl("rollout", "status", "deployment/web", "--timeout=20s").stdout
    assert 'deployment "web" successfully rolled out' in out
    rows = kubectl("get", "deploy", "web").stdout.splitlines()
    assert rows[1].split()[1:4] == ["3/3", "3", "3"]


def test_wait_for_a_job_to_complete(kubectl: Kubectl, server: EmbeddedServer,
                                    tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    kubectl("apply", "-f", str(path))
    server.settle()
    _bind_pending(server, "cpu-a")
    rows = kubectl("get", "jobs").stdout.splitlines()
    assert rows[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert rows[1].split()[:3] == ["train", "Running", "0/2"]
    server.advance(60)
    out = kubectl("wait", "--for=condition=complete", "job/train", "--timeout=20s").stdout
    assert "job.batch/train condition met" in out
    assert kubectl("get", "jobs").stdout.splitlines()[1].split()[:4] == [
        "train", "Complete", "2/2", "60s"]


def test_get_pods_shows_gated_and_terminating(kubectl: Kubectl, make_pod: PodBody,
                                              server: EmbeddedServer) -> None:
    gated = make_pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    kubectl("create", "-f", "-", input=json.dumps(gated))
    kubectl("create", "-f", "-", input=json.dumps(make_pod("held", node="gpu-a")))
    server.settle()
    server.call(lambda: server.api.patch(server.api.pods, "default", "held",
                                         "application/merge-patch+json",
                                         b'{"metadata":{"finalizers":["example.com/x"]}}'))
    kubectl("delete", "pod", "held", "--wait=false")
    rows = {line.split()[0]: line.split() for line in kubectl("get", "pods").stdout
            .splitlines()}
    assert rows["gated"][2] == "SchedulingGated"
    assert rows["held"][2] == "Terminating"


def test_get_pods_watch_prints_status_changes(kubectl: Kubectl, make_pod: PodBody,
                                              kubectl_bin: str, kubeconfig: Path,
                                              server: EmbeddedServer, tmp_path: Path) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("w", duration=10)))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([kubectl_bin, "--kubeconfig", str(kubeconfig), "get", "pods",
                             "-w", "--request-timeout=20s"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        pods = server.api.pods
        while server.call(lambda: server.api.store.watcher_count(pods)) == 0:
            assert time.monotonic() < deadline, "kubectl never started watching"
            time.sleep(0.05)
        _bind(server, "w", "gpu-a")
        server.advance(10)
        while not any("Completed" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=5)
    statuses = [line.split()[2] for line in lines if line.startswith("w ")]
    assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
    assert statuses[0] == "Pending"
    assert statuses[-1] == "Completed"
    assert "Running" in statuses
    assert sum(1 for line in lines if line.startswith("NAME")) == 1


def test_protobuf_bodies_get_a_clear_415(kubectl: Kubectl) -> None:
    proc = kubectl("create", "deployment", "web", "--image=nginx", check=False)
    assert proc.returncode == 1
    assert "reads JSON and YAML bodies only, not protobuf" in proc.stderr
    manifest = kubectl("create", "deployment", "web", "--image=nginx", "--dry-run=client",
                       "-o", "yaml").stdout
    assert "deployment.apps/web created" in kubectl("apply", "-f", "-", input=manifest).stdout


def test_describe_node_with_its_lease_and_pods(kubectl: Kubectl, make_pod: PodBody,
                                               server: EmbeddedServer) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("on-a", gpus=2, node="gpu-a")))
    server.settle()
    out = kubectl("describe", "node", "gpu-a").stdout
    assert "Failed to get lease" not in out
    assert re.search(r"HolderIdentity:\s+gpu-a", out)
    assert re.search(r"Kubelet Version:\s+v1.32.0-kubeberth", out)
    assert "Non-terminated Pods:          (1 in total)" in out
    assert re.search(r"nvidia.com/gpu\s+2\s+0", out)
    leases = kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name").stdout.split()
    assert leases == ["lease.coordination.k8s.io/cpu-a", "lease.coordination.k8s.io/gpu-a",
                      "lease.coordination.k8s.io/gpu-b"]
    kubectl("delete", "node", "gpu-b")
    server.settle()
    assert len(kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name").stdout
               .split()) == 2


def test_kubectl_patch_all_three_types(kubectl: Kubectl, make_pod: PodBody) -> None:
    kubectl("create", "-f", "-", input=json.dumps(make_pod("pt")))
    kubectl("patch", "pod", "pt", "-p", '{"metadata":{"labels":{"s":"1"}}}')
    kubectl("patch", "pod", "pt", "--type=merge", "-p", '{"metadata":{"labels":{"m":"2"}}}')
    kubectl("patch", "pod", "pt", "--type=json", "-p",
            '[{"op":"add","path":"/metadata/labels/j","value":"3"}]')
    labels = json.loads(kubectl("get", "pod", "pt", "-o", "jsonpath={.metadata.labels}").stdout)
    assert labels == {"s": "1", "m": "2", "j": "3"}
    proc = kubectl("patch", "pod", "pt", "--type=json", "-p",
                   '[{"op":"test","path":"/metadata/labels/s","value":"9"}]', check=False)
    assert proc.returncode == 1
    assert "testing value /metadata/labels/s failed" in proc.stderr


def test_apply_new_image_rolls_the_deployment(kubectl: Kubectl, server: EmbeddedServer,
                                              tmp_path: Path) -> None:
    path = tmp_path / "deploy.yaml"
    manifest = WORKLOAD.split("---")[2]
    path.write_text(manifest)
    kubectl("apply", "-f", str(path))
    server.settle()
    path.write_text(manifest.replace("image: nginx", "image: nginx:2"))
    assert "deployment.apps/web configured" in kubectl("apply", "-f", str(path)).stdout
    server.settle()
    images = kubectl("get", "pods", "-l", "app=web", "-o",
                     "jsonpath={.items[*].spec.containers[0].image}").stdout.split()
    assert images == ["nginx:2", "nginx:2"]
    assert len(kubectl("get", "rs", "-o", "name").stdout.split()) == 2
    assert "deployment.apps \"web\" deleted" in kubectl("delete", "-f", str(path)).stdout
    server.settle()
    assert kubectl("get", "rs,pods", "-o", "name").stdout.split() == []


def test_unknown_resource_type_and_raw_metrics(kubectl: Kubectl) -> None:
    proc = kubectl("get", "services", check=False)
    assert proc.returncode == 1
    assert 'the server doesn\'t have a resource type "services"' in proc.stderr
    raw = kubectl("get", "--raw", "/metrics").stdout
    assert 'kube_node_status_allocatable{node="gpu-a",resource="nvidia_com_gpu",' \
           'unit="integer"} 4.0' in raw
    assert json.loads(kubectl("get", "--raw", "/version").stdout)["major"] == "1"
    assert "v1.32.0-kubeberth" in kubectl("version").stdout


def test_server_side_dry_run(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD)
    out = kubectl("apply", "--dry-run=server", "-f", str(path)).stdout
    assert "pod/trainer created (server dry run)" in out
    assert kubectl("get", "pods", "-o", "name").stdout.strip() == ""
    kubectl("apply", "-f", str(path))
    assert 'pod "trainer" deleted (server dry run)' in kubectl(
        "delete", "pod", "trainer", "--dry-run=server").stdout
    assert kubectl("get", "pod", "trainer", "-o", "name").stdout.strip() == "pod/trainer"
