"""InterPodAffinity: required and preferred pod (anti-)affinity, in both directions.

Affinity is a relation between pods, so PreFilter and PreScore must look at bound pods one by
one, as upstream does; they reduce what they find to counts per (topology key, value), after
which Filter and Score are array lookups over the candidate nodes grouped by topology value.
Pods carrying (anti-)affinity are indexed as they are bound and their terms compiled once, so a
cycle in which neither the incoming pod nor any bound pod has terms costs next to nothing.

Semantics follow upstream: namespaces default to the owning pod's, a ``namespaceSelector`` is
matched against namespace labels (``{}`` selects every namespace), and ``matchLabelKeys`` /
``mismatchLabelKeys`` are merged into the label selector as the API server does on pod creation
(kubeberth reads manifests directly, so it performs that mutation itself). Deliberately not
modelled: upstream lists Namespace objects to resolve the incoming pod's ``namespaceSelector``;
here a namespace that pods use but no manifest declares counts as existing, with only its
``kubernetes.io/metadata.name`` label. A bound pod whose terms do not parse contributes none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
)
from kubeberth.api.selectors import LabelPredicate, Labels, compile_label_selector
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import UpdateWithPod, pre_score_state
from kubeberth.scheduling.plugins.pod_topology_spread import DomainIndex
from kubeberth.state.cluster import BoolArray, ClusterState, IntArray, PodInfo

NAME = "InterPodAffinity"

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules")
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
_MIN_HARD_WEIGHT, _MAX_HARD_WEIGHT = 0, 100
_REASONS: list[tuple[str, ...]] = [
    (), (ERR_REASON_AFFINITY_RULES_NOT_MATCH,), (ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,),
    (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,),
]

NamespaceLabels = Callable[[str], Labels]
# topology key -> topology value -> count (or weight sum); zero entries are removed, as upstream.
Counts = dict[str, dict[str, int]]


# ---- args --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    """``InterPodAffinityArgs`` (kubescheduler.config.k8s.io/v1) after defaulting."""

    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> InterPodAffinityArgs:
        raw = raw or {}
        for key in raw:
            if key not in ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"):
                raise InputError(f"unknown field {key!r}", field=key,
                                 expected="hardPodAffinityWeight and/or "
                                 "ignorePreferredTermsOfExistingPods")
        weight = raw.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise InputError(f"hardPodAffinityWeight {weight!r} is not an integer",
                             field="hardPodAffinityWeight",
                             expected=f"an integer in [{_MIN_HARD_WEIGHT}, {_MAX_HARD_WEIGHT}]")
        ignore = raw.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ignore, bool):
            raise InputError(f"ignorePreferredTermsOfExistingPods {ignore!r} is not a boolean",
                             field="ignorePreferredTermsOfExistingPods",
                             expected="true or false")
        args = cls(weight, ignore)
        args.validate()
        return args

    def validate(self) -> None:
        w = self.hard_pod_affinity_weight
        if w < _MIN_HARD_WEIGHT or w > _MAX_HARD_WEIGHT:
            raise InputError(f"hardPodAffinityWeight {w} is not in valid range "
                             f"[{_MIN_HARD_WEIGHT}, {_MAX_HARD_WEIGHT}]",
                             field="hardPodAffinityWeight",
                             expected=f"an integer in [{_MIN_HARD_WEIGHT}, {_MAX_HARD_WEIGHT}]")


# ---- terms -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Term:
    """A parsed PodAffinityTerm (upstream ``framework.AffinityTerm``) with its weight."""

    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelPredicate | None  # None: nil selector, matches no namespace
    selector: LabelPredicate
    weight: int = 0

    def matches(self, namespace: str, labels: Labels, ns_labels: NamespaceLabels) -> bool:
        if namespace not in self.namespaces:
            sel = self.namespace_selector
            if sel is None or not sel(ns_labels(namespace)):
                return False
        return self.selector(labels)


@dataclass(frozen=True, slots=True)
class _PodTerms:
    required_affinity: tuple[_Term, ...] = ()
    required_anti_affinity: tuple[_Term, ...] = ()
    preferred_affinity: tuple[_Term, ...] = ()
    preferred_anti_affinity: tuple[_Term, ...] = ()


_NO_TERMS = _PodTerms()


def _merge_label_keys(term: PodAffinityTerm, labels: Labels) -> LabelSelector | None:
    """What the API server does with matchLabelKeys / mismatchLabelKeys on pod creation."""
    sel = term.label_selector
    if sel is None or not (term.match_label_keys or term.mismatch_label_keys):
        return sel
    extra = [LabelSelectorRequirement(key=k, operator="In", values=[labels[k]])
             for k in term.match_label_keys if k in labels]
    extra += [LabelSelectorRequirement(key=k, operator="NotIn", values=[labels[k]])
              for k in term.mismatch_label_keys if k in labels]
    if not extra:
        return sel
    return LabelSelector(match_labels=sel.match_labels,
                         match_expressions=[*sel.match_expressions, *extra])


def _compile_term(term: PodAffinityTerm, pod: Pod, weight: int, field: str) -> _Term:
    namespace = pod.metadata.namespace or "default"
    selector = compile_label_selector(_merge_label_keys(term, pod.metadata.labels),
                                      f"{field}.labelSelector")
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    ns_selector = (None if term.namespace_selector is None
                   else compile_label_selector(term.namespace_selector,
                                               f"{field}.namespaceSelector"))
    return _Term(term.topology_key, namespaces, ns_selector, selector, weight)


def compile_pod_terms(pod: Pod) -> _PodTerms:
    """All four term lists of a pod; raises InputError naming the bad field."""
    affinity = pod.spec.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return _NO_TERMS
    lists: list[tuple[_Term, ...]] = []
    for attr, name in (("pod_affinity", "podAffinity"), ("pod_anti_affinity", "podAntiAffinity")):
        spec = getattr(affinity, attr)
        base = f"spec.affinity.{name}"
        if spec is None:
            lists += [(), ()]
            continue
        lists.append(tuple(
            _compile_term(t, pod, 0, f"{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
            for i, t in enumerate(spec.required_during_scheduling_ignored_during_execution)))
        lists.append(tuple(
            _compile_term(w.pod_affinity_term, pod, w.weight,
                          f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
                          ".podAffinityTerm")
            for i, w in enumerate(spec.preferred_during_scheduling_ignored_during_execution)))
    return _PodTerms(required_affinity=lists[0], preferred_affinity=lists[1],
                     required_anti_affinity=lists[2], preferred_anti_affinity=lists[3])


def _namespace_labels(snap: ClusterState) -> NamespaceLabels:
    """Namespace -> labels, looked up once per namespace for the duration of one call."""
    cache: dict[str, Labels] = {}

    def get(namespace: str) -> Labels:
        labels = cache.get(namespace)
        if labels is None:
            labels = cache[namespace] = snap.namespace_labels(namespace)
        return labels

    return get


def _bump(counts: Counts, key: str, node_labels: Labels, delta: int) -> bool:
    """Add ``delta`` at the node's value for ``key``; False when the node lacks the key."""
    value = node_labels.get(key)
    if value is None:
        return False
    per_value = counts.setdefault(key, {})
    total = per_value.get(value, 0) + delta
    if total == 0:
        per_value.pop(value, None)
        if not per_value:
            del counts[key]
    else:
        per_value[value] = total
    return True


