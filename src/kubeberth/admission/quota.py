"""Kueue's quota tree: ClusterQueues and Cohorts with nominal quota, usage, borrowing and lending.

Every admission decision asks the same few questions of one tree: how much of a flavor's
resource a ClusterQueue may still use (``available``), how much it could ever use
(``potential_available``), whether it is borrowing, and how far up the cohort tree it must go to
fit. Kueue answers them with a resource node per ClusterQueue and Cohort: ``subtree_quota`` is the
node's own nominal quota plus what its children lend upward (capped by lending limits), and
``usage`` is the part of the children's usage that spills past what they keep to themselves.
This module reproduces those formulas (pkg/cache/scheduler/resource_node.go) with int
milli-units, plus the dominant resource share used by fair sharing (fair_sharing.go). A
:class:`Snapshot` is mutable on purpose, as Kueue's is: preemption simulates removing workloads
and puts them back. Callers that must not see the mutation work on :meth:`Snapshot.clone`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kubeberth.admission.model import (
    ClusterQueue,
    FlavorFungibility,
    KueueObjects,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from kubeberth.api.selectors import compile_label_selector

FlavorResource = tuple[str, str]  # (flavor, resource)
Usage = dict[FlavorResource, int]
MAX_INT64 = 9223372036854775807


@dataclass(slots=True)
class WorkloadInfo:
    """A workload as the quota cache sees it: where it is charged and for how much."""

    obj: Workload
    cluster_queue: str
    # Quota charged, summed over podSets per (flavor, resource).
    usage: Usage = field(default_factory=dict)
    # Every (flavor, resource) pair the admission assigned, even with zero usage.
    flavor_resources: frozenset[FlavorResource] = frozenset()

    @property
    def key(self) -> str:
        return self.obj.key

    @property
    def priority(self) -> int:
        return self.obj.priority


def admitted_info(wl: Workload) -> WorkloadInfo:
    """The cache entry of a workload that holds quota (``status.admission`` set)."""
    assert wl.admission is not None
    usage: Usage = {}
    frs: set[FlavorResource] = set()
    for psa in wl.admission.podset_assignments:
        for res, flv in psa.flavors.items():
            frs.add((flv, res))
            amount = psa.resource_usage.get(res, 0)
            usage[(flv, res)] = usage.get((flv, res), 0) + amount
    return WorkloadInfo(wl, wl.admission.cluster_queue, usage, frozenset(frs))


class QuotaNode:
    """The resource node shared by ClusterQueues and Cohorts."""

    __slots__ = ("children_cohorts", "children_cqs", "fair_weight", "name", "parent", "quotas",
                 "subtree_quota", "usage")

    def __init__(self, name: str, quotas: dict[FlavorResource, ResourceQuota],
                 fair_weight: float) -> None:
        self.name = name
        self.quotas = quotas
        self.fair_weight = fair_weight
        self.parent: CohortSnapshot | None = None
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: Usage = {}
        self.children_cohorts: list[CohortSnapshot] = []
        self.children_cqs: list[ClusterQueueSnapshot] = []

    @property
    def has_parent(self) -> bool:
        return self.parent is not None

    def path_parent_to_root(self) -> Iterator[CohortSnapshot]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node: QuotaNode = self
        while node.parent is not None:
            node = node.parent
        return node

    def local_quota(self, fr: FlavorResource) -> int:
        """Quota kept inside this subtree because of a lending limit (never lent upward)."""
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(0, self.subtree_quota.get(fr, 0) - q.lending_limit)
        return 0

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        return self.usage.get(fr, 0) + val > self.subtree_quota.get(fr, 0)

    def borrowing(self, fr: FlavorResource) -> bool:
        return self.borrowing_with(fr, 0)

    def dominant_resource_share(self, extra: Usage | None = None) -> DRS:
        return dominant_resource_share(self, extra or {})


class CohortSnapshot(QuotaNode):
    __slots__ = ()


class ClusterQueueSnapshot(QuotaNode):
    """A ClusterQueue with its quota node, policies and admitted workloads."""

    __slots__ = ("active", "inactive_cause", "inactive_reason", "namespace_matches", "spec",
                 "workloads")

    def __init__(self, spec: ClusterQueue, quotas: dict[FlavorResource, ResourceQuota]) -> None:
        super().__init__(spec.name, quotas, spec.fair_weight)
        self.spec = spec
        self.workloads: dict[str, WorkloadInfo] = {}
        self.active = True
        # Kueue's reason on the ClusterQueue's Active=False condition, and its message.
        self.inactive_cause = ""
        self.inactive_reason = ""
        self.namespace_matches: Callable[[dict[str, str]], bool] = compile_label_selector(
            spec.namespace_selector, "spec.namespaceSelector")

    @property
    def preemption(self) -> Preemption:
        return self.spec.preemption

    @property
    def fungibility(self) -> FlavorFungibility:
        return self.spec.flavor_fungibility

    @property
    def resource_groups(self) -> list[ResourceGroup]:
        return self.spec.resource_groups

    def rg_by_resource(self, resource: str) -> ResourceGroup | None:
        # Kueue indexes groups by resource in a map; a later group covering it wins.
        for rg in reversed(self.spec.resource_groups):
            if resource in rg.covered_resources:
                return rg
        return None

    def quota_for(self, fr: FlavorResource) -> ResourceQuota:
        return self.quotas.get(fr, ResourceQuota(0))

    def available(self, fr: FlavorResource) -> int:
        return max(0, available(self, fr))

    def potential_available(self, fr: FlavorResource) -> int:
        return potential_available(self, fr)

    def fits(self, usage: Usage) -> bool:
        return all(self.available(fr) >= v for fr, v in usage.items())

    def add_usage(self, usage: Usage) -> None:
        for fr, v in usage.items():
            add_usage(self, fr, v)

    def remove_usage(self, usage: Usage) -> None:
        for fr, v in usage.items():
            remove_usage(self, fr, v)


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """Capacity left to ``node`` given usage and borrowing limits (negative on overadmission)."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        lq = node.local_quota(fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - lq
        used_in_parent = max(0, node.usage.get(fr, 0) - lq)
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit,
                               parent_available)
    return node.local_available(fr) + parent_available


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most ``node`` could use with no usage anywhere, within borrowing limits."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0)
    avail = node.local_quota(fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        avail = min(node.subtree_quota.get(fr, 0) + q.borrowing_limit, avail)
    return avail


def add_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    local = node.local_available(fr)
    node.usage[fr] = node.usage.get(fr, 0) + val
    if node.parent is not None and val > local:
        add_usage(node.parent, fr, val - local)


def remove_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - val
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(val, stored_in_parent))


