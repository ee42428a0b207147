"""Choosing a ResourceFlavor per podSet and resource group, as Kueue's flavor assigner does.

For each podSet and each resource group it requests, Kueue walks the group's flavors in order,
drops those whose taints the pods do not tolerate or whose node labels contradict the pods' node
selector and required node affinity, and grades the rest: Fit (free quota, maybe borrowed),
Preempt (fits after evicting someone; asked of a preemption oracle) or NoFit. FlavorFungibility
decides whether a grade is good enough to stop or whether to try the next flavor, and the
borrowing level (how high in the cohort tree the quota comes from) breaks ties. The assigner only
reads the snapshot; the oracle it is given may simulate preemptions on it and restore it.
Partial admission (podSet minCount) is the reducer at the bottom: a binary search over counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubeberth.admission.model import FlavorFungibility, PodSet, ResourceFlavor
from kubeberth.admission.quota import (
    ClusterQueueSnapshot,
    FlavorResource,
    Usage,
    lowest_subtree_that_fits,
)
from kubeberth.api.objects import NodeSelectorRequirement, NodeSelectorTerm, PodSpec
from kubeberth.api.selectors import compile_node_selector_term, tolerated

# FlavorAssignmentMode, worst first.
NO_FIT, PREEMPT, FIT = 0, 1, 2
MODE_NAMES = {NO_FIT: "NoFit", PREEMPT: "Preempt", FIT: "Fit"}

# The assigner's finer preemption modes, worst first.
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4
_TO_MODE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT,
            G_FIT: FIT}
POSSIBILITIES = {"NoCandidates": G_NO_CANDIDATES, "Preempt": G_PREEMPT, "Reclaim": G_RECLAIM}

REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
_SEVERITY = {"": 0, REASON_WAITING_FOR_QUOTA: 2, REASON_EXCEEDS_MAX_QUOTA: 3,
             REASON_NO_MATCHING_FLAVOR: 4}

# (cq, workload key, flavor-resource, quantity) -> (possibility, borrowing level after).
PreemptionOracle = Callable[[ClusterQueueSnapshot, FlavorResource, int], tuple[str, int]]


def most_severe(a: str, b: str) -> str:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def least_severe(reasons: list[str]) -> str:
    """The reason of the flavor that came closest to fitting."""
    return min(reasons, key=lambda r: _SEVERITY.get(r, 0)) if reasons else ""


@dataclass(slots=True, frozen=True)
class GranularMode:
    preemption_mode: int
    borrowing_level: int


WORST = GranularMode(G_NO_FIT, 1 << 62)
BEST = GranularMode(G_FIT, 0)


def is_preferred(a: GranularMode, b: GranularMode, fungibility: FlavorFungibility) -> bool:
    """Whether ``a`` is a better grade than ``b`` under the queue's preference."""
    if a.preemption_mode == G_NO_FIT:
        return False
    if b.preemption_mode == G_NO_FIT:
        return True
    a_none = a.preemption_mode == G_NO_CANDIDATES
    b_none = b.preemption_mode == G_NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if fungibility.preference == "PreemptionOverBorrowing":
        if a.borrowing_level != b.borrowing_level:
            return a.borrowing_level < b.borrowing_level
        return a.preemption_mode > b.preemption_mode
    if a.preemption_mode != b.preemption_mode:
        return a.preemption_mode > b.preemption_mode
    return a.borrowing_level < b.borrowing_level


def should_try_next_flavor(mode: GranularMode, fungibility: FlavorFungibility) -> bool:
    if mode.preemption_mode in (G_NO_FIT, G_NO_CANDIDATES):
        return True
    if mode.preemption_mode in (G_PREEMPT, G_RECLAIM) and \
            fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode.borrowing_level != 0 and fungibility.when_can_borrow == "TryNextFlavor"


@dataclass(slots=True)
class FlavorAssignment:
    name: str
    mode: int
    borrow: int = 0
    tried_index: int = -1


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, FlavorAssignment] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""
    failed: bool = False

    def representative_mode(self) -> int:
        if self.failed:
            return NO_FIT
        mode = FIT
        for fa in self.flavors.values():
            mode = min(mode, fa.mode)
        return mode


@dataclass(slots=True)
class Assignment:
    podsets: list[PodSetAssignment] = field(default_factory=list)
    usage: Usage = field(default_factory=dict)
    borrowing: int = 0

    def representative_mode(self) -> int:
        if not self.podsets:
            return NO_FIT
        return min(ps.representative_mode() for ps in self.podsets)

    def message(self) -> str:
        parts = []
        for ps in self.podsets:
            if ps.reasons and ps.representative_mode() != FIT:
                parts.append(f"couldn't assign flavors to pod set {ps.name}: "
                             + ", ".join(ps.reasons))
        return "; ".join(parts)

    def no_fit_reason(self) -> str:
        reason = ""
        for ps in self.podsets:
            if ps.representative_mode() == NO_FIT:
                reason = most_severe(reason, ps.no_fit_reason)
        return reason or REASON_WAITING_FOR_QUOTA

    def flavors(self) -> dict[str, dict[str, str]]:
        return {ps.name: {r: fa.name for r, fa in sorted(ps.flavors.items())}
                for ps in self.podsets}

    def tried_indexes(self) -> dict[tuple[str, str], int]:
        return {(ps.name, r): fa.tried_index for ps in self.podsets
                for r, fa in ps.flavors.items()}