def _add_score(score: Counts, key: str, node_labels: Labels, weight: int) -> bool:
    """Like :func:`_bump` but keeps zero sums, as upstream's score map does."""
    value = node_labels.get(key)
    if value is None:
        return False
    per_value = score.setdefault(key, {})
    per_value[value] = per_value.get(value, 0) + weight
    return True


def _clone(counts: Counts) -> Counts:
    return {key: dict(values) for key, values in counts.items()}


class _AffinityIndex:
    """Bound pods that carry pod (anti-)affinity terms, with the terms compiled once.

    Scanning every bound pod each cycle would cost more than the rest of a cycle, so the index
    follows the snapshot's pod map incrementally. Every pod add, pod removal and node change
    bumps ``snap.generation`` once and a pod add appends to ``snap.pods``; so when the entries
    after the last pod seen before are exactly as many as the additions the counters imply
    (``2 * added == generations + growth``), they are all the pods added since, and removals
    can only have taken pods out, which a check of the indexed pods finds. Anything else (a
    node change, a pod removed and re-added behind the last one, an order restored by
    preemption's dry run) fails that test and the index is rebuilt by a full scan."""

    __slots__ = ("_anti", "_by_key", "_count", "_dirty", "_entries", "_generation", "_snap",
                 "_tail")

    def __init__(self) -> None:
        self._snap: ClusterState | None = None
        self._generation = -1
        self._count = 0
        self._tail: PodInfo | None = None
        # pod key -> (bound pod, the Pod its terms were compiled from, terms)
        self._by_key: dict[str, tuple[PodInfo, Pod, _PodTerms]] = {}
        self._entries: list[tuple[PodInfo, _PodTerms]] = []
        self._anti: list[tuple[PodInfo, _PodTerms]] = []
        self._dirty = False  # _by_key changed since the lists were built

    def entries(self, snap: ClusterState) -> list[tuple[PodInfo, _PodTerms]]:
        """Every indexed pod with its terms."""
        self._sync(snap)
        return self._entries

    def with_required_anti_affinity(self, snap: ClusterState
                                    ) -> list[tuple[PodInfo, _PodTerms]]:
        """The indexed pods that have required anti-affinity terms (upstream's
        ``HavePodsWithRequiredAntiAffinityList``)."""
        self._sync(snap)
        return self._anti

    def terms_of(self, pi: PodInfo) -> _PodTerms:
        hit = self._by_key.get(pi.key)
        return hit[2] if hit is not None and hit[1] is pi.pod else _terms_or_none(pi.pod)

    def _sync(self, snap: ClusterState) -> None:
        if self._snap is snap and self._generation == snap.generation:
            return
        if self._snap is not snap or not self._catch_up(snap):
            self._rebuild(snap)
        self._snap, self._generation, self._count = snap, snap.generation, len(snap.pods)
        self._tail = next(reversed(snap.pods.values()), None)
        if self._dirty:
            self._entries = [(pi, terms) for pi, _pod, terms in self._by_key.values()]
            self._anti = [(pi, terms) for pi, terms in self._entries
                          if terms.required_anti_affinity]
            self._dirty = False

    def _catch_up(self, snap: ClusterState) -> bool:
        """Apply the changes since the last sync; False when they cannot be told apart."""
        changes = snap.generation - self._generation
        growth = len(snap.pods) - self._count
        added: list[PodInfo] = []
        for pi in reversed(snap.pods.values()):
            if pi is self._tail:
                break
            if len(added) == changes:
                return False
            added.append(pi)
        else:
            if self._tail is not None:
                return False
        if 2 * len(added) != changes + growth:
            return False
        by_key = self._by_key
        if len(added) > growth:  # some pods were removed
            pods = snap.pods
            for key in [k for k, (pi, _p, _t) in by_key.items() if pods.get(k) is not pi]:
                del by_key[key]
                self._dirty = True
        for pi in reversed(added):
            self._classify(pi)
        return True

    def _rebuild(self, snap: ClusterState) -> None:
        old, self._by_key = self._by_key, {}
        self._dirty = True
        for pi in snap.pods.values():
            hit = old.get(pi.key)
            if hit is not None and hit[0] is pi and hit[1] is pi.pod:
                if pi.node >= 0:
                    self._by_key[pi.key] = hit
            else:
                self._classify(pi)

    def _classify(self, pi: PodInfo) -> None:
        """Index ``pi`` if it is bound and has terms; forget an older entry under its key."""
        if self._by_key.pop(pi.key, None) is not None:
            self._dirty = True
        affinity = pi.pod.spec.affinity
        if affinity is None or pi.node < 0 or (affinity.pod_affinity is None
                                               and affinity.pod_anti_affinity is None):
            return
        terms = _terms_or_none(pi.pod)
        if terms is not _NO_TERMS:
            self._by_key[pi.key] = (pi, pi.pod, terms)
            self._dirty = True


