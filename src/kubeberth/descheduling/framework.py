"""The descheduler's own small framework: snapshot, pod evictor, profiles and one pass.

The Descheduler is not the scheduler: its plugins look at whole nodes and pods that are already
running, so this framework is deliberately separate from
:mod:`kubeberth.scheduling.framework`. It mirrors
upstream's ``pkg/framework``: a profile runs its deschedule plugins, then its balance plugins;
every profile's deschedule plugins run before any profile's balance plugins; every plugin sees
the evictor (the profile's filter and preEvictionFilter plugins in front of one pod evictor that
counts the per-node, per-namespace and total limits for the whole pass and asks the pod's
PodDisruptionBudget, as the eviction API would).

Nothing is applied. :meth:`Descheduler.run_pass` takes a :class:`Snapshot` (nodes, pods with
their owners, PDBs, the clock ``now``) and returns a :class:`PassResult`: the evictions in the
order upstream would issue them, with the plugin and a reason, and the pods a plugin chose but
the evictor, a limit or a PDB refused. Like upstream's dry run, pods evicted earlier in a pass
still count as present for later plugins (their usage, their place in a topology domain); the
evictor only refuses to evict the same pod twice. The simulator calls ``run_pass`` every
``deschedulingInterval`` with its own clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    Namespace,
    Node,
    OwnerReference,
    Pod,
    PodDisruptionBudget,
    PodHolder,
    PriorityClass,
)
from kubeberth.api.quantity import to_milli
from kubeberth.api.resources import PODS, node_allocatable, pod_requests
from kubeberth.api.times import parse_time
from kubeberth.config.manifests import Manifests
from kubeberth.config.plugins import PluginRegistry
from kubeberth.descheduling.policy import (
    DeschedulerPolicy,
    DeschedulerProfile,
    match_label_requirements,
    parse_label_selector_string,
)
from kubeberth.state.cluster import ClusterState

# Upstream's SystemCriticalPriority: pods at or above it are system-critical.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
_OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController", "Job")


# ---- pods as the descheduler reads them ---------------------------------------------------------
@dataclass(slots=True, eq=False)
class PodView(PodHolder):
    """A pod with what the descheduler derives from it once (requests, priority, times, QoS)."""

    pod: Pod
    key: str
    node: str
    priority: int | None
    requests: dict[str, int]
    created: float  # metadata.creationTimestamp; "now" when the manifest has none
    started: float | None
    qos: str

    @property
    def owners(self) -> list[OwnerReference]:
        return self.pod.metadata.owner_references

    @property
    def phase(self) -> str:
        return self.pod.status.phase

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def terminating(self) -> bool:
        return self.pod.metadata.deletion_timestamp is not None


def pod_qos(pod: Pod) -> str:
    """``status.qosClass`` when set, else computed as upstream ``ComputePodQOS`` (cpu and memory
    only; zero quantities do not count)."""
    if pod.status.qos_class:
        return pod.status.qos_class
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in [*pod.spec.init_containers, *pod.spec.containers]:
        reqs = {k: v for k, v in _milli(c.resources.requests).items() if k in ("cpu", "memory")}
        lims = {k: v for k, v in _milli(c.resources.limits).items() if k in ("cpu", "memory")}
        for k, v in reqs.items():
            if v > 0:
                requests[k] = requests.get(k, 0) + v
        found = set()
        for k, v in lims.items():
            if v > 0:
                found.add(k)
                limits[k] = limits.get(k, 0) + v
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(k) == v for k, v in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _milli(values: Mapping[str, Any]) -> dict[str, int]:
    return {k: to_milli(k, v) for k, v in values.items()}


def _priority(pod: Pod, classes: Mapping[str, PriorityClass]) -> int | None:
    """The priority the Priority admission plugin would have set; None when the pod names no
    class and no class is the global default (upstream sorts such pods first)."""
    if pod.spec.priority is not None:
        return pod.spec.priority
    name = pod.spec.priority_class_name
    if name:
        pc = classes.get(name)
        if pc is not None:
            return pc.value
        if name == "system-cluster-critical":
            return SYSTEM_CRITICAL_PRIORITY
        if name == "system-node-critical":
            return SYSTEM_CRITICAL_PRIORITY + 1000
        raise InputError(f"pod {pod.key}: no PriorityClass with name {name} was found",
                         field="spec.priorityClassName",
                         expected="the name of a PriorityClass in the manifests")
    for pc in classes.values():
        if pc.global_default:
            return pc.value
    return None


def make_pod_view(pod: Pod, now: float,
                  classes: Mapping[str, PriorityClass]) -> PodView:
    meta = pod.metadata
    created = parse_time(meta.creation_timestamp, "metadata.creationTimestamp") \
        if meta.creation_timestamp else now
    started = parse_time(pod.status.start_time, "status.startTime") \
        if pod.status.start_time else None
    return PodView(pod=pod, key=pod.key, node=pod.spec.node_name,
                   priority=_priority(pod, classes), requests=pod_requests(pod),
                   created=created, started=started, qos=pod_qos(pod))


# ---- the snapshot -------------------------------------------------------------------------------
class Snapshot:
    """What one descheduling pass reads: nodes, pods (running, pending and finished), PDBs,
    owner replica counts, priority classes and namespaces, at time ``now`` (seconds)."""

    def __init__(self, nodes: Iterable[Node], pods: Iterable[Pod], *, now: float,
                 pdbs: Iterable[PodDisruptionBudget] = (),
                 priority_classes: Iterable[PriorityClass] = (),
                 namespaces: Iterable[Namespace] = (),
                 owner_replicas: Mapping[tuple[str, str, str], int] | None = None,
                 locate: Callable[[Pod, InputError], InputError] | None = None,
                 times: Mapping[str, tuple[float, float | None]] | None = None) -> None:
        self.now = now
        self.nodes: list[Node] = list(nodes)
        self.priority_classes = {pc.metadata.name: pc for pc in priority_classes}
        self.namespaces = {ns.metadata.name: ns for ns in namespaces}
        self.pdbs: list[PodDisruptionBudget] = list(pdbs)
        # (kind, namespace, name) -> spec.replicas of the owning workload.
        self.owner_replicas: dict[tuple[str, str, str], int] = dict(owner_replicas or {})
        self.pods: list[PodView] = []
        self._by_node: dict[str, list[PodView]] = {}
        for pod in pods:
            try:
                pv = make_pod_view(pod, now, self.priority_classes)
            except InputError as err:
                raise (locate(pod, err) if locate else err) from None
            if times is not None and pv.key in times:
                pv.created, pv.started = times[pv.key]
            self.pods.append(pv)
            if pv.node:
                self._by_node.setdefault(pv.node, []).append(pv)
        for listed in self._by_node.values():
            listed.sort(key=lambda p: (p.namespace, p.name))
        self._used: dict[str, dict[str, int]] = {}
        self._alloc: dict[str, dict[str, int]] = {}

    @classmethod
    def from_manifests(cls, m: Manifests, now: float) -> Snapshot:
        def locate(pod: Pod, err: InputError) -> InputError:
            doc = m.origin("Pod", pod.metadata.name, pod.metadata.namespace)
            return doc.locate(err) if doc is not None else err

        return cls(m.nodes, m.pods, now=now, pdbs=m.pdbs, priority_classes=m.priority_classes,
                   namespaces=m.namespaces, owner_replicas=owner_replicas(m), locate=locate)

    @classmethod
    def from_cluster(cls, state: ClusterState, now: float,
                     owner_replicas: Mapping[tuple[str, str, str], int] | None = None
                     ) -> Snapshot:
        """The simulator's view: present nodes, the pods bound or assumed on them (with the
        node the state holds them on), pods' arrival as creation and binding as start time, on
        the simulator's clock."""
        nodes = [state.nodes[i] for i in range(state.num_nodes) if state.present[i]]
        pods: list[Pod] = []
        times: dict[str, tuple[float, float | None]] = {}
        for pi in state.iter_pods():
            pod = pi.pod
            if pi.node >= 0 and pod.spec.node_name != state.node_names[pi.node]:
                spec = msgspec.structs.replace(pod.spec, node_name=state.node_names[pi.node])
                pod = msgspec.structs.replace(pod, spec=spec)
            pods.append(pod)
            times[pi.key] = (pi.arrival, pi.start_time if pi.node >= 0 else None)
        return cls(nodes, pods, now=now, pdbs=state.pdbs,
                   priority_classes=state.priority_classes.values(),
                   namespaces=state.namespaces.values(), owner_replicas=owner_replicas,
                   times=times)

    def all_pods_on_node(self, node: str) -> list[PodView]:
        """Every pod bound to ``node`` (upstream ``ListAllPodsOnANode``), by namespace and name
        (the order upstream's test client lists them in; the informer's order is arbitrary)."""
        return self._by_node.get(node, [])

    def pods_on_node(self, node: str) -> list[PodView]:
        """Pods bound to ``node`` that are not Succeeded or Failed (``ListPodsOnANode``)."""
        return [p for p in self._by_node.get(node, []) if not p.terminal]

    def allocatable(self, node: Node) -> dict[str, int]:
        name = node.metadata.name
        alloc = self._alloc.get(name)
        if alloc is None:
            alloc = node_allocatable(node)
            self._alloc[name] = alloc
        return alloc

    def used(self, node: str) -> dict[str, int]:
        """Summed requests of the node's non-terminal pods, plus ``pods`` as their count × 1000."""
        used = self._used.get(node)
        if used is None:
            used = {}
            pods = self.pods_on_node(node)
            for p in pods:
                for k, v in p.requests.items():
                    used[k] = used.get(k, 0) + v
            used[PODS] = 1000 * len(pods)
            self._used[node] = used
        return used


