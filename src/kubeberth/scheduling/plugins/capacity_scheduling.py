"""CapacityScheduling: per-namespace elastic quotas (ElasticQuota min/max) with borrowing and
quota-aware preemption, as kubernetes-sigs/scheduler-plugins' ``pkg/capacityscheduling``.

An ElasticQuota gives a namespace a guaranteed ``min`` and a ceiling ``max``. A namespace may
use more than its min while others leave theirs idle, but never more than its max, and the
namespaces together never more than the sum of all mins. PreFilter enforces both limits (the
pod's request plus the pods nominated ahead of it); PostFilter preempts: a pod whose namespace
is still within its min takes back borrowed capacity from namespaces over their min, a pod over
its min may only preempt lower-priority pods of its own namespace. Reserve and Unreserve keep
each quota's ``used`` in step with the pods assumed and bound in the snapshot.

Upstream's integer rules are kept, including their quirks: in ``min`` and ``max`` a missing cpu,
memory, ephemeral-storage or pods entry counts as 0 (a ``max`` that lists only memory forbids
any cpu), a missing extended resource counts as 0 in ``min`` and unlimited in ``max``, and an
ElasticQuota without ``max`` is unlimited for cpu, memory and ephemeral-storage. Quotas and usage
are read from the scheduling-objects store and the snapshot instead of informers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeberth.api.objects import Pod, ResourceMap
from kubeberth.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, resource_map
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.default_preemption import (
    CompiledPDB,
    dry_run_candidates,
    filter_pods_with_pdb_violation,
    filter_with_nominated,
    fit_error_message,
    nominate,
    preemption_nodes,
    preemption_policy,
)
from kubeberth.scheduling.plugins.helper import UpdateWithPod, is_scalar_resource, reject_args
from kubeberth.state.cluster import ClusterState, PodInfo

NAME = "CapacityScheduling"
SNAPSHOT_KEY = "ElasticQuotaSnapshot"
PRE_FILTER_KEY = "PreFilter" + NAME
UNBOUNDED = 2**63 - 1  # upstream UpperBoundOfMax (math.MaxInt64)
_FIXED = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
_BOUND_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)

Resources = dict[str, int]


# ---- resources -------------------------------------------------------------------------------
def _tracked(values: Mapping[str, int]) -> Resources:
    """What a ``framework.Resource`` keeps: cpu, memory, ephemeral-storage, pods and scalar
    (extended, hugepages) resources."""
    return {k: v for k, v in values.items() if k in _FIXED or is_scalar_resource(k)}


def resource_list(values: ResourceMap, field: str) -> Resources:
    return _tracked(resource_map(values, field))


def pod_request(pod: Pod) -> Resources:
    """Upstream ``computePodResourceRequest``: containers summed, each init container as a
    per-resource maximum, then the overhead added (no sidecar arithmetic)."""
    total: Resources = {}
    for i, c in enumerate(pod.spec.containers):
        for k, v in resource_map(c.resources.requests, f"spec.containers[{i}]").items():
            total[k] = total.get(k, 0) + v
    for i, c in enumerate(pod.spec.init_containers):
        for k, v in resource_map(c.resources.requests, f"spec.initContainers[{i}]").items():
            total[k] = max(total.get(k, 0), v)
    for k, v in resource_map(pod.spec.overhead, "spec.overhead").items():
        total[k] = total.get(k, 0) + v
    return _tracked(total)


def _add(into: Resources, other: Mapping[str, int], sign: int = 1) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + sign * v


def exceeds(x1: Mapping[str, int], x2: Mapping[str, int], y: Mapping[str, int],
            bound: int) -> bool:
    """Upstream ``cmp2``: does ``x1 + x2`` exceed ``y`` in any resource? cpu, memory,
    ephemeral-storage and pods missing from ``y`` count as 0; other resources of ``x1``
    missing from ``y`` count as ``bound``."""
    for name in _FIXED:
        if x1.get(name, 0) + x2.get(name, 0) > y.get(name, 0):
            return True
    for name, v in x1.items():
        if name not in _FIXED and v + x2.get(name, 0) > y.get(name, bound):
            return True
    return False


@dataclass(slots=True)
class QuotaInfo:
    """Upstream ``ElasticQuotaInfo``: a namespace's min, max and the requests of its pods."""

    namespace: str
    min: Resources
    max: Resources
    used: Resources = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, namespace: str, min_: ResourceMap | None, max_: ResourceMap | None) -> QuotaInfo:
        """Upstream ``newElasticQuotaInfo``: an absent min is 0 and an absent max unlimited
        for cpu, memory and ephemeral-storage."""
        lo = resource_list(min_, "spec.min") if min_ is not None else \
            dict.fromkeys(_BOUND_RESOURCES, 0)
        hi = resource_list(max_, "spec.max") if max_ is not None else \
            dict.fromkeys(_BOUND_RESOURCES, UNBOUNDED)
        return cls(namespace, lo, hi)

    def clone(self) -> QuotaInfo:
        return QuotaInfo(self.namespace, self.min, self.max, dict(self.used), set(self.pods))

    def add_pod(self, key: str, request: Mapping[str, int]) -> None:
        if key not in self.pods:
            self.pods.add(key)
            _add(self.used, request)

    def remove_pod(self, key: str, request: Mapping[str, int]) -> None:
        if key in self.pods:
            self.pods.discard(key)
            _add(self.used, request, -1)

    def used_over_min_with(self, request: Mapping[str, int]) -> bool:
        return exceeds(request, self.used, self.min, 0)

    def used_over_max_with(self, request: Mapping[str, int]) -> bool:
        return exceeds(request, self.used, self.max, UNBOUNDED)

    def used_over_min(self) -> bool:
        return exceeds(self.used, {}, self.min, 0)


