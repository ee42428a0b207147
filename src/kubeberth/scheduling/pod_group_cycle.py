"""The pod-group scheduling cycle of kube-scheduler 1.37 (KEP-4671, KEP-5832, KEP-5732).

A pod of a scheduling.k8s.io PodGroup is never scheduled alone: when the queue hands one out,
its queued siblings are taken with it and the whole group is placed in one cycle.

1. Placements: the placementGenerate plugins split all nodes into candidate placements
   (TopologyPlacementGenerator: one per topology domain; no constraint: all nodes).
2. Feasibility: in each placement, in order, every pod is scheduled in turn by the profile's
   Filter and Score plugins restricted to the placement's nodes, and assumed and reserved
   there so the next pod sees it; after each pod the placementFeasible plugins judge the
   progress (GangScheduling: minCount). The placement is then rolled back. Verdicts: Success,
   PartialSuccess (feasible, but some pods did not fit), Unschedulable.
3. Choice: once ``percentageOfPlacementsToScore`` worth of feasible placements are known, they
   are scored by the placementScore plugins (NormalizePlacementScore, weights); the highest
   total wins, ties drawn with the scheduler's seeded RNG. A single feasible placement is taken
   unscored, as upstream does.
4. Commit: the chosen placement's pods are assumed and reserved again, then permitted; if any
   Reserve or Permit says no, every pod of the group is given back. No placement: every pod is
   requeued unschedulable and nothing stays reserved.

PostFilter (single-pod preemption) never runs for a group pod. When no placement fits, the
podGroupPostFilter plugins run once for the group (KEP-5710; DefaultPreemption's is workload-aware
preemption): on Success their victims are evicted, each pod is nominated to the node the
preemption placed it on, and the group is retried in a later cycle (docs/gangs.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kubeberth.config.workload_api import NativeGroup
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import WaitingPod
from kubeberth.scheduling.framework.interface import QueuedPodInfo
from kubeberth.scheduling.framework.placement import (
    Placement,
    PlacementFramework,
    PlacementProgress,
    PlacementScores,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    ProposedAssignment,
    num_placements_to_score,
)
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.state.cluster import PodInfo

if TYPE_CHECKING:
    from kubeberth.scheduling.scheduler import Scheduler

SUCCESS_VERDICT = "Success"
PARTIAL_VERDICT = "PartialSuccess"
UNSCHEDULABLE_VERDICT = "Unschedulable"
ERROR_VERDICT = "Error"
NOT_EVALUATED = "NotEvaluated"


@dataclass(slots=True)
class PlacementOutcome:
    """One candidate placement: its verdict, the pods it took (pod key -> node name), the
    first pod that did not fit and the plugin that said so, and its scores if it was scored."""

    name: str
    nodes: list[str]
    verdict: str = NOT_EVALUATED
    assignments: dict[str, str] = field(default_factory=dict)
    failed_pod: str = ""
    failed_plugin: str = ""
    message: str = ""
    # Plugin -> (raw, normalized, weighted), when scored.
    scores: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    total: int | None = None


@dataclass(slots=True)
class Preemption:
    """The podGroupPostFilter run of a failed cycle: the plugin that answered ("" when none
    did), its status code and message, and on Success the victims (pod keys, most important
    first) and the node each pod of the group is nominated to ("": its nomination cleared)."""

    plugin: str
    code: Code
    message: str
    victims: list[str] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class MemberOutcome:
    """What the cycle decided for one pod of the group (the scheduler turns it into a
    CycleResult): "assumed", "waiting", "unschedulable" or "error"."""

    qpi: QueuedPodInfo
    outcome: str
    node: str | None = None
    status: Status = SUCCESS
    message: str = ""
    state: CycleState | None = None
    nominated: str | None = None


@dataclass(slots=True)
class GroupOutcome:
    """The whole cycle of one pod group, for the host and for explain."""

    group: NativeGroup
    profile: str
    pods: list[str]
    scheduled_before: list[str]
    placements: list[PlacementOutcome] = field(default_factory=list)
    placements_to_score: int = 0
    chosen: str | None = None
    result: str = UNSCHEDULABLE_VERDICT
    message: str = ""
    members: list[MemberOutcome] = field(default_factory=list)
    preemption: Preemption | None = None


@dataclass(slots=True)
class _Trial:
    """One pod's result inside a placement: node slot (-1 none), its cycle state, status."""

    qpi: QueuedPodInfo
    node: int
    state: CycleState
    status: Status
    message: str = ""


