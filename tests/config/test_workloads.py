"""Deployments, ReplicaSets, StatefulSets and Jobs from manifests: validation, naming, timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.config.workloads import load_owners, parse_replicas_schedule

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kubeberth.io/arrival-seconds: "60"
    kubeberth.io/duration-seconds: "600"
    kubeberth.io/replicas-schedule: "120=5,300=1"
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: 100m}}
"""

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  completions: 4
  parallelism: 2
  backoffLimit: 1
  template:
    metadata:
      annotations: {kubeberth.io/duration-seconds: "30"}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
"""


def owners_of(tmp_path: Path, text: str) -> list:  # type: ignore[type-arg]
    f = tmp_path / "w.yaml"
    f.write_text(text)
    return load_owners(load_manifests(f))


def test_deployment_fields_and_timing(tmp_path: Path) -> None:
    (d,) = owners_of(tmp_path, DEPLOYMENT)
    assert (d.kind, d.key, d.replicas, d.arrival, d.lifetime) == (
        "Deployment", "default/web", 3, 60.0, 600.0)
    assert d.schedule == [(120.0, 5), (300.0, 1)]
    assert d.controller_kind == "ReplicaSet" and d.replica_set.startswith("web-")


def test_deployment_pods_named_and_owned_like_upstream(tmp_path: Path) -> None:
    (d,) = owners_of(tmp_path, DEPLOYMENT)
    a, b = d.new_pod(), d.new_pod()
    hash_ = d.replica_set.rsplit("-", 1)[1]
    assert a.metadata.name.startswith(f"web-{hash_}-") and len(a.metadata.name) == len(
        f"web-{hash_}-") + 5
    assert a.metadata.name != b.metadata.name
    assert a.metadata.labels == {"app": "web", "pod-template-hash": hash_}
    (ref,) = a.metadata.owner_references
    assert (ref.kind, ref.name, ref.controller) == ("ReplicaSet", d.replica_set, True)
    # Each pod gets its own spec: binding one must not touch the template.
    a.spec.node_name = "n1"
    assert d.template.spec.node_name == "" and b.spec.node_name == ""


def test_names_are_reproducible(tmp_path: Path) -> None:
    (d1,) = owners_of(tmp_path, DEPLOYMENT)
    (d2,) = owners_of(tmp_path, DEPLOYMENT)
    assert [d1.new_pod().metadata.name for _ in range(3)] == \
        [d2.new_pod().metadata.name for _ in range(3)]


def test_job_fields_and_labels(tmp_path: Path) -> None:
    (j,) = owners_of(tmp_path, JOB)
    assert (j.kind, j.key, j.completions, j.parallelism, j.backoff_limit, j.pod_duration) == (
        "Job", "ml/train", 4, 2, 1, 30.0)
    p = j.new_pod()
    assert p.metadata.name.startswith("train-") and p.metadata.namespace == "ml"
    assert p.metadata.labels["batch.kubernetes.io/job-name"] == "train"
    assert p.metadata.labels["job-name"] == "train"
    assert p.metadata.owner_references[0].kind == "Job"


def test_job_defaults(tmp_path: Path) -> None:
    text = JOB.replace("  completions: 4\n  parallelism: 2\n  backoffLimit: 1\n", "")
    (j,) = owners_of(tmp_path, text)
    assert (j.completions, j.parallelism, j.backoff_limit) == (None, 1, 6)


@pytest.mark.parametrize(("old", "new", "field", "line"), [
    ("matchLabels: {app: web}}", "matchLabels: {app: api}}", "spec.selector", 11),
    ("  selector: {matchLabels: {app: web}}\n", "", "spec.selector", None),
    ("replicas: 3", "replicas: -1", "spec.replicas", 10),
    ("      containers:", "      restartPolicy: Never\n      containers:",
     "spec.template.spec.restartPolicy", 15),
    ('"120=5,300=1"', '"120=5,100=1"', "kubeberth.io/replicas-schedule", 8),
    ("cpu: 100m", "cpu: lots", "cpu", 17),
    ("    metadata: {labels: {app: web}}",
     "    metadata: {labels: {app: web}, annotations: {kubeberth.io/duration-seconds: '5'}}",
     "spec.template.metadata.annotations", 13),
])
def test_deployment_errors_name_field_and_line(tmp_path: Path, old: str, new: str, field: str,
                                               line: int | None) -> None:
    assert old in DEPLOYMENT
    with pytest.raises(InputError) as info:
        owners_of(tmp_path, DEPLOYMENT.replace(old, new))
    err = info.value
    assert field in (err.field or ""), str(err)
    assert err.source is not None and err.source.endswith("w.yaml")
    if line is not None:
        assert err.line == line, str(err)


@pytest.mark.parametrize(("old", "new", "field"), [
    ("restartPolicy: Never", "restartPolicy: Always", "spec.template.spec.restartPolicy"),
    ("completions: 4", "completions: -4", "spec.completions"),
    ("backoffLimit: 1", "backoffLimit: -1", "spec.backoffLimit"),
    ("metadata: {name: train, namespace: ml}",
     "metadata: {name: train, namespace: ml, annotations: {kubeberth.io/duration-seconds: '9'}}",
     "metadata.annotations"),
])
def test_job_errors(tmp_path: Path, old: str, new: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        owners_of(tmp_path, JOB.replace(old, new))
    assert field in (info.value.field or ""), str(info.value)


def test_duplicate_owner_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="defined twice"):
        owners_of(tmp_path, DEPLOYMENT + "---\n" + DEPLOYMENT)


@pytest.mark.parametrize("raw", ["x", "10=", "=3", "10=3,5=2", "10=-1", "10=1.5"])
def test_bad_replicas_schedule(raw: str) -> None:
    with pytest.raises(InputError, match=r"valid step|not <seconds>"):
        parse_replicas_schedule(raw)


STATEFUL_SET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  podManagementPolicy: POLICY
  ordinals: {start: 5}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: 100m}}
"""


