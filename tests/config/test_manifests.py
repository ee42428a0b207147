"""Loading manifests: kinds, directories, typing rules, eager validation, timing annotations."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.api.resources import pod_non_zero_requests, pod_requests
from kubeberth.config.manifests import (
    ANNOTATION_ARRIVAL,
    ANNOTATION_DURATION,
    KNOWN_KINDS,
    load_manifests,
    not_modelled_note,
    pod_timing,
)
from kubeberth.config.yamlsrc import convert, load_documents


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(path: Path | str) -> InputError:
    with pytest.raises(InputError) as info:
        load_manifests(path)
    return info.value


CLUSTER = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
globalDefault: true
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: null
status:
  allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 4}
---
apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: team-a
spec:
  priorityClassName: high
  containers:
  - name: c
    resources: {requests: {cpu: 2, memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p2}
spec:
  containers:
  - name: c
    resources: {}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec:
  minAvailable: 50%
  selector: {matchLabels: {app: x}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec: {namespaceSelector: {}}
---
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""


# ---- kinds and inputs ----------------------------------------------------------------------------

def test_multi_document_file_sorted_into_kinds(tmp_path: Path) -> None:
    m = load_manifests(write(tmp_path, "cluster.yaml", CLUSTER))
    assert [n.metadata.name for n in m.nodes] == ["n1"]
    assert [p.key for p in m.pods] == ["team-a/p1", "default/p2"]
    assert [p.metadata.namespace for p in m.pods] == ["team-a", "default"]
    assert [pc.value for pc in m.priority_classes] == [1000]
    assert [ns.metadata.name for ns in m.namespaces] == ["team-a"]
    assert [pdb.spec.min_available for pdb in m.pdbs] == ["50%"]
    assert m.pdbs[0].metadata.namespace == "default"
    assert [d.kind for d in m.other] == ["ClusterQueue", "KubeSchedulerConfiguration"]
    (cq,) = m.of_kind("ClusterQueue")
    assert cq.data["spec"] == {"namespaceSelector": {}}
    assert cq.line == 45
    assert cq.line_of("spec.namespaceSelector") == 48
    origin = m.origin("Pod", "p2", "default")
    assert origin is not None and origin.line == 30


def test_directory_reads_manifest_files_in_name_order(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    for name in ("b.yml", "a.yaml", "c.json"):
        node = name.split(".")[0]
        write(d, name, f'{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{node}"}}}}')
    write(d, "notes.txt", "not a manifest")
    (d / "sub").mkdir()
    write(d / "sub", "z.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: z}\n")
    m = load_manifests(d)
    assert [n.metadata.name for n in m.nodes] == ["a", "b", "c"]


def test_several_paths_and_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.StringIO("apiVersion: v1\nkind: Node\nmetadata: {name: s}\n")
    monkeypatch.setattr("sys.stdin", stdin)
    first = write(tmp_path, "a.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n")
    m = load_manifests([first, "-"])
    assert [n.metadata.name for n in m.nodes] == ["a", "s"]


def test_list_kind(tmp_path: Path) -> None:
    path = write(tmp_path, "l.yaml", """
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: n1}
        - apiVersion: v1
          kind: Pod
          metadata: {name: p1}
          spec:
            containers:
            - resources: {requests: {cpu: lots}}
        """)
    err = error_of(path)
    assert (err.source, err.line) == (str(path), 12)
    assert err.field == "items[1].spec.containers[0].resources.requests.cpu"


def test_missing_path() -> None:
    err = error_of("/nonexistent/manifests")
    assert err.source == "/nonexistent/manifests"
    assert err.expected is not None and "directory" in err.expected


# ---- kind and apiVersion -------------------------------------------------------------------------

def test_wrong_api_version_for_known_kind(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", """
        apiVersion: v1
        kind: Node
        metadata: {name: n}
        ---
        apiVersion: apps/v1
        kind: Pod
        metadata: {name: p}
        """)
    err = error_of(path)
    assert (err.source, err.line, err.field) == (str(path), 5, "apiVersion")
    assert err.expected == "apiVersion: v1"


def test_other_kinds_are_kept_and_named(tmp_path: Path) -> None:
    """Kinds kubeberth does not model (and a CRD sharing a modelled kind's name) are kept for
    ``serve`` and named once per apiVersion and kind; layers never see them."""
    path = write(tmp_path, "k.yaml", """
        apiVersion: v1
        kind: Service
        metadata: {name: s}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: t}
        ---
        apiVersion: example.com/v1
        kind: Queue
        metadata: {name: q}
        ---
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: web}
        ---
        apiVersion: scheduling.k8s.io/v1alpha2
        kind: Gizmo
        metadata: {name: g}
        """)
    m = load_manifests(path)
    assert [d.kind for d in m.other] == ["Service", "Service", "Queue", "StatefulSet", "Gizmo"]
    assert m.of_kind("Queue") == [] and m.workload_api == []
    entries = m.not_modelled()
    assert entries == [
        {"apiVersion": "v1", "kind": "Service", "objects": 2},
        {"apiVersion": "example.com/v1", "kind": "Queue", "objects": 1},
        {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Gizmo", "objects": 1}]
    note = not_modelled_note(entries)
    assert note is not None and note.startswith("note: read but not modelled: Service v1 x2, ")
    assert not_modelled_note(load_manifests(write(tmp_path, "n.yaml", """
        apiVersion: v1
        kind: Node
        metadata: {name: n}
        """)).not_modelled()) is None


@pytest.mark.parametrize(("api", "kind", "words"), [
    ("descheduler/v1alpha1", "DeschedulerPolicy", "version 'v1alpha1' of DeschedulerPolicy"),
    ("batch/v2", "Job", "version 'v2' of Job"),
    ("kueue.x-k8s.io/v1alpha9", "ClusterQueue", "version 'v1alpha9' of ClusterQueue"),
    ("apps/v1", "Pod", "Pod has apiVersion 'apps/v1'"),
])
def test_unknown_version_of_a_modelled_kind(tmp_path: Path, api: str, kind: str,
                                            words: str) -> None:
    err = error_of(write(tmp_path, "v.yaml", f"apiVersion: {api}\nkind: {kind}\n"
                                             "metadata: {name: x}\n"))
    assert (err.line, err.field) == (1, "apiVersion")
    assert words in err.message
    assert err.expected is not None and ", ".join(KNOWN_KINDS[kind]).split(",")[0] in err.expected


def test_missing_kind(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "k.yaml", "apiVersion: v1\nmetadata: {name: s}\n"))
    assert (err.line, err.field) == (1, "kind")


# ---- typing rules --------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "line", "field", "expected"), [
    ("spec:\n  priority: \"100\"\n", 6, "spec.priority", "an integer"),
    ("  labels:\n    app.kubernetes.io/version: 1.0\n", 6,
     "metadata.labels.app.kubernetes.io/version", "a string"),
    ("spec:\n  containers:\n  - name: a\n    resources:\n      requests: [1]\n", 9,
     "spec.containers[0].resources.requests", "a mapping"),
    ("spec:\n  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuring"
     "Execution:\n      - weight: 1\n", 9,
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference",
     "a value for preference"),
    ("spec:\n  tolerations:\n  - key: a\n    tolerationSeconds: soon\n", 8,
     "spec.tolerations[0].tolerationSeconds", "an integer"),
])
def test_type_errors_are_located(tmp_path: Path, body: str, line: int, field: str,
                                 expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + body, encoding="utf-8")
    err = error_of(path)
    assert (err.source, err.line, err.field, err.expected) == (str(path), line, field, expected)


def test_nulls_mean_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", """
        apiVersion: v1
        kind: Pod
        metadata:
          name: p
          labels: null
          creationTimestamp: null
        spec:
          nodeSelector: ~
          containers:
          - name: c
            resources:
              requests: null
        status: {}
        """)
    (pod,) = load_manifests(path).pods
    assert pod.metadata.labels == {}
    assert pod.spec.containers[0].resources.requests == {}


def test_int_or_string_fields_accept_both(tmp_path: Path) -> None:
    path = write(tmp_path, "pdb.yaml", """
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {name: a, namespace: x}
        spec: {maxUnavailable: 1}
        ---
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {name: b, namespace: x}
        spec: {minAvailable: "100%"}
        """)
    assert [p.spec.max_unavailable or p.spec.min_available for p in load_manifests(path).pdbs] \
        == [1, "100%"]


# ---- object validation ---------------------------------------------------------------------------

def test_name_required(tmp_path: Path) -> None:
    path = write(tmp_path, "n.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  labels: {}\n")
    err = error_of(path)
    assert (err.line, err.field) == (3, "metadata.name")


def test_duplicate_objects(tmp_path: Path) -> None:
    path = write(tmp_path, "d.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: default}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: other}
        """)
    err = error_of(path)
    assert (err.line, err.field) == (7, "metadata.name")
    assert err.expected is not None and f"{path}:1" in err.expected


