"""Loading Kubernetes manifests (files, directories, stdin) into typed objects.

A cluster and a workload are described the way users already describe them: the YAML they
would ``kubectl apply``. This module checks each object's apiVersion and kind, decodes the kinds
the scheduler itself needs (Node, Pod, PriorityClass, Namespace, PodDisruptionBudget) into
:mod:`kubeberth.api.objects`, applies the server-side defaults that matter for scheduling (a pod's
namespace), validates quantities eagerly so a bad ``cpu: 1x`` is reported at its line and not in
the middle of a simulation, and keeps the documents of other known kinds (Kueue, PodGroup,
workload controllers, DeschedulerPolicy, KubeSchedulerConfiguration, ...) raw for the layers that
own them. Objects of any other kind (Service, Secret, CRDs and their objects, ...) are kept too,
so that ``kubeberth serve`` can serve them, and listed as read but not modelled
(:meth:`Manifests.not_modelled`), so that no input is dropped without a word. An object named
by ``generateName`` gets its name here, as the API server would name it. It does not resolve
references between objects (priority class names, queues): those belong to the layers that use
them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    Namespace,
    Node,
    ObjectMeta,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    class_priority,
)
from kubeberth.api.resources import node_allocatable, pod_requests, resource_map
from kubeberth.api.validation import (
    check_label,
    check_shape,
    validate_node,
    validate_pod,
    validate_priority_class,
)
from kubeberth.config.yamlsrc import STDIN, Document, convert, load_documents

ANNOTATION_ARRIVAL = "kubeberth.io/arrival-seconds"
ANNOTATION_DURATION = "kubeberth.io/duration-seconds"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_NAMESPACE = "default"
# Upstream's HighestUserDefinablePriority: larger values are reserved for system-* classes.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_PERCENT = re.compile(r"[0-9]+%")


class _TopLevel(Protocol):
    metadata: ObjectMeta


_O = TypeVar("_O", bound=_TopLevel)

_CORE = ("v1",)
VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
_KUEUE = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")
_SIG_SCHEDULING = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
# kind -> accepted apiVersions. The first five are decoded here; the rest are kept raw.
KNOWN_KINDS: dict[str, tuple[str, ...]] = {
    "Node": _CORE,
    "Pod": _CORE,
    "PriorityClass": ("scheduling.k8s.io/v1",),
    "Namespace": _CORE,
    "PodDisruptionBudget": ("policy/v1",),
    "ConfigMap": _CORE,
    "Deployment": ("apps/v1",),
    "ReplicaSet": ("apps/v1",),
    "StatefulSet": ("apps/v1",),
    "DaemonSet": ("apps/v1",),
    "Job": ("batch/v1", VOLCANO_JOB_API),
    "PodGroup": (*_SIG_SCHEDULING, "scheduling.volcano.sh/v1beta1", "scheduling.k8s.io/v1beta1",
                 "scheduling.k8s.io/v1alpha2"),
    "ElasticQuota": _SIG_SCHEDULING,
    "Queue": ("scheduling.volcano.sh/v1beta1",),
    "ClusterQueue": _KUEUE,
    "LocalQueue": _KUEUE,
    "ResourceFlavor": _KUEUE,
    "Workload": (*_KUEUE, "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2",
                 "scheduling.k8s.io/v1alpha1"),
    "WorkloadPriorityClass": _KUEUE,
    "AdmissionCheck": _KUEUE,
    "Cohort": (*_KUEUE, "kueue.x-k8s.io/v1alpha1"),
    "Topology": ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1alpha1"),
    "Configuration": ("config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1"),
    "DeschedulerPolicy": ("descheduler/v1alpha2",),
    "KubeSchedulerConfiguration": ("kubescheduler.config.k8s.io/v1",),
    # Dynamic Resource Allocation, decoded by config/dra.py.
    "DeviceClass": ("resource.k8s.io/v1",),
    "ResourceSlice": ("resource.k8s.io/v1",),
    "ResourceClaim": ("resource.k8s.io/v1",),
    "ResourceClaimTemplate": ("resource.k8s.io/v1",),
}
# The native Workload/PodGroup versions (PriorityClass's scheduling.k8s.io/v1 is not one).
_WORKLOAD_API = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2",
                 "scheduling.k8s.io/v1alpha1")
_KNOWN_GROUPS = {v.rpartition("/")[0] for versions in KNOWN_KINDS.values() for v in versions}
# Upstream's generated-name suffix (names.SimpleNameGenerator, utilrand.String).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_SUFFIX = 5
_MAX_GENERATED_BASE = 63 - _GENERATED_SUFFIX


@dataclass(slots=True)
class Manifests:
    """Every object found in the inputs, typed where kubeberth's core uses it."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    # Documents of the other known kinds, in input order, for the layers that parse them.
    other: list[Document] = field(default_factory=list)
    # scheduling.k8s.io Workloads and PodGroups (native gangs), kept apart from Kueue's
    # Workloads and scheduler-plugins' PodGroups that share their kind names.
    workload_api: list[Document] = field(default_factory=list)
    # (kind, namespace, name) -> the document that defined it, to locate later errors.
    origins: dict[tuple[str, str, str], Document] = field(default_factory=dict)

    def of_kind(self, *kinds: str) -> list[Document]:
        """The raw documents of the given kinds, in input order. ``Job`` means batch/v1: a
        Volcano Job shares the kind name but is another object (:meth:`volcano_jobs`); a kind
        of another API group that shares a name (a CRD's ``Queue``) is never returned."""
        return [doc for doc in self.other
                if doc.kind in kinds and _is_known(doc) and not _is_vcjob(doc)]

    def not_modelled(self) -> list[dict[str, object]]:
        """The objects read but not modelled, one entry per apiVersion and kind in input order:
        ``{"apiVersion", "kind", "objects"}``. The JSON outputs carry it as
        ``readNotModelled``."""
        counts: dict[tuple[str, str], int] = {}
        for doc in self.other:
            if not _is_known(doc):
                key = (doc.api_version, doc.kind)
                counts[key] = counts.get(key, 0) + 1
        return [{"apiVersion": api, "kind": kind, "objects": n}
                for (api, kind), n in counts.items()]

    def modelled(self) -> list[Document]:
        """The raw documents of the kinds and versions kubeberth reads, in input order (the
        others are only kept and named, :meth:`not_modelled`)."""
        return [doc for doc in self.other if _is_known(doc)]

    def volcano_jobs(self) -> list[Document]:
        """The raw ``batch.volcano.sh/v1alpha1`` Jobs, in input order."""
        return [doc for doc in self.other if _is_vcjob(doc)]

    def origin(self, kind: str, name: str, namespace: str = "") -> Document | None:
        """Where an object was defined (namespace empty for cluster-scoped kinds)."""
        return self.origins.get((kind, namespace, name))


