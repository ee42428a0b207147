"""Predicates the descheduler plugins share, with upstream's exact rules.

These follow ``pkg/utils`` and ``pkg/descheduler/node`` upstream: what makes a pod a mirror,
static, DaemonSet or system-critical pod, whether a pod's node selector and required node
affinity match a node, whether its tolerations cover a node's taints, and ``NodeFit`` — the
subset of scheduler predicates the descheduler checks before it evicts a pod that must land
elsewhere (selector and affinity, NoSchedule/NoExecute taints, requests against what the node's
running pods leave free, cordon, and inter-pod anti-affinity). Label and taint matching reuse
:mod:`kubeberth.api.selectors`, the same code the scheduler's plugins use.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
)
from kubeberth.api.resources import CPU, MEMORY, PODS
from kubeberth.api.selectors import compile_label_selector, compile_node_selector_term, tolerated
from kubeberth.descheduling.args import PodScope
from kubeberth.descheduling.framework import (
    SYSTEM_CRITICAL_PRIORITY,
    DeschedulerHandle,
    PodView,
    Snapshot,
)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
TaintFilter = Callable[[Taint], bool]


# ---- kinds of pods ---------------------------------------------------------------------------
def is_mirror(pod: PodView) -> bool:
    return MIRROR_ANNOTATION in pod.pod.metadata.annotations


def is_static(pod: PodView) -> bool:
    """A pod whose config source annotation says it did not come from the API server."""
    source = pod.pod.metadata.annotations.get(SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_daemonset(pod: PodView) -> bool:
    return any(o.kind == "DaemonSet" for o in pod.owners)


def is_critical(pod: PodView) -> bool:
    return pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY


def has_local_storage(pod: PodView) -> bool:
    return any(v.host_path is not None or v.empty_dir is not None for v in pod.pod.spec.volumes)


def has_pvc(pod: PodView) -> bool:
    return any(v.persistent_volume_claim is not None for v in pod.pod.spec.volumes)


def has_resource_claims(pod: PodView) -> bool:
    return bool(pod.pod.spec.resource_claims)


def qos_rank(pod: PodView) -> int:
    return {"BestEffort": 0, "Burstable": 1}.get(pod.qos, 2)


def sort_by_priority_low_to_high(pods: Sequence[PodView]) -> list[PodView]:
    """Upstream ``SortPodsBasedOnPriorityLowToHigh``: pods without priority first, then by
    priority; equal priorities by QoS (BestEffort, Burstable, Guaranteed). Stable."""
    return sorted(pods, key=lambda p: (p.priority is not None, p.priority or 0, qos_rank(p)))


# ---- selectors, affinity and taints --------------------------------------------------------------
def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A node selector term against a node; an invalid term matches nothing (as upstream)."""
    try:
        matcher = compile_node_selector_term(term)
    except InputError:
        return False
    return matcher(node.metadata.labels, node.metadata.name)


def required_terms(pod: Pod) -> list[NodeSelectorTerm] | None:
    """The pod's required node selector terms, None when it has no required node affinity."""
    aff = pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return None
    req = aff.node_affinity.required_during_scheduling_ignored_during_execution
    return None if req is None else req.node_selector_terms


def matches_node_selector(pod: Pod, node: Node) -> bool:
    """``nodeSelector`` labels and the required node affinity (any term) both match."""
    labels = node.metadata.labels
    for k, v in pod.spec.node_selector.items():
        if labels.get(k) != v:
            return False
    terms = required_terms(pod)
    if terms is None:
        return True
    return any(term_matches(t, node) for t in terms)


def preferred_weight(pod: Pod, node: Node) -> int:
    """Sum of the weights of the pod's preferred node affinity terms that match ``node``."""
    aff = pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return 0
    terms = aff.node_affinity.preferred_during_scheduling_ignored_during_execution
    return sum(t.weight for t in terms if term_matches(t.preference, node))


def tolerates_taints(tolerations: list[Toleration], taints: Iterable[Taint],
                     accept: TaintFilter | None = None) -> bool:
    """Upstream ``TolerationsTolerateTaintsWithFilter``: every taint passing ``accept`` is
    tolerated."""
    return all(tolerated(tolerations, t) for t in taints if accept is None or accept(t))


def untolerated_taint(tolerations: list[Toleration], taints: Iterable[Taint],
                      accept: TaintFilter | None = None) -> Taint | None:
    for t in taints:
        if (accept is None or accept(t)) and not tolerated(tolerations, t):
            return t
    return None


def no_schedule_or_execute(taint: Taint) -> bool:
    return taint.effect in ("NoSchedule", "NoExecute")