def quantities_fit_in_quota(node: QuotaNode, requests: Usage) -> tuple[bool, Usage]:
    """Whether ``requests`` fit in ``node``'s subtree quota, and what spills past its local
    quota (to be asked of the parent next)."""
    fits = True
    remaining: Usage = {}
    for fr, v in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + v:
            fits = False
        remaining[fr] = max(0, v - node.local_available(fr))
    return fits, remaining


def within_nominal(node: QuotaNode, frs: set[FlavorResource]) -> bool:
    return all(node.subtree_quota.get(fr, 0) >= node.usage.get(fr, 0) for fr in frs)


def node_height(node: CohortSnapshot) -> int:
    """Distance to the furthest leaf (a cohort with only ClusterQueues has height 1)."""
    height = min(len(node.children_cohorts) + len(node.children_cqs), 1)
    for child in node.children_cohorts:
        height = max(height, node_height(child) + 1)
    return height


def lowest_subtree_that_fits(cq: ClusterQueueSnapshot, fr: FlavorResource,
                             val: int) -> tuple[int, bool]:
    """Height of the lowest cohort subtree where ``val`` more of ``fr`` fits (0: no borrowing),
    and whether that subtree is smaller than the whole tree."""
    if not (cq.borrowing_with(fr, val) and cq.has_parent):
        return 0, cq.has_parent
    remaining = val - cq.local_available(fr)
    tracking: CohortSnapshot | None = None
    for tracking in cq.path_parent_to_root():
        if not tracking.borrowing_with(fr, remaining):
            return node_height(tracking), tracking.has_parent
        remaining -= tracking.local_available(fr)
    assert tracking is not None
    return node_height(tracking), tracking.has_parent


