"""NodeAffinity: the pod's nodeSelector and node affinity, plus the profile's added affinity.

PreFilter compiles the pod's required constraints (``spec.nodeSelector`` and the required node
selector terms) once per pod and, like upstream, narrows the cycle to the named nodes when every
term pins ``metadata.name`` with ``In``. Filter rejects (UnschedulableAndUnresolvable) nodes that
miss the scheduler-enforced ``addedAffinity`` first, then nodes that miss the pod's constraints.
Score sums the weights of matching preferred terms (pod's and added), normalised to 0..100.

Every label requirement is evaluated once per distinct value of its label
(:func:`~kubeberth.scheduling.plugins.helper.label_mask`), not once per node. Selectors are
matched against the node's labels as the cluster state keeps them, which include
``kubernetes.io/hostname`` even when a hand-written manifest omits it. Invalid selectors (unknown
operators, ``In`` without values, non-integer ``Gt``) are rejected as bad input with their field
path; upstream silently treats such a term as matching nothing, but the API server would never
admit the pod.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    NodeAffinity as NodeAffinitySpec,
)
from kubeberth.api.objects import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.helper import (
    args_mapping,
    default_normalize_score,
    label_mask,
    reject_unknown,
)
from kubeberth.state.cluster import BoolArray, ClusterState, IntArray, PodInfo

NAME = "NodeAffinity"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
NODE_NAME_FIELD = "metadata.name"

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_POD_AFFINITY_FIELD = "spec.affinity.nodeAffinity"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")

ValuePredicate = Callable[[str | None], bool]


# ---- compiled selectors ----------------------------------------------------------------------
def _value_predicate(req: NodeSelectorRequirement, field: str) -> ValuePredicate:
    """Upstream ``labels.Requirement.Matches`` on one label value (None when the label is
    absent), after ``NewRequirement``'s checks of the operator and its values."""
    op, values = req.operator, req.values
    if op not in _OPERATORS:
        raise InputError(f"Unsupported value: {op!r}", field=f"{field}.operator",
                         expected=" | ".join(_OPERATORS))
    if op in ("In", "NotIn"):
        if not values:
            raise InputError(f"operator {op} needs at least one value",
                             field=f"{field}.values", expected="a non-empty list of values")
        allowed = frozenset(values)
        if op == "In":
            return lambda v: v is not None and v in allowed
        return lambda v: v is None or v not in allowed
    if op in ("Exists", "DoesNotExist"):
        if values:
            raise InputError(f"operator {op} takes no values", field=f"{field}.values",
                             expected="no values")
        return (lambda v: v is not None) if op == "Exists" else (lambda v: v is None)
    if len(values) != 1 or not _INTEGER.match(values[0]):
        raise InputError(f"operator {op} needs exactly one integer value, got {values!r}",
                         field=f"{field}.values", expected="values: [<integer>]")
    bound = int(values[0])

    def compare(v: str | None) -> bool:
        if v is None or not _INTEGER.match(v):
            return False
        return int(v) > bound if op == "Gt" else int(v) < bound

    return compare


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    matches: ValuePredicate


@dataclass(frozen=True, slots=True)
class NameRequirement:
    """A ``metadata.name`` field requirement: In or NotIn one node name."""

    names: frozenset[str]
    negate: bool


def _labels_match(snap: ClusterState, nodes: IntArray,
                  reqs: tuple[LabelRequirement, ...]) -> BoolArray:
    out = np.ones(len(nodes), dtype=np.bool_)
    for r in reqs:
        out &= label_mask(snap, r.key, nodes, r.matches)
    return out


@dataclass(frozen=True, slots=True)
class CompiledTerm:
    """A non-empty NodeSelectorTerm: all label and field requirements must hold."""

    labels: tuple[LabelRequirement, ...]
    fields: tuple[NameRequirement, ...]

    def match(self, snap: ClusterState, nodes: IntArray) -> BoolArray:
        out = _labels_match(snap, nodes, self.labels)
        for f in self.fields:
            idx = [snap.node_index[n] for n in f.names if n in snap.node_index]
            named = np.isin(nodes, np.array(idx, dtype=np.int64))
            out &= ~named if f.negate else named
        return out


