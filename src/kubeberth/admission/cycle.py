"""One Kueue scheduling cycle, as a function from admission state to decisions.

A cycle (pkg/scheduler/scheduler.go ``schedule``) pops one head per ClusterQueue, takes a fresh
quota snapshot, nominates each head (ClusterQueue active, namespace selected, flavors assigned,
preemption targets found, partial admission tried), orders the nominated entries (not borrowing
first, higher priority, older), and then walks them: an entry whose targets overlap a previous
entry's, or that no longer fits once earlier admissions in the same cycle are counted, is
skipped; a Preempt entry issues its preemptions and waits; a Fit entry reserves quota. Heads not
admitted are requeued by their queue's strategy. :func:`run_cycle` never mutates its input
state: it returns the decisions and the next state, which the simulator or a live controller
applies (ungating pods, evicting victims). :func:`finish_evictions` is what the caller reports
back once victims' pods are gone: their quota is released and they queue again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kubeberth.admission.checks import BoundCheck, CheckRegistry, bind, in_tree, reset_on_eviction
from kubeberth.admission.flavors import (
    FIT,
    NO_FIT,
    PREEMPT,
    Assignment,
    FlavorAssigner,
    reduce_podsets,
)
from kubeberth.admission.model import (
    Admission,
    KueueObjects,
    PodSetAssignment,
    WaitForPodsReady,
    Workload,
)
from kubeberth.admission.preemption import Preemptor, Target
from kubeberth.admission.queue import Entry, QueueManager
from kubeberth.admission.quota import (
    DRS,
    ClusterQueueSnapshot,
    CohortSnapshot,
    Snapshot,
    Usage,
    WorkloadInfo,
    admitted_info,
    compare_drs,
)

REASON_WAITING_FOR_PREEMPTION = "WaitingForPreemptedWorkloads"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
REASON_INADMISSIBLE = "Inadmissible"
REASON_PODS_READY = "Waiting"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"


@dataclass(slots=True)
class AdmissionState:
    """What admission knows between cycles: the Kueue objects, the workloads holding quota,
    the queues, and victims whose eviction was issued but not yet observed."""

    objs: KueueObjects
    admitted: dict[str, Workload] = field(default_factory=dict)
    queues: QueueManager = field(default_factory=QueueManager)
    evicting: dict[str, Target] = field(default_factory=dict)
    # Inactive ClusterQueues (missing flavors, stopped) -> the reason; their heads are not popped.
    inactive: dict[str, str] = field(default_factory=dict)
    # Cache of admitted_info per workload key, valid while the Workload object is the same one;
    # shared by clones (a cycle never changes an admitted Workload object in place).
    infos: dict[str, tuple[Workload, WorkloadInfo]] = field(default_factory=dict)
    # AdmissionCheck name -> the plugin modelling its controller (kubeberth.admission.checks).
    checks: dict[str, BoundCheck] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objs: KueueObjects,
                     checks: CheckRegistry | None = None) -> AdmissionState:
        """The state of a fresh Kueue over ``objs``; ``checks`` models the admission-check
        controllers (default: the in-tree ones)."""
        objs, bound = bind(objs, in_tree() if checks is None else checks)
        snap = Snapshot(objs)
        state = cls(objs, queues=QueueManager.build(objs),
                    inactive={n: cq.inactive_reason for n, cq in snap.cluster_queues.items()
                              if not cq.active}, checks=bound)
        for wl in sorted(objs.workloads, key=lambda w: w.key):
            if wl.admission is not None:
                state.admitted[wl.key] = wl
            else:
                state.queues.add(wl, objs)
        return state

    def clone(self) -> AdmissionState:
        return AdmissionState(self.objs, dict(self.admitted), self.queues.clone(),
                              dict(self.evicting), self.inactive, self.infos, self.checks)


@dataclass(slots=True)
class Admitted:
    workload: Workload
    admission: Admission


@dataclass(slots=True)
class Preempted:
    workload: str
    by: str
    reason: str


@dataclass(slots=True)
class NotAdmitted:
    workload: str
    cluster_queue: str
    reason: str
    message: str
    active: bool


@dataclass(slots=True)
class CycleResult:
    admitted: list[Admitted]
    preempted: list[Preempted]
    not_admitted: list[NotAdmitted]
    state: AdmissionState


@dataclass(slots=True)
class _Nominee:
    entry: Entry
    cq: ClusterQueueSnapshot | None
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    message: str = ""
    requeue_reason: str = "Generic"
    status: str = ""
    reason: str = ""


def build_snapshot(state: AdmissionState) -> Snapshot:
    """The quota tree with every admitted workload. Usage is added once per ClusterQueue:
    adding non-negative usage is additive all the way up the tree, so the sum gives the same
    tree as adding workload by workload, at a fraction of the walks."""
    snap = Snapshot(state.objs)
    totals: dict[str, Usage] = {}
    for wl in state.admitted.values():
        hit = state.infos.get(wl.key)
        if hit is not None and hit[0] is wl:
            info = hit[1]
        else:
            info = admitted_info(wl)
            state.infos[wl.key] = (wl, info)
        cq = snap.cluster_queues.get(info.cluster_queue)
        if cq is None:
            continue
        cq.workloads[info.key] = info
        total = totals.setdefault(info.cluster_queue, {})
        for fr, v in info.usage.items():
            total[fr] = total.get(fr, 0) + v
    for name, usage in sorted(totals.items()):
        snap.cluster_queues[name].add_usage(dict(sorted(usage.items())))
    return snap


def _namespace_labels(objs: KueueObjects, namespace: str) -> dict[str, str]:
    # The API server labels every namespace with its name.
    return {**objs.namespaces.get(namespace, {}), "kubernetes.io/metadata.name": namespace}


def _can_be_partially_admitted(wl: Workload) -> bool:
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.podsets)


def _assignments(snap: Snapshot, preemptor: Preemptor, e: Entry, cq: ClusterQueueSnapshot,
                 now: float, partial: bool) -> tuple[Assignment, list[Target]]:
    wl = e.wl
    oracle = preemptor.oracle(snap, wl, now)
    assigner = FlavorAssigner(wl.podsets, cq, snap.flavors, oracle,
                              fair_sharing=snap.fair_sharing, last_tried=e.last_tried)
    full = assigner.assign()
    mode = full.representative_mode()
    if mode == FIT:
        return full, []
    if mode == PREEMPT:
        targets = preemptor.get_targets(snap, wl, cq.name, full.usage, _preempt_frs(full), now)
        if targets:
            return full, targets
    if partial and _can_be_partially_admitted(wl):
        found: dict[str, tuple[Assignment, list[Target]]] = {}

        def fits(counts: list[int]) -> bool:
            a = assigner.assign(counts)
            m = a.representative_mode()
            if m == FIT:
                found[str(counts)] = (a, [])
                return True
            if m == PREEMPT:
                t = preemptor.get_targets(snap, wl, cq.name, a.usage, _preempt_frs(a), now)
                if t:
                    found[str(counts)] = (a, t)
                    return True
            return False

        best = reduce_podsets(wl.podsets, fits)
        if best is not None:
            return found[str(best)]
    return full, []


def _preempt_frs(a: Assignment) -> set[tuple[str, str]]:
    return {(fa.name, res) for ps in a.podsets for res, fa in ps.flavors.items()
            if fa.mode == PREEMPT}


def _reserve_for_unreclaimable(n: _Nominee) -> Usage:
    """Quota a Preempt entry without candidates holds back so lower-priority work elsewhere in
    the cohort cannot take it first (resourcesToReserve)."""
    assert n.assignment is not None and n.cq is not None
    cq = n.cq
    out: Usage = {}
    for fr, usage in n.assignment.usage.items():
        q = cq.quota_for(fr)
        used = cq.usage.get(fr, 0)
        if n.assignment.borrowing > 0:
            out[fr] = usage if q.borrowing_limit is None else min(
                usage, q.nominal + q.borrowing_limit - used)
        else:
            out[fr] = max(0, min(usage, q.nominal - used))
    return out


def _fits_after(snap: Snapshot, cq: ClusterQueueSnapshot, usage: Usage,
                removed: dict[str, WorkloadInfo], targets: list[Target]) -> bool:
    gone = list(removed.values()) + [t.info for t in targets if t.info.key not in removed]
    for info in gone:
        snap.remove_workload(info)
    try:
        return cq.fits(usage)
    finally:
        for info in gone:
            snap.add_workload(info)


def _entry_order(n: _Nominee) -> tuple[object, ...]:
    """Classical order: not borrowing first, then higher priority, then older."""
    assert n.assignment is not None
    return (n.assignment.borrowing, -n.entry.wl.priority, n.entry.wl.queue_time, n.entry.key)


def _admission(wl: Workload, cq: str, a: Assignment) -> Admission:
    psas = []
    for ps in a.podsets:
        flavors = {r: fa.name for r, fa in sorted(ps.flavors.items())}
        usage = {r: v for r, v in ps.requests.items() if r in flavors or v}
        psas.append(PodSetAssignment(ps.name, ps.count, flavors, usage))
    return Admission(cq, psas)


def _blocked_by_pods_ready(state: AdmissionState, cfg: WaitForPodsReady) -> bool:
    return cfg.enable and cfg.block_admission and any(
        not wl.pods_ready for wl in state.admitted.values())


def run_cycle(state: AdmissionState, now: float) -> CycleResult:
    """One scheduling cycle at time ``now`` (Unix seconds). ``state`` is not modified."""
    nxt = state.clone()
    objs = nxt.objs
    heads = nxt.queues.heads(now, frozenset(nxt.inactive))
    admitted: list[Admitted] = []
    preempted: list[Preempted] = []
    not_admitted: list[NotAdmitted] = []
    if not heads:
        return CycleResult(admitted, preempted, not_admitted, nxt)
    snap = build_snapshot(nxt)
    preemptor = Preemptor(fair_sharing=snap.fair_sharing,
                          strategies=objs.config.preemption_strategies)
    entries: list[_Nominee] = []
    inadmissible: list[_Nominee] = []
    for e in heads:
        cq = snap.cluster_queue(e.cluster_queue)
        n = _Nominee(e, cq)
        if cq is None:
            n.message = f"ClusterQueue {e.cluster_queue} not found"
        elif not cq.active:
            n.message = cq.inactive_reason
        elif not cq.namespace_matches(_namespace_labels(objs, e.wl.namespace)):
            n.message = "Workload namespace doesn't match ClusterQueue selector"
            n.requeue_reason = "NamespaceMismatch"
        else:
            n.assignment, n.targets = _assignments(snap, preemptor, e, cq, now,
                                                   objs.config.partial_admission)
            n.message = n.assignment.message()
            entries.append(n)
            continue
        n.reason = REASON_INADMISSIBLE
        inadmissible.append(n)
    removed: dict[str, WorkloadInfo] = {}
    if snap.fair_sharing:
        waiting = {n.entry.cluster_queue: n for n in entries}
        while waiting:
            _process(nxt, snap, _fair_pop(snap, waiting), removed, admitted, preempted, now)
    else:
        entries.sort(key=_entry_order)
        for n in entries:
            _process(nxt, snap, n, removed, admitted, preempted, now)
    for n in entries:
        if n.status == "assumed":
            continue
        if n.status in ("skipped",) and n.requeue_reason == "Generic":
            n.requeue_reason = "FailedAfterNomination"
        _requeue(nxt, n, not_admitted)
    for n in inadmissible:
        _requeue(nxt, n, not_admitted)
    return CycleResult(admitted, preempted, not_admitted, nxt)


def _fair_pop(snap: Snapshot, waiting: dict[str, _Nominee]) -> _Nominee:
    """The fair sharing iterator: a tournament in the cohort tree where, at every cohort, a
    child not borrowing on its nominee's flavors after admitting it wins over one that is, then
    the child whose dominant resource share would be lowest wins (then higher priority, then
    older). Shares are computed at each pop, on the snapshot as
    earlier entries of the cycle left it."""
    cq = snap.cluster_queues[min(waiting)]
    if cq.parent is None:
        return waiting.pop(cq.name)
    root = cq.root()
    assert isinstance(root, CohortSnapshot)
    shares: dict[tuple[str, str], DRS] = {}
    for member in snap.subtree_cluster_queues(root):
        n = waiting.get(member.name)
        if n is None or n.assignment is None:
            continue
        member.add_usage(n.assignment.usage)
        share = member.dominant_resource_share()
        for ancestor in member.path_parent_to_root():
            shares[(ancestor.name, n.entry.key)] = share
            share = ancestor.dominant_resource_share()
        member.remove_usage(n.assignment.usage)
    winner = _tournament(root, waiting, shares)
    assert winner is not None
    return waiting.pop(winner.entry.cluster_queue)


def _tournament(cohort: CohortSnapshot, waiting: dict[str, _Nominee],
                shares: dict[tuple[str, str], DRS]) -> _Nominee | None:
    candidates: list[_Nominee] = []
    for child in sorted(cohort.children_cohorts, key=lambda c: c.name):
        best_child = _tournament(child, waiting, shares)
        if best_child is not None:
            candidates.append(best_child)
    candidates.extend(waiting[c.name] for c in sorted(cohort.children_cqs, key=lambda c: c.name)
                      if c.name in waiting)
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _fair_less(current, best, cohort.name, shares):
            best = current
    return best


def _fair_less(a: _Nominee, b: _Nominee, cohort: str,
               shares: dict[tuple[str, str], DRS]) -> bool:
    """Kueue's order with FairSharingPrioritizeNonBorrowing (on by default): a nominee whose
    side of ``cohort`` is not borrowing on the flavors it asks for goes first, whatever the
    shares; then the lower share, higher priority, older."""
    assert a.assignment is not None and b.assignment is not None
    zero = DRS(1.0, 0.0, "")
    share_a = shares.get((cohort, a.entry.key), zero)
    share_b = shares.get((cohort, b.entry.key), zero)
    borrows_a = share_a.is_borrowing_on(a.assignment.usage)
    if borrows_a != share_b.is_borrowing_on(b.assignment.usage):
        return not borrows_a
    c = compare_drs(share_a, share_b)
    if c:
        return c < 0
    if a.entry.wl.priority != b.entry.wl.priority:
        return a.entry.wl.priority > b.entry.wl.priority
    return a.entry.wl.queue_time < b.entry.wl.queue_time


def _process(state: AdmissionState, snap: Snapshot, n: _Nominee,
             removed: dict[str, WorkloadInfo], admitted: list[Admitted],
             preempted: list[Preempted], now: float) -> None:
    assert n.assignment is not None and n.cq is not None
    cq = n.cq
    mode = n.assignment.representative_mode()
    if mode == NO_FIT:
        n.reason = n.assignment.no_fit_reason()
        return
    if mode == PREEMPT and not n.targets:
        n.reason = REASON_WAITING_FOR_QUOTA
        if cq.preemption.reclaim_within_cohort != "Any":
            cq.add_usage(_reserve_for_unreclaimable(n))
        return
    if any(t.info.key in removed for t in n.targets):
        n.status = "skipped"
        n.reason = REASON_WAITING_FOR_QUOTA
        n.message = "Workload has overlapping preemption targets with another workload"
        n.entry.last_tried = {}
        return
    usage = n.assignment.usage
    if not _fits_after(snap, cq, usage, removed, n.targets):
        n.status = "skipped"
        n.reason = REASON_WAITING_FOR_QUOTA
        n.message = "Workload no longer fits after processing another workload"
        n.entry.last_tried = {}
        return
    for t in n.targets:
        removed[t.info.key] = t.info
    cq.add_usage(usage)
    if mode == PREEMPT:
        n.entry.last_tried = {}
        for t in sorted(n.targets, key=lambda t: t.info.key):
            if t.info.key not in state.evicting:
                state.evicting[t.info.key] = t
                preempted.append(Preempted(t.info.key, n.entry.key, t.reason))
        n.reason = REASON_WAITING_FOR_PREEMPTION
        n.message += f". Pending the preemption of {len(n.targets)} workload(s)"
        n.requeue_reason = "PendingPreemption"
        return
    if _blocked_by_pods_ready(state, state.objs.config.wait_for_pods_ready):
        n.status = "skipped"
        n.reason = REASON_PODS_READY
        n.message = "waiting for all admitted workloads to be in PodsReady condition"
        return
    n.status = "assumed"
    adm = _admission(n.entry.wl, cq.name, n.assignment)
    wl = replace(n.entry.wl, admission=adm, quota_reserved_time=now, evicted=False,
                 check_evicted_at=None)
    state.admitted[wl.key] = wl
    admitted.append(Admitted(wl, adm))


def _requeue(state: AdmissionState, n: _Nominee, out: list[NotAdmitted]) -> None:
    e = n.entry
    if n.assignment is not None and n.status == "" and n.requeue_reason == "Generic":
        e.last_tried = n.assignment.tried_indexes() if \
            n.assignment.representative_mode() != FIT else {}
    e.reason = n.reason or REASON_WAITING_FOR_QUOTA
    e.message = n.message
    state.queues.requeue(e, n.requeue_reason)
    active = any(x.key == e.key for x in state.queues.queues[e.cluster_queue].active)
    out.append(NotAdmitted(e.key, e.cluster_queue, e.reason, e.message, active))


def cohort_cluster_queues(state: AdmissionState, cq_name: str) -> list[str]:
    """Every ClusterQueue in the same cohort tree as ``cq_name`` (itself included)."""
    snap = Snapshot(state.objs)
    cq = snap.cluster_queue(cq_name)
    if cq is None:
        return []
    root = cq.root()
    if root is cq:
        return [cq_name]
    return sorted(c.name for c in snap.subtree_cluster_queues(root))  # type: ignore[arg-type]


def finish_evictions(state: AdmissionState, keys: list[str], now: float) -> AdmissionState:
    """Victims' pods are gone: release their quota, queue them again (evicted workloads go
    back to their LocalQueue) and wake the parked workloads of their cohort."""
    nxt = state.clone()
    touched: set[str] = set()
    for key in keys:
        nxt.evicting.pop(key, None)
        wl = nxt.admitted.pop(key, None)
        if wl is None:
            continue
        assert wl.admission is not None
        touched.add(wl.admission.cluster_queue)
        requeued = replace(wl, admission=None, quota_reserved_time=None, evicted=True,
                           checks=reset_on_eviction(wl.checks, now))
        nxt.queues.add(requeued, nxt.objs)
    for cq in sorted(touched):
        nxt.queues.requeue_inadmissible(cohort_cluster_queues(nxt, cq))
    return nxt


def finish_workloads(state: AdmissionState, keys: list[str]) -> AdmissionState:
    """Workloads that completed: release their quota and wake their cohort's parked workloads."""
    nxt = state.clone()
    touched: set[str] = set()
    for key in keys:
        wl = nxt.admitted.pop(key, None)
        if wl is not None and wl.admission is not None:
            touched.add(wl.admission.cluster_queue)
        nxt.queues.remove(key)
    for cq in sorted(touched):
        nxt.queues.requeue_inadmissible(cohort_cluster_queues(nxt, cq))
    return nxt