def owner_replicas(m: Manifests) -> dict[tuple[str, str, str], int]:
    """``spec.replicas`` (default 1; a Job's ``parallelism``) of the workloads in the manifests.
    A ReplicaSet controlled by a Deployment in the manifests takes the Deployment's replicas, as
    the disruption controller scales by the Deployment."""
    out: dict[tuple[str, str, str], int] = {}
    controlled_by: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    for doc in m.of_kind(*_OWNER_KINDS):
        meta = doc.data.get("metadata") or {}
        spec = doc.data.get("spec") or {}
        if not isinstance(meta, dict) or not isinstance(spec, dict):
            continue
        ns = str(meta.get("namespace") or "default")
        key = (doc.kind, ns, str(meta.get("name")))
        replicas = spec.get("parallelism" if doc.kind == "Job" else "replicas", 1)
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            out[key] = replicas
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "Deployment":
                controlled_by[key] = ("Deployment", ns, str(ref.get("name")))
    for rs, deployment in controlled_by.items():
        if deployment in out:
            out[rs] = out[deployment]
    return out


def default_now(m: Manifests) -> float:
    """The latest timestamp in the manifests (pods' creation, start and deletion times, nodes'
    creation times), so that the same files always give the same pass; the epoch if none."""
    latest = 0.0
    for pod in m.pods:
        for raw, where in ((pod.metadata.creation_timestamp, "metadata.creationTimestamp"),
                           (pod.status.start_time, "status.startTime"),
                           (pod.metadata.deletion_timestamp, "metadata.deletionTimestamp")):
            if raw:
                latest = max(latest, _located_time(m, "Pod", pod, raw, where))
    for node in m.nodes:
        raw = node.metadata.creation_timestamp
        if raw:
            latest = max(latest, _located_time(m, "Node", node, raw, "metadata.creationTimestamp"))
    return latest


