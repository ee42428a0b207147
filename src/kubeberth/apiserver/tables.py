"""Server-side printing: ``meta.k8s.io/v1`` Tables, the columns ``kubectl get`` shows.

kubectl asks for ``application/json;as=Table;g=meta.k8s.io;v=v1`` and prints whatever columns
the server returns, so without this every resource would show only NAME and AGE. The columns
and cell formats follow upstream's printers (``pkg/printers/internalversion``) for the built-in
kinds and the CRDs' ``additionalPrinterColumns`` for Kueue and PodGroup kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubeberth.api.times import parse_time_or_none
from kubeberth.apiserver.resources import ResourceType

Obj = dict[str, Any]
Cell = str | int | bool | None


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    cell: Callable[[Obj, float], Cell]
    type: str = "string"
    priority: int = 0
    format: str = ""


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _get(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _since(ts: Any, now: float) -> str:
    when = parse_time_or_none(ts) if isinstance(ts, str) else None
    return "<unknown>" if when is None else human_duration(now - when)


def _age(obj: Obj, now: float) -> str:
    return _since(_get(obj, "metadata.creationTimestamp"), now)


def _name(obj: Obj, _now: float) -> str:
    return str(obj["metadata"].get("name", ""))


def _path(path: str, default: str = "<none>") -> Callable[[Obj, float], Cell]:
    def cell(obj: Obj, _now: float) -> Cell:
        value = _get(obj, path)
        if value is None or value == "":
            return default
        return value if isinstance(value, int | bool) else str(value)
    return cell


NAME = Column("Name", _name, format="name")
AGE = Column("Age", _age)


def _pod_status(pod: Obj, _now: float) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    conditions = status.get("conditions") or []
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in conditions):
        reason = "SchedulingGated"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(pod: Obj, _now: float) -> str:
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for cs in (pod.get("status") or {}).get("containerStatuses") or []
                if cs.get("ready"))
    return f"{ready}/{total}"


def _pod_restarts(pod: Obj, _now: float) -> int:
    return sum(int(cs.get("restartCount", 0))
               for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _node_status(node: Obj, _now: float) -> str:
    ready = "Unknown"
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _node_roles(node: Obj, _now: float) -> str:
    labels = node["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/") and "/" in k)
    if labels.get("kubernetes.io/role"):
        roles.append(labels["kubernetes.io/role"])
    return ",".join(r for r in roles if r) or "<none>"


def _event_object(ev: Obj, _now: float) -> str:
    inv = ev.get("involvedObject") or {}
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


def _event_last_seen(ev: Obj, now: float) -> str:
    ts = ev.get("lastTimestamp") or ev.get("eventTime") or _get(ev, "metadata.creationTimestamp")
    return _since(ts, now)


def _event_source(ev: Obj, _now: float) -> str:
    src = ev.get("source") or {}
    text = str(src.get("component") or ev.get("reportingComponent") or "")
    return f"{text}, {src['host']}" if src.get("host") else text


def _int_or_str(path: str) -> Callable[[Obj, float], Cell]:
    def cell(obj: Obj, _now: float) -> Cell:
        value = _get(obj, path)
        return "N/A" if value is None else str(value)
    return cell


def _ready_of(ready_path: str, want_path: str) -> Callable[[Obj, float], Cell]:
    def cell(obj: Obj, _now: float) -> Cell:
        want = _get(obj, want_path)
        return f"{_get(obj, ready_path) or 0}/{1 if want is None else want}"
    return cell


def _job_status(job: Obj, _now: float) -> str:
    conds = {c.get("type"): c.get("status") for c in _get(job, "status.conditions") or []}
    for ctype, shown in (("Complete", "Complete"), ("Failed", "Failed"),
                         ("Suspended", "Suspended")):
        if conds.get(ctype) == "True":
            return shown
    return "Running"


def _job_completions(job: Obj, _now: float) -> str:
    done = _get(job, "status.succeeded") or 0
    total = _get(job, "spec.completions")
    return f"{done}/{total if total is not None else 1}"


def _job_duration(job: Obj, now: float) -> str:
    start = parse_time_or_none(str(_get(job, "status.startTime") or ""))
    if start is None:
        return ""
    end = parse_time_or_none(str(_get(job, "status.completionTime") or "")) or now
    return human_duration(end - start)


def _count(path: str) -> Callable[[Obj, float], Cell]:
    def cell(obj: Obj, _now: float) -> Cell:
        value = _get(obj, path)
        return len(value) if isinstance(value, dict | list) else 0
    return cell


def _holder(obj: Obj, _now: float) -> str:
    return str(_get(obj, "spec.holderIdentity") or "")


def _native_policy(obj: Obj, _now: float) -> str:
    policy = _get(obj, "spec.schedulingPolicy")
    return "Gang" if isinstance(policy, dict) and policy.get("gang") is not None else "Basic"


def _native_workload(obj: Obj, _now: float) -> str:
    return str(_get(obj, "spec.workloadRef.workloadName") or "<none>")


def _native_status(obj: Obj, _now: float) -> str:
    """kubectl's Status of a native PodGroup: Pending until the scheduler writes
    PodGroupInitiallyScheduled (Scheduled or Unschedulable); a DisruptionTarget shows its
    reason."""
    conditions = {c.get("type"): c for c in _get(obj, "status.conditions") or []
                  if isinstance(c, dict)}
    status = "Pending"
    scheduled = conditions.get("PodGroupInitiallyScheduled")
    if scheduled is not None:
        status = "Scheduled" if scheduled.get("status") == "True" else "Unschedulable"
    disruption = conditions.get("DisruptionTarget")
    return str(disruption.get("reason") or "") if disruption is not None else status


_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("", "Pod"): [
        NAME, Column("Ready", _pod_ready), Column("Status", _pod_status),
        Column("Restarts", _pod_restarts, "string"), AGE,
        Column("IP", _path("status.podIP"), priority=1),
        Column("Node", _path("spec.nodeName"), priority=1),
        Column("Nominated Node", _path("status.nominatedNodeName"), priority=1),
        Column("Readiness Gates", lambda _o, _n: "<none>", priority=1)],
    ("", "Node"): [
        NAME, Column("Status", _node_status), Column("Roles", _node_roles), AGE,
        Column("Version", _path("status.nodeInfo.kubeletVersion", "")),
        Column("Internal-IP", lambda _o, _n: "<none>", priority=1),
        Column("External-IP", lambda _o, _n: "<none>", priority=1)],
    ("", "Namespace"): [NAME, Column("Status", _path("status.phase", "")), AGE],
    ("", "Event"): [
        Column("Last Seen", _event_last_seen), Column("Type", _path("type", "")),
        Column("Reason", _path("reason", "")), Column("Object", _event_object),
        Column("Subobject", _path("involvedObject.fieldPath", ""), priority=1),
        Column("Source", _event_source, priority=1), Column("Message", _path("message", "")),
        Column("First Seen", lambda o, n: _since(o.get("firstTimestamp"), n), priority=1),
        Column("Count", lambda o, _n: int(o.get("count") or 1), "integer", priority=1),
        Column("Name", _name, priority=1)],
    ("", "ConfigMap"): [NAME, Column("Data", _count("data"), "integer"), AGE],
    ("scheduling.k8s.io", "PriorityClass"): [
        NAME, Column("Value", _path("value", "0"), "integer"),
        Column("Global-Default", lambda o, _n: bool(o.get("globalDefault")), "boolean"), AGE,
        Column("PreemptionPolicy", _path("preemptionPolicy", ""))],
    ("policy", "PodDisruptionBudget"): [
        NAME, Column("Min Available", _int_or_str("spec.minAvailable")),
        Column("Max Unavailable", _int_or_str("spec.maxUnavailable")),
        Column("Allowed Disruptions", _path("status.disruptionsAllowed", "0"), "integer"), AGE],
    ("coordination.k8s.io", "Lease"): [NAME, Column("Holder", _holder), AGE],
    ("apps", "Deployment"): [
        NAME, Column("Ready", _ready_of("status.readyReplicas", "spec.replicas")),
        Column("Up-to-date", _path("status.updatedReplicas", "0"), "integer"),
        Column("Available", _path("status.availableReplicas", "0"), "integer"), AGE],
    ("apps", "ReplicaSet"): [
        NAME, Column("Desired", _path("spec.replicas", "1"), "integer"),
        Column("Current", _path("status.replicas", "0"), "integer"),
        Column("Ready", _path("status.readyReplicas", "0"), "integer"), AGE],
    ("batch", "Job"): [
        NAME, Column("Status", _job_status), Column("Completions", _job_completions),
        Column("Duration", _job_duration), AGE],
    ("kueue.x-k8s.io", "ClusterQueue"): [
        NAME, Column("Cohort", _path("spec.cohort", "")),
        Column("Strategy", _path("spec.queueingStrategy", ""), priority=1),
        Column("Pending Workloads", _path("status.pendingWorkloads", "0"), "integer"),
        Column("Admitted Workloads", _path("status.admittedWorkloads", "0"), "integer")],
    ("kueue.x-k8s.io", "LocalQueue"): [
        NAME, Column("ClusterQueue", _path("spec.clusterQueue", "")),
        Column("Pending Workloads", _path("status.pendingWorkloads", "0"), "integer"),
        Column("Admitted Workloads", _path("status.admittedWorkloads", "0"), "integer")],
    ("kueue.x-k8s.io", "Workload"): [
        NAME, Column("Queue", _path("spec.queueName", "")),
        Column("Reserved in", _path("status.admission.clusterQueue", "")), AGE],
    ("scheduling.k8s.io", "PodGroup"): [
        NAME, Column("Policy", _native_policy), Column("Workload", _native_workload),
        Column("Status", _native_status), AGE],
    ("scheduling.x-k8s.io", "PodGroup"): [
        NAME, Column("Phase", _path("status.phase", "")),
        Column("MinMember", _path("spec.minMember", "0"), "integer"),
        Column("Running", _path("status.running", "0"), "integer"), AGE],
}


def columns(rt: ResourceType) -> list[Column]:
    return _COLUMNS.get((rt.group, rt.kind), [NAME, AGE])


def table(rt: ResourceType, objects: Iterable[Obj], now: float, resource_version: str,
          include_object: str = "Metadata", *, with_columns: bool = True,
          continue_token: str = "", table_version: str = "v1") -> dict[str, Any]:
    """A meta.k8s.io Table of ``objects``; rows carry the object or its metadata."""
    cols = columns(rt)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [c.cell(obj, now) for c in cols]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata",
                             "apiVersion": f"meta.k8s.io/{table_version}",
                             "metadata": obj.get("metadata", {})}
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    out: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{table_version}",
                           "metadata": meta, "rows": rows}
    out["columnDefinitions"] = [
        {"name": c.name, "type": c.type, "format": c.format, "description": c.name,
         "priority": c.priority} for c in cols] if with_columns else []
    return out