def test_priority_class_rules(tmp_path: Path) -> None:
    two_defaults = write(tmp_path, "pc.yaml", """
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: a}
        value: 1
        globalDefault: true
        ---
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: b}
        value: 2
        globalDefault: true
        """)
    err = error_of(two_defaults)
    assert (err.line, err.field) == (11, "globalDefault")
    too_high = write(tmp_path, "hi.yaml", """
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: huge}
        value: 2000000000
        """)
    err = error_of(too_high)
    assert (err.line, err.field) == (4, "value")
    system = write(tmp_path, "sys.yaml", """
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: system-node-critical}
        value: 2000001000
        preemptionPolicy: Never
        """)
    assert load_manifests(system).priority_classes[0].preemption_policy == "Never"


@pytest.mark.parametrize(("spec", "field"), [
    ("{minAvailable: 1, maxUnavailable: 1}", "spec.maxUnavailable"),
    ("{minAvailable: half}", "spec.minAvailable"),
    ("{maxUnavailable: 150%}", "spec.maxUnavailable"),
    ("{maxUnavailable: -1}", "spec.maxUnavailable"),
    ("{maxUnavailable: 1, unhealthyPodEvictionPolicy: Sometimes}",
     "spec.unhealthyPodEvictionPolicy"),
])
def test_pdb_rules(tmp_path: Path, spec: str, field: str) -> None:
    path = write(tmp_path, "pdb.yaml", f"""
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {{name: a}}
        spec: {spec}
        """)
    err = error_of(path)
    assert (err.line, err.field) == (4, field)