def _located_time(m: Manifests, kind: str, obj: Pod | Node, raw: str, where: str) -> float:
    try:
        return parse_time(raw, where)
    except InputError as err:
        doc = m.origin(kind, obj.metadata.name,
                       obj.metadata.namespace if kind == "Pod" else "")
        raise (doc.locate(err) if doc is not None else err) from None


# ---- evictions ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Eviction:
    """One eviction a plugin asked for (accepted, or refused and listed as skipped): the pod, its
    node, the plugin and why."""

    pod: str
    node: str
    plugin: str
    reason: str
    profile: str = ""

    def to_json(self) -> dict[str, str]:
        return {"pod": self.pod, "node": self.node, "plugin": self.plugin, "reason": self.reason}


class EvictError(StrEnum):
    """Why the pod evictor refused; plugins react to the limits as upstream's do."""

    NODE_LIMIT = "node limit"
    NAMESPACE_LIMIT = "namespace limit"
    TOTAL_LIMIT = "total limit"
    REFUSED = "refused"


@dataclass(slots=True)
class EvictionLimits:
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


class PodEvictor:
    """Counts evictions against the pass's limits and the pods' disruption budgets; records
    every eviction and every refusal. One per pass, shared by all profiles."""

    def __init__(self, limits: EvictionLimits, budgets: DisruptionChecker) -> None:
        self.limits = limits
        self.budgets = budgets
        self.node_count: dict[str, int] = {}
        self.namespace_count: dict[str, int] = {}
        self.total = 0
        self.evictions: list[Eviction] = []
        self.skipped: list[Eviction] = []
        self.evicted: set[str] = set()

    def evict(self, pod: PodView, plugin: str, reason: str, profile: str) -> EvictError | None:
        """Upstream ``PodEvictor.EvictPod``: total limit, node limit, namespace limit, then the
        eviction API (here: the PodDisruptionBudget check)."""
        if pod.key in self.evicted:
            return EvictError.REFUSED
        lim = self.limits
        refusal: tuple[EvictError, str] | None = None
        if lim.total is not None and self.total + 1 > lim.total:
            refusal = (EvictError.TOTAL_LIMIT,
                       f"maxNoOfPodsToEvictTotal ({lim.total}) reached")
        elif pod.node and lim.per_node is not None \
                and self.node_count.get(pod.node, 0) + 1 > lim.per_node:
            refusal = (EvictError.NODE_LIMIT,
                       f"maxNoOfPodsToEvictPerNode ({lim.per_node}) reached on node {pod.node}")
        elif lim.per_namespace is not None \
                and self.namespace_count.get(pod.namespace, 0) + 1 > lim.per_namespace:
            refusal = (EvictError.NAMESPACE_LIMIT,
                       f"maxNoOfPodsToEvictPerNamespace ({lim.per_namespace}) reached in "
                       f"namespace {pod.namespace}")
        else:
            blocked = self.budgets.try_evict(pod)
            if blocked is not None:
                refusal = (EvictError.REFUSED, blocked)
        if refusal is not None:
            self.skipped.append(Eviction(pod.key, pod.node, plugin,
                                         f"{reason}; not evicted: {refusal[1]}", profile))
            return refusal[0]
        if pod.node:
            self.node_count[pod.node] = self.node_count.get(pod.node, 0) + 1
        self.namespace_count[pod.namespace] = self.namespace_count.get(pod.namespace, 0) + 1
        self.total += 1
        self.evicted.add(pod.key)
        self.evictions.append(Eviction(pod.key, pod.node, plugin, reason, profile))
        return None

    def refuse(self, pod: PodView, plugin: str, reason: str, why: str, profile: str) -> None:
        """Record a pod a plugin chose that the evictor's filters refused."""
        if pod.key not in self.evicted:
            self.skipped.append(Eviction(pod.key, pod.node, plugin,
                                         f"{reason}; not evicted: {why}", profile))