def _is_vcjob(doc: Document) -> bool:
    return doc.kind == "Job" and doc.data.get("apiVersion") == VOLCANO_JOB_API


def _is_known_version(kind: str, api: object) -> bool:
    return api in KNOWN_KINDS.get(kind, ())


def _is_known(doc: Document) -> bool:
    return _is_known_version(doc.kind, doc.data.get("apiVersion"))


def _group(api: object) -> str:
    return str(api).rpartition("/")[0]


def describe_not_modelled(entries: list[dict[str, object]]) -> str:
    """``Service v1 x2, Gizmo example.com/v1``: the entries in one line."""
    return ", ".join(f"{e['kind']} {e['apiVersion']}" + (f" x{e['objects']}" if e["objects"] != 1
                                                          else "") for e in entries)


def not_modelled_note(entries: list[dict[str, object]]) -> str | None:
    """The one stderr line naming what was read but not modelled (None: nothing was)."""
    return f"note: read but not modelled: {describe_not_modelled(entries)}" if entries else None


def manifest_files(paths: str | Path | Iterable[str | Path]) -> list[str]:
    """Expand inputs: a directory stands for its *.yaml, *.yml and *.json files (sorted, not
    recursive, as ``kubectl apply -f dir``), ``-`` for standard input."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[str] = []
    for item in items:
        name = str(item)
        if name == STDIN:
            files.append(name)
            continue
        path = Path(item)
        if path.is_dir():
            files.extend(str(p) for p in sorted(path.iterdir())
                         if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        elif path.exists():
            files.append(name)
        else:
            raise InputError("no such file or directory", source=name,
                             expected="a manifest file, a directory of manifests or - for stdin")
    return files


def load_manifests(paths: str | Path | Iterable[str | Path], *, seed: int = 0) -> Manifests:
    """Read and validate every object in ``paths``; ``seed`` picks the names of objects given
    by ``generateName`` (the same seed, the same names)."""
    out = Manifests()
    global_default: Document | None = None
    names = _NameGenerator(seed)
    for name in manifest_files(paths):
        for doc in load_documents(name):
            kind = _check_kind(doc)
            names.name(doc)
            if kind == "Pod":
                pod = _pod(doc)
                _remember(out, doc, kind, pod.metadata.namespace, pod.metadata.name)
                out.pods.append(pod)
            elif kind == "Node":
                node = _node(doc)
                _remember(out, doc, kind, "", node.metadata.name)
                out.nodes.append(node)
            elif kind == "PriorityClass":
                pc = _priority_class(doc)
                if pc.global_default:
                    if global_default is not None:
                        raise doc.error(
                            "a second PriorityClass is marked globalDefault", field="globalDefault",
                            expected=f"at most one globalDefault PriorityClass (the first is "
                            f"{_where(global_default)})")
                    global_default = doc
                _remember(out, doc, kind, "", pc.metadata.name)
                out.priority_classes.append(pc)
            elif kind == "Namespace":
                ns = _namespace(doc)
                _remember(out, doc, kind, "", ns.metadata.name)
                out.namespaces.append(ns)
            elif kind == "PodDisruptionBudget":
                pdb = _pdb(doc)
                _remember(out, doc, kind, pdb.metadata.namespace, pdb.metadata.name)
                out.pdbs.append(pdb)
            elif _is_known(doc) and doc.api_version in _WORKLOAD_API:
                out.workload_api.append(doc)
            else:
                out.other.append(doc)
    return out


def check_priority_class_names(m: Manifests) -> None:
    """Each pod's priorityClassName names a PriorityClass of ``m`` or a system class, as the
    API server's Priority admission requires, in its words. For inputs that hold the classes
    of their pods (a bundle, not a workload file whose classes are in the cluster file)."""
    classes = {pc.metadata.name: pc for pc in m.priority_classes}
    for pod in m.pods:
        name = pod.spec.priority_class_name
        doc = m.origin("Pod", pod.metadata.name, pod.metadata.namespace)
        if name and class_priority(name, classes) is None and doc is not None:
            raise doc.error(f"no PriorityClass with name {name} was found",
                            field="spec.priorityClassName",
                            expected="the name of a PriorityClass in the manifests, "
                            "system-cluster-critical or system-node-critical")


class _NameGenerator:
    """Names for objects given by ``generateName``, as the API server makes them: the prefix
    (cut to 58 characters) and five characters of upstream's alphabet; drawn from a hash of the
    seed and the draw's number instead of a random source, so that runs repeat."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.draws = 0
        self.taken: set[tuple[str, str, str]] = set()

    def name(self, doc: Document) -> None:
        meta = doc.data.get("metadata")
        if not isinstance(meta, dict) or meta.get("name") or not meta.get("generateName"):
            return
        prefix = str(meta["generateName"])[:_MAX_GENERATED_BASE]
        namespace = str(meta.get("namespace") or "")
        while True:
            self.draws += 1
            digest = int.from_bytes(hashlib.sha256(
                f"{self.seed}/{self.draws}/{prefix}".encode()).digest(), "big")
            chars = []
            for _ in range(_GENERATED_SUFFIX):
                digest, i = divmod(digest, len(_NAME_ALPHABET))
                chars.append(_NAME_ALPHABET[i])
            key = (doc.kind, namespace, prefix + "".join(chars))
            if key not in self.taken:
                break
        self.taken.add(key)
        meta["name"] = key[2]


