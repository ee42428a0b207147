"""Compact builders of Kueue manifests for admission tests, and a runner through the package.

Tests describe queues and workloads in a few words; these helpers expand them into the real
``kueue.x-k8s.io/v1beta2`` documents, load them the way the CLI does and run admission.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubeberth.admission.model import KueueObjects, load_kueue
from kubeberth.admission.quota import Snapshot, admitted_info
from kubeberth.api.times import parse_time
from kubeberth.cli.admit import AdmitRun, admit, contract
from kubeberth.config.manifests import load_manifests

KUEUE = "kueue.x-k8s.io/v1beta2"
T0 = "2025-01-01T00:00:00Z"


def at(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"2025-01-01T00:{minutes:02d}:{secs:02d}Z"


def flavor(name: str, labels: dict[str, str] | None = None,
           taints: list[dict[str, str]] | None = None,
           tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": spec}


def quota(name: str, nominal: str, borrowing: str | None = None,
          lending: str | None = None) -> dict[str, Any]:
    q: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return q


def group(resources: list[str], *flavors: tuple[str, list[dict[str, Any]]]
          ) -> dict[str, Any]:
    return {"coveredResources": resources,
            "flavors": [{"name": f, "resources": qs} for f, qs in flavors]}


def cluster_queue(name: str, groups: list[dict[str, Any]], *, cohort: str = "",
                  strategy: str = "BestEffortFIFO", within: str = "Never",
                  reclaim: str = "Never", borrow_within: str = "Never",
                  threshold: int | None = None, weight: str | None = None,
                  when_can_borrow: str = "MayStopSearch",
                  when_can_preempt: str = "TryNextFlavor",
                  namespace_selector: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    bwc: dict[str, Any] = {"policy": borrow_within}
    if threshold is not None:
        bwc["maxPriorityThreshold"] = threshold
    spec: dict[str, Any] = {
        "namespaceSelector": namespace_selector if namespace_selector is not None else {},
        "queueingStrategy": strategy, "resourceGroups": groups,
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                       "borrowWithinCohort": bwc},
        "flavorFungibility": {"whenCanBorrow": when_can_borrow,
                              "whenCanPreempt": when_can_preempt}}
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    spec.update(extra or {})
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def cohort(name: str, parent: str = "", groups: list[dict[str, Any]] | None = None,
           weight: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = groups
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(cq: str, namespace: str = "default", name: str | None = None
                ) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": name or cq, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


def workload(name: str, queue: str, requests: dict[str, str], *, count: int = 1,
             namespace: str = "default", priority: int | None = None, created: int = 0,
             min_count: int | None = None, node_selector: dict[str, str] | None = None,
             tolerations: list[dict[str, str]] | None = None,
             admitted: tuple[str, dict[str, str]] | None = None,
             reserved_at: int | None = None) -> dict[str, Any]:
    """A Workload; ``admitted=(clusterQueue, {resource: flavor})`` gives it status.admission."""
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {
        "requests": requests}}]}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    ps: dict[str, Any] = {"name": "main", "count": count, "template": {"spec": pod_spec}}
    if min_count is not None:
        ps["minCount"] = min_count
    spec: dict[str, Any] = {"queueName": queue, "podSets": [ps]}
    if priority is not None:
        spec["priority"] = priority
    doc: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Workload",
                           "metadata": {"name": name, "namespace": namespace,
                                        "uid": f"uid-{name}",
                                        "creationTimestamp": at(created)},
                           "spec": spec}
    if admitted is not None:
        cq, flavors = admitted
        usage = {r: _times(v, count) for r, v in requests.items()}
        doc["status"] = {
            "admission": {"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "count": count, "flavors": flavors, "resourceUsage": usage}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                            "lastTransitionTime": at(reserved_at if reserved_at is not None
                                                     else created)}]}
    return doc


def _times(value: str, count: int) -> str:
    if value.endswith("Gi"):
        return f"{int(value[:-2]) * count}Gi"
    if value.endswith("m"):
        return f"{int(value[:-1]) * count}m"
    return str(int(value) * count)


def configuration(fair_sharing: bool = False, strategies: list[str] | None = None,
                  **extra: Any) -> dict[str, Any]:
    fs: dict[str, Any] = {"enable": fair_sharing}
    if strategies:
        fs["preemptionStrategies"] = strategies
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
            "fairSharing": fs, **extra}


def write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "manifests.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def load(tmp_path: Path, docs: list[dict[str, Any]]) -> KueueObjects:
    return load_kueue(load_manifests([write(tmp_path, docs)]))


def snapshot(objs: KueueObjects) -> Snapshot:
    """The quota snapshot of ``objs`` with every admitted workload's usage added."""
    snap = Snapshot(objs)
    for wl in objs.workloads:
        if wl.admission is not None:
            snap.add_workload(admitted_info(wl))
    return snap


def admitted(name: str, cq: str, cpu: str, priority: int = 0, created: int = 0,
             reserved_at: int | None = None) -> dict[str, Any]:
    """A workload asking ``cpu`` CPU, already admitted to ``cq`` on flavor ``default``."""
    return workload(name, cq, {"cpu": cpu}, priority=priority, created=created,
                    admitted=(cq, {"cpu": "default"}), reserved_at=reserved_at)


def run(tmp_path: Path, docs: list[dict[str, Any]], cycles: int | None = None
        ) -> tuple[dict[str, Any], AdmitRun]:
    """Admission until nothing changes (or ``cycles``): the JSON contract and the run."""
    objs = load(tmp_path, docs)
    result = admit(objs, parse_time(at(600), "now"), cycles)
    return contract(result), result


def states(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """workload -> (state, reason)."""
    return {w["name"]: (w["state"], w["reason"]) for w in data["workloads"]}


def victims(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((p["workload"], p["by"], p["reason"]) for p in data["preempted"])


def two_gpu_queues(a_gpu: tuple[str, str | None, str | None],
                   b_gpu: tuple[str, str | None, str | None]) -> list[dict[str, Any]]:
    """Flavor a100 and ClusterQueues ``a`` and ``b`` in cohort ``co``, each with one
    nvidia.com/gpu quota (nominal, borrowingLimit, lendingLimit), and a LocalQueue each."""
    gpu = "nvidia.com/gpu"
    return [
        flavor("a100"),
        cluster_queue("a", [group([gpu], ("a100", [quota(gpu, *a_gpu)]))], cohort="co"),
        cluster_queue("b", [group([gpu], ("a100", [quota(gpu, *b_gpu)]))], cohort="co"),
        local_queue("a"), local_queue("b"),
    ]
