"""The descheduler's side of the eviction API's PodDisruptionBudget check.

The descheduler does not check budgets itself: it asks the eviction API, which refuses (429)
when the pod's PDB allows no more disruptions. That arithmetic (a PDB's status computed from the
pods present, as the disruption controller would, and the eviction subresource's verdict) lives
once, in :mod:`kubeberth.state.disruption`, shared with the simulator's eviction path. This
module only describes a :class:`Snapshot`'s pods to it and words refusals the way the
descheduler reports them. Two readings are the descheduler's own, for hand-written manifests:

- a running pod that reports no Ready condition counts as Ready;
- a controller that is not among the snapshot's workloads is scaled by the pods present that
  name it (upstream's disruption controller would fail safe with no disruptions allowed).
"""

from __future__ import annotations

from kubeberth.api.objects import OwnerReference
from kubeberth.descheduling.framework import PodView, Snapshot
from kubeberth.state import disruption
from kubeberth.state.disruption import MULTIPLE_PDBS, BudgetStatus, DisruptionBudgets


def is_ready(pod: PodView) -> bool:
    """Ready condition True; a running pod that reports no Ready condition counts as ready."""
    if pod.terminating or pod.phase not in ("Running", ""):
        return False
    for cond in pod.pod.status.conditions:
        if cond.type == "Ready":
            return cond.status == "True"
    return True


def controller_of(pod: PodView) -> OwnerReference | None:
    for ref in pod.owners:
        if ref.controller:
            return ref
    return pod.owners[0] if pod.owners else None


def budget_view(pod: PodView) -> disruption.PodView:
    """The pod as the disruption arithmetic reads it."""
    ref = controller_of(pod)
    return disruption.PodView(pod.namespace, pod.name, pod.labels, pod.phase, is_ready(pod),
                              None if ref is None else (ref.kind, ref.name), pod.terminating)


def describe(st: BudgetStatus) -> str:
    """Why a PDB refused, with the numbers the disruption controller computed."""
    spec = st.pdb.spec
    rule = (f"minAvailable {spec.min_available}" if spec.min_available is not None
            else f"maxUnavailable {spec.max_unavailable}" if spec.max_unavailable is not None
            else "no minAvailable/maxUnavailable")
    return (f"PodDisruptionBudget {st.pdb.key} ({rule}; {st.current_healthy} healthy of "
            f"{st.expected_pods} expected, {st.desired_healthy} required) allows no more "
            "disruptions")


class SnapshotBudgets:
    """Every PDB's budget in a snapshot; :meth:`try_evict` is the eviction API's check."""

    def __init__(self, snapshot: Snapshot) -> None:
        replicas = snapshot.owner_replicas

        def scale(kind: str, namespace: str, name: str) -> int | None:
            return replicas.get((kind, namespace, name))

        self.budgets = DisruptionBudgets.compute(
            snapshot.pdbs, [budget_view(p) for p in snapshot.pods], scale, count_unknown=True)

    def covering(self, pod: PodView) -> list[BudgetStatus]:
        return self.budgets.matching(budget_view(pod))

    def try_evict(self, pod: PodView) -> str | None:
        """None when the eviction API accepts (and counts) the eviction, else why not."""
        view = budget_view(pod)
        verdict = self.budgets.evict(view)
        if verdict.allowed:
            return None
        found = self.budgets.matching(view)
        if verdict.code == MULTIPLE_PDBS:
            names = ", ".join(st.pdb.key for st in found)
            return ("the pod has more than one PodDisruptionBudget, which the eviction "
                    f"subresource does not support ({names})")
        return describe(found[0])