def compile_term(term: NodeSelectorTerm, field: str) -> CompiledTerm | None:
    """None for an empty term, which upstream skips (it matches no node)."""
    if not term.match_expressions and not term.match_fields:
        return None
    labels = tuple(LabelRequirement(r.key, _value_predicate(r, f"{field}.matchExpressions[{i}]"))
                   for i, r in enumerate(term.match_expressions))
    fields: list[NameRequirement] = []
    for i, r in enumerate(term.match_fields):
        at = f"{field}.matchFields[{i}]"
        if r.key != NODE_NAME_FIELD:
            raise InputError(f"Unsupported value: {r.key!r}", field=f"{at}.key",
                             expected=NODE_NAME_FIELD)
        if r.operator not in ("In", "NotIn") or len(r.values) != 1:
            raise InputError(f"node field selector {r.operator} {r.values!r} is not supported",
                             field=at, expected="operator In or NotIn with exactly one value")
        fields.append(NameRequirement(frozenset(r.values), r.operator == "NotIn"))
    return CompiledTerm(labels, tuple(fields))


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """A NodeSelector: the terms are ORed; no usable term matches no node."""

    terms: tuple[CompiledTerm, ...]

    def match(self, snap: ClusterState, nodes: IntArray) -> BoolArray:
        out = np.zeros(len(nodes), dtype=np.bool_)
        for term in self.terms:
            out |= term.match(snap, nodes)
        return out


def compile_selector(sel: NodeSelector, field: str) -> CompiledSelector:
    compiled = (compile_term(t, f"{field}.nodeSelectorTerms[{i}]")
                for i, t in enumerate(sel.node_selector_terms))
    return CompiledSelector(tuple(t for t in compiled if t is not None))


@dataclass(frozen=True, slots=True)
class CompiledPreferred:
    """Weighted preferred terms; terms with weight 0 or an empty preference are dropped."""

    terms: tuple[tuple[int, CompiledTerm], ...]

    def score(self, snap: ClusterState, nodes: IntArray) -> IntArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        for weight, term in self.terms:
            out += np.where(term.match(snap, nodes), weight, 0)
        return out


def compile_preferred(terms: list[PreferredSchedulingTerm], field: str) -> CompiledPreferred:
    out: list[tuple[int, CompiledTerm]] = []
    for i, t in enumerate(terms):
        term = compile_term(t.preference, f"{field}[{i}].preference")
        if t.weight != 0 and term is not None:
            out.append((t.weight, term))
    return CompiledPreferred(tuple(out))


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """Upstream ``GetRequiredNodeAffinity``: nodeSelector equalities and the required terms."""

    selector: tuple[LabelRequirement, ...]
    affinity: CompiledSelector | None

    def match(self, snap: ClusterState, nodes: IntArray) -> BoolArray:
        out = _labels_match(snap, nodes, self.selector)
        if self.affinity is not None:
            out &= self.affinity.match(snap, nodes)
        return out


def _equals(value: str) -> ValuePredicate:
    return lambda v: v == value


def _pod_required(pod: PodInfo) -> NodeSelector | None:
    aff = pod.pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return None
    return aff.node_affinity.required_during_scheduling_ignored_during_execution


def _pod_preferred(pod: PodInfo) -> list[PreferredSchedulingTerm]:
    aff = pod.pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return []
    return aff.node_affinity.preferred_during_scheduling_ignored_during_execution


def _for_pod(pod: PodInfo, err: InputError) -> InputError:
    return InputError(f"pod {pod.key}: {err.message}", field=err.field, expected=err.expected)


def required_node_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    try:
        required = _pod_required(pod)
        affinity = None if required is None else \
            compile_selector(required, f"{_POD_AFFINITY_FIELD}.{REQUIRED}")
    except InputError as err:
        raise _for_pod(pod, err) from None
    selector = tuple(LabelRequirement(k, _equals(v))
                     for k, v in pod.pod.spec.node_selector.items())
    return RequiredNodeAffinity(selector, affinity)


def pinned_node_names(required: NodeSelector) -> set[str] | None:
    """The nodes the required terms can only match by ``metadata.name In``, or None when some
    term does not pin names (upstream ORs terms and intersects a term's name lists)."""
    names: set[str] | None = None
    for term in required.node_selector_terms:
        term_names: set[str] | None = None
        for r in term.match_fields:
            if r.key == NODE_NAME_FIELD and r.operator == "In":
                term_names = set(r.values) if term_names is None else term_names & set(r.values)
        if term_names is None:
            return None
        names = term_names if names is None else names | term_names
    return names


