"""Small builders for descheduler tests: nodes, pods, PDBs and policies as users write them."""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from kubeberth.api.objects import Node, Pod, PodDisruptionBudget
from kubeberth.api.times import format_time, parse_time
from kubeberth.config.yamlsrc import Source, parse_source
from kubeberth.descheduling.framework import PassResult, Snapshot
from kubeberth.descheduling.policy import DeschedulerPolicy, parse_descheduler_policy
from kubeberth.descheduling.registry import build_descheduler

NOW_TEXT = "2024-06-01T12:00:00Z"
NOW = parse_time(NOW_TEXT)


def at(offset_s: float) -> str:
    """A timestamp ``offset_s`` seconds after NOW (negative: in the past)."""
    return format_time(NOW + offset_s)


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110,
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, ready: bool = True, **extra: str) -> Node:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **extra}
    data: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    return msgspec.convert(data, Node)


def pod(name: str, node_name: str = "", *, ns: str = "default", cpu: str | None = "100m",
        memory: str | None = None, owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
        labels: dict[str, str] | None = None, priority: int | None = None,
        phase: str = "Running", created: float | None = None, started: float | None = -3600,
        annotations: dict[str, str] | None = None, extra_requests: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None) -> Pod:
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    container: dict[str, Any] = {"name": "c", "image": "img"}
    if requests:
        container["resources"] = {"requests": requests}
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {},
                                "annotations": annotations or {}}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                        "name": owner[1], "controller": True}]
    if created is not None:
        metadata["creationTimestamp"] = at(created)
    metadata.update(meta or {})
    pod_spec: dict[str, Any] = {"containers": [container], "nodeName": node_name}
    if priority is not None:
        pod_spec["priority"] = priority
    pod_spec.update(spec or {})
    pod_status: dict[str, Any] = {"phase": phase}
    if started is not None:
        pod_status["startTime"] = at(started)
    pod_status.update(status or {})
    return msgspec.convert({"metadata": metadata, "spec": pod_spec, "status": pod_status}, Pod)


def pdb(name: str, selector: dict[str, Any] | None, *, ns: str = "default",
        min_available: int | str | None = None, max_unavailable: int | str | None = None,
        **spec: Any) -> PodDisruptionBudget:
    data: dict[str, Any] = {"metadata": {"name": name, "namespace": ns}, "spec": dict(spec)}
    if selector is not None:
        data["spec"]["selector"] = selector
    if min_available is not None:
        data["spec"]["minAvailable"] = min_available
    if max_unavailable is not None:
        data["spec"]["maxUnavailable"] = max_unavailable
    return msgspec.convert(data, PodDisruptionBudget)


def policy(plugins: dict[str, list[str]], config: dict[str, dict[str, Any]] | None = None,
           **top: Any) -> DeschedulerPolicy:
    """One profile ``p`` enabling ``plugins`` per extension point with ``config`` args."""
    profile = {"name": "p",
               "pluginConfig": [{"name": k, "args": v} for k, v in (config or {}).items()],
               "plugins": {point: {"enabled": names} for point, names in plugins.items()}}
    return policy_from({"profiles": [profile], **top})


def policy_from(data: dict[str, Any]) -> DeschedulerPolicy:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **data}
    source = Source("policy.yaml", yaml.safe_dump(doc, sort_keys=False))
    return parse_descheduler_policy(parse_source(source)[0])


def run(pol: DeschedulerPolicy, nodes: list[Node], pods: list[Pod], *,
        pdbs: list[PodDisruptionBudget] | None = None, now: float = NOW,
        min_ready_nodes: int = 2, **snapshot: Any) -> PassResult:
    snap = Snapshot(nodes, pods, now=now, pdbs=pdbs or [], **snapshot)
    return build_descheduler(pol).run_pass(snap, min_ready_nodes=min_ready_nodes)


def evicted(result: PassResult) -> list[str]:
    return [d.pod.split("/", 1)[1] for d in result.evictions]


def skipped(result: PassResult) -> dict[str, str]:
    return {d.pod.split("/", 1)[1]: d.reason for d in result.skipped}