# ---- quantities ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "line", "field"), [
    ("spec:\n  containers:\n  - name: c\n    resources:\n      requests:\n        memory: 1Gb\n",
     10, "spec.containers[0].resources.requests.memory"),
    ("spec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        cpu: -1\n",
     10, "spec.containers[0].resources.limits.cpu"),
    ("spec:\n  initContainers:\n  - name: i\n    resources:\n      requests:\n"
     "        nvidia.com/gpu: one\n", 10,
     "spec.initContainers[0].resources.requests.nvidia.com/gpu"),
    ("spec:\n  overhead:\n    cpu: 1 core\n", 7, "spec.overhead.cpu"),
])
def test_pod_quantity_errors(tmp_path: Path, body: str, line: int, field: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + body, encoding="utf-8")
    err = error_of(path)
    assert (err.source, err.line, err.field) == (str(path), line, field)
    assert err.expected is not None and "quantity" in err.expected


def test_node_quantity_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "n.yaml", """
        apiVersion: v1
        kind: Node
        metadata: {name: n}
        status:
          capacity:
            cpu: "8"
            memory: 8 GiB
          allocatable:
            cpu: "8"
        """)
    err = error_of(path)
    assert (err.line, err.field) == (7, "status.capacity.memory")


def test_sidecar_and_init_containers_round_trip_through_pod_requests(tmp_path: Path) -> None:
    path = write(tmp_path, "sidecar.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: s}
        spec:
          overhead: {cpu: 10m}
          initContainers:
          - name: init-big
            resources: {requests: {cpu: "2", memory: 1Gi}}
          - name: proxy
            restartPolicy: Always
            resources: {requests: {cpu: 500m, memory: 128Mi}}
          - name: init-after-sidecar
            resources: {requests: {cpu: "1"}}
          containers:
          - name: app
            resources: {requests: {cpu: "1", memory: 256Mi, nvidia.com/gpu: 1}}
        """)
    (pod,) = load_manifests(path).pods
    assert pod.spec.init_containers[1].restart_policy == "Always"
    mi = 1024 * 1024 * 1000
    # app + sidecar = 1500m, vs init-big 2000m, vs init-after-sidecar 1000m + sidecar 500m.
    assert pod_requests(pod) == {"cpu": 2010, "memory": 1024 * mi,
                                 "nvidia.com/gpu": 1000}
    non_zero = pod_non_zero_requests(pod)
    assert non_zero["cpu"] == 2010
    # Decoding the same document again gives an identical object.
    (doc,) = load_documents(path)
    again = convert(doc, Pod)
    again.metadata.namespace = "default"
    assert again == pod


# ---- timing annotations --------------------------------------------------------------------------

def test_timing_annotations(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", f"""
        apiVersion: v1
        kind: Pod
        metadata:
          name: a
          annotations:
            {ANNOTATION_ARRIVAL}: "12.5"
            {ANNOTATION_DURATION}: "3600"
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: b}}
        """)
    a, b = load_manifests(path).pods
    assert pod_timing(a) == (12.5, 3600.0)
    assert pod_timing(b) == (0.0, None)


@pytest.mark.parametrize("value", ['"-1"', '"soon"', '"nan"', '"inf"'])
def test_bad_timing_annotation(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, "t.yaml", f"""
        apiVersion: v1
        kind: Pod
        metadata:
          name: a
          annotations:
            other: x
            {ANNOTATION_DURATION}: {value}
        """)
    err = error_of(path)
    assert (err.line, err.field) == (7, f"metadata.annotations.{ANNOTATION_DURATION}")
    assert err.expected is not None and "seconds" in err.expected


def test_unquoted_timing_annotation_is_a_type_error(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", f"""
        apiVersion: v1
        kind: Pod
        metadata:
          name: a
          annotations:
            {ANNOTATION_ARRIVAL}: 5
        """)
    err = error_of(path)
    assert (err.line, err.field, err.expected) == (
        6, f"metadata.annotations.{ANNOTATION_ARRIVAL}", "a string")