def mark_pods_ready(state: AdmissionState, keys: list[str]) -> AdmissionState:
    """The admitted workloads' pods are all running (the PodsReady condition)."""
    nxt = state.clone()
    for key in keys:
        wl = nxt.admitted.get(key)
        if wl is not None:
            nxt.admitted[key] = replace(wl, pods_ready=True)
    return nxt


def backoff_seconds(count: int, cfg: WaitForPodsReady) -> float:
    """waitForPodsReady requeuing backoff for the ``count``-th requeue: base * 2^(count-1),
    capped at backoffMaxSeconds (upstream adds a jitter of 0.01%, left out here)."""
    strategy = cfg.requeuing
    return float(min(strategy.backoff_base_seconds * 2 ** (count - 1),
                     strategy.backoff_max_seconds))


def pods_ready_timeout(state: AdmissionState, keys: list[str], now: float) -> AdmissionState:
    """Admitted workloads that did not reach PodsReady within waitForPodsReady.timeout: evicted,
    their quota released, requeued after the backoff, or deactivated past backoffLimitCount."""
    cfg = state.objs.config.wait_for_pods_ready
    nxt = state.clone()
    touched: set[str] = set()
    for key in keys:
        wl = nxt.admitted.pop(key, None)
        if wl is None or wl.admission is None:
            continue
        touched.add(wl.admission.cluster_queue)
        count = wl.requeue_count + 1
        evicted = replace(wl, admission=None, quota_reserved_time=None, evicted=True,
                          checks=reset_on_eviction(wl.checks, now),
                          pods_ready=False, requeue_count=count,
                          requeue_at=now + backoff_seconds(count, cfg),
                          pods_ready_evicted_at=now if cfg.requeuing.timestamp == "Eviction"
                          else None)
        limit = cfg.requeuing.backoff_limit_count
        if limit is not None and count > limit:
            nxt.queues.unqueued[key] = (replace(evicted, active=False), REQUEUING_LIMIT_EXCEEDED,
                                        "The workload is deactivated: exceeded the maximum "
                                        "number of re-queuing retries")
            continue
        nxt.queues.add(evicted, nxt.objs)
    for cq in sorted(touched):
        nxt.queues.requeue_inadmissible(cohort_cluster_queues(nxt, cq))
    return nxt
