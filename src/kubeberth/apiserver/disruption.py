"""PodDisruptionBudget arithmetic, as upstream's disruption controller computes it.

The eviction subresource answers 429 when evicting a pod would take a budget below what it
promises; both the eviction handler and the controller that keeps ``status`` current use
:func:`pdb_status`, so ``kubectl get pdb`` shows the number the next eviction will be judged by.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from kubeberth.apiserver.selectors import field_value

Obj = dict[str, Any]


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector over labels; a PDB's empty selector matches every pod (policy/v1),
    a missing one matches none."""
    if not isinstance(selector, dict):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def pod_healthy(pod: Obj) -> bool:
    """Running, Ready and not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if field_value(pod, "status.phase") != "Running":
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def covered_pods(pdb: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """Non-terminal pods in the budget's namespace that its selector matches."""
    ns = pdb["metadata"].get("namespace")
    selector = (pdb.get("spec") or {}).get("selector")
    return [p for p in pods
            if p["metadata"].get("namespace") == ns
            and field_value(p, "status.phase") not in ("Succeeded", "Failed")
            and selector_matches(selector, p["metadata"].get("labels") or {})]


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def pdb_status(pdb: Obj, pods: Iterable[Obj]) -> Obj:
    """expectedPods, currentHealthy, desiredHealthy and disruptionsAllowed.

    Upstream takes expectedPods from the owning controllers' scale; here it is the number of
    matching non-terminal pods (see docs/apiserver.md).
    """
    spec = pdb.get("spec") or {}
    matched = covered_pods(pdb, pods)
    expected = len(matched)
    healthy = sum(1 for p in matched if pod_healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0  # neither set: upstream's controller leaves desiredHealthy at zero
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "expectedPods": expected,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(0, healthy - desired),
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": "True" if healthy > desired else "False",
            "reason": "SufficientPods" if healthy > desired else "InsufficientPods",
            "message": "",
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "lastTransitionTime": pdb["metadata"].get("creationTimestamp"),
        }],
    }
