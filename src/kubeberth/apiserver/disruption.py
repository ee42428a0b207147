"""PodDisruptionBudgets in the embedded API server: stored objects described to the one PDB
implementation, :mod:`kubeberth.state.disruption`.

The eviction subresource and the controller that keeps ``status`` current both ask it, so
``kubectl get pdb`` shows the number the next eviction is judged by, and the simulator, the
Descheduler's evictor and this server answer an eviction with the same arithmetic. Expected pods
come from the selected pods' controllers' scale as upstream's disruption controller finds it
(a ReplicaSet owned by a Deployment counts the Deployment's replicas; a Job has no scale and
fails safe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from kubeberth.api.objects import LabelSelector, PodDisruptionBudget
from kubeberth.api.selectors import compile_label_selector
from kubeberth.state.disruption import BudgetStatus, PodView, ScaleLookup, pdb_status

Obj = dict[str, Any]
# (kind, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str], Obj | None]
_SCALED = ("ReplicaSet", "Deployment", "StatefulSet", "ReplicationController")


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector over labels; a missing (or malformed) selector matches none."""
    if not isinstance(selector, dict):
        return False
    try:
        typed = msgspec.convert(selector, LabelSelector)
    except msgspec.ValidationError:
        return False
    return compile_label_selector(typed, nil_matches=False)(labels)


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_view(pod: Obj) -> PodView:
    meta = pod.get("metadata") or {}
    controller = next(((r.get("kind", ""), r.get("name", ""))
                       for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    return PodView(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                   labels=dict(meta.get("labels") or {}),
                   phase=(pod.get("status") or {}).get("phase") or "Pending",
                   ready=_ready(pod), controller=controller,
                   deleting=bool(meta.get("deletionTimestamp")))


def pod_healthy(pod: Obj) -> bool:
    """Running, Ready and not being deleted: what a budget counts as healthy."""
    view = pod_view(pod)
    return view.phase == "Running" and view.ready and not view.deleting


def typed_pdb(pdb: Obj) -> PodDisruptionBudget:
    """A stored budget (already validated on write) as the typed object."""
    return msgspec.convert(pdb, PodDisruptionBudget)


def scale_lookup(get: Lookup) -> ScaleLookup:
    """Upstream's scale finders: a ReplicaSet controlled by a Deployment is scaled by the
    Deployment; ReplicaSets, Deployments, StatefulSets and ReplicationControllers by their
    ``spec.replicas``; anything else (a Job) has no scale."""

    def scale(kind: str, namespace: str, name: str) -> int | None:
        if kind not in _SCALED:
            return None
        obj = get(kind, namespace, name)
        if obj is None:
            return None
        if kind == "ReplicaSet":
            for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Deployment":
                    return scale("Deployment", namespace, ref.get("name", ""))
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        return replicas if isinstance(replicas, int) else 1

    return scale


def budget_status(pdb: Obj, pods: Iterable[Obj], scale: ScaleLookup) -> BudgetStatus:
    return pdb_status(typed_pdb(pdb), [pod_view(p) for p in pods], scale)


def status_object(pdb: Obj, status: BudgetStatus) -> Obj:
    """``status`` as the disruption controller writes it."""
    generation = (pdb.get("metadata") or {}).get("generation", 1)
    allowed = status.disruptions_allowed > 0
    reason = "SufficientPods" if allowed else ("SyncFailed" if status.error else
                                               "InsufficientPods")
    return {
        "observedGeneration": generation,
        "expectedPods": status.expected_pods,
        "currentHealthy": status.current_healthy,
        "desiredHealthy": status.desired_healthy,
        "disruptionsAllowed": status.disruptions_allowed,
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "reason": reason,
            "message": status.error,
            "observedGeneration": generation,
            "lastTransitionTime": (pdb.get("metadata") or {}).get("creationTimestamp"),
        }],
    }