def pod_timing(pod: Pod) -> tuple[float, float | None]:
    """A pod's simulated arrival time (default 0) and run time (None: runs until the end).

    Read from the annotations ``kubeberth.io/arrival-seconds`` and
    ``kubeberth.io/duration-seconds``; errors name the annotation's field path.
    """
    annotations = pod.metadata.annotations
    arrival = 0.0
    if ANNOTATION_ARRIVAL in annotations:
        arrival = _seconds(annotations[ANNOTATION_ARRIVAL], ANNOTATION_ARRIVAL)
    duration = None
    if ANNOTATION_DURATION in annotations:
        duration = _seconds(annotations[ANNOTATION_DURATION], ANNOTATION_DURATION)
    return arrival, duration


def _seconds(raw: str, annotation: str) -> float:
    expected = 'a non-negative number of seconds as a string, such as "0", "30" or "2.5"'
    field = f"metadata.annotations.{annotation}"
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{raw!r} is not a number of seconds", field=field,
                         expected=expected) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{raw!r} is not a non-negative finite number of seconds", field=field,
                         expected=expected)
    return value


def _check_kind(doc: Document) -> str:
    kind = doc.data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise doc.error("the object has no kind", field="kind",
                        expected="a kind such as Pod, Node or Deployment")
    versions = KNOWN_KINDS.get(kind, ())
    api = doc.data.get("apiVersion")
    if not isinstance(api, str) or not api:
        shown = f"apiVersion {api!r}" if api is not None else "no apiVersion"
        raise doc.error(f"{kind} has {shown}", field="apiVersion",
                        expected="apiVersion: " + " or ".join(versions) if versions
                        else "an apiVersion such as v1 or example.com/v1")
    if versions and api not in versions and _group(api) in _KNOWN_GROUPS:
        # Another group's kind of the same name (a CRD's Queue) is not ours: kept, noted.
        expected = "apiVersion: " + " or ".join(versions)
        if _group(api) in {_group(v) for v in versions}:
            raise doc.error(f"kubeberth does not read version {api.rpartition('/')[2]!r} of "
                            f"{kind} ({api})", field="apiVersion",
                            expected=f"a version kubeberth reads, {expected}")
        raise doc.error(f"{kind} has apiVersion {api!r}", field="apiVersion", expected=expected)
    with doc.located():
        check_shape(doc.data)
    return kind


