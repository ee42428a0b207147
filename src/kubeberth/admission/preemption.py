"""Which admitted workloads to evict so a pending one fits: Kueue's preemptor.

Classical preemption (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort) collects
candidates from the preemptor's own ClusterQueue and from cohort subtrees that use more than
their quota, orders them (already evicted first, other queues before its own, lower priority,
most recently admitted), removes them one by one from the snapshot until the workload fits, and
then adds back every one that is not needed: the minimal victim set. Fair sharing replaces the
candidate order with a walk down the cohort tree towards the subtree with the highest dominant
resource share, guarded by the preemption strategies (rules S2-a and S2-b of KEP 1714). This
follows pkg/scheduler/preemption (classical/, fairsharing/) at the conformance commit; the
snapshot is mutated during the simulation and always restored before returning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from kubeberth.admission.model import Workload
from kubeberth.admission.quota import (
    DRS,
    ClusterQueueSnapshot,
    CohortSnapshot,
    FlavorResource,
    QuotaNode,
    Snapshot,
    Usage,
    WorkloadInfo,
    compare_drs,
    lowest_subtree_that_fits,
    quantities_fit_in_quota,
    within_nominal,
)

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

# Classical candidate variants.
_NEVER, _WITHIN_CQ, _HIERARCHICAL, _WITHOUT_BORROWING, _WHILE_BORROWING = range(5)
_VARIANT_REASON = {_WITHIN_CQ: IN_CLUSTER_QUEUE, _HIERARCHICAL: IN_COHORT_RECLAMATION,
                   _WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
                   _WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING}

_Node = TypeVar("_Node", bound=QuotaNode)


@dataclass(slots=True)
class Target:
    info: WorkloadInfo
    reason: str


@dataclass(slots=True)
class _Ctx:
    wl: Workload
    cq: ClusterQueueSnapshot
    snapshot: Snapshot
    usage: Usage
    frs: set[FlavorResource]
    now: float


@dataclass(slots=True)
class _Candidate:
    info: WorkloadInfo
    lca: CohortSnapshot | None
    variant: int


def _reservation_time(info: WorkloadInfo, now: float) -> float:
    t = info.obj.quota_reserved_time
    return now if t is None else t


def candidate_sort_key(info: WorkloadInfo, cq_name: str, now: float) -> tuple[object, ...]:
    """CandidatesOrdering: evicted first, other queues first, lower priority, newest
    reservation, then UID."""
    return (not info.obj.evicted, info.cluster_queue == cq_name, info.priority,
            -_reservation_time(info, now), info.obj.uid or info.key)


def uses_resources(info: WorkloadInfo, frs: set[FlavorResource]) -> bool:
    return any(fr in frs for fr in info.flavor_resources)


def _workload_fits(ctx: _Ctx, allow_borrowing: bool) -> bool:
    for fr, v in ctx.usage.items():
        if not allow_borrowing and ctx.cq.borrowing_with(fr, v):
            return False
        if v > ctx.cq.available(fr):
            return False
    return True


def _under_nominal(ctx: _Ctx) -> bool:
    return all(ctx.cq.usage.get(fr, 0) < ctx.cq.quota_for(fr).nominal for fr in ctx.frs)


def _fill_back(ctx: _Ctx, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    for i in range(len(targets) - 2, -1, -1):
        ctx.snapshot.add_workload(targets[i].info)
        if _workload_fits(ctx, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ctx.snapshot.remove_workload(targets[i].info)
    return targets


def _restore(snapshot: Snapshot, targets: list[Target]) -> None:
    for t in targets:
        snapshot.add_workload(t.info)


class Preemptor:
    """Finds preemption targets; ``strategies`` are the fair sharing preemption strategies."""

    def __init__(self, *, fair_sharing: bool = False,
                 strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare",
                                                "LessThanInitialShare")) -> None:
        self.fair_sharing = fair_sharing
        self.strategies = strategies

    def get_targets(self, snapshot: Snapshot, wl: Workload, cq_name: str, usage: Usage,
                    frs: set[FlavorResource], now: float) -> list[Target]:
        """The minimal set of workloads to evict so ``usage`` fits in ``cq_name``."""
        cq = snapshot.cluster_queues[cq_name]
        ctx = _Ctx(wl, cq, snapshot, usage, frs, now)
        if self.fair_sharing:
            return self._fair(ctx)
        return self._classical(ctx)

    def oracle(self, snapshot: Snapshot, wl: Workload, now: float,
               ) -> _Oracle:
        return _Oracle(self, snapshot, wl, now)

    # -- classical ------------------------------------------------------------------------

    def _classical(self, ctx: _Ctx) -> list[Target]:
        same = self._same_queue_candidates(ctx)
        hier, prio = self._hierarchical_candidates(ctx)
        for lst in (same, hier, prio):
            lst.sort(key=lambda c: candidate_sort_key(c.info, ctx.cq.name, ctx.now))
        ordered = ([c for c in hier if c.info.obj.evicted] + [c for c in prio if c.info.obj.evicted]
                   + [c for c in same if c.info.obj.evicted]
                   + [c for c in hier if not c.info.obj.evicted]
                   + [c for c in prio if not c.info.obj.evicted]
                   + [c for c in same if not c.info.obj.evicted])
        forbidden = ctx.cq.preemption.borrow_within_cohort == "Never"
        if (not hier and not prio) or (forbidden and not _under_nominal(ctx)):
            attempts = [True]
        elif forbidden and not hier:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            targets: list[Target] = []
            for cand in ordered:
                if not self._valid(ctx, cand, borrowing):
                    continue
                ctx.snapshot.remove_workload(cand.info)
                targets.append(Target(cand.info, _VARIANT_REASON[cand.variant]))
                if _workload_fits(ctx, borrowing):
                    targets = _fill_back(ctx, targets, borrowing)
                    _restore(ctx.snapshot, targets)
                    return targets
            _restore(ctx.snapshot, targets)
        return []

    def _valid(self, ctx: _Ctx, cand: _Candidate, borrow: bool) -> bool:
        if cand.info.cluster_queue == ctx.cq.name:
            return True
        if borrow and cand.variant == _WITHOUT_BORROWING:
            return False
        cq = ctx.snapshot.cluster_queues[cand.info.cluster_queue]
        if within_nominal(cq, ctx.frs):
            return False
        for node in cq.path_parent_to_root():
            if node is cand.lca:
                break
            if within_nominal(node, ctx.frs):
                return False
        return True

    def _classify(self, ctx: _Ctx, info: WorkloadInfo, advantage: bool) -> int:
        if not uses_resources(info, ctx.frs):
            return _NEVER
        incoming, cand = ctx.wl.priority, info.priority
        same = info.cluster_queue == ctx.cq.name
        policy = (ctx.cq.preemption.within_cluster_queue if same
                  else ctx.cq.preemption.reclaim_within_cohort)
        if _priority_too_high(policy, ctx.wl, info.obj, incoming, cand):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL
        p = ctx.cq.preemption
        if p.borrow_within_cohort == "Never":
            return _WITHOUT_BORROWING
        if cand >= incoming or (p.max_priority_threshold is not None
                                and cand > p.max_priority_threshold):
            return _WITHOUT_BORROWING
        return _WHILE_BORROWING

    def _from_cq(self, ctx: _Ctx, cq: ClusterQueueSnapshot, lca: CohortSnapshot | None,
                 advantage: bool) -> list[_Candidate]:
        out = []
        for info in sorted(cq.workloads.values(), key=lambda i: i.key):
            variant = self._classify(ctx, info, advantage)
            if variant != _NEVER:
                out.append(_Candidate(info, lca, variant))
        return out

    def _same_queue_candidates(self, ctx: _Ctx) -> list[_Candidate]:
        if ctx.cq.preemption.within_cluster_queue == "Never":
            return []
        return self._from_cq(ctx, ctx.cq, None, False)

    def _hierarchical_candidates(self, ctx: _Ctx) -> tuple[list[_Candidate], list[_Candidate]]:
        hier: list[_Candidate] = []
        prio: list[_Candidate] = []
        if not ctx.cq.has_parent or ctx.cq.preemption.reclaim_within_cohort == "Never":
            return hier, prio
        advantage, remaining = quantities_fit_in_quota(ctx.cq, ctx.usage)
        previous: CohortSnapshot | None = None
        for root in ctx.cq.path_parent_to_root():
            target = hier if advantage else prio
            self._collect_subtree(ctx, root, root, previous, advantage, target)
            fits, remaining = quantities_fit_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root
        return hier, prio

    def _collect_subtree(self, ctx: _Ctx, current: CohortSnapshot, subtree_root: CohortSnapshot,
                         skip: CohortSnapshot | None, advantage: bool,
                         out: list[_Candidate]) -> None:
        for child in current.children_cohorts:
            if child is skip or within_nominal(child, ctx.frs):
                continue
            self._collect_subtree(ctx, child, subtree_root, skip, advantage, out)
        for cq in current.children_cqs:
            if cq is ctx.cq:
                continue
            if not within_nominal(cq, ctx.frs):
                out.extend(self._from_cq(ctx, cq, subtree_root, advantage))

    # -- fair sharing ---------------------------------------------------------------------

    def _fair_candidates(self, ctx: _Ctx) -> list[WorkloadInfo]:
        out: list[WorkloadInfo] = []
        cq = ctx.cq
        p = cq.preemption
        if p.within_cluster_queue != "Never":
            for info in sorted(cq.workloads.values(), key=lambda i: i.key):
                if not _priority_too_high(p.within_cluster_queue, ctx.wl, info.obj,
                                          ctx.wl.priority, info.priority) \
                        and uses_resources(info, ctx.frs):
                    out.append(info)
        if cq.parent is not None and p.reclaim_within_cohort != "Never":
            root = cq.root()
            assert isinstance(root, CohortSnapshot)
            for other in ctx.snapshot.subtree_cluster_queues(root):
                if other is cq or not _cq_borrowing(other, ctx.frs):
                    continue
                for info in sorted(other.workloads.values(), key=lambda i: i.key):
                    if not _priority_too_high(p.reclaim_within_cohort, ctx.wl, info.obj,
                                              ctx.wl.priority, info.priority) \
                            and uses_resources(info, ctx.frs):
                        out.append(info)
        return out

    def _fair(self, ctx: _Ctx) -> list[Target]:
        candidates = self._fair_candidates(ctx)
        if not candidates:
            return []
        candidates.sort(key=lambda i: candidate_sort_key(i, ctx.cq.name, ctx.now))
        targets: list[Target] = []
        ctx.cq.add_usage(ctx.usage)
        fits = False
        try:
            retry: list[WorkloadInfo] = []
            fits, retry = self._first_strategy(ctx, candidates, targets)
            if not fits and len(self.strategies) > 1:
                fits = self._second_strategy(ctx, retry, targets)
        finally:
            ctx.cq.remove_usage(ctx.usage)
        if not fits:
            _restore(ctx.snapshot, targets)
            return []
        targets = _fill_back(ctx, targets, True)
        _restore(ctx.snapshot, targets)
        return targets

    def _fits_fair(self, ctx: _Ctx) -> bool:
        ctx.cq.remove_usage(ctx.usage)
        try:
            return _workload_fits(ctx, True)
        finally:
            ctx.cq.add_usage(ctx.usage)

    def _preempt_fits(self, ctx: _Ctx, info: WorkloadInfo, reason: str,
                      targets: list[Target]) -> bool:
        """Take ``info`` out of the snapshot as a target; whether the preemptor fits now."""
        ctx.snapshot.remove_workload(info)
        targets.append(Target(info, reason))
        return self._fits_fair(ctx)

    def _first_strategy(self, ctx: _Ctx, candidates: list[WorkloadInfo],
                        targets: list[Target]) -> tuple[bool, list[WorkloadInfo]]:
        strategy = self.strategies[0]
        ordering = _TargetOrdering(ctx, candidates)
        within = all(ctx.cq.usage.get(fr, 0) <= ctx.cq.quota_for(fr).nominal for fr in ctx.frs)
        retry: list[WorkloadInfo] = []
        for target_cq in ordering:
            if target_cq is ctx.cq or within:
                reason = IN_CLUSTER_QUEUE if target_cq is ctx.cq else IN_COHORT_RECLAMATION
                if self._preempt_fits(ctx, ordering.pop(target_cq), reason, targets):
                    return True, []
                continue
            preemptor_new, target_old = ordering.shares(target_cq)
            while ordering.has_workload(target_cq):
                info = ordering.pop(target_cq)
                target_new = ordering.share_after_removal(target_cq, info)
                if _strategy(strategy, preemptor_new, target_old, target_new):
                    if self._preempt_fits(ctx, info, IN_COHORT_FAIR_SHARING, targets):
                        return True, []
                    break
                retry.append(info)
        return False, retry

    def _second_strategy(self, ctx: _Ctx, retry: list[WorkloadInfo],
                         targets: list[Target]) -> bool:
        ordering = _TargetOrdering(ctx, retry)
        for target_cq in ordering:
            preemptor_new, target_old = ordering.shares(target_cq)
            info = ordering.pop(target_cq)
            if (compare_drs(preemptor_new, target_old) < 0
                    and self._preempt_fits(ctx, info, IN_COHORT_FAIR_SHARING, targets)):
                return True
            ordering.drop(target_cq)
        return False


def _strategy(name: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    if name == "LessThanOrEqualToFinalShare":
        return compare_drs(preemptor_new, target_new) <= 0
    return compare_drs(preemptor_new, target_old) < 0


def _priority_too_high(policy: str, preemptor: Workload, candidate: Workload, incoming: int,
                       cand: int) -> bool:
    lower = incoming > cand
    if policy == "LowerPriority":
        return not lower
    if policy == "LowerOrNewerEqualPriority":
        newer_equal = incoming == cand and preemptor.queue_time < candidate.queue_time
        return not (lower or newer_equal)
    return policy != "Any"


def _cq_borrowing(cq: ClusterQueueSnapshot, frs: set[FlavorResource]) -> bool:
    return cq.has_parent and any(cq.borrowing(fr) for fr in frs)


class _TargetOrdering:
    """Fair sharing's walk from the root cohort to the ClusterQueue with the highest share."""

    def __init__(self, ctx: _Ctx, candidates: list[WorkloadInfo]) -> None:
        self.ctx = ctx
        self.ancestors = set(map(id, ctx.cq.path_parent_to_root()))
        self.targets: dict[str, list[WorkloadInfo]] = {}
        for info in candidates:
            self.targets.setdefault(info.cluster_queue, []).append(info)
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has_workload(self, cq: ClusterQueueSnapshot) -> bool:
        return bool(self.targets.get(cq.name))

    def pop(self, cq: ClusterQueueSnapshot) -> WorkloadInfo:
        return self.targets[cq.name].pop(0)

    def drop(self, cq: ClusterQueueSnapshot) -> None:
        self.pruned_cqs.add(cq.name)

    def __iter__(self) -> Iterator[ClusterQueueSnapshot]:
        cq = self.ctx.cq
        if cq.parent is None:
            while self.has_workload(cq):
                yield cq
            return
        root = cq.root()
        assert isinstance(root, CohortSnapshot)
        while root.name not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: CohortSnapshot) -> ClusterQueueSnapshot | None:
        best_cq, best_cq_drs = _highest_share(
            cohort.children_cqs, self.pruned_cqs,
            lambda cq, drs: (drs.is_zero() and cq is not self.ctx.cq) or not self.has_workload(cq))
        best_co, best_co_drs = _highest_share(
            cohort.children_cohorts, self.pruned_cohorts,
            lambda co, drs: drs.is_zero() and id(co) not in self.ancestors)
        if best_co is None and best_cq is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if best_co is not None and (best_cq is None or _ge(best_co_drs, best_cq_drs)):
            return self._next(best_co)
        return best_cq

    def _almost_lcas(self, target: ClusterQueueSnapshot) -> tuple[QuotaNode, QuotaNode]:
        lca: CohortSnapshot | None = None
        for anc in target.path_parent_to_root():
            if id(anc) in self.ancestors:
                lca = anc
                break
        return _almost_lca(self.ctx.cq, lca), _almost_lca(target, lca)

    def shares(self, target: ClusterQueueSnapshot) -> tuple[DRS, DRS]:
        p, t = self._almost_lcas(target)
        return p.dominant_resource_share(), t.dominant_resource_share()

    def share_after_removal(self, target: ClusterQueueSnapshot, info: WorkloadInfo) -> DRS:
        target.remove_usage(info.usage)
        try:
            return self._almost_lcas(target)[1].dominant_resource_share()
        finally:
            target.add_usage(info.usage)


