"""PodDisruptionBudgets (policy/v1) as the eviction API enforces them, from the pods present.

The descheduler does not check budgets itself: it asks the eviction API, which refuses (429)
when the pod's PDB allows no more disruptions. The PDB's ``status`` a user writes in a manifest is
a stale copy of what the disruption controller computed, so it is ignored; the budget is computed
here as the disruption controller would from the snapshot's pods:

- the PDB selects pods in its namespace (a nil selector none, an empty one all);
- ``minAvailable: N``: desiredHealthy = N, expected = the selected pods;
- ``minAvailable: P%`` or ``maxUnavailable``: expected = the replicas of the pods' controllers
  (from the workload manifests; when a controller is not in the snapshot, the pods present that
  name it), desiredHealthy = ceil(P% × expected), or expected − ceil-scaled maxUnavailable;
- currentHealthy = selected pods that are Ready and not terminating (a running pod without a
  Ready condition counts as Ready, as in hand-written manifests);
- disruptionsAllowed = max(0, currentHealthy − desiredHealthy), 0 when expected is 0.

The eviction API itself lets terminal, pending and terminating pods go without asking the budget,
refuses pods covered by more than one PDB, and lets an unready pod go when the budget is already
met (``unhealthyPodEvictionPolicy: IfHealthyBudget``, the default) or always (``AlwaysAllow``).
Each accepted eviction uses one disruption for the rest of the pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kubeberth.api.objects import OwnerReference, PodDisruptionBudget
from kubeberth.api.selectors import compile_label_selector
from kubeberth.plugins.deschedule.framework import PodView, Snapshot


@dataclass(slots=True)
class Budget:
    pdb: PodDisruptionBudget
    pods: list[PodView]
    expected: int
    desired_healthy: int
    current_healthy: int
    allowed: int
    healthy: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return f"{self.pdb.metadata.namespace or 'default'}/{self.pdb.metadata.name}"

    def describe(self) -> str:
        spec = self.pdb.spec
        rule = (f"minAvailable {spec.min_available}" if spec.min_available is not None
                else f"maxUnavailable {spec.max_unavailable}" if spec.max_unavailable is not None
                else "no minAvailable/maxUnavailable")
        return (f"PodDisruptionBudget {self.key} ({rule}; {self.current_healthy} healthy of "
                f"{self.expected} expected, {self.desired_healthy} required) allows no more "
                "disruptions")


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


def scaled(value: int | str, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` rounding up."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


class DisruptionBudgets:
    """Every PDB's budget in a snapshot; :meth:`try_evict` is the eviction API's check."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.budgets: list[Budget] = [self._budget(snapshot, pdb) for pdb in snapshot.pdbs]

    @staticmethod
    def _budget(snapshot: Snapshot, pdb: PodDisruptionBudget) -> Budget:
        ns = pdb.metadata.namespace or "default"
        matches = compile_label_selector(pdb.spec.selector, nil_matches=False)
        pods = [p for p in snapshot.pods if p.namespace == ns and matches(p.labels)]
        spec = pdb.spec
        if spec.max_unavailable is not None or isinstance(spec.min_available, str):
            expected = _expected_scale(snapshot, pods)
            if spec.max_unavailable is not None:
                desired = max(0, expected - scaled(spec.max_unavailable, expected))
            else:
                desired = scaled(spec.min_available or 0, expected)
        elif spec.min_available is not None:
            expected, desired = len(pods), int(spec.min_available)
        else:
            expected, desired = len(pods), 0
        healthy = {p.key for p in pods if is_ready(p)}
        allowed = len(healthy) - desired
        if expected <= 0 or allowed < 0:
            allowed = 0
        return Budget(pdb, pods, expected, desired, len(healthy), allowed, healthy)

    def covering(self, pod: PodView) -> list[Budget]:
        return [b for b in self.budgets if any(p is pod for p in b.pods)]

    def try_evict(self, pod: PodView) -> str | None:
        if pod.terminal or pod.phase == "Pending" or pod.terminating:
            return None
        budgets = self.covering(pod)
        if not budgets:
            return None
        if len(budgets) > 1:
            names = ", ".join(b.key for b in budgets)
            return ("the pod has more than one PodDisruptionBudget, which the eviction "
                    f"subresource does not support ({names})")
        b = budgets[0]
        if pod.key not in b.healthy:
            policy = b.pdb.spec.unhealthy_pod_eviction_policy or "IfHealthyBudget"
            if policy == "AlwaysAllow" or (b.current_healthy >= b.desired_healthy
                                           and b.desired_healthy > 0):
                return None
        if b.allowed <= 0:
            return b.describe()
        b.allowed -= 1
        if pod.key in b.healthy:
            b.healthy.discard(pod.key)
            b.current_healthy -= 1
        return None


def _expected_scale(snapshot: Snapshot, pods: list[PodView]) -> int:
    """Sum of the replicas of the selected pods' controllers; pods without an owner count
    nothing (the disruption controller ignores unmanaged pods)."""
    present: dict[tuple[str, str, str], int] = {}
    for p in pods:
        ref = controller_of(p)
        if ref is None:
            continue
        key = (ref.kind, p.namespace, ref.name)
        present[key] = present.get(key, 0) + (0 if p.terminal else 1)
    total = 0
    for key, count in present.items():
        total += snapshot.owner_replicas.get(key, count)
    return total
