"""Kueue objects converted between ``kueue.x-k8s.io/v1beta1`` and ``v1beta2``, both ways.

Kueue serves both versions and converts through its webhook, so an object written in one
version reads in the other with its fields renamed: a ClusterQueue's ``cohort`` is v1beta2's
``cohortName``; v1beta1's ``admissionChecks`` list becomes an ``admissionChecksStrategy``;
v1beta1's ``Borrow`` and ``Preempt`` fungibility policies read as ``MayStopSearch``; a Workload's
``priorityClassSource`` and ``priorityClassName`` are v1beta2's ``priorityClassRef``; status
fields renamed on the way (LocalQueue ``flavorUsage``, Workload
``accumulatedPastExexcutionTimeSeconds``) follow. The converter works on raw documents, so the
loaders, the live controllers and a serving API can all use it; kinds whose fields do not differ
only change their apiVersion. Topology assignments (v1beta1 ``domains``, v1beta2 ``slices``)
are not converted: kubeberth does not read them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

V1BETA1 = "kueue.x-k8s.io/v1beta1"
V1BETA2 = "kueue.x-k8s.io/v1beta2"
_SOURCES = {  # v1beta1 priorityClassSource -> v1beta2 priorityClassRef group and kind
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}
_RENAMED_STATUS = {  # kind -> (v1beta1 status field, v1beta2 status field)
    "LocalQueue": ("flavorUsage", "flavorsUsage"),
    "Workload": ("accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds"),
}


def convert(data: Mapping[str, Any], to: str) -> dict[str, Any]:
    """A copy of the Kueue object ``data`` in version ``to`` (V1BETA1 or V1BETA2); an object
    already in that version comes back unchanged."""
    out: dict[str, Any] = copy.deepcopy(dict(data))
    if out.get("apiVersion") == to or to not in (V1BETA1, V1BETA2):
        return out
    up = to == V1BETA2
    kind = out.get("kind")
    spec = out.get("spec")
    if isinstance(spec, dict):
        if kind == "ClusterQueue":
            _cluster_queue(spec, up)
        elif kind == "Workload":
            _workload(spec, up)
    status = out.get("status")
    if isinstance(status, dict) and kind in _RENAMED_STATUS:
        old, new = _RENAMED_STATUS[kind] if up else _RENAMED_STATUS[kind][::-1]
        if old in status:
            status[new] = status.pop(old)
    out["apiVersion"] = to
    return out


def _cluster_queue(spec: dict[str, Any], up: bool) -> None:
    old, new = ("cohort", "cohortName") if up else ("cohortName", "cohort")
    if old in spec:
        spec[new] = spec.pop(old)
    if not up:
        return
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, dict):
        for key, policy in (("whenCanPreempt", "Preempt"), ("whenCanBorrow", "Borrow")):
            if fungibility.get(key) == policy:
                fungibility[key] = "MayStopSearch"


def _workload(spec: dict[str, Any], up: bool) -> None:
    if up:
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        if source in _SOURCES:
            group, kind = _SOURCES[source]
            spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name or ""}
        return
    ref = spec.pop("priorityClassRef", None)
    if not isinstance(ref, dict):
        return
    for source, (group, kind) in _SOURCES.items():
        if ref.get("group") == group and ref.get("kind") == kind:
            spec["priorityClassSource"] = source
            spec["priorityClassName"] = ref.get("name", "")