class PodGroupCycle:
    """Runs pod-group cycles for a :class:`Scheduler` (one per profile framework)."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.placement: dict[str, PlacementFramework] = {}
        for profile, fw in zip(sched.config.profiles, sched.frameworks.values(), strict=True):
            pfw = PlacementFramework(fw, profile)
            if pfw.percentage_of_placements_to_score is None:
                pfw.percentage_of_placements_to_score = \
                    sched.config.percentage_of_placements_to_score
            self.placement[fw.profile_name] = pfw

    # ---- queue side ------------------------------------------------------------------------
    def siblings_ready(self, pod: PodInfo) -> None:
        """A new member may have completed its group: siblings GangScheduling kept out of
        the queue are judged again (upstream's Pod/Add event for GangScheduling); siblings that
        failed for other reasons stay where they are."""
        objects = self.sched.snapshot.objects
        group = objects.native_group(pod)
        if group is None:
            return
        members = objects.native_members(group.key)
        if len(members) < group.min_count:
            return
        queue = self.sched.queue
        gated = [k for k in members if k != pod.key
                 and (q := queue.get(k)) is not None and q.gated]
        if gated:
            queue.activate(gated)

    # ---- the cycle -------------------------------------------------------------------------
    def run(self, fw: Framework, first: QueuedPodInfo, group: NativeGroup) -> GroupOutcome:
        sched = self.sched
        snap = sched.snapshot
        queue = sched.queue
        members = snap.objects.native_members(group.key)
        qpis = [first]
        for key in members:
            if key != first.info.key:
                taken = queue.take(key)
                if taken is not None:
                    qpis.append(taken)
        # Creation order, a stable order while the group does not change (KEP-4671).
        order = {key: i for i, key in enumerate(members)}
        qpis.sort(key=lambda q: order.get(q.info.key, len(order)))
        scheduled = [m for m in members.values() if m.node >= 0]
        info = PodGroupInfo(group, [q.info for q in qpis], scheduled)
        out = GroupOutcome(group, fw.profile_name, [q.info.key for q in qpis],
                           [m.key for m in scheduled])
        names = sorted({q.info.pod.spec.scheduler_name for q in qpis})
        if len(names) > 1:
            msg = (f"pod group {group.key}: its pods name different schedulers "
                   f"({', '.join(names)}); all pods of a pod group must share spec.schedulerName")
            return self._fail(out, qpis, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,)), msg)
        pfw = self.placement[fw.profile_name]
        gstate = CycleState()
        trials, st = self._place(fw, pfw, gstate, info, qpis, out)
        if trials is not None:
            return self._commit(fw, out, trials)
        if st.code == Code.UNSCHEDULABLE:
            st = self._post_filter(fw, pfw, gstate, info, qpis, out, st)
        return self._fail(out, qpis, st, st.message(), error=st.code == Code.ERROR)

    def _place(self, fw: Framework, pfw: PlacementFramework, gstate: CycleState,
               info: PodGroupInfo, qpis: list[QueuedPodInfo],
               out: GroupOutcome) -> tuple[list[_Trial] | None, Status]:
        """Upstream's podGroupSchedulingAlgorithm without PostFilter: generate placements,
        evaluate them, score the feasible ones. Returns the chosen placement's trials (the
        snapshot rolled back), or None and the failure, its message the group's."""
        snap = self.sched.snapshot
        group = info.group
        parent = Placement("", snap.node_ids())
        placements, st = pfw.run_generate(gstate, info, parent, snap)
        if not st.ok:
            return None, Status(st.code, (f"pod group {group.key}: {st.message()}",), st.plugin)
        total_nodes = sum(len(p.nodes) for p in placements)
        want = num_placements_to_score(pfw.percentage_of_placements_to_score, len(placements),
                                       total_nodes)
        out.placements_to_score = want
        feasible: list[tuple[PlacementOutcome, Placement, list[_Trial]]] = []
        for placement in placements:
            po = PlacementOutcome(placement.name,
                                  [snap.node_names[n] for n in placement.nodes.tolist()])
            out.placements.append(po)
            if len(feasible) >= want:
                continue
            trials, verdict = self._evaluate(fw, pfw, info, qpis, placement, po)
            if verdict.code == Code.ERROR:
                return None, verdict
            if po.verdict in (SUCCESS_VERDICT, PARTIAL_VERDICT):
                feasible.append((po, placement, trials))
        if not feasible:
            first_fail = next((p for p in out.placements if p.verdict != NOT_EVALUATED), None)
            detail = first_fail.message if first_fail is not None else "no placement"
            msg = (f"pod group {group.key}: no placement fits the group "
                   f"({len(placements)} placement(s)): {detail}")
            return None, Status(Code.UNSCHEDULABLE, (msg,))
        best = 0
        if len(feasible) > 1:
            assignments = [PodGroupAssignments(p, [(t.qpi.info, t.node) for t in trials
                                                   if t.node >= 0])
                           for _po, p, trials in feasible]
            scores, st = pfw.run_score(gstate, info, assignments, snap)
            if not st.ok:
                return None, Status(Code.ERROR, st.reasons, st.plugin)
            self._record_scores(scores, [po for po, _p, _t in feasible])
            best = self._pick(scores)
        chosen, _placement, trials = feasible[best]
        out.chosen = chosen.name
        return trials, SUCCESS

    def _evaluate(self, fw: Framework, pfw: PlacementFramework, info: PodGroupInfo,
                  qpis: list[QueuedPodInfo], placement: Placement,
                  po: PlacementOutcome) -> tuple[list[_Trial], Status]:
        """Schedule the pods one by one inside ``placement``, then roll everything back."""
        sched = self.sched
        snap = sched.snapshot
        pstate = CycleState()
        progress = PlacementProgress(len(qpis), len(info.scheduled))
        verdict = pfw.run_feasible(pstate, info, progress)
        trials: list[_Trial] = []
        try:
            if verdict.rejected:
                po.verdict = UNSCHEDULABLE_VERDICT
                po.failed_plugin = verdict.plugin
                po.message = verdict.message()
                return trials, SUCCESS
            for qpi in qpis:
                state = CycleState()
                res = sched.schedule_within(fw, state, qpi, placement.nodes)
                trial = _Trial(qpi, -1, state, res.status, res.message)
                if res.outcome == "assumed" and res.node is not None:
                    node = snap.node_index[res.node]
                    snap.add_pod(qpi.info, node, defer_devices=True)
                    st = fw.run_reserve(state, qpi.info, snap, node)
                    if st.ok:
                        snap.place_gpu_devices(qpi.info)
                        trial.node = node
                    else:
                        fw.run_unreserve(state, qpi.info, snap, node)
                        snap.remove_pod(qpi.info)
                        trial.status, trial.message = st, st.message()
                elif res.outcome == "error":
                    trials.append(trial)
                    return trials, res.status if res.status.code == Code.ERROR else \
                        Status(Code.ERROR, (res.message,))
                trials.append(trial)
                if trial.node < 0 and not po.failed_pod:
                    po.failed_pod = qpi.info.key
                    po.failed_plugin = trial.status.plugin or ",".join(
                        sorted(qpi.unschedulable_plugins))
                    po.message = trial.message
                progress = PlacementProgress(progress.remaining - 1,
                                             progress.scheduled + (trial.node >= 0))
                verdict = pfw.run_feasible(pstate, info, progress)
                if verdict.code == Code.ERROR:
                    return trials, verdict
                if verdict.rejected:
                    break
        finally:
            for trial in reversed(trials):
                if trial.node >= 0:
                    fw.run_unreserve(trial.state, trial.qpi.info, snap, trial.node)
                    snap.remove_pod(trial.qpi.info)
        po.assignments = {t.qpi.info.key: snap.node_names[t.node] for t in trials if t.node >= 0}
        if verdict.ok:
            all_fit = len(po.assignments) == len(qpis)
            po.verdict = SUCCESS_VERDICT if all_fit or not info.scheduled else PARTIAL_VERDICT
            if not po.assignments:
                po.verdict = UNSCHEDULABLE_VERDICT
                po.message = po.message or "no pods were schedulable"
        else:
            po.verdict = UNSCHEDULABLE_VERDICT
            detail = verdict.message()
            po.message = f"{detail}; {po.message}" if po.message else detail
            if not po.failed_plugin:
                po.failed_plugin = verdict.plugin
        return trials, SUCCESS

    @staticmethod
    def _record_scores(scores: PlacementScores, outcomes: list[PlacementOutcome]) -> None:
        for i, po in enumerate(outcomes):
            po.scores = {name: (int(raw[i]), int(norm[i]), int(weighted[i]))
                         for name, (raw, norm, weighted) in scores.per_plugin.items()}
            po.total = int(scores.totals[i])

    def _pick(self, scores: PlacementScores) -> int:
        totals = scores.totals
        best = np.flatnonzero(totals == totals.max())
        if len(best) == 1:
            return int(best[0])
        return int(best[int(self.sched.rng.integers(len(best)))])

    def _commit(self, fw: Framework, out: GroupOutcome, trials: list[_Trial]) -> GroupOutcome:
        """Reserve and permit the chosen placement's pods, all or none."""
        sched = self.sched
        snap = sched.snapshot
        placed = [t for t in trials if t.node >= 0]
        reserved: list[_Trial] = []
        failure: Status | None = None
        for t in placed:
            snap.add_pod(t.qpi.info, t.node, defer_devices=True)
            st = fw.run_reserve(t.state, t.qpi.info, snap, t.node)
            reserved.append(t)
            if not st.ok:
                failure = st
                break
            snap.place_gpu_devices(t.qpi.info)
        waits: dict[str, float] = {}
        if failure is None:
            for t in placed:
                st, plugin_waits = fw.run_permit(t.state, t.qpi.info, snap, t.node)
                if st.code == Code.WAIT:
                    waits[t.qpi.info.key] = min(plugin_waits.values()) if plugin_waits else 0.0
                    pending = set(plugin_waits)
                    sched.handle.waiting_pods.add(WaitingPod(
                        t.qpi.info, t.node, fw.profile_name,
                        deadline=sched.clock() + waits[t.qpi.info.key], pending=pending))
                elif not st.ok:
                    failure = st
                    break
        if failure is not None:
            for t in placed:
                sched.handle.waiting_pods.remove(t.qpi.info.key)
            for t in reversed(reserved):
                fw.run_unreserve(t.state, t.qpi.info, snap, t.node)
                snap.remove_pod(t.qpi.info)
            msg = f"pod group {out.group.key}: {failure.message()}"
            out.chosen = None
            return self._fail(out, [t.qpi for t in trials], failure, msg,
                              error=failure.code == Code.ERROR)
        out.result = "Scheduled"
        for t in trials:
            key = t.qpi.info.key
            if t.node < 0:
                # Not needed for minCount and not placed: back to the queue on its own.
                out.members.append(MemberOutcome(t.qpi, "unschedulable", status=t.status,
                                                 message=t.message, state=t.state))
                sched.queue.add_unschedulable_if_not_present(t.qpi,
                                                             sched.queue.scheduling_cycle)
                continue
            node_name = snap.node_names[t.node]
            if key in waits:
                sched.register_waiting(t.qpi, t.state)
                out.members.append(MemberOutcome(t.qpi, "waiting", node_name,
                                                 Status(Code.WAIT), state=t.state))
            else:
                out.members.append(MemberOutcome(t.qpi, "assumed", node_name, state=t.state))
        return out

    def _post_filter(self, fw: Framework, pfw: PlacementFramework, gstate: CycleState,
                     info: PodGroupInfo, qpis: list[QueuedPodInfo], out: GroupOutcome,
                     failure: Status) -> Status:
        """Upstream's podGroupCycle once the group fits nowhere: the podGroupPostFilter plugins
        may free room. On Success the host evicts their victims and each pod is nominated where
        they placed it; the group waits for a later cycle. Their status message is appended to
        the group's failure as one more reason (upstream's AppendReason, even when empty); an
        Error replaces it."""
        sched = self.sched
        group = info.group

        def schedule() -> tuple[list[ProposedAssignment], Status]:
            """The pod-group algorithm again, with a fresh cycle state, as upstream's
            pgSchedulingFunc; the recorded outcome is a scratch one."""
            scratch = GroupOutcome(group, out.profile, out.pods, out.scheduled_before)
            trials, st = self._place(fw, pfw, CycleState(), info, qpis, scratch)
            if trials is None:
                return [], st
            return [ProposedAssignment(t.qpi.info, t.node, t.state) for t in trials], st

        result, st = pfw.run_post_filter(gstate, info, sched.snapshot, schedule)
        found = result if st.ok and result is not None else PodGroupPostFilterResult()
        out.preemption = Preemption(st.plugin, st.code, st.message(),
                                    [v.key for v in found.victims], dict(found.nominated))
        for victim in found.victims:
            sched.evictor(victim, qpis[0].info)
        if st.code == Code.ERROR:
            return st
        return Status(failure.code, (*failure.reasons, st.message()), failure.plugin)

    def _fail(self, out: GroupOutcome, qpis: list[QueuedPodInfo], st: Status, message: str,
              *, error: bool = False) -> GroupOutcome:
        """Every pod of the group back to the queue; nothing of it stays reserved."""
        out.result = "Error" if error else UNSCHEDULABLE_VERDICT
        out.message = message
        plugins = {p.failed_plugin for p in out.placements if p.failed_plugin}
        status = Status(Code.ERROR if error else Code.UNSCHEDULABLE, (message,), st.plugin)
        pre = out.preemption
        # Waiting on preemption: each pod nominated where the preemption placed it (an empty
        # name clears), the others untouched; otherwise upstream's clearNominatedNode.
        nominated = pre.nominated if pre is not None and pre.code == Code.SUCCESS else None
        for qpi in qpis:
            qpi.unschedulable_plugins = set(plugins) or ({st.plugin} if st.plugin else set())
            key = qpi.info.key
            node = nominated.get(key) or None if nominated is not None else None
            if nominated is None or key in nominated:
                self.sched.set_nomination(qpi.info, node)
            out.members.append(MemberOutcome(qpi, "error" if error else "unschedulable",
                                             status=status, message=message, nominated=node))
            queue = self.sched.queue
            queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
        return out


__all__ = ["GroupOutcome", "MemberOutcome", "PlacementOutcome", "PodGroupCycle", "Preemption"]