def _highest_share(children: list[_Node], pruned: set[str],
                   prune: Callable[[_Node, DRS], bool]) -> tuple[_Node | None, DRS]:
    """The child with the highest share (the last by name among equals), skipping the pruned
    ones and pruning those ``prune`` rules out; with none left, None and a share below all."""
    best: _Node | None = None
    best_drs = DRS(1.0, -1.0, "")
    for node in sorted(children, key=lambda c: c.name):
        if node.name in pruned:
            continue
        drs = node.dominant_resource_share()
        if prune(node, drs):
            pruned.add(node.name)
        elif _ge(drs, best_drs):
            best, best_drs = node, drs
    return best, best_drs


def _ge(a: DRS, b: DRS) -> bool:
    if b.unweighted_ratio < 0:
        return True
    return compare_drs(a, b) >= 0


def _almost_lca(cq: ClusterQueueSnapshot, lca: CohortSnapshot | None) -> QuotaNode:
    node: QuotaNode = cq
    for anc in cq.path_parent_to_root():
        if anc is lca:
            return node
        node = anc
    raise AssertionError("no least common ancestor")


class _Oracle:
    """SimulatePreemption: can preempting make ``quantity`` of one flavor-resource fit?"""

    def __init__(self, preemptor: Preemptor, snapshot: Snapshot, wl: Workload,
                 now: float) -> None:
        self.preemptor = preemptor
        self.snapshot = snapshot
        self.wl = wl
        self.now = now

    def __call__(self, cq: ClusterQueueSnapshot, fr: FlavorResource,
                 quantity: int) -> tuple[str, int]:
        targets = self.preemptor.get_targets(self.snapshot, self.wl, cq.name, {fr: quantity},
                                             {fr}, self.now)
        if not targets:
            return "NoCandidates", lowest_subtree_that_fits(cq, fr, quantity)[0]
        for t in targets:
            self.snapshot.remove_workload(t.info)
        borrow = lowest_subtree_that_fits(cq, fr, quantity)[0]
        _restore(self.snapshot, targets)
        if any(t.info.cluster_queue == cq.name for t in targets):
            return "Preempt", borrow
        return "Reclaim", borrow