def podset_total_requests(ps: PodSet, count: int, cq: ClusterQueueSnapshot) -> dict[str, int]:
    """A podSet's requests for ``count`` pods; ``pods`` counted when the queue covers it."""
    total = {r: v * count for r, v in sorted(ps.requests.items())}
    if cq.rg_by_resource("pods") is not None:
        total["pods"] = count * 1000
    return total


def untolerated_taint(flavor: ResourceFlavor, spec: PodSpec) -> str | None:
    tolerations = [*spec.tolerations, *flavor.tolerations]
    for t in flavor.node_taints:
        if t.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerated(tolerations, t):
            return f"{t.key}={t.value}:{t.effect}"
    return None


def matches_flavor_labels(flavor: ResourceFlavor, spec: PodSpec) -> bool:
    """kube-scheduler's required node affinity against the flavor's labels, restricted to the
    label keys the flavor itself sets (other keys are for the node, not the flavor)."""
    keys = flavor.node_labels.keys()
    labels = flavor.node_labels
    for k, v in spec.node_selector.items():
        if k in keys and labels.get(k) != v:
            return False
    aff = spec.affinity
    if aff is None or aff.node_affinity is None:
        return True
    required = aff.node_affinity.required_during_scheduling_ignored_during_execution
    if required is None:
        return True
    terms: list[NodeSelectorTerm] = []
    for t in required.node_selector_terms:
        exprs: list[NodeSelectorRequirement] = [e for e in t.match_expressions if e.key in keys]
        if not exprs:
            return True  # an emptied term matches any flavor: terms are ORed
        terms.append(NodeSelectorTerm(match_expressions=exprs))
    return any(compile_node_selector_term(t)(labels, "") for t in terms)