# ---- args ------------------------------------------------------------------------------------
def _convert(raw: object, kind: type[Any], where: str) -> Any:
    """msgspec conversion with its error located under ``where``."""
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as err:
        text = str(err)
        message, _, path = text.partition(" - at `$")
        field = where + path.rstrip("`") if path else where
        raise InputError(message, field=field, expected="a Kubernetes NodeAffinity") from None


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_affinity: NodeAffinitySpec | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NodeAffinityArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, ("addedAffinity",), None)
        added = raw.get("addedAffinity")
        if added is None:
            return cls()
        reject_unknown(args_mapping(added, "addedAffinity"), (REQUIRED, PREFERRED),
                       "addedAffinity")
        args = cls(_convert(added, NodeAffinitySpec, "addedAffinity"))
        args.validate()
        return args

    def validate(self) -> None:
        """Upstream ``ValidateNodeAffinityArgs`` (the selectors must parse), plus the API's
        1..100 weight range so added scores stay within the normalisable range."""
        self.compiled()
        if self.added_affinity is None:
            return
        preferred = self.added_affinity.preferred_during_scheduling_ignored_during_execution
        for i, t in enumerate(preferred):
            if not 1 <= t.weight <= 100:
                raise InputError(f"Invalid value: {t.weight}: must be in the range 1-100",
                                 field=f"addedAffinity.{PREFERRED}[{i}].weight",
                                 expected="an integer from 1 to 100")

    def compiled(self) -> tuple[CompiledSelector | None, CompiledPreferred | None]:
        aff = self.added_affinity
        if aff is None:
            return None, None
        required = aff.required_during_scheduling_ignored_during_execution
        preferred = aff.preferred_during_scheduling_ignored_during_execution
        return (
            None if required is None else compile_selector(required, f"addedAffinity.{REQUIRED}"),
            compile_preferred(preferred, f"addedAffinity.{PREFERRED}") if preferred else None,
        )


# ---- plugin ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreScoreState:
    preferred: CompiledPreferred


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin,
                   EnqueueExtensions):
    name = NAME

    def __init__(self, args: NodeAffinityArgs) -> None:
        self.args = args
        self._added_required, self._added_preferred = args.compiled()

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        required = _pod_required(pod)
        if required is None and self._added_required is None and not pod.pod.spec.node_selector:
            return None, SKIP
        state.write(PRE_FILTER_KEY, required_node_affinity(pod))
        if required is None or not required.node_selector_terms:
            return None, SUCCESS
        names = pinned_node_names(required)
        if names is not None and not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
        return (PreFilterResult(names) if names else None), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        s = state.get(PRE_FILTER_KEY)
        required = s if isinstance(s, RequiredNodeAffinity) else required_node_affinity(pod)
        ids = np.where(required.match(snap, nodes), 0, 2).astype(np.int32)
        if self._added_required is not None:
            ids[~self._added_required.match(snap, nodes)] = 1
        codes = np.where(ids > 0, np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                         np.int8(0)).astype(np.int8)
        return FilterResult(codes, ids, [(), (ERR_REASON_ENFORCED,), (ERR_REASON_POD,)])

    def _pod_preferred(self, pod: PodInfo) -> CompiledPreferred | None:
        terms = _pod_preferred(pod)
        if not terms:
            return None
        try:
            return compile_preferred(terms, f"{_POD_AFFINITY_FIELD}.{PREFERRED}")
        except InputError as err:
            raise _for_pod(pod, err) from None

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        preferred = self._pod_preferred(pod)
        if preferred is None and self._added_preferred is None:
            return SKIP
        state.write(PRE_SCORE_KEY, PreScoreState(preferred or CompiledPreferred(())))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        preferred = s.preferred if isinstance(s, PreScoreState) else self._pod_preferred(pod)
        total = np.zeros(len(nodes), dtype=np.int64)
        if self._added_preferred is not None:
            total += self._added_preferred.score(snap, nodes)
        if preferred is not None:
            total += preferred.score(snap, nodes)
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        return default_normalize_score(scores, reverse=False)

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, or a node whose labels changed, may now match."""
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeLabel")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(NodeAffinityArgs.parse(args))