def test_stateful_set_pods_have_ordinal_names_from_the_start_ordinal(tmp_path: Path) -> None:
    (s,) = owners_of(tmp_path, STATEFUL_SET.replace("POLICY", "Parallel"))
    assert (s.kind, s.key, s.replicas, s.ordered, s.start_ordinal) == (
        "StatefulSet", "data/db", 1, False, 5)
    pod = s.new_pod(5)
    assert pod.key == "data/db-5" and pod.metadata.labels["apps.kubernetes.io/pod-index"] == "5"
    assert pod.metadata.labels["controller-revision-hash"] == s.revision
    assert s.ordinal_of("db-12") == 12 and s.ordinal_of("dbx-1") is None
    assert s.ordinal_of("db-a") is None
    assert s.stateful_sync(3, {6: False}) == ([5, 7], True)


def test_ordered_ready_sync_stops_at_a_pod_not_ready(tmp_path: Path) -> None:
    (s,) = owners_of(tmp_path, STATEFUL_SET.replace("POLICY", "OrderedReady"))
    assert s.stateful_sync(3, {}) == ([5], False)
    assert s.stateful_sync(3, {5: True, 6: False}) == ([], False)
    assert s.stateful_sync(3, {5: True, 6: True}) == ([7], False)
    assert s.stateful_sync(2, {5: True, 6: True, 7: True}) == ([], True)


def test_stateful_set_policy_must_be_known(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        owners_of(tmp_path, STATEFUL_SET.replace("POLICY", "Ordered"))
    assert exc.value.field == "spec.podManagementPolicy"
    assert exc.value.expected == "OrderedReady or Parallel"


def test_daemon_set_has_no_replicas_schedule(tmp_path: Path) -> None:
    text = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  annotations: {kubeberth.io/replicas-schedule: "10=2"}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: c}]}
"""
    with pytest.raises(InputError) as exc:
        owners_of(tmp_path, text)
    assert exc.value.field == "metadata.annotations.kubeberth.io/replicas-schedule"
    (ds,) = owners_of(tmp_path, text.replace('kubeberth.io/replicas-schedule: "10=2"', ""))
    assert (ds.kind, ds.replicas, ds.controller_kind) == ("DaemonSet", 0, "DaemonSet")