# ---------------------------------------------------------------------------------------------
# Dominant resource share


@dataclass(slots=True, frozen=True)
class DRS:
    """A node's dominant resource share: usage above its subtree quota over what it could
    borrow, per mille, before weighting. ``borrowed`` names the flavor-resources over quota,
    even those nobody lends (ratio zero), for the fair sharing order's "nominal first" rule."""

    fair_weight: float
    unweighted_ratio: float
    dominant_resource: str
    borrowed: frozenset[FlavorResource] = frozenset()

    def is_borrowing_on(self, requested: Usage) -> bool:
        """Whether the node borrows a flavor-resource of which ``requested`` asks a positive
        amount."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    def is_zero(self) -> bool:
        return self.unweighted_ratio == 0

    def zero_weight_borrows(self) -> bool:
        return self.fair_weight == 0 and not self.is_zero()

    def precise_weighted_share(self) -> float:
        if self.is_zero():
            return 0.0
        if self.fair_weight == 0:
            return math.inf
        return self.unweighted_ratio / self.fair_weight

    def rounded_weighted_share(self) -> int:
        if self.zero_weight_borrows():
            return MAX_INT64
        return math.ceil(self.precise_weighted_share())


def compare_drs(a: DRS, b: DRS) -> int:
    """Negative when ``a`` should be scheduled before ``b`` (and preempted after it)."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return _cmp(a.unweighted_ratio, b.unweighted_ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    return _cmp(a.precise_weighted_share(), b.precise_weighted_share())


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def dominant_resource_share(node: QuotaNode, extra: Usage) -> DRS:
    drs = DRS(node.fair_weight, 0.0, "")
    if node.parent is None:
        return drs
    borrowing: dict[str, int] = {}
    borrowed_frs: set[FlavorResource] = set()
    for fr, quota in node.subtree_quota.items():
        borrowed = extra.get(fr, 0) + node.usage.get(fr, 0) - quota
        if borrowed > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + borrowed
            borrowed_frs.add(fr)
    if not borrowing:
        return drs
    lendable = _lendable(node.parent)
    ratio, resource = 0.0, ""
    for rname, b in borrowing.items():
        lr = lendable.get(rname, 0)
        if lr > 0:
            r = b * 1000.0 / lr
            if r > ratio or (r == ratio and rname < resource):
                ratio, resource = r, rname
    return DRS(node.fair_weight, ratio, resource, frozenset(borrowed_frs))


def _lendable(node: QuotaNode) -> dict[str, int]:
    root = node.root()
    out: dict[str, int] = {}
    for fr in root.subtree_quota:
        out[fr[1]] = out.get(fr[1], 0) + potential_available(node, fr)
    return out


# ---------------------------------------------------------------------------------------------
# Snapshot


def _quotas(groups: list[ResourceGroup]) -> dict[FlavorResource, ResourceQuota]:
    out: dict[FlavorResource, ResourceQuota] = {}
    for rg in groups:
        for fq in rg.flavors:
            for res, q in fq.resources.items():
                out[(fq.name, res)] = q
    return out