class DisruptionChecker(Protocol):
    def try_evict(self, pod: PodView) -> str | None:
        """None when the eviction API would accept the eviction (and count it), else why not."""


# ---- plugins, the handle and profiles -----------------------------------------------------------
FilterFunc = Callable[[PodView], str | None]


class DeschedulePlugin(Protocol):
    def deschedule(self, nodes: list[Node]) -> None: ...


class BalancePlugin(Protocol):
    def balance(self, nodes: list[Node]) -> None: ...


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A registered plugin: its name, extension points, args parser and factory."""

    name: str
    points: tuple[str, ...]
    parse_args: Callable[[Mapping[str, Any]], Any]
    new: Callable[[Any, DeschedulerHandle], Any]


class Evictor:
    """What plugins see of the evictor: the profile's filters and the shared pod evictor."""

    def __init__(self, profile: str, pod_evictor: PodEvictor) -> None:
        self.profile = profile
        self.pod_evictor = pod_evictor
        self.filters: list[FilterFunc] = []
        self.pre_eviction_filters: list[FilterFunc] = []

    def filter(self, pod: PodView) -> str | None:
        return _first_refusal(self.filters, pod)

    def pre_eviction_filter(self, pod: PodView) -> str | None:
        return _first_refusal(self.pre_eviction_filters, pod)

    def filter_both(self, pod: PodView) -> str | None:
        """Filter, then PreEvictionFilter (upstream wraps both into one filter)."""
        return self.filter(pod) or self.pre_eviction_filter(pod)

    def evict(self, pod: PodView, plugin: str, reason: str) -> EvictError | None:
        """Evict without pre-checks (upstream ``Evictor().Evict``)."""
        return self.pod_evictor.evict(pod, plugin, reason, self.profile)

    def evict_checked(self, pod: PodView, plugin: str, reason: str) -> EvictError | None:
        """Filter, PreEvictionFilter, then evict; a filter's refusal is recorded as skipped."""
        why = self.filter_both(pod)
        if why is not None:
            self.refuse(pod, plugin, reason, why)
            return EvictError.REFUSED
        return self.evict(pod, plugin, reason)

    def evict_on_node(self, chosen: Iterable[tuple[PodView, str]], plugin: str) -> bool:
        """Evict one node's chosen ``(pod, reason)`` pairs in order, as upstream's per-node
        loops do: the node limit ends the node; True when the total limit ends the pass."""
        for pod, reason in chosen:
            err = self.evict_checked(pod, plugin, reason)
            if err is EvictError.NODE_LIMIT:
                return False
            if err is EvictError.TOTAL_LIMIT:
                return True
        return False

    def evict_in_order(self, chosen: Iterable[tuple[PodView, str]], plugin: str) -> bool:
        """Evict ``(pod, reason)`` pairs chosen across nodes in order (oldest first, say): a
        node's limit only skips its pod; True when the total limit ends the plugin."""
        for pod, reason in chosen:
            if self.evict_checked(pod, plugin, reason) is EvictError.TOTAL_LIMIT:
                return True
        return False

    def refuse(self, pod: PodView, plugin: str, reason: str, why: str) -> None:
        self.pod_evictor.refuse(pod, plugin, reason, why, self.profile)


