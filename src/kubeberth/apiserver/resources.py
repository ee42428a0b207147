"""The resource types the embedded API server serves, and its discovery documents.

kubectl and client libraries find out what a server offers through discovery (``/api``,
``/apis``, ``/api/v1``, ``/apis/<group>/<version>``): each resource's plural, kind, scope, short
names and verbs. One table here drives discovery, routing and storage, so a resource is served
exactly when it is listed. Several versions of one group share one storage (as a real server
with a storage version); the server does not convert between them, it only rewrites
``apiVersion`` on the way out (see docs/apiserver.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource: where it lives in the API and how discovery describes it."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    # Subresources beyond the object itself: "status", "binding", "eviction", "scale".
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str]:
        """Storage identity: (group, plural); every version of the group shares it."""
        return (self.group, self.plural)

    def api_version(self, version: str | None = None) -> str:
        v = version or self.versions[0]
        return f"{self.group}/{v}" if self.group else v


_CORE = ""
_X_SCHED = "scheduling.x-k8s.io"
_SIGS_SCHED = "scheduling.sigs.k8s.io"
_VOLCANO = "scheduling.volcano.sh"
_KUEUE = "kueue.x-k8s.io"
_KUEUE_VERSIONS = ("v1beta1", "v1beta2")

RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(_CORE, ("v1",), "namespaces", "Namespace", False, ("ns",), ("status",)),
    ResourceType(_CORE, ("v1",), "nodes", "Node", False, ("no",), ("status",)),
    ResourceType(_CORE, ("v1",), "pods", "Pod", True, ("po",),
                 ("status", "binding", "eviction"), ("all",)),
    ResourceType(_CORE, ("v1",), "events", "Event", True, ("ev",)),
    ResourceType(_CORE, ("v1",), "configmaps", "ConfigMap", True, ("cm",)),
    ResourceType("scheduling.k8s.io", ("v1",), "priorityclasses", "PriorityClass", False,
                 ("pc",)),
    ResourceType("policy", ("v1",), "poddisruptionbudgets", "PodDisruptionBudget", True,
                 ("pdb",), ("status",)),
    ResourceType("coordination.k8s.io", ("v1",), "leases", "Lease", True),
    ResourceType("apps", ("v1",), "deployments", "Deployment", True, ("deploy",),
                 ("status", "scale"), ("all",)),
    ResourceType("apps", ("v1",), "replicasets", "ReplicaSet", True, ("rs",),
                 ("status", "scale"), ("all",)),
    ResourceType("batch", ("v1",), "jobs", "Job", True, (), ("status",), ("all",)),
    ResourceType(_X_SCHED, ("v1alpha1",), "podgroups", "PodGroup", True, ("pg", "pgs"),
                 ("status",)),
    ResourceType(_X_SCHED, ("v1alpha1",), "elasticquotas", "ElasticQuota", True,
                 ("eq", "eqs"), ("status",)),
    ResourceType(_SIGS_SCHED, ("v1alpha1",), "podgroups", "PodGroup", True, (), ("status",)),
    ResourceType(_SIGS_SCHED, ("v1alpha1",), "elasticquotas", "ElasticQuota", True, (),
                 ("status",)),
    ResourceType(_VOLCANO, ("v1beta1",), "podgroups", "PodGroup", True, ("podgroup-v1beta1",),
                 ("status",)),
    ResourceType(_VOLCANO, ("v1beta1",), "queues", "Queue", False, ("q", "queue-v1beta1"),
                 ("status",)),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "clusterqueues", "ClusterQueue", False,
                 ("cq",), ("status",)),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "localqueues", "LocalQueue", True,
                 ("lq", "queue", "queues"), ("status",)),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "resourceflavors", "ResourceFlavor", False,
                 ("flavor", "flavors", "rf")),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "workloads", "Workload", True,
                 ("wl",), ("status",)),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "workloadpriorityclasses", "WorkloadPriorityClass",
                 False),
    ResourceType(_KUEUE, _KUEUE_VERSIONS, "admissionchecks", "AdmissionCheck", False, (),
                 ("status",)),
    ResourceType(_KUEUE, ("v1beta2", "v1beta1", "v1alpha1"), "cohorts", "Cohort", False, (),
                 ("status",)),
    ResourceType(_KUEUE, ("v1beta2", "v1alpha1"), "topologies", "Topology", False),
    # Stored and served as written: Volcano Jobs and Dynamic Resource Allocation (no controller
    # of this server acts on them; docs/apiserver.md). The scheduling.k8s.io Workload and
    # PodGroup are in OPTIONAL_APIS below.
    ResourceType("batch.volcano.sh", ("v1alpha1",), "jobs", "Job", True, ("vcjob", "vj"),
                 ("status",)),
    ResourceType("resource.k8s.io", ("v1",), "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", ("v1",), "resourceslices", "ResourceSlice", False),
    ResourceType("resource.k8s.io", ("v1",), "resourceclaims", "ResourceClaim", True, (),
                 ("status",)),
    ResourceType("resource.k8s.io", ("v1",), "resourceclaimtemplates", "ResourceClaimTemplate",
                 True),
)


# APIs kube-apiserver 1.37 leaves off unless --runtime-config turns them on (new beta APIs are
# off by default), by the group/version that flag names. Kubernetes 1.37's native Workload and
# PodGroup also need the GenericWorkload feature gate upstream; here turning the API on is
# enough. Served, kubectl's "workloads" names these before Kueue's, as on a real cluster.
OPTIONAL_APIS: dict[str, tuple[ResourceType, ...]] = {
    "scheduling.k8s.io/v1beta1": (
        ResourceType("scheduling.k8s.io", ("v1beta1",), "workloads", "Workload", True),
        ResourceType("scheduling.k8s.io", ("v1beta1",), "podgroups", "PodGroup", True, (),
                     ("status",)),
    ),
}


def runtime_config(text: str) -> tuple[ResourceType, ...]:
    """The resources ``--runtime-config`` adds, read as kube-apiserver reads the flag:
    comma-separated ``group/version=true|false`` (a bare ``group/version`` means true)."""
    out: dict[str, tuple[ResourceType, ...]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if key not in OPTIONAL_APIS:
            raise InputError(f"{key!r} cannot be turned on or off here", field="--runtime-config",
                             expected="group/version=true|false for one of "
                             + ", ".join(OPTIONAL_APIS))
        if value not in ("", "true", "false"):
            raise InputError(f"{item!r}", field="--runtime-config",
                             expected=f"{key}=true or {key}=false")
        if value == "false":
            out.pop(key, None)
        else:
            out[key] = OPTIONAL_APIS[key]
    return tuple(rt for rts in out.values() for rt in rts)


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version priority (GA before beta before alpha, then the higher number),
    which picks a group's preferred version: scheduling.k8s.io prefers v1 over v1alpha2."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (-1, 0, 0)
    stability = {"alpha": 0, "beta": 1}.get(match.group(2) or "", 2)
    return (stability, int(match.group(1)), int(match.group(3) or 0))


class Registry:
    """Lookups over :data:`RESOURCES` by URL parts and by apiVersion/kind."""

    def __init__(self, resources: tuple[ResourceType, ...] = RESOURCES) -> None:
        self.resources = resources
        self._by_path = {(r.group, v, r.plural): r for r in resources for v in r.versions}
        self._by_kind = {(r.group, v, r.kind): r for r in resources for v in r.versions}
        groups: dict[str, list[str]] = {}
        for r in resources:
            if r.group:
                versions = groups.setdefault(r.group, [])
                versions.extend(v for v in r.versions if v not in versions)
        # Preferred version: the most stable and newest, as a real server orders them.
        self.groups = {g: sorted(vs, key=version_priority, reverse=True)
                       for g, vs in groups.items()}

    def by_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return self._by_kind.get((group, version, kind))

    def of_kind(self, group: str, kind: str) -> ResourceType | None:
        """The first served resource of ``kind`` in ``group`` (any version)."""
        for r in self.resources:
            if r.group == group and r.kind == kind:
                return r
        return None

    def group_version_served(self, group: str, version: str) -> bool:
        return any(r.group == group and version in r.versions for r in self.resources)

    # Discovery documents.

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}

    def api_group_list(self) -> dict[str, Any]:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [self._group(g) for g in self.groups]}

    def api_group(self, group: str) -> dict[str, Any] | None:
        if group not in self.groups:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)}

    def _group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self.groups[group]]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        if not (group == "" and version == "v1") and not self.group_version_served(group,
                                                                                    version):
            return None
        items: list[dict[str, Any]] = []
        for r in self.resources:
            if r.group != group or version not in r.versions:
                continue
            entry: dict[str, Any] = {
                "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                "kind": r.kind, "verbs": VERBS,
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            items.append(entry)
            for sub in r.subresources:
                items.append(_subresource(r, sub))
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": items}


def _subresource(r: ResourceType, sub: str) -> dict[str, Any]:
    kind, verbs, group, version = r.kind, STATUS_VERBS, None, None
    if sub == "binding":
        kind, verbs = "Binding", ["create"]
    elif sub == "eviction":
        kind, verbs, group, version = "Eviction", ["create"], "policy", "v1"
    elif sub == "scale":
        kind, group, version = "Scale", "autoscaling", "v1"
    entry: dict[str, Any] = {"name": f"{r.plural}/{sub}", "singularName": "",
                             "namespaced": r.namespaced, "kind": kind, "verbs": verbs}
    if group is not None:
        entry["group"], entry["version"] = group, version
    return entry


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root(registry: Registry) -> dict[str, Any]:
    """``/openapi/v3``: one entry per served group-version."""
    paths: dict[str, Any] = {}
    for r in registry.resources:
        for v in r.versions:
            path = _gv_path(r.group, v)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


def openapi_v3_group_version(registry: Registry, group: str, version: str
                             ) -> dict[str, Any] | None:
    """A minimal OpenAPI v3 document for one group-version: operations without schemas.

    It exists so that kubectl's validation finds that the server accepts the
    ``fieldValidation`` parameter (and leaves validation to the server) instead of failing to
    download a schema; it carries no object schemas (see docs/apiserver.md).
    """
    if not registry.group_version_served(group, version) and (group, version) != ("", "v1"):
        return None
    param = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for r in registry.resources:
        if r.group != group or version not in r.versions:
            continue
        gvk = {"group": group, "version": version, "kind": r.kind}
        base = "/" + _gv_path(group, version)
        scope = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced \
            else f"{base}/{r.plural}"
        op = {"x-kubernetes-group-version-kind": gvk, "parameters": [param],
              "responses": {"200": {"description": "OK"}}}
        paths[f"{scope}/{{name}}"] = {"patch": {**op, "x-kubernetes-action": "patch"},
                                      "put": {**op, "x-kubernetes-action": "put"}}
        paths[scope] = {"post": {**op, "x-kubernetes-action": "post"}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (kubeberth)", "version": "v1"},
            "paths": paths, "components": {"schemas": {}}}