class FlavorAssigner:
    """Assigns flavors to one workload's podSets against one ClusterQueue snapshot."""

    def __init__(self, podsets: list[PodSet], cq: ClusterQueueSnapshot,
                 flavors: dict[str, ResourceFlavor], oracle: PreemptionOracle, *,
                 fair_sharing: bool = False,
                 last_tried: dict[tuple[str, str], int] | None = None) -> None:
        self.podsets = podsets
        self.cq = cq
        self.flavors = flavors
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        self.last_tried = last_tried or {}

    def assign(self, counts: list[int] | None = None) -> Assignment:
        """Flavors for every podSet (``counts`` overrides podSet counts: partial admission).
        PodSets of one group are assigned together, on their summed requests."""
        assignment = Assignment()
        groups: dict[str, list[int]] = {}
        for i, ps in enumerate(self.podsets):
            groups.setdefault(ps.group or f"\0{ps.name}", []).append(i)
        for members in groups.values():
            per_ps = []
            for i in members:
                ps = self.podsets[i]
                count = ps.count if counts is None else counts[i]
                per_ps.append(PodSetAssignment(ps.name, count,
                                               podset_total_requests(ps, count, self.cq)))
            requests: dict[str, int] = {}
            for psa in per_ps:
                for r, v in psa.requests.items():
                    requests[r] = requests.get(r, 0) + v
            group_flavors: dict[str, FlavorAssignment] = {}
            reasons: list[str] = []
            no_fit_reason = ""
            failed = False
            specs = [self.podsets[i] for i in members]
            for res, qty in requests.items():
                if self.cq.rg_by_resource(res) is None and qty == 0:
                    continue
                if res in group_flavors:
                    continue
                chosen, why, no_fit = self._find_flavor(specs, requests, res, assignment.usage)
                reasons.extend(why)
                if chosen is None:
                    failed = True
                    no_fit_reason = no_fit
                    group_flavors = {}
                    break
                group_flavors.update(chosen)
            for psa in per_ps:
                psa.reasons = list(reasons)
                psa.failed = failed
                psa.no_fit_reason = no_fit_reason
                psa.flavors = {r: fa for r, fa in group_flavors.items() if r in psa.requests}
                assignment.podsets.append(psa)
                for res, fa in psa.flavors.items():
                    fr = (fa.name, res)
                    assignment.usage[fr] = assignment.usage.get(fr, 0) + psa.requests[res]
                    assignment.borrowing = max(assignment.borrowing, fa.borrow)
            if failed:
                return assignment
        return assignment

    def _find_flavor(self, podsets: list[PodSet], requests: dict[str, int], res: str,
                     assigned: Usage) -> tuple[dict[str, FlavorAssignment] | None, list[str], str]:
        rg = self.cq.rg_by_resource(res)
        if rg is None:
            return None, [f"resource {res} unavailable in ClusterQueue"], \
                REASON_NO_MATCHING_FLAVOR
        group_requests = {r: v for r, v in requests.items() if r in rg.covered_resources}
        reasons: list[str] = []
        flavor_reasons: list[str] = []
        best: dict[str, FlavorAssignment] | None = None
        best_mode = WORST
        start = self.last_tried.get((podsets[0].name, res), -1) + 1
        attempted = -1
        for idx in range(start, len(rg.flavors)):
            attempted = idx
            fname = rg.flavors[idx].name
            mismatch = next((m for m in (self._structural_mismatch(fname, ps.template)
                                         for ps in podsets) if m is not None), None)
            if mismatch is not None:
                reasons.append(mismatch)
                flavor_reasons.append(REASON_NO_MATCHING_FLAVOR)
                continue
            assignments: dict[str, FlavorAssignment] = {}
            representative = BEST
            flavor_reason = ""
            for rname, val in group_requests.items():
                fr = (fname, rname)
                gmode, borrow, why, why_reason = self._fits_quota(fr, assigned.get(fr, 0), val)
                reasons.extend(why)
                flavor_reason = most_severe(flavor_reason, why_reason)
                mode = GranularMode(gmode, borrow)
                if is_preferred(representative, mode, self.cq.fungibility):
                    representative = mode
                if representative.preemption_mode == G_NO_FIT:
                    break
                assignments[rname] = FlavorAssignment(fname, _TO_MODE[gmode], borrow)
            flavor_reasons.append(flavor_reason)
            if not should_try_next_flavor(representative, self.cq.fungibility):
                best, best_mode = assignments, representative
                break
            if is_preferred(representative, best_mode, self.cq.fungibility):
                best, best_mode = assignments, representative
        if best is None or best_mode.preemption_mode == G_NO_FIT:
            return None, reasons, least_severe(flavor_reasons) or REASON_NO_MATCHING_FLAVOR
        tried = -1 if attempted == len(rg.flavors) - 1 else attempted
        for fa in best.values():
            fa.tried_index = tried
        if best_mode.preemption_mode == G_FIT:
            return best, [], ""
        return best, reasons, ""

    def _structural_mismatch(self, fname: str, spec: PodSpec) -> str | None:
        flavor = self.flavors.get(fname)
        if flavor is None:
            return f"flavor {fname} not found"
        taint = untolerated_taint(flavor, spec)
        if taint is not None:
            return f"untolerated taint {taint} in flavor {fname}"
        if not matches_flavor_labels(flavor, spec):
            return f"flavor {fname} doesn't match node affinity"
        return None

    def _fits_quota(self, fr: FlavorResource, assumed: int,
                    request: int) -> tuple[int, int, list[str], str]:
        cq = self.cq
        val = assumed + request
        max_capacity = cq.potential_available(fr)
        if val > max_capacity:
            return G_NO_FIT, 0, [
                f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered "
                f"podsets requests ({assumed}m) + current podset request ({request}m) > "
                f"maximum capacity ({max_capacity}m)"], REASON_EXCEEDS_MAX_QUOTA
        free = cq.available(fr)
        borrow, may_reclaim = lowest_subtree_that_fits(cq, fr, val)
        if val <= free:
            return G_FIT, borrow, [], ""
        why = [f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
               f"{val - free}m more needed"]
        # Preemption is only simulated when the request fits the nominal quota, the tree has
        # quota to reclaim, or the queue may preempt while borrowing.
        p = cq.preemption
        can_preempt_borrowing = p.borrow_within_cohort != "Never" or (
            self.fair_sharing and p.reclaim_within_cohort != "Never")
        if cq.quota_for(fr).nominal >= val or may_reclaim or can_preempt_borrowing:
            possibility, after = self.oracle(cq, fr, val)
            return POSSIBILITIES[possibility], after, why, ""
        return G_NO_FIT, borrow, why, REASON_WAITING_FOR_QUOTA


def reduce_podsets(podsets: list[PodSet],
                   fits: Callable[[list[int]], bool]) -> list[int] | None:
    """Partial admission: the largest counts between minCount and count that ``fits`` accepts,
    found by binary search over a shrink budget spread in proportion to each podSet's slack."""
    full = [ps.count for ps in podsets]
    deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count)
              for ps in podsets]
    total = sum(deltas)
    if total == 0:
        return None

    def counts(amount: int) -> list[int]:
        return [full[i] - deltas[i] * amount // total for i in range(len(podsets))]

    lo, hi = 0, total + 1
    best: list[int] | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        c = counts(mid)
        if fits(c):
            best = c
            hi = mid
        else:
            lo = mid + 1
    if lo > total:
        return None
    return best