class QuotaInfos(dict[str, QuotaInfo]):
    """Quota infos by namespace; the copy a cycle works on lives in its CycleState."""

    def clone(self) -> QuotaInfos:
        return QuotaInfos({ns: info.clone() for ns, info in self.items()})

    def aggregated_used_over_min_with(self, request: Mapping[str, int]) -> bool:
        used: Resources = {}
        lo: Resources = {}
        for info in self.values():
            _add(used, info.used)
            _add(lo, info.min)
        _add(used, request)
        return exceeds(used, {}, lo, 0)


@dataclass(slots=True)
class PreFilterState:
    """The pod's request, plus the nominated pods that go before it in its own quota
    (``in_quota``) and across all quotas (``in_all``)."""

    pod_request: Resources
    in_quota: Resources = field(default_factory=dict)
    in_all: Resources = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return self


# ---- plugin ----------------------------------------------------------------------------------
class CapacityScheduling(PreFilterPlugin, UpdateWithPod, PostFilterPlugin, ReservePlugin,
                         EnqueueExtensions):
    """scheduler-plugins' CapacityScheduling plugin."""

    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.infos = QuotaInfos()
        for ns, eq in handle.snapshot.objects.elastic_quotas.items():
            self.infos[ns] = QuotaInfo.of(ns, eq.spec.min, eq.spec.max)
        self._requests: dict[str, Resources] = {}
        self._counted: dict[str, str] = {}  # pod key -> namespace, for pods in self.infos

    def _request(self, pi: PodInfo) -> Resources:
        req = self._requests.get(pi.key)
        if req is None:
            req = pod_request(pi.pod)
            self._requests[pi.key] = req
        return req

    def _sync(self, snap: ClusterState) -> None:
        """Bring ``used`` in step with the snapshot's assumed and bound pods (upstream updates
        it from the pod informer and in Reserve/Unreserve)."""
        pods = snap.pods
        counted = self._counted
        if counted.keys() == pods.keys():
            return
        for key in counted.keys() - pods.keys():
            ns = counted.pop(key)
            info = self.infos.get(ns)
            if info is not None:
                info.remove_pod(key, self._requests.pop(key, {}))
        for key in pods.keys() - counted.keys():
            pi = pods[key]
            counted[key] = pi.namespace
            info = self.infos.get(pi.namespace)
            if info is not None:
                info.add_pod(key, self._request(pi))

    # ---- PreFilter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        self._sync(snap)
        infos = self.infos.clone()
        state.write(SNAPSHOT_KEY, infos)
        request = self._request(pod)
        eq = infos.get(pod.namespace)
        if eq is None:
            state.write(PRE_FILTER_KEY, PreFilterState(request))
            return None, SUCCESS
        in_quota: Resources = {}
        in_all: Resources = {}
        nominator = self.handle.nominator
        for node in nominator.nodes():
            for p in nominator.pods_for(node):
                if p.key == pod.key:
                    continue
                info = self.infos.get(p.namespace)
                if info is None:
                    continue
                if p.namespace == pod.namespace and p.priority >= pod.priority:
                    _add(in_quota, self._request(p))
                    _add(in_all, self._request(p))
                elif p.namespace != pod.namespace and not info.used_over_min():
                    _add(in_all, self._request(p))
        _add(in_quota, request)
        _add(in_all, request)
        state.write(PRE_FILTER_KEY, PreFilterState(request, in_quota, in_all))
        if eq.used_over_max_with(in_quota):
            return None, Status(Code.UNSCHEDULABLE, (
                f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter because ElasticQuota "
                f"{eq.namespace} is more than Max",))
        if infos.aggregated_used_over_min_with(in_all):
            return None, Status(Code.UNSCHEDULABLE, (
                f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter because total "
                "ElasticQuota used is more than min",))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def update_with_pod(self, state: CycleState, other: PodInfo, node: int, snap: ClusterState,
                        delta: int) -> None:
        """The pod counted in or out of its namespace's quota in the snapshot."""
        info = state.read(SNAPSHOT_KEY, QuotaInfos).get(other.namespace)
        if info is None:
            return
        if delta > 0:
            info.add_pod(other.key, self._request(other))
        else:
            info.remove_pod(other.key, self._request(other))

    # ---- Reserve ---------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        self._sync(snap)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  node: int) -> None:
        self._sync(snap)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("ElasticQuota", "*")]

    # ---- PostFilter: preemption ------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        nodes = preemption_nodes(self.handle, pod, snap, diagnosis,
                                 self._eligible(state, pod, snap, diagnosis))
        if isinstance(nodes, Status):
            return None, nodes
        fw, all_nodes, potential = nodes
        candidates, statuses = dry_run_candidates(
            fw, state, pod, snap, potential, 0, len(potential), select=self._select_victims)
        if not candidates:
            errors = [st.message() for st in statuses.values() if st.code == Code.ERROR]
            if errors:
                return None, Status(Code.ERROR, (errors[0],))
            return (PostFilterResult(nominated_node=""),
                    Status(Code.UNSCHEDULABLE, (fit_error_message(int(all_nodes.size),
                                                                  statuses),)))
        return nominate(self.handle, pod, snap, candidates)

    def _eligible(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  diagnosis: Diagnosis) -> tuple[bool, str]:
        """Upstream's quota-aware ``PodEligibleToPreemptOthers``: no while a pod this one may
        preempt is still terminating on its nominated node."""
        if preemption_policy(pod.pod, snap) == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        name = pod.pod.status.nominated_node_name
        node = snap.node_index.get(name) if name else None
        if node is None or not snap.present[node]:
            return True, ""
        if node < len(diagnosis.codes) and \
                diagnosis.codes[node] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        infos = state.read(SNAPSHOT_KEY, QuotaInfos)
        pre = state.read(PRE_FILTER_KEY, PreFilterState)
        terminating = "not eligible due to a terminating pod on the nominated node."
        own = infos.get(pod.namespace)
        pods = snap.pods_on_node[node].values()
        if own is not None:
            over_min = own.used_over_min_with(pre.in_quota)
            for p in pods:
                if p.pod.metadata.deletion_timestamp is None:
                    continue
                info = infos.get(p.namespace)
                if info is None:
                    continue
                if p.namespace == pod.namespace and p.priority < pod.priority:
                    return False, terminating
                if p.namespace != pod.namespace and not over_min and info.used_over_min():
                    return False, terminating
        else:
            for p in pods:
                if p.namespace in infos:
                    continue
                if p.pod.metadata.deletion_timestamp is not None and p.priority < pod.priority:
                    return False, terminating
        return True, ""

    def _select_victims(self, fw: Framework, state: CycleState, pod: PodInfo,
                        snap: ClusterState, node: int, pdbs: Sequence[CompiledPDB]
                        ) -> tuple[list[PodInfo], int, Status]:
        """Upstream's quota-aware ``SelectVictimsOnNode`` on a clone of the cycle state; the
        snapshot is restored before returning."""
        infos = state.read(SNAPSHOT_KEY, QuotaInfos)
        pre = state.read(PRE_FILTER_KEY, PreFilterState)
        on_node = snap.pods_on_node[node]
        order = list(on_node)
        off_node: dict[str, PodInfo] = {}
        nominator = fw.handle.nominator

        def remove(pi: PodInfo) -> Status:
            if pi.key in off_node:
                return Status(Code.ERROR, (f"no corresponding pod {pi.name} in pods of node "
                                           f"{snap.node_names[node]}",))
            snap.remove_pod(pi)
            off_node[pi.key] = pi
            return fw.run_pre_filter_extension_remove_pod(state, pod, pi, node, snap)

        def add(pi: PodInfo) -> Status:
            snap.add_pod(pi, node)
            del off_node[pi.key]
            return fw.run_pre_filter_extension_add_pod(state, pod, pi, node, snap)

        try:
            own = infos.get(pod.namespace)
            # Least important first, as upstream sorts the node's pods before choosing.
            pods = sorted(on_node.values(), key=lambda p: (p.priority, -p.start_time))
            potential: list[PodInfo] = []
            if own is not None:
                over_min = own.used_over_min_with(pre.in_quota)
                for p in pods:
                    info = infos.get(p.namespace)
                    if info is None:
                        continue
                    if over_min:
                        chosen = p.namespace == pod.namespace and p.priority < pod.priority
                    else:
                        chosen = p.namespace != pod.namespace and info.used_over_min()
                    if chosen:
                        potential.append(p)
                        st = remove(p)
                        if not st.ok:
                            return [], 0, _as_error(st)
            else:
                for p in pods:
                    if p.namespace in infos or p.priority >= pod.priority:
                        continue
                    potential.append(p)
                    st = remove(p)
                    if not st.ok:
                        return [], 0, _as_error(st)
            if not potential:
                return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
                    f"No victims found on node {snap.node_names[node]} for preemptor pod "
                    f"{pod.name}",))
            st = filter_with_nominated(fw, state, pod, snap, node, nominator)
            if not st.ok:
                return [], 0, st
            if own is not None and (own.used_over_max_with(pre.pod_request)
                                    or infos.aggregated_used_over_min_with(pre.pod_request)):
                return [], 0, Status(Code.UNSCHEDULABLE, ("global quota max exceeded",))
            potential.sort(key=lambda p: (-p.priority, p.start_time))
            violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
            victims: list[PodInfo] = []
            num_violating = 0
            for counts, group in ((True, violating), (False, non_violating)):
                for pi in group:
                    st = add(pi)
                    if not st.ok:
                        return [], 0, _as_error(st)
                    fits = filter_with_nominated(fw, state, pod, snap, node, nominator).ok
                    if not fits:
                        st = remove(pi)
                        if not st.ok:
                            return [], 0, _as_error(st)
                        victims.append(pi)
                    if own is not None and (own.used_over_max_with(pre.in_quota)
                                            or infos.aggregated_used_over_min_with(pre.in_all)):
                        st = remove(pi)
                        if not st.ok:
                            return [], 0, _as_error(st)
                        victims.append(pi)
                    if not fits and counts:
                        num_violating += 1
            return victims, num_violating, SUCCESS
        finally:
            for pi in list(off_node.values()):
                snap.add_pod(pi, node)
            if list(on_node) != order:
                restored = [(key, on_node[key]) for key in order]
                on_node.clear()
                on_node.update(restored)


def _as_error(st: Status) -> Status:
    return Status(Code.ERROR, st.reasons, st.plugin)


def new(args: Mapping[str, Any] | None, handle: Handle) -> CapacityScheduling:
    reject_args(NAME, args)
    return CapacityScheduling(handle)
