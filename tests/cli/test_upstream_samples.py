"""Upstream's own example files, unchanged, give their documented outcome: a Kueue doc sample
whose Job has only a generateName is admitted; the Kubernetes docs' StatefulSet + Service bundle
is read, its StatefulSet creates its pods, and what kubeberth does not model (the Service) is
named once on stderr and in the JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.apiserver import EmbeddedServer
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests

# kubernetes-sigs/kueue site/static/examples/admin/single-clusterqueue-setup.yaml
# (65d7c2541b649aa9b5ac018f95e90b63382d22f8), unchanged.
KUEUE_SETUP = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"

"""
# kubernetes-sigs/kueue site/static/examples/jobs/sample-job.yaml
# (ff6c38c648cd850b9eac18c4f9b1a4265444f97f), unchanged.
KUEUE_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: gcr.io/k8s-staging-perf-tests/sleep:v0.1.0
        args: ["30s"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
"""
# kubernetes/website content/en/examples/application/web/web.yaml
# (10d228cf9cd50259470cd772ec0448bb0f4ebb4d), unchanged.
WEB = """\
apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels:
    app: nginx
spec:
  ports:
  - port: 80
    name: web
  clusterIP: None
  selector:
    app: nginx
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: "nginx"
  replicas: 2
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
        image: registry.k8s.io/nginx-slim:0.7
        ports:
        - containerPort: 80
          name: web
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      resources:
        requests:
          storage: 1Gi

"""
NODE_AND_POD = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {generateName: worker-}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
"""
GENERATED = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in (("setup.yaml", KUEUE_SETUP), ("job.yaml", KUEUE_JOB), ("web.yaml", WEB),
                       ("cluster.yaml", NODE_AND_POD)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_kueue_sample_job_with_generate_name_is_admitted(files: Path) -> None:
    args = ["admit", "-f", str(files / "setup.yaml"), "-f", str(files / "job.yaml"),
            "-f", str(files / "job.yaml"), "-o", "json"]
    code, out, err = run(*args)
    assert code == 0, err
    rows = json.loads(out)["workloads"]
    assert [r["state"] for r in rows] == ["Admitted", "Admitted"]
    names = [r["name"] for r in rows]
    for name in names:
        prefix, suffix = name.rsplit("-", 1)
        assert prefix.endswith("/job-sample-job") and GENERATED.fullmatch(suffix), name
    assert names[0] != names[1]
    # Deterministic: the same seed names the same; another seed names others.
    assert run(*args)[1] == out
    _, other, _ = run(*args, "--seed", "7")
    assert {r["name"] for r in json.loads(other)["workloads"]}.isdisjoint(names)


def test_generated_names_follow_the_api_server(tmp_path: Path) -> None:
    long = "x" * 70 + "-"
    (tmp_path / "p.yaml").write_text(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{generateName: {long}}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: a-, name: given}\n")
    first, given = load_manifests(tmp_path / "p.yaml").pods
    assert given.metadata.name == "given"
    name = first.metadata.name
    assert len(name) == 63 and name[:58] == long[:58] and GENERATED.fullmatch(name[58:])
    assert load_manifests(tmp_path / "p.yaml", seed=1).pods[0].metadata.name != name


def test_statefulset_and_service_bundle_through_explain(files: Path) -> None:
    code, out, err = run("explain", "-f", str(files / "cluster.yaml"), "-f",
                         str(files / "web.yaml"), "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    worker, web = data["pods"]
    assert worker["selectedNode"] == "n1"
    assert GENERATED.fullmatch(worker["pod"].rsplit("-", 1)[1])
    # OrderedReady: one sync of the controller creates web-0 only.
    assert (web["pod"], web["selectedNode"]) == ("default/web-0", "n1")
    assert data["readNotModelled"] == [{"apiVersion": "v1", "kind": "Service", "objects": 1}]
    notes = [line for line in err.splitlines() if "read but not modelled" in line]
    assert len(notes) == 1 and "Service v1" in notes[0] and "StatefulSet" not in notes[0]
    # Nothing else to say: no field, no note.
    code, out, err = run("explain", "-f", str(files / "cluster.yaml"), "-o", "json")
    assert code == 0 and "readNotModelled" not in json.loads(out)
    assert "read but not modelled" not in err


def test_deschedule_and_admit_name_what_they_do_not_model(files: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
                      "- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n  plugins:\n"
                      "    filter: {enabled: [DefaultEvictor]}\n")
    code, out, err = run("deschedule", "-f", str(files / "cluster.yaml"), "-f",
                         str(files / "web.yaml"), "--policy", str(policy), "-o", "json")
    assert code == 0, err
    assert [e["kind"] for e in json.loads(out)["readNotModelled"]] == ["Service"]
    code, out, err = run("admit", "-f", str(files / "setup.yaml"), "-f", str(files / "web.yaml"),
                         "-o", "json")
    assert code == 0, err
    # The StatefulSet has no queue-name label: Kueue leaves it alone, nothing left unsaid.
    assert [e["kind"] for e in json.loads(out)["readNotModelled"]] == ["Service"]


def test_serve_lists_the_kinds_it_does_not_serve(files: Path) -> None:
    """``serve -f`` creates what the embedded server serves and names the rest (today neither
    Service nor StatefulSet is served)."""
    crd_object = files / "crd.yaml"
    crd_object.write_text("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    with EmbeddedServer(manifests=load_manifests([files / "cluster.yaml", files / "web.yaml",
                                                  crd_object])) as srv:
        assert srv.skipped == ["Service", "StatefulSet", "Gadget"]
        pods = srv.call(lambda: [o["metadata"]["name"] for rt in srv.cluster.registry.resources
                                 if rt.kind == "Pod"
                                 for o in srv.cluster.store.table(rt).values()])
        assert len(pods) == 1 and pods[0].startswith("worker-")


def test_simulate_names_what_it_does_not_model(files: Path, tmp_path: Path) -> None:
    cluster = tmp_path / "nodes.yaml"
    cluster.write_text(NODE_AND_POD.split("---")[0])
    workload = tmp_path / "pods.yaml"
    workload.write_text(NODE_AND_POD.split("---")[1])
    out = tmp_path / "out"
    code, stdout, err = run("simulate", "--cluster", str(cluster), "-w", str(workload), "-w",
                            str(files / "web.yaml"), "-o", "json", "--out-dir", str(out), "-q")
    assert code == 0, err
    listed = json.loads(stdout)["run"]["readNotModelled"]
    assert [e["kind"] for e in listed] == ["Service"]
    assert json.loads((out / "summary.json").read_text())["run"]["readNotModelled"] == listed
    assert "read but not modelled</td><td>Service v1</td>" in (out / "report.html").read_text()
    assert sum("read but not modelled" in line for line in err.splitlines()) == 1


# sigs.k8s.io/descheduler v0.36.0 pkg/framework/plugins/podlifetime/README.md, "Transition-based
# eviction for completed pods", unchanged.
DESCHEDULER_036_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: default
    plugins:
      deschedule:
        enabled:
          - name: PodLifeTime
    pluginConfig:
      - name: PodLifeTime
        args:
          states:
            - Succeeded
          conditions:
            - reason: PodCompleted
              status: "True"
              minTimeSinceLastTransitionSeconds: 14400
          namespaces:
            include:
              - default
"""


def _completed(name: str, ns: str, completed: str) -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  creationTimestamp: "2024-06-01T00:00:00Z"
  ownerReferences: [{{apiVersion: batch/v1, kind: Job, name: {name}, controller: true}}]
spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}
status:
  phase: Succeeded
  conditions:
  - {{type: Initialized, status: "True", reason: PodCompleted, lastTransitionTime: "{completed}"}}
  - {{type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: "{completed}"}}
"""


def test_descheduler_036_policy_from_its_readme(tmp_path: Path) -> None:
    """Succeeded pods of ``default`` whose PodCompleted transition is over 4 hours old go.

    The README writes ``enabled: [{name: PodLifeTime}]``, which the descheduler's strict
    decoder refuses too (``PluginSet.Enabled`` is ``[]string``): refused with the field named,
    then run with the plugin named as a string."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(DESCHEDULER_036_POLICY)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODE_AND_POD.split("---")[0])
    code, _, err = run("deschedule", "-f", str(nodes), "--policy", str(policy))
    assert code == 2
    assert "profiles[0].plugins.deschedule.enabled[0]: got a mapping. Expected a string" in err
    policy.write_text(DESCHEDULER_036_POLICY.replace("- name: PodLifeTime\n    pluginConfig",
                                                     "- PodLifeTime\n    pluginConfig"))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_AND_POD.split("---")[0]
                       + "---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\n"
                       "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
                       + _completed("done-long-ago", "default", "2024-06-01T06:00:00Z")
                       + _completed("done-recently", "default", "2024-06-01T10:00:00Z")
                       + _completed("elsewhere", "batch", "2024-06-01T06:00:00Z"))
    code, out, err = run("deschedule", "-f", str(cluster), "--policy", str(policy),
                         "--now", "2024-06-01T12:00:00Z", "-o", "json")
    assert code == 0, err
    assert [e["pod"] for e in json.loads(out)["evictions"]] == ["default/done-long-ago"]
