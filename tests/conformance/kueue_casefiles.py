"""Turn the shared Kueue conformance cases into the manifests Kueue itself serves.

Each case's setup becomes v1beta2 ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
Namespaces, Workloads (admitted ones with ``status.admission`` and a QuotaReserved condition) and
a Configuration, so the cases go through ``kubeberth admit`` exactly like user input. Case times
are seconds relative to the test clock :data:`T0`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
NOW = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
KUEUE = "kueue.x-k8s.io/v1beta2"
PIN = "pin.kubeberth.test/"


def at(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resource_groups(groups: list[dict[str, Any]], limits: bool = True
                     ) -> list[dict[str, Any]]:
    """Resource groups in API form. Kueue's API refuses borrowing and lending limits on a
    ClusterQueue without a cohort (upstream unit tests build some anyway); with no cohort they
    have no effect, so ``limits=False`` leaves them out."""
    out = []
    for g in groups:
        covered = list(g["covered_resources"])
        flavors = []
        for f in g["flavors"]:
            res = []
            for name in covered:
                q = (f.get("resources") or {}).get(name, {"nominal": "0"})
                r: dict[str, Any] = {"name": name, "nominalQuota": str(q.get("nominal", "0"))}
                if "borrowing_limit" in q and limits:
                    r["borrowingLimit"] = str(q["borrowing_limit"])
                if "lending_limit" in q and limits:
                    r["lendingLimit"] = str(q["lending_limit"])
                res.append(r)
            flavors.append({"name": f["name"], "resources": res})
        out.append({"coveredResources": covered, "flavors": flavors})
    return out


def _flavor(f: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if f.get("node_labels"):
        spec["nodeLabels"] = f["node_labels"]
    if f.get("node_taints"):
        spec["nodeTaints"] = f["node_taints"]
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f["name"]},
            "spec": spec}


def _cohort(c: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if c.get("parent"):
        spec["parentName"] = c["parent"]
    if c.get("resource_groups"):
        spec["resourceGroups"] = _resource_groups(c["resource_groups"])
    if "fair_sharing_weight" in c:
        spec["fairSharing"] = {"weight": str(c["fair_sharing_weight"])}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": c["name"]}, "spec": spec}


def _cluster_queue(c: dict[str, Any]) -> dict[str, Any]:
    p = c.get("preemption") or {}
    bwc = p.get("borrow_within_cohort") or {}
    preemption: dict[str, Any] = {
        "withinClusterQueue": p.get("within_cluster_queue", "Never"),
        "reclaimWithinCohort": p.get("reclaim_within_cohort", "Never"),
        "borrowWithinCohort": {"policy": bwc.get("policy", "Never")},
    }
    if "max_priority_threshold" in bwc:
        preemption["borrowWithinCohort"]["maxPriorityThreshold"] = bwc["max_priority_threshold"]
    ff = c.get("flavor_fungibility") or {}
    fungibility: dict[str, Any] = {
        "whenCanBorrow": ff.get("when_can_borrow") or "MayStopSearch",
        "whenCanPreempt": ff.get("when_can_preempt") or "TryNextFlavor"}
    if ff.get("preference"):
        fungibility["preference"] = ff["preference"]
    spec: dict[str, Any] = {
        "namespaceSelector": c.get("namespace_selector") or {},
        "queueingStrategy": c.get("queueing_strategy", "BestEffortFIFO"),
        "resourceGroups": _resource_groups(c.get("resource_groups") or [],
                                           limits=bool(c.get("cohort"))),
        "preemption": preemption,
        "flavorFungibility": fungibility,
    }
    if c.get("cohort"):
        spec["cohortName"] = c["cohort"]
    if "fair_sharing_weight" in c:
        spec["fairSharing"] = {"weight": str(c["fair_sharing_weight"])}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": c["name"]},
            "spec": spec}


def _podsets(podsets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for ps in podsets:
        spec: dict[str, Any] = {"containers": [{
            "name": "c", "image": "pause",
            "resources": {"requests": {k: str(v)
                                       for k, v in (ps.get("requests_per_pod") or {}).items()}}}]}
        if ps.get("node_selector"):
            spec["nodeSelector"] = ps["node_selector"]
        if ps.get("tolerations"):
            spec["tolerations"] = ps["tolerations"]
        if ps.get("required_node_affinity"):
            spec["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": ps["required_node_affinity"]}}}
        item: dict[str, Any] = {"name": ps["name"], "count": ps.get("count", 1),
                                "template": {"spec": spec}}
        if "min_count" in ps:
            item["minCount"] = ps["min_count"]
        if ps.get("podset_group"):
            item["topologyRequest"] = {"podSetGroupName": ps["podset_group"]}
        out.append(item)
    return out


def workload_manifest(w: dict[str, Any], queue: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": w["name"], "namespace": w.get("namespace", "default")}
    if w.get("uid"):
        meta["uid"] = w["uid"]
    if "creation_time_s" in w:
        meta["creationTimestamp"] = at(w["creation_time_s"])
    doc: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta,
                           "spec": {"queueName": queue, "priority": w.get("priority", 0),
                                    "podSets": _podsets(w["podsets"])}}
    adm = w.get("admission")
    if adm:
        psas = []
        for a in adm["podset_assignments"]:
            psas.append({"name": a["name"], "count": a.get("count", 1),
                         "flavors": a.get("flavors") or {},
                         "resourceUsage": {k: str(v)
                                           for k, v in (a.get("resource_usage") or {}).items()}})
        cond: dict[str, Any] = {"type": "QuotaReserved", "status": "True",
                                "reason": "QuotaReserved"}
        if "quota_reserved_time_s" in w:
            cond["lastTransitionTime"] = at(w["quota_reserved_time_s"])
        doc["status"] = {"admission": {"clusterQueue": adm["cluster_queue"],
                                       "podSetAssignments": psas},
                         "conditions": [cond]}
    return doc


def _pin_flavors(case: dict[str, Any]) -> dict[str, Any]:
    """preemption_targets cases give the preemptor's flavor assignment. Pin it through the
    flavor assigner's own rules: every flavor gets a label per resource it serves
    (``pin.kubeberth.test/<resource>: <flavor>``) and the preemptor's podSets select the
    assigned flavors with a nodeSelector, so no other flavor matches."""
    case = json.loads(json.dumps(case))
    setup = case["setup"]
    serves: dict[str, dict[str, str]] = {}
    for cq in setup.get("cluster_queues") or []:
        for g in cq.get("resource_groups") or []:
            for f in g["flavors"]:
                for res in g["covered_resources"]:
                    serves.setdefault(f["name"], {})[f"{PIN}{res}"] = f["name"]
    for f in setup.get("resource_flavors") or []:
        f["node_labels"] = {**(f.get("node_labels") or {}), **serves.get(f["name"], {})}
    pinned = {a["podset"]: {f"{PIN}{res}": fa["flavor"] for res, fa in a["flavors"].items()}
              for a in case["input"]["flavor_assignment"]}
    for w in case.get("pending") or []:
        if w["name"] == case["input"]["preemptor"]:
            for ps in w["podsets"]:
                ps["node_selector"] = {**(ps.get("node_selector") or {}),
                                       **pinned.get(ps["name"], {})}
    return case


def case_manifests(case: dict[str, Any]) -> list[dict[str, Any]]:
    if case["kind"] == "preemption_targets":
        case = _pin_flavors(case)
    setup = case["setup"]
    docs: list[dict[str, Any]] = []
    namespaces = {n["name"]: n.get("labels") or {} for n in setup.get("namespaces") or []}
    lqs = {(q["namespace"], q["name"]): q["cluster_queue"]
           for q in setup.get("local_queues") or []}
    wls = list(setup.get("admitted_workloads") or []) + list(case.get("pending") or [])
    for w in wls:
        ns = w.get("namespace", "default")
        namespaces.setdefault(ns, {})
        if "local_queue" not in w:
            cq = w.get("cluster_queue") or (w.get("admission") or {}).get("cluster_queue", "")
            lqs.setdefault((ns, f"lq-{cq}"), cq)
    for name, labels in sorted(namespaces.items()):
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "labels": labels}})
    docs.extend(_flavor(f) for f in setup.get("resource_flavors") or [])
    docs.extend(_cohort(c) for c in setup.get("cohorts") or [])
    docs.extend(_cluster_queue(c) for c in setup.get("cluster_queues") or [])
    for (ns, name), cq in sorted(lqs.items()):
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"clusterQueue": cq}})
    for w in wls:
        if "local_queue" in w:
            queue = w["local_queue"]
        else:
            cq = w.get("cluster_queue") or (w.get("admission") or {}).get("cluster_queue", "")
            queue = f"lq-{cq}"
        docs.append(workload_manifest(w, queue))
    fs = setup.get("fair_sharing") or {}
    config: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta1",
                              "kind": "Configuration",
                              "fairSharing": {"enable": bool(fs.get("enabled"))}}
    if fs.get("preemption_strategies"):
        config["fairSharing"]["preemptionStrategies"] = fs["preemption_strategies"]
    if setup.get("feature_gates"):
        config["featureGates"] = setup["feature_gates"]
    docs.append(config)
    return docs