def _first_refusal(filters: list[FilterFunc], pod: PodView) -> str | None:
    """Why the first refusing filter refuses ``pod``; None when all pass."""
    return next((why for f in filters if (why := f(pod)) is not None), None)


@dataclass(slots=True)
class DeschedulerHandle:
    """What the framework lends a plugin for one pass: the snapshot and the evictor."""

    snapshot: Snapshot
    evictor: Evictor


# ---- the descheduler ----------------------------------------------------------------------------
@dataclass(slots=True)
class PassResult:
    evictions: list[Eviction] = field(default_factory=list)
    skipped: list[Eviction] = field(default_factory=list)
    # Why the whole pass did nothing (fewer than two ready nodes), else None.
    cycle_skipped: str | None = None
    nodes: int = 0

    def to_json(self) -> dict[str, list[dict[str, str]]]:
        """The public contract: ``{"evictions": [...], "skipped": [...]}`` in eviction order."""
        return {"evictions": [d.to_json() for d in self.evictions],
                "skipped": [d.to_json() for d in self.skipped]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


@dataclass(slots=True)
class _ProfilePlan:
    name: str
    # (plugin spec, parsed args) in the order the plugins are enabled at each point.
    deschedule: list[tuple[PluginSpec, Any]]
    balance: list[tuple[PluginSpec, Any]]
    filter: list[tuple[PluginSpec, Any]]
    pre_eviction_filter: list[tuple[PluginSpec, Any]]


class Descheduler:
    """A validated DeschedulerPolicy, ready to run passes over snapshots."""

    def __init__(self, policy: DeschedulerPolicy, registry: PluginRegistry[PluginSpec]) -> None:
        self.policy = policy
        self.registry = registry
        self.node_requirements = parse_label_selector_string(policy.node_selector or "")
        self.limits = EvictionLimits(policy.max_pods_to_evict_per_node,
                                     policy.max_pods_to_evict_per_namespace,
                                     policy.max_pods_to_evict_total)
        try:
            self.profiles = [self._plan(p) for p in policy.profiles]
        except InputError as err:
            raise policy.locate(err) from None

    def _plan(self, profile: DeschedulerProfile) -> _ProfilePlan:
        path = f"profiles[{profile.index}]"
        args: dict[str, Any] = {}
        for name, raw in profile.plugin_config.items():
            where = profile.plugin_config_path.get(name, f"{path}.pluginConfig")
            spec = self.registry.get(name)
            if spec is None:
                raise InputError(f"unknown plugin {name!r}",
                                 field=where.removesuffix(".args") + ".name",
                                 expected="one of " + ", ".join(sorted(self.registry)))
            try:
                args[name] = spec.parse_args(raw)
            except InputError as err:
                raise err.at(field=where) from None
        points: dict[str, list[tuple[PluginSpec, Any]]] = {}
        for point in ("deschedule", "balance", "filter", "preEvictionFilter", "presort", "sort"):
            chosen: list[tuple[PluginSpec, Any]] = []
            for k, name in enumerate(profile.plugins.get(point, [])):
                where = f"{path}.plugins.{point}.enabled[{k}]"
                spec = self.registry.get(name)
                if spec is None or point not in spec.points:
                    implementing = sorted(n for n, s in self.registry.items() if point in s.points)
                    raise InputError(
                        f"profile {profile.name!r} configures the {point} extension point of "
                        f"non-existing plugin {name!r}", field=where,
                        expected=("one of " + ", ".join(implementing)) if implementing
                        else f"no plugins at {point} (no registered plugin implements it)")
                if name not in args:
                    raise InputError(f"unable to find {name!r} plugin config", field=where,
                                     expected=f"a pluginConfig entry named {name} in profile "
                                     f"{profile.name!r}")
                chosen.append((spec, args[name]))
            points[point] = chosen
        return _ProfilePlan(profile.name, points["deschedule"], points["balance"],
                            points["filter"], points["preEvictionFilter"])

    def ready_nodes(self, snapshot: Snapshot) -> list[Node]:
        """Upstream ``ReadyNodes``: nodes matching the policy's nodeSelector whose Ready
        condition is not False/Unknown (unschedulable nodes included)."""
        return [n for n in snapshot.nodes
                if n.ready and match_label_requirements(self.node_requirements, n.metadata.labels)]

    def run_pass(self, snapshot: Snapshot, *, min_ready_nodes: int = 2) -> PassResult:
        """One descheduling cycle over ``snapshot``. Upstream skips the cycle when fewer than two
        nodes are ready; ``min_ready_nodes=0`` disables that guard (as upstream's unit tests
        call a plugin directly)."""
        from kubeberth.descheduling.pdb import SnapshotBudgets

        nodes = self.ready_nodes(snapshot)
        if len(nodes) < min_ready_nodes:
            return PassResult(cycle_skipped=f"{len(nodes)} ready node(s) match the policy; the "
                              f"descheduler needs at least {min_ready_nodes}", nodes=len(nodes))
        pod_evictor = PodEvictor(self.limits, SnapshotBudgets(snapshot))
        runners = [self._instantiate(plan, snapshot, pod_evictor) for plan in self.profiles]
        for deschedulers, _ in runners:
            for d in deschedulers:
                d.deschedule(nodes)
        for _, balancers in runners:
            for b in balancers:
                b.balance(nodes)
        return PassResult(evictions=pod_evictor.evictions, skipped=pod_evictor.skipped,
                          nodes=len(nodes))

    def _instantiate(self, plan: _ProfilePlan, snapshot: Snapshot, pod_evictor: PodEvictor
                     ) -> tuple[list[DeschedulePlugin], list[BalancePlugin]]:
        evictor = Evictor(plan.name, pod_evictor)
        handle = DeschedulerHandle(snapshot, evictor)
        built: dict[str, Any] = {}

        def build(spec: PluginSpec, args: Any) -> Any:
            if spec.name not in built:
                built[spec.name] = spec.new(args, handle)
            return built[spec.name]

        evictor.filters = [build(s, a).filter for s, a in plan.filter]
        evictor.pre_eviction_filters = [build(s, a).pre_eviction_filter
                                        for s, a in plan.pre_eviction_filter]
        deschedulers: list[DeschedulePlugin] = [build(s, a) for s, a in plan.deschedule]
        balancers: list[BalancePlugin] = [build(s, a) for s, a in plan.balance]
        return deschedulers, balancers