def check_metadata(doc: Document, meta: ObjectMeta, *, namespaced: bool) -> None:
    """Every object needs a name; a namespaced one without a namespace is in ``default``."""
    if not meta.name:
        raise doc.error(f"the {doc.kind} has no name", field="metadata.name",
                        expected="a non-empty metadata.name")
    if namespaced and not meta.namespace:
        meta.namespace = DEFAULT_NAMESPACE


def convert_object(doc: Document, type_: type[_O], *, namespaced: bool) -> _O:
    """Decode ``doc`` as a top-level object of ``type_`` and check its metadata, as every
    loader does before its kind's own checks."""
    obj = convert(doc, type_)
    check_metadata(doc, obj.metadata, namespaced=namespaced)
    return obj


def _remember(out: Manifests, doc: Document, kind: str, namespace: str, name: str) -> None:
    key = (kind, namespace, name)
    first = out.origins.get(key)
    if first is not None:
        shown = f"{namespace}/{name}" if namespace else name
        raise doc.error(f"{kind} {shown} is defined twice", field="metadata.name",
                        expected=f"unique names (the first is at {_where(first)})")
    out.origins[key] = doc


def _where(doc: Document) -> str:
    line = doc.line if doc.line is not None else doc.line_of("")
    return f"{doc.source.name}:{line}" if line is not None else doc.source.name