def _terms_or_none(pod: Pod) -> _PodTerms:
    """A bound pod's terms; one whose terms do not parse constrains nobody."""
    try:
        return compile_pod_terms(pod)
    except InputError:
        return _NO_TERMS


# ---- cycle state -------------------------------------------------------------------------------
@dataclass(slots=True)
class _PreFilterState:
    terms: _PodTerms  # the incoming pod's
    namespace: str
    labels: Labels
    self_match: bool  # the incoming pod matches all its own required affinity terms
    existing_anti_affinity: Counts  # bound pods whose required anti-affinity matches the pod
    affinity: Counts  # bound pods matching all the pod's required affinity terms
    anti_affinity: Counts  # bound pods matching one of the pod's required anti-affinity terms

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.terms, self.namespace, self.labels, self.self_match,
                               _clone(self.existing_anti_affinity), _clone(self.affinity),
                               _clone(self.anti_affinity))


@dataclass(slots=True)
class _PreScoreState:
    topology_score: Counts

    def clone(self) -> _PreScoreState:
        return self


# ---- the plugin --------------------------------------------------------------------------------
class InterPodAffinity(PreFilterPlugin, UpdateWithPod, FilterPlugin, PreScorePlugin, ScorePlugin,
                       EnqueueExtensions):
    name: ClassVar[str] = NAME

    def __init__(self, args: InterPodAffinityArgs) -> None:
        self.args = args
        self._domains = DomainIndex()
        self._index = _AffinityIndex()

    # ---- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        try:
            terms = compile_pod_terms(pod.pod)
        except InputError as err:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"parsing pod: {err}",))
        required, anti = terms.required_affinity, terms.required_anti_affinity
        if not required and not anti and not snap.pod_affinity_pods:
            return None, SKIP  # no bound pod has terms: the index would be empty
        with_anti = self._index.with_required_anti_affinity(snap)
        if not with_anti and not required and not anti:
            return None, SKIP
        namespace, labels = pod.namespace, pod.labels
        ns_labels = _namespace_labels(snap)
        node_labels = snap.labels
        existing: Counts = {}
        for pi, other in with_anti:
            for t in other.required_anti_affinity:
                if t.matches(namespace, labels, ns_labels):
                    _bump(existing, t.topology_key, node_labels[pi.node], 1)
        if not existing and not required and not anti:
            return None, SKIP
        affinity: Counts = {}
        anti_affinity: Counts = {}
        if required or anti:
            for pi in snap.pods.values():
                if pi.node < 0:
                    continue
                on_node = node_labels[pi.node]
                meta = pi.pod.metadata
                other_ns, other_labels = meta.namespace or "default", meta.labels
                if required and all(t.matches(other_ns, other_labels, ns_labels)
                                    for t in required):
                    for t in required:
                        _bump(affinity, t.topology_key, on_node, 1)
                for t in anti:
                    if t.matches(other_ns, other_labels, ns_labels):
                        _bump(anti_affinity, t.topology_key, on_node, 1)
        self_match = bool(required) and all(t.matches(namespace, labels, ns_labels)
                                            for t in required)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(
            terms, namespace, labels, self_match, existing, affinity, anti_affinity))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def update_with_pod(self, state: CycleState, other: PodInfo, node: int, snap: ClusterState,
                        delta: int) -> None:
        """Upstream ``preFilterState.updateWithPod``."""
        s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        ns_labels = _namespace_labels(snap)
        on_node = snap.labels[node]
        for t in self._index.terms_of(other).required_anti_affinity:
            if t.matches(s.namespace, s.labels, ns_labels):
                _bump(s.existing_anti_affinity, t.topology_key, on_node, delta)
        other_ns, other_labels = other.namespace, other.labels
        required = s.terms.required_affinity
        if required and all(t.matches(other_ns, other_labels, ns_labels) for t in required):
            for t in required:
                _bump(s.affinity, t.topology_key, on_node, delta)
        for t in s.terms.required_anti_affinity:
            if t.matches(other_ns, other_labels, ns_labels):
                _bump(s.anti_affinity, t.topology_key, on_node, delta)

    def _positive(self, snap: ClusterState, key: str, counts: Mapping[str, int],
                  nodes: IntArray) -> BoolArray:
        """Candidates whose value for ``key`` has a positive count."""
        dom = self._domains.get(snap, key)
        return dom.lookup(counts)[dom.codes[nodes]] > 0

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return FilterResult.error(len(nodes), f'error reading "{PRE_FILTER_STATE_KEY}" '
                                      "from cycleState: not found")
        n = len(nodes)
        reason = np.zeros(n, dtype=np.int32)
        required = s.terms.required_affinity
        if required:
            missing = np.zeros(n, dtype=np.bool_)
            empty_domain = np.zeros(n, dtype=np.bool_)
            for t in required:
                dom = self._domains.get(snap, t.topology_key)
                missing |= dom.codes[nodes] < 0
                empty_domain |= ~self._positive(snap, t.topology_key,
                                                s.affinity.get(t.topology_key, {}), nodes)
            # The first pod of a group with affinity to itself may go anywhere the topology
            # keys exist, provided no pod anywhere matches the terms yet.
            first_of_group = not s.affinity and s.self_match
            failed = missing | (empty_domain & (not first_of_group))
            reason[failed] = 1
        if s.anti_affinity:
            keys = dict.fromkeys(t.topology_key for t in s.terms.required_anti_affinity)
            for key in keys:
                hit = self._positive(snap, key, s.anti_affinity.get(key, {}), nodes)
                reason[hit & (reason == 0)] = 2
        for key, counts in s.existing_anti_affinity.items():
            hit = self._positive(snap, key, counts, nodes)
            reason[hit & (reason == 0)] = 3
        codes = np.where(reason == 1, np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                         np.where(reason > 1, np.int8(Code.UNSCHEDULABLE), np.int8(0)))
        return FilterResult(codes.astype(np.int8), reason, list(_REASONS))

    # ---- PreScore / Score ----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        try:
            terms = compile_pod_terms(pod.pod)
        except InputError as err:
            return Status(Code.ERROR, (f"failed to parse pod: {err}",))
        preferred, preferred_anti = terms.preferred_affinity, terms.preferred_anti_affinity
        has_constraints = bool(preferred or preferred_anti)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        if not has_constraints and not snap.pod_affinity_pods:
            return SKIP  # no bound pod has terms: the index would be empty
        entries = self._index.entries(snap)
        if not has_constraints and not entries:
            return SKIP  # nothing could add to the score map
        namespace, labels = pod.namespace, pod.labels
        ns_labels = _namespace_labels(snap)
        node_labels = snap.labels
        hard_weight = self.args.hard_pod_affinity_weight
        score: Counts = {}
        matched = False
        # The incoming pod's preferred terms against every bound pod (upstream visits all pods
        # only when the incoming pod has such terms)...
        if has_constraints:
            for pi in snap.pods.values():
                if pi.node < 0:
                    continue
                on_node = node_labels[pi.node]
                meta = pi.pod.metadata
                other_ns, other_labels = meta.namespace or "default", meta.labels
                for t in preferred:
                    if on_node and t.matches(other_ns, other_labels, ns_labels):
                        matched |= _add_score(score, t.topology_key, on_node, t.weight)
                for t in preferred_anti:
                    if on_node and t.matches(other_ns, other_labels, ns_labels):
                        matched |= _add_score(score, t.topology_key, on_node, -t.weight)
        # ...and the terms of bound pods that have any against the incoming pod.
        for pi, other in entries:
            on_node = node_labels[pi.node]
            if not on_node:
                continue
            if hard_weight > 0:
                for t in other.required_affinity:
                    if t.matches(namespace, labels, ns_labels):
                        matched |= _add_score(score, t.topology_key, on_node, hard_weight)
            for t in other.preferred_affinity:
                if t.matches(namespace, labels, ns_labels):
                    matched |= _add_score(score, t.topology_key, on_node, t.weight)
            for t in other.preferred_anti_affinity:
                if t.matches(namespace, labels, ns_labels):
                    matched |= _add_score(score, t.topology_key, on_node, -t.weight)
        if not matched:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(score))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = pre_score_state(state, PRE_SCORE_STATE_KEY, _PreScoreState, "failed to read")
        total = np.zeros(len(nodes), dtype=np.int64)
        for key, per_value in s.topology_score.items():
            dom = self._domains.get(snap, key)
            total += dom.lookup(per_value)[dom.codes[nodes]]
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        s = pre_score_state(state, PRE_SCORE_STATE_KEY, _PreScoreState, "failed to read")
        if not s.topology_score or len(scores) == 0:
            return None
        low, high = int(scores.min()), int(scores.max())
        if high - low <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        # float64(MaxNodeScore) * (float64(score-min) / float64(max-min)), truncated as Go does.
        ratio = (scores - low).astype(np.float64) / float(high - low)
        return (float(MAX_NODE_SCORE) * ratio).astype(np.int64)

    # ---- queueing ------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        """Bound pods appearing, leaving or relabelling change matches; nodes appearing or
        relabelling change topology (taint updates stand in for nodes turning ready)."""
        return [
            ClusterEvent("Pod", "Add"), ClusterEvent("Pod", "UpdatePodLabel"),
            ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("Node", "UpdateNodeTaint"),
        ]


def new(args: Mapping[str, Any] | None, handle: Handle) -> InterPodAffinity:
    """Registry factory: validate args (InputError names the field) and build the plugin."""
    return InterPodAffinity(InterPodAffinityArgs.from_mapping(args))
