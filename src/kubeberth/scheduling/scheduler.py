"""One scheduler: profiles, queue and the scheduling and binding cycles of kube-scheduler.

``schedule_one`` is upstream's ``ScheduleOne`` for one popped pod: PreFilter, Filter over all
candidate nodes from a rotating start index until ``numFeasibleNodesToFind`` feasible nodes are
known, PostFilter (preemption) when none is, PreScore/Score/NormalizeScore, highest total with a
seeded tie-break, then assume (the pod's requests are added to the snapshot at once, as the
scheduler cache assumes), Reserve and Permit. The binding cycle (PreBind, Bind, PostBind) is a
separate call so the host decides when it happens: the simulator runs it after a bind latency on
its virtual clock, the live scheduler after the API round trip.

The host applies every decision through three callables given at construction: ``binder`` (record
pod → node; may fail), ``evictor`` (delete a preemption victim) and ``nominate`` (set or clear
``status.nominatedNodeName``). The scheduler itself never talks to the world.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.config.workload_api import NativeGroup
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.cycle_state import (
    PODS_TO_ACTIVATE_KEY,
    CycleState,
    PodsToActivate,
)
from kubeberth.scheduling.framework.extender import (
    ExtenderError,
    ExtenderVerdicts,
    bind_with_extenders,
    build_extenders,
    filter_with_extenders,
    score_with_extenders,
)
from kubeberth.scheduling.framework.handle import Handle, WaitingPod
from kubeberth.scheduling.framework.interface import ClusterEvent, Diagnosis, QueuedPodInfo
from kubeberth.scheduling.framework.queue import SchedulingQueue
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.runtime import (
    FilterOutcome,
    Framework,
    ScoreOutcome,
    num_feasible_nodes_to_find,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.pod_group_cycle import GroupOutcome, PodGroupCycle
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.jit import kernel

Binder = Callable[[PodInfo, str], Status]
Evictor = Callable[[PodInfo, PodInfo], None]
Nominate = Callable[[PodInfo, str | None], None]

# Events the scheduler raises itself, as upstream's internal queue moves do.
ASSIGNED_POD_DELETE = ClusterEvent("Pod", "Delete")
NODE_ADD = ClusterEvent("Node", "Add")


@dataclass(slots=True)
class CycleResult:
    """What one scheduling cycle decided for one pod."""

    qpi: QueuedPodInfo
    profile: str
    # "assumed": reserved and permitted, binding cycle due; "waiting": held by Permit;
    # "unschedulable"; "error".
    outcome: str
    node: str | None = None
    status: Status = SUCCESS
    message: str = ""
    victims: list[PodInfo] = field(default_factory=list)
    nominated_node: str | None = None
    state: CycleState | None = None
    # Filled only when recording (explain): every filter verdict and every computed score.
    filters: FilterOutcome | None = None
    scores: ScoreOutcome | None = None
    evaluated: int = 0
    feasible: int = 0
    # Only when extenders are configured: their verdicts, and which one bound the pod.
    extenders: ExtenderVerdicts | None = None
    bound_by: str = ""
    # Set for the pods of a native PodGroup: the pod-group cycle they were decided in, and
    # whether this is the cycle's first result (hosts act on a group's outcome once).
    group: GroupOutcome | None = None
    opens_group: bool = False

    @property
    def pod(self) -> PodInfo:
        return self.qpi.info


@kernel
def _highest(totals: IntArray) -> tuple[int, int]:
    """How many candidates share the highest total, and the first of them (one pass)."""
    best = totals[0]
    first = 0
    count = 1
    for k in range(1, len(totals)):
        v = totals[k]
        if v > best:
            best = v
            first = k
            count = 1
        elif v == best:
            count += 1
    return count, first


@kernel
def _nth_highest(totals: IntArray, first: int, nth: int) -> int:
    """Position of the ``nth`` (from 0) candidate holding the highest total, which
    :func:`_highest` found first at ``first``."""
    best = totals[first]
    for k in range(first, len(totals)):
        if totals[k] == best:
            if nth == 0:
                return k
            nth -= 1
    return -1


def fit_error_message(diagnosis: Diagnosis, num_nodes: int) -> str:
    """Upstream FitError text: ``0/N nodes are available: <count> <reason>, ...``, with the
    reason histogram sorted by reason text."""
    if diagnosis.pre_filter_message:
        return f"0/{num_nodes} nodes are available: {diagnosis.pre_filter_message}."
    if diagnosis.reason_counts is not None:
        counts = diagnosis.reason_counts()
    else:
        counts = Counter()
        for slot in np.flatnonzero(diagnosis.codes != 0):
            for reason in diagnosis.reasons(int(slot)):
                counts[reason] += 1
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."


def _rotated(nodes: IntArray, start: int, lo: int, hi: int) -> IntArray:
    """Entries ``lo:hi`` of ``nodes`` rotated to begin at ``start``: a view unless they wrap
    around the end (a cycle on a large cluster judges only a first batch of them)."""
    n = len(nodes)
    a, b = start + lo, start + hi
    if b <= n:
        return nodes if a == 0 and b == n else nodes[a:b]
    if a >= n:
        return nodes[a - n: b - n]
    return np.concatenate([nodes[a:], nodes[: b - n]])


def _first_batch(to_find: int) -> int:
    """How many nodes the first filter batch judges: twice the feasible nodes wanted, so one
    batch usually suffices, and never so few that per-call overhead dominates."""
    return max(2 * to_find, 256)


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Registry,
        snapshot: ClusterState,
        *,
        clock: Callable[[], float],
        seed: int = 0,
        binder: Binder,
        evictor: Evictor,
        nominate: Nominate | None = None,
    ) -> None:
        self.config = config
        self.snapshot = snapshot
        self.rng = np.random.default_rng(seed)
        self.handle = Handle(snapshot, clock=clock, rng=self.rng,
                             parallelism=config.parallelism)
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            fw = Framework(profile, registry, self.handle)
            self.frameworks[profile.scheduler_name] = fw
        self.handle.frameworks = self.frameworks
        self.extenders = build_extenders(config.extenders)
        self.handle.extenders = self.extenders
        first = next(iter(self.frameworks.values()))
        sort_name = first.queue_sort.name
        sort_args = config.profiles[0].plugin_config.get(sort_name)
        for profile, fw in zip(config.profiles, self.frameworks.values(), strict=True):
            if fw.queue_sort.name != sort_name or \
                    profile.plugin_config.get(sort_name) != sort_args:
                raise InputError(
                    f"profile {profile.scheduler_name!r} sorts its queue with "
                    f"{fw.queue_sort.name!r}, profile {first.profile_name!r} with {sort_name!r}",
                    field=f"profiles[{profile.index}].plugins.queueSort",
                    expected="the same queueSort plugin and args in every profile (one queue "
                             "serves them all)")
        events: dict[str, list[ClusterEvent]] = {}
        for fw in self.frameworks.values():
            for name, evs in fw.enqueue_events().items():
                events.setdefault(name, list(evs))
        self.queue = SchedulingQueue(
            first.queue_sort.sort_key,
            clock=clock,
            pod_initial_backoff=config.pod_initial_backoff_seconds,
            pod_max_backoff=config.pod_max_backoff_seconds,
            pre_enqueue=self._pre_enqueue,
            events_by_plugin=events,
        )
        self.binder = binder
        self.evictor = evictor
        self.nominate = nominate
        self.next_start_node_index = 0
        self.clock = clock
        self._waiting: dict[str, tuple[QueuedPodInfo, CycleState]] = {}
        # (percentage of nodes to score, node count) -> feasible nodes a cycle looks for.
        self._to_find: dict[tuple[int | None, int], int] = {}
        # Native PodGroups: their cycle, and the results of a group cycle not yet handed out.
        self.groups = PodGroupCycle(self)
        self._group_results: deque[CycleResult] = deque()

    # ---- queue front door ------------------------------------------------------------------
    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.pod.spec.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod: PodInfo) -> Status:
        return self.frameworks[pod.pod.spec.scheduler_name].run_pre_enqueue(pod)

    def add(self, pod: PodInfo) -> None:
        self.queue.add(pod)
        if self.snapshot.objects.native_group_name(pod):
            self.groups.siblings_ready(pod)

    # ---- scheduling cycle ------------------------------------------------------------------
    def schedule_one(self, *, record: bool = False) -> CycleResult | None:
        if self._group_results:
            return self._group_results.popleft()
        qpi = self.queue.pop()
        if qpi is None:
            return None
        group = self.snapshot.objects.native_group(qpi.info)
        if group is not None:
            return self._schedule_group(qpi, group)
        return self.schedule_pod(qpi, record=record)

    # ---- pod-group cycle (scheduling/pod_group_cycle.py) --------------------------------------
    def _schedule_group(self, qpi: QueuedPodInfo, group: NativeGroup) -> CycleResult:
        """One cycle for the popped pod's whole group; its members' results are handed out
        one per ``schedule_one`` call, the popped pod's first."""
        fw = self.frameworks[qpi.info.pod.spec.scheduler_name]
        out = self.groups.run(fw, qpi, group)
        results = [CycleResult(m.qpi, fw.profile_name, m.outcome, node=m.node, status=m.status,
                               message=m.message, nominated_node=m.nominated, state=m.state,
                               group=out)
                   for m in out.members]
        self._group_results.extend(results[1:])
        results[0].opens_group = True
        return results[0]

    def schedule_within(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo,
                        nodes: IntArray) -> CycleResult:
        """Filter and score one pod of a group over a placement's nodes, without PostFilter
        (a group's preemption is decided for the whole group)."""
        return self._schedule(fw, state, qpi, False, within=nodes)

    def register_waiting(self, qpi: QueuedPodInfo, state: CycleState) -> None:
        """A group pod the pod-group cycle left waiting at Permit."""
        self._waiting[qpi.info.key] = (qpi, state)

    def schedule_pod(self, qpi: QueuedPodInfo, *, record: bool = False) -> CycleResult:
        pod = qpi.info
        fw = self.frameworks[pod.pod.spec.scheduler_name]
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        result = self._schedule(fw, state, qpi, record)
        if result.outcome != "assumed":
            self._handle_failure(fw, result, cycle)
            return result
        node = self.snapshot.node_index[result.node or ""]
        self.snapshot.add_pod(pod, node, defer_devices=True)
        st = fw.run_reserve(state, pod, self.snapshot, node)
        if not st.ok:
            return self._reject_reserved(fw, state, result, node, st, cycle)
        self.snapshot.place_gpu_devices(pod)  # devices no Reserve plugin chose
        st, waits = fw.run_permit(state, pod, self.snapshot, node)
        if st.code == Code.WAIT:
            now = self.clock()
            self.handle.waiting_pods.add(WaitingPod(
                pod, node, fw.profile_name, deadline=now + min(waits.values()),
                pending=set(waits)))
            self._waiting[pod.key] = (qpi, state)
            result.outcome = "waiting"
            result.status = st
            return result
        if not st.ok:
            return self._reject_reserved(fw, state, result, node, st, cycle)
        return result

    def _reject_reserved(self, fw: Framework, state: CycleState, result: CycleResult,
                         node: int, st: Status, cycle: int) -> CycleResult:
        """Reserve or Permit said no: give the reservation back and requeue the pod."""
        fw.run_unreserve(state, result.pod, self.snapshot, node)
        self.snapshot.remove_pod(result.pod)
        result.outcome = "unschedulable" if st.rejected else "error"
        result.status = st
        result.message = st.message()
        self._handle_failure(fw, result, cycle)
        return result

    def _schedule(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo,
                  record: bool, within: IntArray | None = None) -> CycleResult:
        pod = qpi.info
        snap = self.snapshot
        all_nodes = snap.node_ids() if within is None else within
        num_all = len(all_nodes)
        result = CycleResult(qpi, fw.profile_name, "unschedulable", state=state)
        if num_all == 0:
            result.message = "no nodes available to schedule pods"
            result.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (result.message,))
            return result
        allowed, st = fw.run_pre_filter(state, pod, snap)
        if st is not SUCCESS and not st.ok:
            codes = np.full(snap.num_nodes, int(st.code), dtype=np.int8)
            diag = Diagnosis(codes, lambda _s: st.reasons, lambda _s: st.plugin,
                             {st.plugin}, pre_filter_message=st.message())
            if st.code == Code.ERROR:
                result.outcome = "error"
                result.status = st
                result.message = st.message()
                return result
            return self._unschedulable(fw, state, pod, diag, result, num_all,
                                       post_filter=within is None)
        nodes = all_nodes
        if allowed is not None:
            # Few names (NodeName, matchFields on metadata.name): look them up, not every node.
            slots = [snap.node_index[name] for name in allowed if name in snap.node_index]
            nodes = np.intersect1d(nodes, np.array(slots, dtype=np.int64), assume_unique=True)
        # Nominated node first (upstream evaluateNominatedNode).
        nominated = pod.pod.status.nominated_node_name
        if nominated and nominated in snap.node_index and not record:
            idx = snap.node_index[nominated]
            if snap.present[idx] and idx in set(nodes.tolist()):
                one = np.array([idx], dtype=np.int64)
                out = fw.run_filters(state, pod, snap, one)
                out = self._check_nominated(fw, state, pod, out)
                if out.codes[0] == Code.ERROR:
                    return self._filter_error(result, out, 0, record)
                if out.codes[0] == 0 and self.extenders:
                    # Extenders mark the node in ``out`` when they filter it out.
                    try:
                        filter_with_extenders(self.extenders, pod, snap, one, out,
                                              ExtenderVerdicts())
                    except ExtenderError as err:
                        return self._extender_error(result, err)
                if out.codes[0] == 0:
                    result.outcome = "assumed"
                    result.node = nominated
                    result.evaluated = result.feasible = 1
                    return result
        start = self.next_start_node_index % len(nodes) if len(nodes) else 0
        percentage = fw.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.config.percentage_of_nodes_to_score
        to_find = self._to_find.get((percentage, num_all), -1)
        if to_find < 0:
            to_find = self._to_find[percentage, num_all] = \
                num_feasible_nodes_to_find(percentage, num_all)
        if not record and 2 * _first_batch(to_find) >= len(nodes):
            # Filters are pure, so judging every node in slot order and then reading the
            # verdicts in rotated order decides exactly what upstream's early stop decides;
            # when the stop would come past half the nodes anyway, that is the cheaper way.
            out = self._check_nominated(fw, state, pod, fw.run_filters(state, pod, snap, nodes))
            if fw.filter_may_fail and np.logical_or.reduce(out.codes == Code.ERROR):
                return self._filter_error(result, out, start, record)
            feasible_pos = out.feasible_positions()
            count = len(feasible_pos)
            # Rotated order from ``start``: the feasible positions at or after it, then the
            # wrapped-around ones, cut at ``to_find`` (joined only when the cut needs both).
            split = int(feasible_pos.searchsorted(start)) if start else 0
            if count - split >= to_find:
                feasible_pos = feasible_pos[split: split + to_find]
                processed = int(feasible_pos[-1]) - start + 1
            else:
                if split:
                    feasible_pos = np.concatenate(
                        [feasible_pos[split:], feasible_pos[:min(split, to_find - count + split)]])
                if count >= to_find:
                    processed = (int(feasible_pos[-1]) - start) % len(nodes) + 1
                else:
                    processed = len(nodes)
            ordered = nodes
        else:
            out = self._find_feasible(fw, state, pod, nodes, start, to_find, record)
            if fw.filter_may_fail and np.logical_or.reduce(out.codes == Code.ERROR):
                return self._filter_error(result, out, 0, record)
            # The judged nodes in rotated order: every node, or a prefix that found enough.
            ordered = out.nodes
            feasible_pos = out.feasible_positions()
            if len(feasible_pos) >= to_find:
                processed = int(feasible_pos[to_find - 1]) + 1
                feasible_pos = feasible_pos[:to_find]
            else:
                processed = len(nodes)
        self.next_start_node_index = (self.next_start_node_index + processed) % num_all
        result.evaluated = processed
        result.feasible = len(feasible_pos)
        if record:
            result.filters = out
        if len(feasible_pos) == 0:
            diag = self._diagnosis(out)
            return self._unschedulable(fw, state, pod, diag, result, num_all,
                                       post_filter=within is None)
        # Positions are slots when the candidates are every slot in order (no gather needed).
        feasible = feasible_pos if snap.every_node(ordered) else ordered[feasible_pos]
        if self.extenders:
            result.extenders = ExtenderVerdicts()
            try:
                feasible = filter_with_extenders(self.extenders, pod, snap, feasible, out,
                                                 result.extenders)
            except ExtenderError as err:
                return self._extender_error(result, err)
            result.feasible = len(feasible)
            if len(feasible) == 0:
                diag = self._diagnosis(out)
                return self._unschedulable(fw, state, pod, diag, result, num_all,
                                           post_filter=within is None)
        if len(feasible) == 1:
            # Upstream's schedulePod takes a lone feasible node without PreScore or Score (so a
            # device choice a score plugin would record is GpuDevices' deviceSelection's).
            result.outcome = "assumed"
            result.node = snap.node_names[int(feasible[0])]
            return result
        st = fw.run_pre_score(state, pod, snap, feasible)
        if not st.ok:
            result.outcome = "error"
            result.status = st
            result.message = st.message()
            return result
        scores = fw.run_score(state, pod, snap, feasible, record=record)
        if not scores.status.ok:
            result.outcome = "error"
            result.status = scores.status
            result.message = scores.status.message()
            return result
        if result.extenders is not None:
            score_with_extenders(self.extenders, pod, snap, feasible, scores.totals,
                                 result.extenders)
        if record:
            result.scores = scores
        totals = scores.totals
        # Ties go to a seeded draw among the highest, in candidate order, as upstream's
        # reservoir sampling picks uniformly among them.
        count, pick = _highest(totals)
        if count > 1:
            pick = _nth_highest(totals, pick, int(self.rng.integers(count)))
        result.outcome = "assumed"
        result.node = snap.node_names[int(feasible[pick])]
        return result

    @staticmethod
    def _filter_error(result: CycleResult, out: FilterOutcome, start: int,
                      record: bool) -> CycleResult:
        """A Filter answered Error on a judged node (its PreFilter state was absent): upstream's
        findNodesThatPassFilters stops there and the cycle fails with that error, as
        RunFilterPlugins words it. ``start`` is the position the search began at; explain
        reports the nodes judged up to the failing one. The next cycle starts where this one
        did (upstream counts the nodes its parallel workers had judged, which is not
        deterministic)."""
        failing = np.flatnonzero(out.codes == Code.ERROR)
        later = failing[failing >= start]
        pos = int(later[0] if later.size else failing[0])
        plugin = out.plugin_at(pos)
        result.outcome = "error"
        result.message = f'running "{plugin}" filter plugin: {", ".join(out.reasons_at(pos))}'
        result.status = Status(Code.ERROR, (result.message,), plugin)
        if record:
            result.filters = out.head(pos + 1)
        return result

    @staticmethod
    def _extender_error(result: CycleResult, err: ExtenderError) -> CycleResult:
        """A non-ignorable extender failed: the cycle fails closed, as upstream's does."""
        result.outcome = "error"
        result.message = str(err)
        result.status = Status(Code.ERROR, (result.message,), "Extender")
        return result

    def _find_feasible(self, fw: Framework, state: CycleState, pod: PodInfo, nodes: IntArray,
                       start: int, to_find: int, record: bool) -> FilterOutcome:
        """Filter ``nodes`` in order rotated to ``start`` until ``to_find`` feasible nodes are
        known, as upstream stops early. Filters run on a first batch twice that size and, only
        if it fell short, on the rest; explain (``record``) evaluates every node. The outcome's
        ``nodes`` are the judged nodes in rotated order."""
        n = len(nodes)
        first = n if record else min(n, _first_batch(to_find))
        out = self._check_nominated(fw, state, pod, fw.run_filters(
            state, pod, self.snapshot, _rotated(nodes, start, 0, first), record=record), record)
        if first == n or int(np.count_nonzero(out.codes == 0)) >= to_find:
            return out
        rest = self._check_nominated(fw, state, pod, fw.run_filters(
            state, pod, self.snapshot, _rotated(nodes, start, first, n)))
        return FilterOutcome.concat(out, rest)

    def _check_nominated(self, fw: Framework, state: CycleState, pod: PodInfo,
                         out: FilterOutcome, record: bool = False) -> FilterOutcome:
        """Upstream's ``RunFilterPluginsWithNominatedPods`` on every node that pods of equal or
        higher priority are nominated to: the filters run first with those pods counted on the
        node, and a rejection there is the node's verdict; only when they pass does the verdict
        without them (the one ``out`` holds) stand. Recording (explain) also keeps each
        plugin's failing verdict with them, which is the one upstream's run reports."""
        nominator = self.handle.nominator
        busy = nominator.nodes()
        if not busy:
            return out
        snap = self.snapshot
        for pos in np.flatnonzero(np.isin(out.nodes, busy)):
            node = int(out.nodes[pos])
            with nominator.counted_on(fw, state, pod, snap, node) as nominated:
                if nominated is None:
                    continue
                trial, st = nominated
                if st.ok:
                    # Reasons are read here, while the nominated pods are on the node.
                    with_them = fw.run_filters(trial, pod, snap, np.array([node], dtype=np.int64),
                                               record=record)
                    if with_them.codes[0] != 0:
                        st = Status(Code(int(with_them.codes[0])), with_them.reasons_at(0),
                                    with_them.plugin_at(0))
                    failed = {name: res.status(0, name)
                              for name, res in with_them.per_plugin.items() if res.codes[0] != 0}
                    if failed:
                        out.with_nominated[int(pos)] = failed
            if not st.ok:
                out.passed = None
                out.codes[pos] = int(st.code)
                k = out.plugin_names.index(st.plugin) if st.plugin in out.plugin_names else 0
                out.first_plugin[pos] = k
                out.overrides[int(pos)] = st.reasons
        return out

    def _diagnosis(self, out: FilterOutcome) -> Diagnosis:
        snap = self.snapshot
        codes = np.zeros(snap.num_nodes, dtype=np.int8)
        codes[out.nodes] = out.codes
        failed_plugins = {out.plugin_names[int(k)] for k in np.unique(out.first_plugin)
                          if k >= 0}
        # Slot -> position in ``out``, built only if someone asks for a node's reasons.
        index: list[dict[int, int]] = []

        def pos(slot: int) -> int:
            if not index:
                index.append({int(n): i for i, n in enumerate(out.nodes.tolist())})
            return index[0].get(slot, -1)

        return Diagnosis(
            codes,
            lambda slot: out.reasons_at(p) if (p := pos(slot)) >= 0 else (),
            lambda slot: out.plugin_at(p) if (p := pos(slot)) >= 0 else "",
            failed_plugins,
            evaluated=out.nodes,
            reason_counts=out.reason_counts,
        )

    def _unschedulable(self, fw: Framework, state: CycleState, pod: PodInfo,
                       diag: Diagnosis, result: CycleResult, num_all: int,
                       *, post_filter: bool = True) -> CycleResult:
        result.outcome = "unschedulable"
        worst = int(diag.codes.max()) if diag.codes.size else int(Code.UNSCHEDULABLE)
        message = fit_error_message(diag, num_all)
        post, st = fw.run_post_filter(state, pod, self.snapshot, diag) if post_filter \
            else (None, SUCCESS)
        if post is not None and st.ok and post.nominated_node:
            result.victims = list(post.victims)
            result.nominated_node = post.nominated_node
        if fw.post_filter and st.reasons:
            # Upstream's FitError ends with PostFilter's message, whether it found room
            # ("preemption: found a potential placement ...") or not.
            message = f"{message} {st.message()}"
        result.message = message
        result.status = Status(Code(worst) if worst else Code.UNSCHEDULABLE, (message,))
        qpi = result.qpi
        qpi.unschedulable_plugins = set(diag.unschedulable_plugins)
        return result

    def _handle_failure(self, fw: Framework, result: CycleResult, cycle: int) -> None:
        pod = result.pod
        if result.nominated_node:
            for victim in result.victims:
                self.evictor(victim, pod)
            node = self.snapshot.node_index[result.nominated_node]
            # Lower-priority pods nominated to the same node lose their nomination.
            for other in self.handle.nominator.pods_for(node):
                if other.priority < pod.priority:
                    self.set_nomination(other, None)
            self.set_nomination(pod, result.nominated_node)
        self.queue.add_unschedulable_if_not_present(result.qpi, cycle)

    def set_nomination(self, pod: PodInfo, node_name: str | None) -> None:
        """Nominate ``pod`` to ``node_name`` (None: clear its nomination, if it has one) in the
        nominator, the pod's status and the host."""
        if node_name is None:
            if self.handle.nominator.node_of(pod.key) is None and \
                    not pod.pod.status.nominated_node_name:
                return
            self.handle.nominator.remove(pod)
            pod.pod.status.nominated_node_name = ""
        else:
            self.handle.nominator.add(pod, self.snapshot.node_index[node_name])
            pod.pod.status.nominated_node_name = node_name
        if self.nominate:
            self.nominate(pod, node_name)

    # ---- binding cycle ---------------------------------------------------------------------
    def bind(self, result: CycleResult) -> Status:
        """Run PreBind, Bind and PostBind for an assumed pod; on failure forget it, unreserve
        and requeue it with backoff (upstream handleBindingCycleError)."""
        st, host_bind = self.begin_binding(result)
        if st.ok and host_bind:
            st = self.binder(result.pod, result.node or "")
        return self.finish_binding(result, st)

    def begin_binding(self, result: CycleResult) -> tuple[Status, bool]:
        """The binding cycle up to the host's binder: PreBind, then the extenders' or the Bind
        plugins' binding. Returns the status so far and whether the host binder is due; a host
        that binds asynchronously calls the binder itself, then :meth:`finish_binding`."""
        pod = result.pod
        fw = self.frameworks[result.profile]
        state = result.state or CycleState()
        node = self.snapshot.node_index[result.node or ""]
        st = fw.run_pre_bind(state, pod, self.snapshot, node)
        if not st.ok:
            return st, False
        if self.extenders:
            if result.extenders is None:
                result.extenders = ExtenderVerdicts()
            bound = bind_with_extenders(self.extenders, pod, result.node or "",
                                        result.extenders)
            if bound is not None:
                # The extender bound it (upstream extendersBinding): no Bind plugin runs and
                # the host binder is not called, the extender having done the binding.
                result.bound_by, st = bound
                return st, False
        st = fw.run_bind(state, pod, self.snapshot, node)
        return st, st.ok

    def finish_binding(self, result: CycleResult, st: Status) -> Status:
        """End the binding cycle with the binding's status: PostBind on success; on failure
        Unreserve, forget the assumed pod and requeue it with backoff."""
        pod = result.pod
        fw = self.frameworks[result.profile]
        state = result.state or CycleState()
        node = self.snapshot.node_index[result.node or ""]
        if not st.ok:
            fw.run_unreserve(state, pod, self.snapshot, node)
            self.snapshot.remove_pod(pod)
            result.outcome = "error"
            result.status = st
            result.message = st.message()
            self.queue.add_unschedulable_if_not_present(result.qpi, self.queue.scheduling_cycle)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
            return st
        self.handle.nominator.remove(pod)
        pod.pod.status.nominated_node_name = ""
        pod.pod.spec.node_name = result.node or ""
        fw.run_post_bind(state, pod, self.snapshot, node)
        self.queue.done(pod.key)
        return SUCCESS

    def activate_requested(self, state: CycleState | None) -> None:
        """Move the pods a plugin asked for during a cycle (upstream ``PodsToActivate``) to
        activeQ, as upstream does once the cycle is over; hosts call it after each cycle."""
        want = state.get(PODS_TO_ACTIVATE_KEY) if state is not None else None
        if isinstance(want, PodsToActivate) and want.keys:
            keys = sorted(want.keys)
            want.keys.clear()
            self.queue.activate(keys)

    def settle_waiting(self, now: float) -> Iterator[CycleResult]:
        """Every Permit wait that is over, until none is: unreserving one pod may reject its
        waiting siblings (Coscheduling), so the waits are resolved again until nothing more is
        decided. Each result's requested activations are done before it is yielded; the host
        binds the "assumed" ones and records the others."""
        while done := self.resolve_waiting(now):
            for res in done:
                self.activate_requested(res.state)
                yield res

    def resolve_waiting(self, now: float) -> list[CycleResult]:
        """Finish Permit waits that were allowed, rejected or timed out. Allowed pods come back
        as "assumed" results whose binding cycle is due; the others are unreserved and requeued."""
        done: list[CycleResult] = []
        for wp in self.handle.waiting_pods:
            if not wp.decided and now < wp.deadline:
                continue
            self.handle.waiting_pods.remove(wp.info.key)
            fw = self.frameworks[wp.profile]
            qpi, state = self._waiting.pop(wp.info.key)
            node_name = self.snapshot.node_names[wp.node]
            if wp.rejected is None and not wp.pending:
                done.append(CycleResult(qpi, wp.profile, "assumed", node=node_name,
                                        state=state))
                continue
            st = wp.rejected or Status(Code.UNSCHEDULABLE,
                                       ("rejected due to timeout after waiting at permit",),
                                       ",".join(sorted(wp.pending)))
            fw.run_unreserve(state, wp.info, self.snapshot, wp.node)
            self.snapshot.remove_pod(wp.info)
            qpi.unschedulable_plugins = {st.plugin} if st.plugin else set()
            self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
            done.append(CycleResult(qpi, wp.profile, "unschedulable", node=node_name,
                                    status=st, message=st.message()))
        return done

    def next_permit_deadline(self) -> float | None:
        deadlines = [wp.deadline for wp in self.handle.waiting_pods]
        return min(deadlines) if deadlines else None

    def profiles(self) -> Mapping[str, Framework]:
        return self.frameworks