class Snapshot:
    """ClusterQueues, Cohorts and flavors with the usage of every workload holding quota."""

    def __init__(self, objs: KueueObjects) -> None:
        self.objs = objs
        self.flavors: dict[str, ResourceFlavor] = objs.flavors
        self.fair_sharing = objs.config.fair_sharing
        self.cohorts: dict[str, CohortSnapshot] = {}
        self.cluster_queues: dict[str, ClusterQueueSnapshot] = {}
        for name, co in sorted(objs.cohorts.items()):
            self.cohorts[name] = CohortSnapshot(name, _quotas(co.resource_groups), co.fair_weight)
        for name, spec in sorted(objs.cluster_queues.items()):
            cq = ClusterQueueSnapshot(spec, _quotas(spec.resource_groups))
            self.cluster_queues[name] = cq
            if spec.cohort:
                self._cohort(spec.cohort).children_cqs.append(cq)
                cq.parent = self.cohorts[spec.cohort]
        for name, co in sorted(objs.cohorts.items()):
            if co.parent:
                parent = self._cohort(co.parent)
                parent.children_cohorts.append(self.cohorts[name])
                self.cohorts[name].parent = parent
        for cq in self.cluster_queues.values():
            missing = sorted({fr[0] for fr in cq.quotas if fr[0] not in self.flavors})
            if missing:
                cq.active = False
                cq.inactive_cause = "FlavorNotFound"
                cq.inactive_reason = (f"ClusterQueue {cq.name} is inactive: references missing "
                                      f"ResourceFlavor(s): {', '.join(missing)}")
            elif cq.spec.stop_policy != "None":
                cq.active = False
                cq.inactive_cause = "Stopped"
                cq.inactive_reason = f"ClusterQueue {cq.name} is inactive: Stopped"
            else:
                self._check_admission_checks(cq)
        self.recompute_quotas()

    def _check_admission_checks(self, cq: ClusterQueueSnapshot) -> None:
        """A ClusterQueue is inactive while an AdmissionCheck it names is missing or not
        Active (pkg/cache/scheduler/clusterqueue.go updateWithAdmissionChecks)."""
        checks = self.objs.admission_checks
        missing = sorted(n for n in set(cq.spec.admission_checks) if n not in checks)
        inactive = sorted(n for n in set(cq.spec.admission_checks)
                          if n in checks and not checks[n].active)
        for what, cause, names in (("missing", "AdmissionCheckNotFound", missing),
                                   ("inactive", "AdmissionCheckInactive", inactive)):
            if names:
                cq.active = False
                cq.inactive_cause = cause
                cq.inactive_reason = (f"ClusterQueue {cq.name} is inactive: references {what} "
                                      f"AdmissionCheck(s): {', '.join(names)}")
                return

    def _cohort(self, name: str) -> CohortSnapshot:
        # A Cohort referenced but never defined exists implicitly, without quota.
        if name not in self.cohorts:
            self.cohorts[name] = CohortSnapshot(name, {}, 1.0)
        return self.cohorts[name]

    def recompute_quotas(self) -> None:
        """Accumulate subtree quota and usage from the leaves up (updateCohortResourceNode)."""
        for cq in self.cluster_queues.values():
            cq.subtree_quota = {fr: q.nominal for fr, q in cq.quotas.items()}
        for co in self.cohorts.values():
            if co.parent is None:
                _accumulate(co)

    def cluster_queue(self, name: str) -> ClusterQueueSnapshot | None:
        return self.cluster_queues.get(name)

    def add_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        cq.workloads[info.key] = info
        cq.add_usage(info.usage)

    def remove_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        cq.workloads.pop(info.key, None)
        cq.remove_usage(info.usage)

    def subtree_cluster_queues(self, node: CohortSnapshot) -> list[ClusterQueueSnapshot]:
        out = list(node.children_cqs)
        for child in node.children_cohorts:
            out.extend(self.subtree_cluster_queues(child))
        return out


def _accumulate(co: CohortSnapshot) -> None:
    co.subtree_quota = {fr: q.nominal for fr, q in co.quotas.items()}
    co.usage = {}
    children: list[QuotaNode] = []
    for sub in co.children_cohorts:
        _accumulate(sub)
        children.append(sub)
    children.extend(co.children_cqs)
    for child in children:
        for fr, cq_quota in child.subtree_quota.items():
            co.subtree_quota[fr] = co.subtree_quota.get(fr, 0) + cq_quota - child.local_quota(fr)
        for fr, used in child.usage.items():
            delta = max(0, used - child.local_quota(fr))
            co.usage[fr] = co.usage.get(fr, 0) + delta
