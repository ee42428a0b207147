"""Turn the shared descheduler conformance cases into manifests and a DeschedulerPolicy.

The cases (``../shared/conformance/descheduler/cases.yaml``) describe nodes, pods and a policy in
a neutral schema; this module writes them as the YAML a user would give ``kubeberth deschedule``.
Times are relative to :data:`NOW`, which the tests pass as ``--now``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
NOW_TEXT = "2024-01-01T00:00:00Z"
# The case fields pod_manifest and node_manifest translate.
POD_KEYS = frozenset({
    "name", "namespace", "node", "requests", "containers", "labels", "annotations", "priority",
    "tolerations", "node_selector", "volumes", "topology_spread_constraints", "phase",
    "qos_class", "owner_references", "deletion_timestamp_set", "creation_time_s",
    "required_node_affinity", "required_pod_anti_affinity", "container_statuses",
    "init_container_statuses"})
NODE_KEYS = frozenset({"name", "allocatable", "labels", "taints", "unschedulable"})


def _time(offset_s: float) -> str:
    return (NOW + dt.timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _statuses(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(raw):
        status: dict[str, Any] = {"name": f"c{i}", "restartCount": s.get("restartCount", 0)}
        if s.get("state"):
            status["state"] = s["state"]
        out.append(status)
    return out


def pod_manifest(p: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [
        {"name": f"c{i}", "image": c.get("image", "")} for i, c in enumerate(p.get("containers")
                                                                             or [{}])]
    if p.get("requests"):
        containers[0]["resources"] = {"requests": dict(p["requests"])}
    spec: dict[str, Any] = {"containers": containers, "nodeName": p["node"]}
    meta: dict[str, Any] = {"name": p["name"], "namespace": p.get("namespace", "default")}
    status: dict[str, Any] = {}
    for key, into, target in (("labels", meta, "labels"), ("annotations", meta, "annotations"),
                              ("priority", spec, "priority"), ("tolerations", spec, "tolerations"),
                              ("node_selector", spec, "nodeSelector"), ("volumes", spec, "volumes"),
                              ("topology_spread_constraints", spec,
                               "topologySpreadConstraints"),
                              ("phase", status, "phase"), ("qos_class", status, "qosClass")):
        if key in p:
            into[target] = p[key]
    if p.get("owner_references"):
        meta["ownerReferences"] = [{"apiVersion": "v1", **ref} for ref in p["owner_references"]]
    if p.get("deletion_timestamp_set"):
        meta["deletionTimestamp"] = NOW_TEXT
    if "creation_time_s" in p:
        meta["creationTimestamp"] = _time(p["creation_time_s"])
    affinity: dict[str, Any] = {}
    if p.get("required_node_affinity"):
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": p["required_node_affinity"]}}
    if p.get("required_pod_anti_affinity"):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": p["required_pod_anti_affinity"]}
    if affinity:
        spec["affinity"] = affinity
    if p.get("container_statuses"):
        status["containerStatuses"] = _statuses(p["container_statuses"])
    if p.get("init_container_statuses"):
        status["initContainerStatuses"] = _statuses(p["init_container_statuses"])
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if status:
        doc["status"] = status
    return doc


def node_manifest(n: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if n.get("taints"):
        spec["taints"] = n["taints"]
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n["name"], "labels": n.get("labels") or {}},
            "spec": spec,
            "status": {"allocatable": {k: str(v) for k, v in n["allocatable"].items()}}}


def policy_document(case: dict[str, Any]) -> dict[str, Any]:
    """The case's policy as a DeschedulerPolicy. Upstream's unit tests build plugin args without
    the defaulting and validation the policy loader applies; where that matters the args say
    what the test ran with: RemoveFailedPods' minPodLifetimeSeconds (3600 by default, unset in
    the tests) is 0, and the node utilization plugins' ``evictableNamespaces.include`` (ignored
    by the plugins, rejected by validation) is dropped."""
    policy = yaml.safe_load(yaml.safe_dump(case["policy"]))
    for profile in policy["profiles"]:
        for pc in profile.get("pluginConfig") or []:
            args = pc.get("args") or {}
            if pc["name"] == "RemoveFailedPods":
                args.setdefault("minPodLifetimeSeconds", 0)
            namespaces = args.get("evictableNamespaces")
            if pc["name"] in ("LowNodeUtilization", "HighNodeUtilization") and namespaces:
                namespaces.pop("include", None)
                if not namespaces:
                    del args["evictableNamespaces"]
            pc["args"] = args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **policy}


def write_case(case: dict[str, Any], directory: Path) -> tuple[Path, Path]:
    """Write ``manifests.yaml`` and ``policy.yaml`` for one case; returns their paths."""
    docs = [node_manifest(n) for n in case["nodes"]] + [pod_manifest(p) for p in case["pods"]]
    manifests = directory / "manifests.yaml"
    manifests.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    policy = directory / "policy.yaml"
    policy.write_text(yaml.safe_dump(policy_document(case), sort_keys=False))
    return manifests, policy
