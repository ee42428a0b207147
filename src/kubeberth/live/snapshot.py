"""Read a live cluster's scheduling state into manifests the offline commands load.

``kubeberth snapshot`` lists, through any API server (a real one or ``kubeberth serve``), what
the scheduler, Kueue and the descheduler read: nodes, pods and their owners, priority classes,
budgets, gangs, Kueue's objects and Dynamic Resource Allocation. Each object is written back as
the manifest a user would apply, minus what the server populated for its own bookkeeping
(``managedFields``, ``resourceVersion``, ``uid``, ...), and with what the decisions depend on
kept (``spec.nodeName``, node allocatable, pod phase and conditions, ``creationTimestamp``,
Workload admission). A kind the server does not serve (a CRD not installed) is skipped and
reported once. Output is deterministic: one file per kind, numbered in dependency order, objects
sorted by namespace and name (pods in creation order, which is their queue order), keys sorted.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx  # lightkube 1.x speaks through httpx2
import msgspec
import yaml
from lightkube import ApiError, Client
from lightkube.core.generic_client import ALL_NS, GenericSyncClient
from lightkube.core.resource import Resource
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from kubeberth.api.errors import InputError
from kubeberth.api.validation import check_label
from kubeberth.live.informer import Obj, list_objects

# v1beta1 first: every Kueue 0.19 server serves it, converting objects stored as v1beta2, while
# a server that stores as written (kubeberth's own, docs/apiserver.md) only relabels them.
_KUEUE = ("v1beta1", "v1beta2")


@dataclass(frozen=True, slots=True)
class Kind:
    """One resource a snapshot reads: the versions tried, in order, and its output file."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool

    @property
    def label(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# In the order the files are written (and loaded): what an object refers to comes first.
KINDS: tuple[Kind, ...] = (
    Kind("", ("v1",), "namespaces", "Namespace", False),
    Kind("", ("v1",), "nodes", "Node", False),
    Kind("scheduling.k8s.io", ("v1",), "priorityclasses", "PriorityClass", False),
    Kind("kueue.x-k8s.io", _KUEUE, "workloadpriorityclasses", "WorkloadPriorityClass", False),
    Kind("kueue.x-k8s.io", _KUEUE, "resourceflavors", "ResourceFlavor", False),
    Kind("kueue.x-k8s.io", ("v1beta1", "v1beta2", "v1alpha1"), "cohorts", "Cohort", False),
    Kind("kueue.x-k8s.io", ("v1beta2", "v1alpha1"), "topologies", "Topology", False),
    Kind("kueue.x-k8s.io", _KUEUE, "admissionchecks", "AdmissionCheck", False),
    Kind("kueue.x-k8s.io", _KUEUE, "clusterqueues", "ClusterQueue", False),
    Kind("kueue.x-k8s.io", _KUEUE, "localqueues", "LocalQueue", True),
    Kind("resource.k8s.io", ("v1",), "deviceclasses", "DeviceClass", False),
    Kind("resource.k8s.io", ("v1",), "resourceslices", "ResourceSlice", False),
    Kind("resource.k8s.io", ("v1",), "resourceclaimtemplates", "ResourceClaimTemplate", True),
    Kind("resource.k8s.io", ("v1",), "resourceclaims", "ResourceClaim", True),
    Kind("policy", ("v1",), "poddisruptionbudgets", "PodDisruptionBudget", True),
    Kind("scheduling.x-k8s.io", ("v1alpha1",), "podgroups", "PodGroup", True),
    Kind("scheduling.sigs.k8s.io", ("v1alpha1",), "podgroups", "PodGroup", True),
    # Native gangs, at the versions the loaders read (kube-apiserver 1.37 serves v1beta1 only
    # with --runtime-config, as `kubeberth serve` does).
    Kind("scheduling.k8s.io", ("v1beta1", "v1alpha2", "v1alpha1"), "workloads", "Workload",
         True),
    Kind("scheduling.k8s.io", ("v1beta1", "v1alpha2"), "podgroups", "PodGroup", True),
    Kind("apps", ("v1",), "deployments", "Deployment", True),
    Kind("apps", ("v1",), "replicasets", "ReplicaSet", True),
    Kind("batch", ("v1",), "jobs", "Job", True),
    Kind("kueue.x-k8s.io", _KUEUE, "workloads", "Workload", True),
    Kind("", ("v1",), "pods", "Pod", True),
)

# Where a scheduler's KubeSchedulerConfiguration is looked for when --scheduler-config is not
# given, in this order: (namespace, ConfigMap). Every key of the ConfigMap is tried; the first
# value holding a KubeSchedulerConfiguration wins. kubeadm keeps the scheduler's configuration
# as a file on the control-plane nodes (a static pod's --config), never in the API.
SCHEDULER_CONFIG_MAPS: tuple[tuple[str, str], ...] = (
    ("kube-system", "kube-scheduler-config"),
    ("kube-system", "scheduler-config"),
    ("scheduler-plugins", "scheduler-config"),  # scheduler-plugins' as-a-second-scheduler chart
    ("kubeberth-system", "kubeberth-scheduler-config"),  # `kubeberth manifests`
)

# Where Kueue's manager keeps its Configuration (Kueue's install manifests and Helm chart).
KUEUE_CONFIG_MAPS: tuple[tuple[str, str], ...] = (("kueue-system", "kueue-manager-config"),)

# Server-populated metadata the loaders must not see: identity and bookkeeping of one server.
_DROPPED_META = ("managedFields", "resourceVersion", "uid", "generation", "selfLink",
                 "deletionGracePeriodSeconds")
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_TOP = ("apiVersion", "kind", "metadata", "spec", "status")


@dataclass(slots=True)
class Snapshot:
    """What was read: each kind's objects (stripped, sorted) and what could not be read."""

    objects: dict[Kind, list[Obj]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    scheduler_config: str | None = None
    scheduler_config_from: str = ""
    kueue_config: str | None = None  # Kueue's Configuration, as found in its ConfigMap
    kueue_config_from: str = ""


Progress = Callable[[str], None]


@functools.cache
def _resource(kind: Kind, version: str) -> type[Resource]:
    """lightkube's class for one resource, made once per process (lightkube refuses a second
    class for the same kind)."""
    make = create_namespaced_resource if kind.namespaced else create_global_resource
    return make(kind.group, version, kind.kind, kind.plural)


# Answers a client retries, as client-go does: a CRD's storage still initializing (429), an API
# server starting or overloaded (503); at most this many times, RETRY_DELAY seconds apart.
RETRIES = 20
RETRY_DELAY = 0.5


def _list_retrying(http: GenericSyncClient, res: type[Resource], ns: str | None) -> list[Obj]:
    attempts = 1
    while True:
        try:
            return list_objects(http, res, ns)
        except ApiError as err:
            if err.status.code not in (429, 503) or attempts >= RETRIES:
                raise
            attempts += 1
            time.sleep(RETRY_DELAY)


def _read_kind(http: GenericSyncClient, kind: Kind,
               namespaces: list[str] | None) -> list[Obj] | None:
    """Every object of ``kind`` (in ``namespaces``), at the first version the server serves;
    None if it serves none."""
    for version in kind.versions:
        res = _resource(kind, version)
        api = f"{kind.group}/{version}" if kind.group else version
        scopes: list[str | None] = [None]
        if kind.namespaced:
            scopes = [ALL_NS] if namespaces is None or kind.kind == "Pod" else list(namespaces)
        try:
            items: list[Obj] = []
            for ns in scopes:
                items.extend(_list_retrying(http, res, ns))
        except ApiError as err:
            if err.status.code == 404:
                continue
            raise
        return [{**obj, "apiVersion": api, "kind": kind.kind} for obj in items]
    return None


def read_cluster(client: Client, namespaces: list[str] | None = None,
                 progress: Progress | None = None, *, find_config: bool = True) -> Snapshot:
    """List every kind of :data:`KINDS`. With ``namespaces``, namespaced objects come from
    those namespaces only, except the pods bound to a node elsewhere: they hold capacity.
    An unreachable server or an answer other than a list or a 404 is an InputError.
    ``find_config``: also look for the scheduler's configuration (:data:`SCHEDULER_CONFIG_MAPS`);
    Kueue's Configuration is always looked for (:data:`KUEUE_CONFIG_MAPS`)."""
    http: GenericSyncClient = client._client
    snap = Snapshot()
    for kind in KINDS:
        if progress is not None:
            progress(kind.label)
        try:
            items = _read_kind(http, kind, namespaces)
        except (ApiError, httpx.HTTPError, OSError, msgspec.DecodeError) as err:
            raise InputError(f"cannot list {kind.label}: {err}", field="--kubeconfig",
                             expected="a reachable API server and credentials that may list "
                                      "what docs/snapshot.md names") from None
        if items is None:
            snap.skipped.append(kind.label)
            continue
        if namespaces is not None:
            items = [o for o in items if _in_scope(kind, o, namespaces)]
        snap.objects[kind] = _sorted(kind, [strip(o) for o in items], items)
    if progress is not None:
        progress("configuration ConfigMaps")
    if find_config:
        found = config_from_maps(client, SCHEDULER_CONFIG_MAPS, "KubeSchedulerConfiguration")
        if found is not None:
            snap.scheduler_config, snap.scheduler_config_from = found
    kueue = config_from_maps(client, KUEUE_CONFIG_MAPS, "Configuration")
    if kueue is not None:
        snap.kueue_config, snap.kueue_config_from = kueue
    return snap


def _in_scope(kind: Kind, obj: Obj, namespaces: list[str]) -> bool:
    meta = obj.get("metadata") or {}
    if kind.kind == "Namespace":
        return meta.get("name") in namespaces
    if kind.kind == "Pod" and meta.get("namespace") not in namespaces:
        return bool((obj.get("spec") or {}).get("nodeName"))
    return True


def _sorted(kind: Kind, stripped: list[Obj], raw: list[Obj]) -> list[Obj]:
    """Namespace and name order; pods in creation order (the order a scheduler queues them):
    creationTimestamp, then the order the server wrote them (resourceVersion, when every one
    is a number as etcd's are), then namespace and name."""
    def name_key(obj: Obj) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    if kind.kind != "Pod":
        return sorted(stripped, key=name_key)
    versions = [str((o.get("metadata") or {}).get("resourceVersion") or "") for o in raw]
    numeric = all(v.isdigit() for v in versions)
    order = sorted(range(len(stripped)), key=lambda i: (
        str((stripped[i].get("metadata") or {}).get("creationTimestamp") or ""),
        int(versions[i]) if numeric else 0, name_key(stripped[i])))
    return [stripped[i] for i in order]


def strip(obj: Obj) -> Obj:
    """The object as a manifest: without the server's bookkeeping (identity, versions, field
    managers, the last-applied annotation, owner uids), with everything else as served."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    for key in _DROPPED_META:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    for key in _DROPPED_ANNOTATIONS:
        annotations.pop(key, None)
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    return out


def config_from_maps(client: Client, places: tuple[tuple[str, str], ...],
                     kind: str) -> tuple[str, str] | None:
    """(YAML, "namespace/name:key") of the first value holding a ``kind`` document in the
    ConfigMaps ``places`` (namespace, name), or None. A ConfigMap that is absent or that the
    credentials may not read is passed over."""
    from lightkube.resources.core_v1 import ConfigMap

    for namespace, name in places:
        try:
            cm = client.get(ConfigMap, name, namespace=namespace)
        except ApiError as err:
            if err.status.code in (403, 404):
                continue
            raise InputError(f"cannot read ConfigMap {namespace}/{name}: {err}",
                             field="--kubeconfig",
                             expected="a reachable API server") from None
        for key, text in sorted((cm.data or {}).items()):
            try:
                doc = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and doc.get("kind") == kind:
                return text, f"{namespace}/{name}:{key}"
    return None


def dump_object(obj: Obj) -> str:
    """One object as YAML: apiVersion, kind, metadata, spec, status first, then the rest;
    every nested mapping's keys sorted, so the same object always reads the same."""
    def ordered(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ordered(value[k]) for k in sorted(value)}
        if isinstance(value, list):
            return [ordered(v) for v in value]
        return value

    top = {k: ordered(obj[k]) for k in _TOP if k in obj}
    top.update({k: ordered(obj[k]) for k in sorted(obj) if k not in _TOP})
    return yaml.safe_dump(top, sort_keys=False, allow_unicode=True, width=100)


def file_name(index: int, kind: Kind) -> str:
    """``NN-<plural>[.<group>].yaml``: numbered so a directory load reads them in order."""
    return f"{index:02d}-{kind.label}.yaml"


def files(snap: Snapshot) -> dict[str, str]:
    """File name -> YAML of every kind read that has objects."""
    out: dict[str, str] = {}
    for i, kind in enumerate(KINDS):
        objs = snap.objects.get(kind) or []
        if objs:
            out[file_name(i, kind)] = "---\n".join(dump_object(o) for o in objs)
    return out


def count(snap: Snapshot) -> dict[str, int]:
    """Objects read per kind label."""
    return {k.label: len(v) for k, v in snap.objects.items() if v}


def namespaces_flag(values: Iterable[str] | None) -> list[str] | None:
    """``--namespace`` values, each a namespace name (None: every namespace)."""
    if not values:
        return None
    for v in values:
        check_label(v, "--namespace")
    return sorted(set(values))
