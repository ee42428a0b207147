"""DefaultPreemption: the PostFilter that finds room for a pod by evicting lower-priority pods.

It reproduces kube-scheduler's ``defaultpreemption`` plugin and its ``preemption.Evaluator``: the
pod must be eligible, only nodes the filters rejected as plain ``Unschedulable`` are tried, each
is dry-run (remove every lower-priority pod, check the pod fits, then reprieve as many pods as
possible, PDB-violating ones first), and the best candidate is chosen by upstream's ordered
criteria. Filters are never called directly: the pod's own profile (``handle.frameworks``) runs
them, so this module works with whatever filter plugins a profile enables.

Upstream dry-runs on copies of each NodeInfo; we mutate the shared snapshot in place and always
restore it (matrices, per-node pod order and the global pod order) before returning, which is far
cheaper than copying matrices. The plugin never acts: it returns the victims and the nominated
node, and the host evicts, clears the lower-priority nominations to that node and nominates.
Asynchronous preemption is not modelled. Candidates are examined sequentially, so the "stop
once enough candidates are found" rule is exact rather than racy as in upstream's parallel
search. The plugin's PodGroupPostFilter (workload-aware preemption) is in
:mod:`kubeberth.scheduling.plugins.workload_preemption`, whose subclass the registry builds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod, PodDisruptionBudget
from kubeberth.api.selectors import LabelPredicate, compile_label_selector
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.extender import (
    ExtenderError,
    HTTPExtender,
    preempt_with_extenders,
)
from kubeberth.scheduling.framework.handle import Handle, Nominator
from kubeberth.scheduling.framework.interface import Diagnosis, PostFilterPlugin, PostFilterResult
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import args_int, args_mapping, reject_unknown
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "DefaultPreemption"

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_NO_VICTIMS_STATUS = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_MESSAGE_PREFIX = "preemption: "
# Upstream adds MaxInt32+1 to every victim priority so sums of negative priorities stay ordered.
_PRIORITY_OFFSET = 2**31
_ARG_FIELDS = ("minCandidateNodesPercentage", "minCandidateNodesAbsolute")


# ---- args ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    """How many candidate nodes the dry run collects: a share of the potential nodes, at least an
    absolute number (upstream defaults 10% and 100)."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> DefaultPreemptionArgs:
        """Defaults for absent fields, then upstream's ValidateDefaultPreemptionArgs."""
        raw = args_mapping(raw)
        reject_unknown(raw, _ARG_FIELDS, None)
        pct = args_int(raw, "minCandidateNodesPercentage", None, 10)
        absolute = args_int(raw, "minCandidateNodesAbsolute", None, 100)
        if pct < 0 or pct > 100:
            raise InputError(f"Invalid value: {pct}: not in valid range [0, 100]",
                             field="minCandidateNodesPercentage",
                             expected="an integer between 0 and 100")
        if absolute < 0:
            raise InputError(f"Invalid value: {absolute}: not in valid range [0, inf)",
                             field="minCandidateNodesAbsolute",
                             expected="a non-negative integer")
        if pct == 0 and absolute == 0:
            raise InputError("Invalid value: 0: cannot be zero at the same time as "
                             "minCandidateNodesAbsolute", field="minCandidateNodesPercentage",
                             expected="minCandidateNodesPercentage or minCandidateNodesAbsolute "
                             "to be positive")
        return cls(pct, absolute)

    def num_candidates(self, num_nodes: int) -> int:
        """Upstream ``calculateNumCandidates``: the percentage of ``num_nodes`` (integer
        division), raised to the absolute minimum, capped at ``num_nodes``."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)


# ---- candidates ------------------------------------------------------------------------------
@dataclass(slots=True)
class Candidate:
    """A node where the pod fits once ``victims`` (most important first) are evicted."""

    node: int
    name: str
    victims: list[PodInfo]
    num_pdb_violations: int


@dataclass(slots=True)
class CompiledPDB:
    """A PodDisruptionBudget reduced to what victim selection reads; ``matches`` is None for a
    nil, empty or invalid selector, which upstream treats as matching nothing."""

    namespace: str
    matches: LabelPredicate | None
    disruptions_allowed: int
    disrupted: frozenset[str]


def compile_pdbs(pdbs: Iterable[PodDisruptionBudget]) -> list[CompiledPDB]:
    """Compile PDB selectors once per preemption rather than once per victim."""
    out: list[CompiledPDB] = []
    for pdb in pdbs:
        sel = pdb.spec.selector
        matches: LabelPredicate | None = None
        if sel is not None and (sel.match_labels or sel.match_expressions):
            try:
                matches = compile_label_selector(sel)
            except InputError:
                matches = None
        out.append(CompiledPDB(pdb.metadata.namespace or "default", matches,
                        pdb.status.disruptions_allowed, frozenset(pdb.status.disrupted_pods)))
    return out


def pdb_violation_counts(units: Iterable[Sequence[PodInfo]], pdbs: Sequence[CompiledPDB]
                         ) -> list[int]:
    """For each preemption unit in order (a pod, or a pod group's pods), how many of its pods'
    evictions would exceed a matching PDB's remaining disruption budget, counting each budget
    down as upstream's FilterVictimsWithPDBViolation does. A pod already listed in a PDB's
    disruptedPods does not consume that budget."""
    allowed = [p.disruptions_allowed for p in pdbs]
    counts: list[int] = []
    for unit in units:
        violations = 0
        for pi in unit:
            violated = False
            labels = pi.labels
            if labels:
                for i, pdb in enumerate(pdbs):
                    if pdb.namespace != pi.namespace or pdb.matches is None:
                        continue
                    if not pdb.matches(labels) or pi.name in pdb.disrupted:
                        continue
                    allowed[i] -= 1
                    if allowed[i] < 0:
                        violated = True
            violations += violated
        counts.append(violations)
    return counts


def filter_pods_with_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[CompiledPDB]
                                   ) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` (order kept) into those whose eviction would violate a PDB and the rest."""
    counts = pdb_violation_counts(((pi,) for pi in pods), pdbs)
    violating = [pi for pi, n in zip(pods, counts, strict=True) if n]
    non_violating = [pi for pi, n in zip(pods, counts, strict=True) if not n]
    return violating, non_violating


def _importance(pi: PodInfo) -> tuple[int, float]:
    """Sort key for upstream ``MoreImportantPod``: higher priority first, then earlier start."""
    return (-pi.priority, pi.start_time)


def _as_error(st: Status) -> Status:
    return Status(Code.ERROR, st.reasons, st.plugin)


def preemption_nodes(handle: Handle, pod: PodInfo, snap: ClusterState, diagnosis: Diagnosis,
                     eligible: tuple[bool, str]) -> tuple[Framework, IntArray, IntArray] | Status:
    """Upstream ``Evaluator.Preempt``'s set-up, shared by every preemption PostFilter: given
    the plugin's own ``PodEligibleToPreemptOthers`` verdict, the pod's profile, every node, and
    the nodes whose Filter failure preemption may resolve (Unschedulable, not
    UnschedulableAndUnresolvable); a status when the pod may not preempt or there are no nodes."""
    if not eligible[0]:
        return Status(Code.UNSCHEDULABLE, (eligible[1],))
    fw = handle.frameworks.get(pod.pod.spec.scheduler_name)
    if fw is None:
        return Status(Code.ERROR, (f"no profile named {pod.pod.spec.scheduler_name!r}",))
    all_nodes = snap.node_ids()
    if all_nodes.size == 0:
        return Status(Code.ERROR, ("no nodes available",))
    codes = diagnosis.codes
    ids = all_nodes[all_nodes < len(codes)]
    return fw, all_nodes, ids[codes[ids] == Code.UNSCHEDULABLE]


def filter_with_nominated(fw: Framework, state: CycleState, pod: PodInfo, snap: ClusterState,
                           node: int, nominator: Nominator) -> Status:
    """Upstream ``RunFilterPluginsWithNominatedPods``: the pod must fit both with the pods of
    equal or higher priority nominated to the node counted as running and without them."""
    with nominator.counted_on(fw, state, pod, snap, node) as nominated:
        if nominated is not None:
            trial, st = nominated
            if st.ok:
                st = fw.run_filters_on_node(trial, pod, snap, node)
            if not st.ok:
                return st
    return fw.run_filters_on_node(state, pod, snap, node)


def select_victims_on_node(fw: Framework, state: CycleState, pod: PodInfo, snap: ClusterState,
                           node: int, pdbs: Sequence[CompiledPDB]
                           ) -> tuple[list[PodInfo], int, Status]:
    """Upstream ``SelectVictimsOnNode``: the fewest, least important pods to evict from ``node``.

    Returns victims (most important first), how many of them violate a PDB, and a status.
    ``state`` is modified (pass a clone). The node's pods, the matrices and the node's pod order
    are restored before returning; the global ``snap.pods`` order is restored by
    :func:`dry_run_candidates`, which is the entry point callers should use.
    """
    on_node = snap.pods_on_node[node]
    order = list(on_node)
    potential = [pi for pi in on_node.values() if pi.priority < pod.priority]
    if not potential:
        return [], 0, _NO_VICTIMS_STATUS
    nominator = fw.handle.nominator
    off_node: dict[str, PodInfo] = {}
    try:
        for pi in potential:
            snap.remove_pod(pi)
            off_node[pi.key] = pi
            st = fw.run_pre_filter_extension_remove_pod(state, pod, pi, node, snap)
            if not st.ok:
                return [], 0, _as_error(st)
        st = filter_with_nominated(fw, state, pod, snap, node, nominator)
        if not st.ok:
            return [], 0, st
        potential.sort(key=_importance)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0
        for counts_as_violation, group in ((True, violating), (False, non_violating)):
            for pi in group:
                snap.add_pod(pi, node)
                del off_node[pi.key]
                st = fw.run_pre_filter_extension_add_pod(state, pod, pi, node, snap)
                if not st.ok:
                    return [], 0, _as_error(st)
                if filter_with_nominated(fw, state, pod, snap, node, nominator).ok:
                    continue
                snap.remove_pod(pi)
                off_node[pi.key] = pi
                st = fw.run_pre_filter_extension_remove_pod(state, pod, pi, node, snap)
                if not st.ok:
                    return [], 0, _as_error(st)
                victims.append(pi)
                if counts_as_violation:
                    num_violating += 1
        if violating and non_violating:
            victims.sort(key=_importance)
        return victims, num_violating, SUCCESS
    finally:
        for pi in off_node.values():
            snap.add_pod(pi, node)
        if list(on_node) != order:
            restored = [(key, on_node[key]) for key in order]
            on_node.clear()
            on_node.update(restored)


def _has_lower_priority(snap: ClusterState, node: int, priority: int) -> bool:
    return any(pi.priority < priority for pi in snap.pods_on_node[node].values())


VictimSelector = Callable[[Framework, CycleState, PodInfo, ClusterState, int,
                           Sequence[CompiledPDB]], tuple[list[PodInfo], int, Status]]


def dry_run_candidates(fw: Framework, state: CycleState, pod: PodInfo, snap: ClusterState,
                       potential: Sequence[int] | IntArray, offset: int, num_candidates: int,
                       pdbs: Iterable[PodDisruptionBudget] | None = None,
                       select: VictimSelector = select_victims_on_node,
                       ) -> tuple[list[Candidate], dict[int, Status]]:
    """Upstream ``DryRunPreemption``, sequentially: visit ``potential`` node slots from
    ``offset`` (wrapping), dry-run each on a clone of ``state``, and stop once at least one
    candidate violates no PDB and ``num_candidates`` were found. Each of the two lists keeps at
    most ``num_candidates``; non-violating candidates come first.

    Returns the candidates and a status per node that was tried and failed (Error statuses
    included). ``pdbs`` defaults to ``snap.pdbs``; ``select`` is the victim selection
    (CapacityScheduling brings its own). The snapshot is left exactly as it was.
    """
    nodes = [int(n) for n in potential]
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[int, Status] = {}
    if select is select_victims_on_node and not snap.has_priority_below(pod.priority):
        # No bound pod anywhere has a lower priority: every node says so, in visiting order.
        for i in range(len(nodes)):
            statuses[nodes[(offset + i) % len(nodes)]] = _NO_VICTIMS_STATUS
        return [], statuses
    compiled = compile_pdbs(snap.pdbs if pdbs is None else pdbs)
    saved_pods = list(snap.pods.items())
    generation = snap.generation
    try:
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            if select is select_victims_on_node and not _has_lower_priority(
                    snap, node, pod.priority):
                # The common case on a busy cluster; no state clone needed to say so.
                statuses[node] = _NO_VICTIMS_STATUS
                continue
            victims, num_violations, st = select(fw, state.clone(), pod, snap, node, compiled)
            if st.ok and victims:
                bucket = non_violating if num_violations == 0 else violating
                if len(bucket) < num_candidates:
                    bucket.append(Candidate(node, snap.node_names[node], victims,
                                            num_violations))
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if st.ok:
                st = Status(Code.ERROR, ('expected at least one victim pod on node "'
                                         + snap.node_names[node] + '"',))
            statuses[node] = st
    finally:
        if snap.generation != generation:
            snap.pods.clear()
            snap.pods.update(saved_pods)
    return non_violating + violating, statuses


def _earliest_top_priority_start(victims: Sequence[PodInfo]) -> float:
    """Upstream ``GetEarliestPodStartTime``: earliest start among the highest-priority victims."""
    top = victims[0].priority
    earliest = victims[0].start_time
    for pi in victims:
        if pi.priority == top:
            earliest = min(earliest, pi.start_time)
        elif pi.priority > top:
            top = pi.priority
            earliest = pi.start_time
    return earliest


_SCORE_FUNCS: tuple[Callable[[Candidate], float], ...] = (
    lambda c: -c.num_pdb_violations,
    lambda c: -c.victims[0].priority,
    lambda c: -sum(pi.priority + _PRIORITY_OFFSET for pi in c.victims),
    lambda c: -len(c.victims),
    lambda c: _earliest_top_priority_start(c.victims),
)


def select_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    """Upstream ``SelectCandidate``/``pickOneNodeForPreemption``: fewest PDB violations, then the
    lowest highest-priority victim, the lowest sum of (offset) victim priorities, the fewest
    victims, the latest earliest start among the top-priority victims, then the first in order.
    A candidate without victims (only possible when callers build candidates themselves) wins
    outright, as it costs nothing."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    for c in candidates:
        if not c.victims:
            return c
    remaining = list(candidates)
    for score in _SCORE_FUNCS:
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0]


# ---- eligibility and messages ----------------------------------------------------------------
def preemption_policy(pod: Pod, snap: ClusterState) -> str:
    """The pod's preemptionPolicy as the Priority admission plugin would have set it: the pod's
    own field, else its PriorityClass's, else the global default class's."""
    if pod.spec.preemption_policy is not None:
        return pod.spec.preemption_policy
    classes = snap.priority_classes
    if pod.spec.priority_class_name:
        pc = classes.get(pod.spec.priority_class_name)
        return pc.preemption_policy if pc is not None else "PreemptLowerPriority"
    for pc in classes.values():
        if pc.global_default:
            return pc.preemption_policy
    return "PreemptLowerPriority"


def terminating_by_preemption(pod: Pod) -> bool:
    """Being deleted with a DisruptionTarget condition the scheduler's preemption set."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for cond in pod.status.conditions:
        if cond.type == "DisruptionTarget":
            return cond.status == "True" and cond.reason == "PreemptionByScheduler"
    return False


def nominated_node(pod: PodInfo, snap: ClusterState, nominator: Nominator) -> int | None:
    """The node the pod is nominated to: the nominator's, else its status's (if present)."""
    node = nominator.node_of(pod.key)
    if node is not None:
        return node
    name = pod.pod.status.nominated_node_name
    idx = snap.node_index.get(name) if name else None
    if idx is None or not snap.present[idx]:
        return None
    return idx


def pod_eligible_to_preempt_others(pod: PodInfo, snap: ClusterState, diagnosis: Diagnosis,
                                   nominator: Nominator) -> tuple[bool, str]:
    """Upstream ``PodEligibleToPreemptOthers``: not with preemptionPolicy Never, and not while a
    lower-priority pod on the pod's nominated node is still terminating from an earlier
    preemption (unless the filters now reject that node as unresolvable)."""
    if preemption_policy(pod.pod, snap) == "Never":
        return False, NOT_ELIGIBLE_NEVER
    node = nominated_node(pod, snap, nominator)
    if node is None:
        return True, ""
    if node < len(diagnosis.codes) and diagnosis.codes[node] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return True, ""
    for pi in snap.pods_on_node[node].values():
        if pi.priority < pod.priority and terminating_by_preemption(pi.pod):
            return False, NOT_ELIGIBLE_TERMINATING
    return True, ""


def fit_error_message(num_all_nodes: int, statuses: Mapping[int, Status]) -> str:
    """Upstream ``FitError.Error`` for preemption: a sorted histogram of the reasons of nodes
    tried, with every other node counted as "Preemption is not helpful for scheduling"."""
    counts: dict[str, int] = {}
    for st in statuses.values():
        for reason in st.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if len(statuses) < num_all_nodes:
        counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + num_all_nodes - len(statuses)
    message = f"0/{num_all_nodes} nodes are available:"
    if counts:
        message += " " + ", ".join(sorted(f"{n} {r}" for r, n in counts.items())) + "."
    return message


def _aggregate(messages: Sequence[str]) -> str:
    """apimachinery's aggregate error text: one message as is, several deduplicated in []."""
    if len(messages) == 1:
        return messages[0]
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def extender_candidates(extenders: Sequence[HTTPExtender], pod: PodInfo, snap: ClusterState,
                        candidates: Sequence[Candidate]) -> list[Candidate]:
    """Candidates after the extenders' preempt verbs (upstream ``callExtenders``). Upstream
    rebuilds them from a map; here the survivors keep their order and nodes an extender added
    follow by name, so the choice among equals stays deterministic."""
    kept = preempt_with_extenders(extenders, pod, snap, {
        c.name: (c.victims, c.num_pdb_violations) for c in candidates})
    order = {c.name: i for i, c in enumerate(candidates)}
    names = sorted(kept, key=lambda name: (order.get(name, len(order)), name))
    return [Candidate(snap.node_index[name], name, kept[name][0], kept[name][1])
            for name in names]


def nominate(handle: Handle, pod: PodInfo, snap: ClusterState, candidates: list[Candidate]
             ) -> tuple[PostFilterResult | None, Status]:
    """The end of upstream's ``Evaluator.Preempt`` once candidates exist: the extenders'
    ProcessPreemption and the best candidate, with upstream's success message. The scheduler
    clears the lower-priority nominations to that node when it nominates the pod."""
    if handle.extenders:
        try:
            candidates = extender_candidates(handle.extenders, pod, snap, candidates)
        except ExtenderError as err:
            return None, Status(Code.ERROR, (str(err),))
    best = select_candidate(candidates)
    if best is None:
        return None, Status(Code.UNSCHEDULABLE, ("no candidate node for preemption",))
    found = (f"found a potential placement for pod on node {best.name}, preempting "
             f"{len(best.victims)} victims")
    return (PostFilterResult(nominated_node=best.name, victims=list(best.victims)),
            Status(Code.SUCCESS, (found,)))


# ---- plugin ----------------------------------------------------------------------------------
class DefaultPreemption(PostFilterPlugin):
    """kube-scheduler's DefaultPreemption PostFilter plugin."""

    name = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        result, st = self._preempt(state, pod, snap, diagnosis)
        message = st.message()
        if message:
            st = Status(st.code, (_MESSAGE_PREFIX + message,), st.plugin)
        return result, st

    def _preempt(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                 diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        nodes = preemption_nodes(self.handle, pod, snap, diagnosis, pod_eligible_to_preempt_others(
            pod, snap, diagnosis, self.handle.nominator))
        if isinstance(nodes, Status):
            return None, nodes
        fw, all_nodes, potential = nodes
        candidates: list[Candidate] = []
        statuses: dict[int, Status] = {}
        if potential.size:
            offset = int(self.handle.rng.integers(len(potential)))
            num = self.args.num_candidates(len(potential))
            candidates, statuses = dry_run_candidates(fw, state, pod, snap, potential, offset, num)
        if not candidates:
            errors = [st.message() for st in statuses.values() if st.code == Code.ERROR]
            if errors:
                return None, Status(Code.ERROR, (_aggregate(errors),))
            return (PostFilterResult(nominated_node=""),
                    Status(Code.UNSCHEDULABLE, (fit_error_message(int(all_nodes.size), statuses),)))
        return nominate(self.handle, pod, snap, candidates)

