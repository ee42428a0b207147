"""PodDisruptionBudgets (policy/v1) evaluated against the pods that exist now, and the eviction
API's verdict on one eviction.

Every voluntary disruption (the Descheduler, the spill flow bringing pods back, a drain) goes
through the eviction subresource, and its answer depends on a PDB's status, which the
disruption controller keeps from live pods. Manifests rarely carry a meaningful status, so this
module computes it the way upstream's ``pkg/controller/disruption`` does and then answers as
``pkg/registry/core/pod/storage/eviction.go`` does:

* ``expectedPods`` and ``desiredHealthy``: ``maxUnavailable`` (int or percent) is taken from the
  summed scale of the controllers of the selected pods (percent rounded up) and
  ``desiredHealthy = max(0, expected - maxUnavailable)``; an integer ``minAvailable`` is
  ``desiredHealthy`` with every selected pod expected; a percent ``minAvailable`` is rounded up
  against the controllers' scale. Pods without a controller are left out of the scale (upstream
  warns "UnmanagedPods"); a controller without a scale (a Job) makes the status fail safe with
  ``disruptionsAllowed = 0``, as the controller's ``failSafe`` does.
* ``currentHealthy``: selected pods that are Ready and not being deleted.
* ``disruptionsAllowed = currentHealthy - desiredHealthy``, 0 when negative or nothing expected.
* An eviction: a pod that is not Running (Pending, Succeeded, Failed) or already being deleted
  is deleted without a PDB check; more than one matching PDB is refused (HTTP 500); a pod that is
  not Ready passes when the PDB's ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow`` or when
  ``currentHealthy >= desiredHealthy > 0`` (without using the budget); otherwise it needs
  ``disruptionsAllowed > 0`` and uses one (HTTP 429 "Cannot evict pod as it would violate the
  pod's disruption budget." when none is left).

The module is pure: callers describe pods as :class:`PodView` (the host knows whether a pod is
Ready) and say how to find a controller's scale. ``DisruptionBudgets`` holds the statuses for
a pass of several evictions and counts each allowed one down, as checkAndDecrement does before
the disruption controller catches up. It is the one implementation: the simulator's eviction
path and the Descheduler's evictor (``plugins/deschedule/pdb.py``, which only adapts its
snapshot's pods) both answer through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubeberth.api.objects import NamespacedName, PodDisruptionBudget
from kubeberth.api.selectors import LabelPredicate, compile_label_selector

# A controller's scale by (kind, namespace, name); None when the kind has no scale (Job).
ScaleLookup = Callable[[str, str, str], int | None]

TOO_MANY_REQUESTS = 429
MULTIPLE_PDBS = 500
ALLOWED = 200
_FINISHED = ("Succeeded", "Failed")
VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE_PDB = ("This pod has more than one PodDisruptionBudget, which the eviction "
                     "subresource does not support.")


class EvictionRequest(Protocol):
    """What a descheduling pass asks the host to evict (any object with these fields)."""

    @property
    def pod(self) -> str: ...  # "namespace/name"

    @property
    def plugin(self) -> str: ...

    @property
    def reason(self) -> str: ...


@dataclass(slots=True, frozen=True)
class PodView(NamespacedName):
    """A pod as the disruption math reads it."""

    namespace: str
    name: str
    labels: dict[str, str]
    phase: str  # Pending, Running, Succeeded, Failed
    ready: bool
    # The controller ownerReference (kind, name), or None for a bare pod.
    controller: tuple[str, str] | None = None
    deleting: bool = False


@dataclass(slots=True)
class BudgetStatus:
    """The computed ``status`` of one PDB, plus why it failed safe (empty when it did not)."""

    pdb: PodDisruptionBudget
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    error: str = ""


@dataclass(slots=True, frozen=True)
class EvictionVerdict:
    """The eviction subresource's answer: ``code`` 200 when the pod may be deleted."""

    allowed: bool
    code: int
    message: str = ""
    pdb: str = ""  # namespace/name of the PDB that decided, when one did
    detail: str = ""  # a refusal's cause, as the API's Status carries it in details.causes


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """Upstream ``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` of ``total``."""
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def pdb_selector(pdb: PodDisruptionBudget) -> LabelPredicate:
    """policy/v1: an empty selector selects every pod in the namespace, a missing one none."""
    return compile_label_selector(pdb.spec.selector, "spec.selector", nil_matches=False)


def selected_pods(pdb: PodDisruptionBudget, pods: Iterable[PodView]) -> list[PodView]:
    matches = pdb_selector(pdb)
    ns = pdb.metadata.namespace or "default"
    return [p for p in pods if p.namespace == ns and matches(p.labels)]


