"""Workload-aware preemption (KEP-5710): DefaultPreemption's PodGroupPostFilter, upstream's
``preemption.PodGroupEvaluator``.

A pod group that fits nowhere may evict lower-priority work. The domain is the whole cluster:

1. Victims are preemption units: a native PodGroup with ``disruptionMode: All`` is one unit (all
   its scheduled pods, on whatever nodes); any other pod is a unit of its own. A unit's priority
   is its PodGroup's when the pod joins one, else the pod's. Units of lower priority than the
   preemptor group's are the potential victims.
2. Every potential victim is removed and the pod-group algorithm runs once on what is left
   (placements, feasibility, choice, no PostFilter); if the group still does not fit, preemption
   cannot help.
3. Victims are sorted most important first (priority, then a group's unit before a lone pod,
   more pods first, then the earliest start) and reprieved in that order, those whose eviction
   would violate a PodDisruptionBudget first: a unit is put back, whole, and kept if every pod
   of the group still passes the Filter plugins on its proposed node, with the cycle state the
   algorithm gave it and the earlier pods of the group assumed and reserved.
4. What is left are the victims; each pod of the group is nominated to its proposed node.

Like DefaultPreemption's pod path, the plugin never acts: it returns the victims and the
nominations, and the host evicts and nominates. The snapshot is restored before returning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.placement import (
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    ProposedAssignment,
)
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins import default_preemption
from kubeberth.scheduling.plugins.default_preemption import (
    NAME,
    NOT_ELIGIBLE_NEVER,
    compile_pdbs,
    filter_with_nominated,
    nominated_node,
    pdb_violation_counts,
    preemption_policy,
    terminating_by_preemption,
)
from kubeberth.state.cluster import ClusterState, PodInfo

MESSAGE_PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"


@dataclass(slots=True)
class Victim:
    """A preemption unit: its pods with the node each runs on, its priority, whether it is a
    pod group's (upstream ``IsGroup``: a whole group, or a pod that joins one) and its
    earliest start."""

    pods: list[tuple[PodInfo, int]]
    priority: int
    group: bool
    earliest_start: float

    def importance(self) -> tuple[int, int, int, float]:
        """Sort key, most important first (1.37's ``MoreImportantVictim``): higher priority,
        a group's unit before a lone pod, more pods, then the earlier start."""
        return (-self.priority, 0 if self.group else 1, -len(self.pods), self.earliest_start)


def victim_priority(pi: PodInfo, snap: ClusterState) -> int:
    """Upstream ``GetPodPriority``: the pod's PodGroup's priority when it joins one."""
    group = snap.objects.native_group(pi)
    return group.priority if group is not None else pi.priority


def domain_victims(snap: ClusterState) -> list[Victim]:
    """Every preemption unit running in the cluster, nodes in slot order and pods in their
    order on each node (upstream ``getCrossNodesVictims``)."""
    objects = snap.objects
    seen: set[str] = set()
    out: list[Victim] = []
    for node in snap.node_ids().tolist():
        for pi in snap.pods_on_node[node].values():
            group = objects.native_group(pi)
            in_group = bool(objects.native_group_name(pi))
            if group is None or group.disruption_mode != "All":
                if pi.key not in seen:
                    seen.add(pi.key)
                    out.append(Victim([(pi, node)], victim_priority(pi, snap), in_group,
                                      pi.start_time))
                continue
            if group.key in seen:
                continue
            seen.add(group.key)
            pods = [(m, m.node) for m in objects.native_members(group.key).values()
                    if m.node >= 0]
            out.append(Victim(pods, group.priority, True, min(m.start_time for m, _ in pods)))
    return out


def ongoing_preemption(group: PodGroupInfo, priority: int, snap: ClusterState,
                       handle: Handle) -> bool:
    """Upstream ``isOngoingPreemption``: a lower-priority pod still terminating from an earlier
    preemption on a node a pod of the group is nominated to."""
    nodes = {n for pi in group.pods if (n := nominated_node(pi, snap, handle.nominator))
             is not None}
    return any(victim_priority(pi, snap) < priority and terminating_by_preemption(pi.pod)
               for node in sorted(nodes) for pi in snap.pods_on_node[node].values())


class _Evaluator:
    """One preemption attempt on the shared snapshot, which it puts back as it found it."""

    def __init__(self, fw: Framework, snap: ClusterState) -> None:
        self.fw = fw
        self.snap = snap
        # Pods taken off their node, with the node and the GPU devices they held there.
        self.off: dict[str, tuple[PodInfo, int, tuple[int, ...]]] = {}

    def _put_back(self, key: str) -> None:
        """A victim back on its node, on the very devices it held."""
        pi, node, devices = self.off.pop(key)
        self.snap.add_pod(pi, node, defer_devices=True)
        self.snap.place_gpu_devices(pi, devices or None)

    def _tell(self, pi: PodInfo, node: int, assignments: Sequence[ProposedAssignment],
              *, added: bool) -> Status:
        """Every assigned pod's PreFilter state learns that ``pi`` is back on (or gone from)
        ``node``; a failing extension is an Error, as upstream wraps it."""
        fw = self.fw
        change = fw.run_pre_filter_extension_add_pod if added else \
            fw.run_pre_filter_extension_remove_pod
        for a in assignments:
            st = change(a.state, a.pod, pi, node, self.snap)
            if not st.ok:
                return Status(Code.ERROR, st.reasons, st.plugin)
        return SUCCESS

    def remove(self, v: Victim, assignments: Sequence[ProposedAssignment]) -> Status:
        for pi, node in v.pods:
            self.off[pi.key] = (pi, node, pi.gpu_devices)
            self.snap.remove_pod(pi)
            if not (st := self._tell(pi, node, assignments, added=False)).ok:
                return st
        return SUCCESS

    def add(self, v: Victim, assignments: Sequence[ProposedAssignment]) -> Status:
        for pi, node in v.pods:
            self._put_back(pi.key)
            if not (st := self._tell(pi, node, assignments, added=True)).ok:
                return st
        return SUCCESS

    def reprieve(self, v: Victim, assignments: Sequence[ProposedAssignment]) -> tuple[bool, Status]:
        """Put ``v`` back whole; keep it there if every assigned pod still passes its Filter
        plugins on its node, the earlier ones assumed and reserved (rolled back after)."""
        st = self.add(v, assignments)
        if not st.ok:
            return False, st
        fw, snap = self.fw, self.snap
        nominator = fw.handle.nominator
        placed: list[ProposedAssignment] = []
        try:
            for a in assignments:
                if not filter_with_nominated(fw, a.state, a.pod, snap, a.node, nominator).ok:
                    return False, self.remove(v, assignments)
                snap.add_pod(a.pod, a.node, defer_devices=True)
                placed.append(a)
                if fw.run_reserve(a.state, a.pod, snap, a.node).ok:
                    snap.place_gpu_devices(a.pod)
            return True, SUCCESS
        finally:
            for a in reversed(placed):
                fw.run_unreserve(a.state, a.pod, snap, a.node)
                snap.remove_pod(a.pod)

    def restore(self) -> None:
        for key in list(self.off):
            self._put_back(key)


def preempt(handle: Handle, group: PodGroupInfo, snap: ClusterState,
            schedule: PodGroupSchedulingFunc) -> tuple[PodGroupPostFilterResult | None, Status]:
    """Upstream ``PodGroupEvaluator.Preempt``, without the executor: victims and nominations.
    The group may not preempt when a pod's preemptionPolicy is Never (the pods' policy, as
    upstream without the PodGroupPreemptionPolicy gate); while an earlier preemption of it is
    still under way, it keeps its nominations and evicts nothing more."""
    priority = group.group.priority
    if any(preemption_policy(pi.pod, snap) == "Never" for pi in group.pods):
        return None, Status(Code.UNSCHEDULABLE, (NOT_ELIGIBLE_NEVER,))
    if ongoing_preemption(group, priority, snap, handle):
        current = {pi.key: pi.pod.status.nominated_node_name for pi in group.pods}
        return PodGroupPostFilterResult(nominated=current), Status(Code.SUCCESS, (ONGOING,))
    potential = [v for v in domain_victims(snap) if v.priority < priority]
    if not potential:
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
    fw = handle.frameworks[group.pods[0].pod.spec.scheduler_name]
    saved_pods = list(snap.pods.items())
    orders = {node: list(snap.pods_on_node[node]) for v in potential for _pi, node in v.pods}
    ev = _Evaluator(fw, snap)
    try:
        for v in potential:
            ev.remove(v, ())
        assignments, st = schedule()
        if not st.ok:
            return None, st
        potential.sort(key=Victim.importance)
        counts = pdb_violation_counts([[pi for pi, _ in v.pods] for v in potential],
                                      compile_pdbs(snap.pdbs))
        violating = [v for v, n in zip(potential, counts, strict=True) if n]
        non_violating = [v for v, n in zip(potential, counts, strict=True) if not n]
        valid = [a for a in assignments if a.node >= 0]
        victims: list[Victim] = []
        for v in violating + non_violating:
            fits, st = ev.reprieve(v, valid)
            if not st.ok:
                return None, st
            if not fits:
                victims.append(v)
        victims.sort(key=Victim.importance)
        result = PodGroupPostFilterResult(
            victims=[pi for v in victims for pi, _ in v.pods],
            nominated={a.pod.key: snap.node_names[a.node] for a in valid})
        found = f"found a placement for podgroup, preempting {len(result.victims)} victims"
        return result, Status(Code.SUCCESS, (found,))
    finally:
        ev.restore()
        for node, order in orders.items():
            on_node = snap.pods_on_node[node]
            if list(on_node) != order:
                restored = [(key, on_node[key]) for key in order]
                on_node.clear()
                on_node.update(restored)
        if list(snap.pods) != [k for k, _ in saved_pods]:
            snap.pods.clear()
            snap.pods.update(saved_pods)


class DefaultPreemption(default_preemption.DefaultPreemption, PodGroupPostFilterPlugin):
    """kube-scheduler's DefaultPreemption with both its extension points: PostFilter for a pod
    (:mod:`default_preemption`), PodGroupPostFilter for a native pod group (this module)."""

    def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo, snap: ClusterState,
                              schedule: PodGroupSchedulingFunc
                              ) -> tuple[PodGroupPostFilterResult | None, Status]:
        result, st = preempt(self.handle, group, snap, schedule)
        if st.reasons:
            st = Status(st.code, (MESSAGE_PREFIX + st.message(),), st.plugin)
        return result, st


def new(args: Mapping[str, Any] | None, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(default_preemption.DefaultPreemptionArgs.parse(args), handle)


__all__ = ["NAME", "DefaultPreemption", "Victim", "domain_victims", "new", "preempt",
           "victim_priority"]