def show_taint(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


# ---- NodeFit ------------------------------------------------------------------------------------
def node_fit(snapshot: Snapshot, pod: PodView, node: Node) -> str | None:
    """Upstream ``NodeFit``: None when the pod could be scheduled onto ``node``, else why not."""
    if not matches_node_selector(pod.pod, node):
        return "pod node selector does not match the node label"
    if not tolerates_taints(pod.pod.spec.tolerations, node.spec.taints, no_schedule_or_execute):
        return "pod does not tolerate taints on the node"
    if not pod.node or pod.node != node.metadata.name:
        why = _fits_request(snapshot, pod, node)
        if why is not None:
            return why
    if node.spec.unschedulable:
        return "node is not schedulable"
    if _matches_anti_affinity_on_node(snapshot, pod, node):
        return "pod matches inter-pod anti-affinity rule of other pod on node"
    return None


def _fits_request(snapshot: Snapshot, pod: PodView, node: Node) -> str | None:
    alloc = snapshot.allocatable(node)
    used = snapshot.used(node.metadata.name)
    for name, request in pod.requests.items():
        if name == PODS:
            continue
        if name in (CPU, MEMORY) or name in alloc:
            available = alloc.get(name, 0) - used.get(name, 0)
        else:
            available = 0
        if request > available:
            return f"insufficient {name}"
    if alloc.get(PODS, 0) - used[PODS] <= 0:
        return "insufficient pods"
    return None


def pod_fits_any_other_node(snapshot: Snapshot, pod: PodView, nodes: Iterable[Node]) -> bool:
    return any(node_fit(snapshot, pod, n) is None for n in nodes
               if n.metadata.name != pod.node)


def pod_fits_any_node(snapshot: Snapshot, pod: PodView, nodes: Iterable[Node]) -> bool:
    return any(node_fit(snapshot, pod, n) is None for n in nodes)


# ---- inter-pod anti-affinity --------------------------------------------------------------------
def anti_affinity_terms(pod: Pod) -> list[PodAffinityTerm]:
    aff = pod.spec.affinity
    if aff is None or aff.pod_anti_affinity is None:
        return []
    return aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution


def term_selector(selector: LabelSelector | None) -> Callable[[Mapping[str, str]], bool]:
    """``LabelSelectorAsSelector``: nil matches nothing; invalid selectors match nothing."""
    try:
        return compile_label_selector(selector, nil_matches=False)
    except InputError:
        return lambda _labels: False


def _same_topology(a: Node, b: Node, key: str) -> bool:
    if a.metadata.name == b.metadata.name:
        return True
    va = a.metadata.labels.get(key)
    vb = b.metadata.labels.get(key)
    return va is not None and vb is not None and va == vb


def anti_affinity_violated(pod: PodView, pods_by_namespace: Mapping[str, Sequence[PodView]],
                           nodes: Mapping[str, Node]) -> bool:
    """Upstream ``CheckPodsWithAntiAffinityExist``: another pod in the term's namespaces matches
    one of ``pod``'s required anti-affinity terms in the same topology domain."""
    node = nodes.get(pod.node)
    for term in anti_affinity_terms(pod.pod):
        namespaces = set(term.namespaces) if term.namespaces else {pod.namespace}
        matches = term_selector(term.label_selector)
        for ns in sorted(namespaces):
            for other in pods_by_namespace.get(ns, ()):
                if other.name == pod.name or other.namespace not in namespaces \
                        or not matches(other.labels):
                    continue
                other_node = nodes.get(other.node)
                if node is None or other_node is None:
                    continue
                if _same_topology(node, other_node, term.topology_key):
                    return True
    return False


def _matches_anti_affinity_on_node(snapshot: Snapshot, pod: PodView, node: Node) -> bool:
    """Upstream ``podMatchesInterPodAntiAffinity``, kept exact: it looks the pod's own node up in
    a map that holds only ``node``, so it can only be true for the node the pod runs on."""
    if not anti_affinity_terms(pod.pod):
        return False
    by_ns: dict[str, list[PodView]] = {}
    for p in snapshot.pods_on_node(node.metadata.name):
        by_ns.setdefault(p.namespace, []).append(p)
    return anti_affinity_violated(pod, by_ns, {node.metadata.name: node})


# ---- namespaces and label selectors in plugin args -----------------------------------------------
def namespace_filter(include: Sequence[str], exclude: Sequence[str]) -> Callable[[PodView], bool]:
    inc, exc = frozenset(include), frozenset(exclude)
    if inc:
        return lambda p: p.namespace in inc
    if exc:
        return lambda p: p.namespace not in exc
    return lambda _p: True


def label_filter(selector: LabelSelector | None) -> Callable[[PodView], bool]:
    """A plugin's ``labelSelector`` arg: nil or empty selects every pod."""
    if selector is None:
        return lambda _p: True
    matches = compile_label_selector(selector, nil_matches=True)
    return lambda p: matches(p.labels)


def pod_scope(scope: PodScope) -> Callable[[PodView], bool]:
    """A plugin's ``namespaces`` and ``labelSelector`` args together: the pods it considers."""
    in_ns = namespace_filter(scope.namespaces.include, scope.namespaces.exclude)
    in_labels = label_filter(scope.label_selector)
    return lambda p: in_ns(p) and in_labels(p)


class ScopedArgs(Protocol):
    @property
    def scope(self) -> PodScope: ...


ArgsT = TypeVar("ArgsT", bound=ScopedArgs)


class ScopedPlugin(Generic[ArgsT]):
    """A plugin built from its args and the pass's handle that judges only the pods its
    ``namespaces`` and ``labelSelector`` admit (``in_scope``)."""

    def __init__(self, args: ArgsT, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.in_scope = pod_scope(args.scope)


def in_states(pod: PodView, states: Collection[str], *, status_reason: bool,
              init_containers: bool) -> bool:
    """Upstream's ``states`` arg: the pod's phase (or its status reason, with
    ``status_reason``) or a container's waiting reason is one of ``states``; empty admits all."""
    if not states:
        return True
    status = pod.pod.status
    if status.phase in states or (status_reason and status.reason in states):
        return True
    statuses = list(status.container_statuses)
    if init_containers:
        statuses += status.init_container_statuses
    return any(s.state.waiting is not None and s.state.waiting.reason in states
               for s in statuses)