def _expected_scale(pods: Sequence[PodView], scale: ScaleLookup,
                    count_unknown: bool) -> tuple[int, str]:
    """Sum of the scales of the selected pods' controllers; an error text when one has none
    (or, with ``count_unknown``, its selected pods that are not finished in its place)."""
    first: dict[tuple[str, str], PodView] = {}
    present: dict[tuple[str, str], int] = {}
    for p in pods:
        if p.controller is None:
            continue
        first.setdefault(p.controller, p)
        present[p.controller] = present.get(p.controller, 0) + int(p.phase not in _FINISHED)
    total = 0
    for (kind, name), p in first.items():
        found = scale(kind, p.namespace, name)
        if found is None:
            if not count_unknown:
                return 0, f'found no controllers for pod "{p.name}"'
            found = present[(kind, name)]
        total += found
    return total, ""


def pdb_status(pdb: PodDisruptionBudget, pods: Iterable[PodView], scale: ScaleLookup,
               count_unknown: bool = False) -> BudgetStatus:
    """What the disruption controller would write into ``pdb.status`` now. ``count_unknown``
    scales a controller the lookup does not know by its pods present instead of failing safe
    (for hand-written manifests that carry pods without their workloads)."""
    selected = selected_pods(pdb, pods)
    spec = pdb.spec
    expected = desired = 0
    error = ""
    if spec.max_unavailable is not None:
        expected, error = _expected_scale(selected, scale, count_unknown)
        desired = max(0, expected - scaled_value(spec.max_unavailable, expected, True))
    elif spec.min_available is not None:
        if isinstance(spec.min_available, int):
            desired = spec.min_available
            expected = len(selected)
        else:
            expected, error = _expected_scale(selected, scale, count_unknown)
            desired = scaled_value(spec.min_available, expected, True)
    healthy = sum(1 for p in selected if p.ready and not p.deleting)
    if error:
        return BudgetStatus(pdb, 0, 0, 0, 0, error)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return BudgetStatus(pdb, expected, desired, healthy, allowed)


@dataclass(slots=True)
class DisruptionBudgets:
    """Every PDB's status at one moment; :meth:`evict` answers and counts allowed evictions
    down, so a pass of several evictions sees the budget shrink as the API server's would."""

    statuses: list[BudgetStatus]
    _matchers: list[LabelPredicate] = field(default_factory=list)

    @classmethod
    def compute(cls, pdbs: Iterable[PodDisruptionBudget], pods: Iterable[PodView],
                scale: ScaleLookup, count_unknown: bool = False) -> DisruptionBudgets:
        views = list(pods)
        statuses = [pdb_status(pdb, views, scale, count_unknown) for pdb in pdbs]
        return cls(statuses, [pdb_selector(s.pdb) for s in statuses])

    def matching(self, pod: PodView) -> list[BudgetStatus]:
        return [s for s, m in zip(self.statuses, self._matchers, strict=True)
                if (s.pdb.metadata.namespace or "default") == pod.namespace and m(pod.labels)]

    def check(self, pod: PodView) -> EvictionVerdict:
        """The verdict without using the budget (a dry run)."""
        return self._decide(pod, dry_run=True)

    def evict(self, pod: PodView) -> EvictionVerdict:
        """The verdict; an allowed eviction of a healthy pod uses one disruption, and the pod
        no longer counts as healthy (as the disruption controller will find)."""
        return self._decide(pod, dry_run=False)

    def _decide(self, pod: PodView, dry_run: bool) -> EvictionVerdict:
        if pod.phase == "Pending" or pod.phase in _FINISHED or pod.deleting:
            return EvictionVerdict(True, ALLOWED)
        found = self.matching(pod)
        if not found:
            return EvictionVerdict(True, ALLOWED)
        if len(found) > 1:
            return EvictionVerdict(False, MULTIPLE_PDBS, MORE_THAN_ONE_PDB)
        st = found[0]
        if not pod.ready:
            if st.pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow":
                return EvictionVerdict(True, ALLOWED, pdb=st.pdb.key)
            if st.current_healthy >= st.desired_healthy > 0:
                return EvictionVerdict(True, ALLOWED, pdb=st.pdb.key)
        if st.disruptions_allowed <= 0:
            detail = st.error or (f"The disruption budget {st.pdb.metadata.name} needs "
                                  f"{st.desired_healthy} healthy pods and has "
                                  f"{st.current_healthy} currently")
            return EvictionVerdict(False, TOO_MANY_REQUESTS, f"{VIOLATES_BUDGET} {detail}",
                                   pdb=st.pdb.key, detail=detail)
        if not dry_run:
            st.disruptions_allowed -= 1
            if pod.ready:
                st.current_healthy -= 1
        return EvictionVerdict(True, ALLOWED, pdb=st.pdb.key)


__all__ = ["ALLOWED", "MULTIPLE_PDBS", "TOO_MANY_REQUESTS", "VIOLATES_BUDGET", "BudgetStatus",
           "DisruptionBudgets", "EvictionRequest", "EvictionVerdict", "PodView", "ScaleLookup",
           "pdb_status", "scaled_value", "selected_pods"]