# Names are checked as the API server checks them, upper case aside (api/validation.py says why).
def _pod(doc: Document) -> Pod:
    pod = convert_object(doc, Pod, namespaced=True)
    spec = pod.spec
    if spec.preemption_policy is not None and spec.preemption_policy not in PREEMPTION_POLICIES:
        raise doc.error(f"unknown preemptionPolicy {spec.preemption_policy!r}",
                        field="spec.preemptionPolicy",
                        expected=" or ".join(PREEMPTION_POLICIES))
    with doc.located():
        validate_pod(pod, fold_case=True)
        pod_requests(pod)
        for kind, containers in (("containers", spec.containers),
                                 ("initContainers", spec.init_containers)):
            for i, c in enumerate(containers):
                resource_map(c.resources.limits, f"spec.{kind}[{i}].resources.limits")
        pod_timing(pod)
    return pod


def _node(doc: Document) -> Node:
    node = convert_object(doc, Node, namespaced=False)
    with doc.located():
        validate_node(node, fold_case=True)
        node_allocatable(node)
        resource_map(node.status.capacity, "status.capacity")
    return node


def _priority_class(doc: Document) -> PriorityClass:
    pc = convert_object(doc, PriorityClass, namespaced=False)
    with doc.located():
        validate_priority_class(pc, fold_case=True)
    if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY and not pc.metadata.name.startswith("system-"):
        raise doc.error(f"value {pc.value} is above the user-definable range", field="value",
                        expected=f"at most {HIGHEST_USER_DEFINABLE_PRIORITY} (higher values are "
                        "reserved for classes named system-*)")
    if pc.preemption_policy not in PREEMPTION_POLICIES:
        raise doc.error(f"unknown preemptionPolicy {pc.preemption_policy!r}",
                        field="preemptionPolicy", expected=" or ".join(PREEMPTION_POLICIES))
    return pc


def _pdb(doc: Document) -> PodDisruptionBudget:
    pdb = convert_object(doc, PodDisruptionBudget, namespaced=True)
    spec = pdb.spec
    if spec.min_available is not None and spec.max_unavailable is not None:
        raise doc.error("minAvailable and maxUnavailable are both set", field="spec.maxUnavailable",
                        expected="only one of minAvailable and maxUnavailable")
    for name, value in (("minAvailable", spec.min_available),
                        ("maxUnavailable", spec.max_unavailable)):
        if isinstance(value, int) and value < 0:
            raise doc.error(f"{name} is negative ({value})", field=f"spec.{name}",
                            expected="a non-negative integer or a percentage such as \"50%\"")
        if isinstance(value, str) and not _is_percent(value):
            raise doc.error(f"{name} {value!r} is not a percentage", field=f"spec.{name}",
                            expected="a non-negative integer or a percentage from 0% to 100%")
    policy = spec.unhealthy_pod_eviction_policy
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        raise doc.error(f"unknown unhealthyPodEvictionPolicy {policy!r}",
                        field="spec.unhealthyPodEvictionPolicy",
                        expected="IfHealthyBudget or AlwaysAllow")
    return pdb


def _namespace(doc: Document) -> Namespace:
    ns = convert_object(doc, Namespace, namespaced=False)
    with doc.located():
        check_label(ns.metadata.name, "metadata.name", fold_case=True)
    return ns


def _is_percent(value: str) -> bool:
    return _PERCENT.fullmatch(value) is not None and int(value[:-1]) <= 100


def decode_object(
    doc: Document,
) -> Node | Pod | PriorityClass | Namespace | PodDisruptionBudget | None:
    """Validate one object as :func:`load_manifests` does (kind, apiVersion, fields, quantities).

    Returns the typed object for the kinds decoded here and None for the kinds kept raw; the
    embedded API server uses it to answer a bad object with the same words as the CLI.
    """
    kind = _check_kind(doc)
    if kind == "Pod":
        return _pod(doc)
    if kind == "Node":
        return _node(doc)
    if kind == "PriorityClass":
        return _priority_class(doc)
    if kind == "PodDisruptionBudget":
        return _pdb(doc)
    if kind == "Namespace":
        return _namespace(doc)
    return None
