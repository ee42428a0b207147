"""PodTopologySpread: spread matching pods evenly over topology domains (zones, hosts, ...).

kube-scheduler's plugin walks every node and every pod for each incoming pod; here PreFilter and
PreScore still visit each bound pod once (a pod's labels must be matched against the selector),
but everything per node is an array over node slots grouped by topology value, so Filter and
Score are a few numpy operations over all candidate nodes. Counts, skew, the ``log(size + 2)``
topology weight, the hostname special case and both normalisations follow upstream exactly.

Deliberately not modelled: Services, ReplicaSets, StatefulSets and ReplicationControllers are not
objects kubeberth keeps, so the selector for the *default* constraints is derived from the pod's
controller owner reference (see :func:`default_selector`) instead of being read from those
objects, and a pod matched only by a Service gets no default constraints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    NodeSelectorRequirement,
    Pod,
    Toleration,
    TopologySpreadConstraint,
)
from kubeberth.api.selectors import LabelPredicate, Labels, compile_label_selector, tolerated
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
from kubeberth.state.cluster import BoolArray, ClusterState, IntArray, PodInfo

NAME = "PodTopologySpread"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

# Upstream ``systemDefaultConstraints``: hosts with maxSkew 3, zones with maxSkew 5, both soft.
SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME,
                             when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_TOPOLOGY_ZONE,
                             when_unsatisfiable=SCHEDULE_ANYWAY),
)

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

_MAX_INT32 = 2**31 - 1
_DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
# Controllers whose selector upstream's helper.DefaultSelector reads, as (apiVersion, kind).
_SELECTOR_OWNERS = frozenset({
    ("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"),
})
# Labels the StatefulSet controller stamps per pod or per revision; its selector never has them.
_STATEFULSET_POD_LABELS = (
    "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
    "controller-revision-hash",
)
_REASONS: list[tuple[str, ...]] = [
    (), (ERR_REASON_CONSTRAINTS_NOT_MATCH,), (ERR_REASON_NODE_LABEL_NOT_MATCH,),
]

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT64 = re.compile(r"^[+-]?[0-9]+$")


# ---- topology domains (shared with InterPodAffinity) -------------------------------------------
@dataclass(slots=True, frozen=True)
class Domains:
    """Node slots grouped by the value of one label key."""

    codes: IntArray  # per node slot: index into ``values``, -1 where the node lacks the label
    values: list[str]
    index: dict[str, int]

    def codes_of(self, values: Iterable[str]) -> IntArray:
        """Domain indices of the given label values (values no node carries are left out)."""
        found = [self.index[v] for v in values if v in self.index]
        return np.array(found, dtype=np.int64)

    def lookup(self, counts: Mapping[str, int]) -> IntArray:
        """A value -> count map as an array indexed by domain, with one trailing zero so that
        indexing with a code of -1 (label absent) reads 0."""
        out = np.zeros(len(self.values) + 1, dtype=np.int64)
        for value, count in counts.items():
            code = self.index.get(value)
            if code is not None:
                out[code] = count
        return out


class DomainIndex:
    """Factorises node label values once per node change: the snapshot caches its per-key value
    array until a node changes, so array identity tells whether the factorisation is stale."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache: dict[str, tuple[npt.NDArray[np.object_], Domains]] = {}

    def get(self, snap: ClusterState, key: str) -> Domains:
        raw = snap.label_values(key)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1]
        codes = np.full(len(raw), -1, dtype=np.int64)
        values: list[str] = []
        index: dict[str, int] = {}
        for slot, value in enumerate(raw.tolist()):
            if value is None:
                continue
            code = index.get(value)
            if code is None:
                code = len(values)
                index[value] = code
                values.append(value)
            codes[slot] = code
        domains = Domains(codes, values, index)
        self._cache[key] = (raw, domains)
        return domains


def _parse_int64(raw: str) -> int | None:
    if not _INT64.match(raw):
        return None
    value = int(raw)
    return value if -(2**63) <= value < 2**63 else None


def _requirement_mask(dom: Domains, req: NodeSelectorRequirement, field: str) -> BoolArray:
    op = req.operator
    if op == "In":
        return np.isin(dom.codes, dom.codes_of(req.values))
    if op == "NotIn":
        return ~np.isin(dom.codes, dom.codes_of(req.values))
    if op == "Exists":
        return dom.codes >= 0
    if op == "DoesNotExist":
        return dom.codes < 0
    if op in ("Gt", "Lt"):
        bound = _parse_int64(req.values[0]) if len(req.values) == 1 else None
        if bound is None:
            raise InputError(f"operator {op} needs exactly one integer value, got {req.values}",
                             field=f"{field}.values", expected="values: [<integer>]")
        per_value = []
        for value in dom.values:
            num = _parse_int64(value)
            per_value.append(num is not None and (num > bound if op == "Gt" else num < bound))
        per_value.append(False)
        return np.array(per_value, dtype=np.bool_)[dom.codes]
    raise InputError(f"unknown operator {op!r}", field=f"{field}.operator",
                     expected="In | NotIn | Exists | DoesNotExist | Gt | Lt")


def required_node_affinity_mask(snap: ClusterState, domains: DomainIndex, pod: Pod) -> BoolArray:
    """Per node slot, whether the node satisfies the pod's nodeSelector and required node
    affinity (upstream ``nodeaffinity.GetRequiredNodeAffinity(pod).Match``)."""
    n = snap.num_nodes
    mask = np.ones(n, dtype=np.bool_)
    for key, value in pod.spec.node_selector.items():
        dom = domains.get(snap, key)
        code = dom.index.get(value)
        if code is None:
            return np.zeros(n, dtype=np.bool_)
        mask &= dom.codes == code
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = (node_affinity.required_during_scheduling_ignored_during_execution
                if node_affinity is not None else None)
    if required is None:
        return mask
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    names = Domains(np.arange(n, dtype=np.int64), snap.node_names, snap.node_index)
    any_term = np.zeros(n, dtype=np.bool_)
    for i, term in enumerate(required.node_selector_terms):
        if not term.match_expressions and not term.match_fields:
            continue
        term_mask = np.ones(n, dtype=np.bool_)
        for j, req in enumerate(term.match_expressions):
            where = f"{base}.nodeSelectorTerms[{i}].matchExpressions[{j}]"
            term_mask &= _requirement_mask(domains.get(snap, req.key), req, where)
        for j, req in enumerate(term.match_fields):
            where = f"{base}.nodeSelectorTerms[{i}].matchFields[{j}]"
            if req.key != "metadata.name":
                raise InputError(f"unsupported field selector key {req.key!r}",
                                 field=f"{where}.key", expected="metadata.name")
            term_mask &= _requirement_mask(names, req, where)
        any_term |= term_mask
    return mask & any_term


def _tolerated_mask(snap: ClusterState, tolerations: list[Toleration]) -> BoolArray:
    """Per node slot, whether every NoSchedule/NoExecute taint is tolerated."""
    ids, groups = snap.taint_groups()
    ok = [not any(t.effect in _DO_NOT_SCHEDULE_EFFECTS and not tolerated(tolerations, t)
                  for t in taints) for taints in groups]
    return np.array(ok, dtype=np.bool_)[ids]


def _round_half_away(values: npt.NDArray[np.float64]) -> IntArray:
    """Go's math.Round for non-negative inputs (numpy rounds half to even)."""
    floor = np.floor(values)
    return (floor + (values - floor >= 0.5)).astype(np.int64)


# ---- args --------------------------------------------------------------------------------------
def _is_qualified_name(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def _validate_constraint(c: TopologySpreadConstraint, field: str) -> None:
    """The checks the API server applies to a constraint, which a plugin relies on."""
    if c.max_skew <= 0:
        raise InputError(f"maxSkew {c.max_skew} is not in valid range (0, inf)",
                         field=f"{field}.maxSkew", expected="an integer >= 1")
    if not c.topology_key:
        raise InputError("topologyKey can not be empty", field=f"{field}.topologyKey",
                         expected="a label key such as topology.kubernetes.io/zone")
    if not _is_qualified_name(c.topology_key):
        raise InputError(f"topologyKey {c.topology_key!r} is not a valid label key",
                         field=f"{field}.topologyKey",
                         expected="an optional DNS subdomain prefix and '/', then a name of at "
                         "most 63 alphanumerics, '-', '_' or '.'")
    if not c.when_unsatisfiable:
        raise InputError("whenUnsatisfiable can not be empty",
                         field=f"{field}.whenUnsatisfiable",
                         expected=f"{DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise InputError(f"unsupported whenUnsatisfiable {c.when_unsatisfiable!r}",
                         field=f"{field}.whenUnsatisfiable",
                         expected=f"{DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    if c.min_domains is not None and c.min_domains <= 0:
        raise InputError(f"minDomains {c.min_domains} is not in valid range (0, inf)",
                         field=f"{field}.minDomains", expected="an integer >= 1, or unset")
    for name, value in (("nodeAffinityPolicy", c.node_affinity_policy),
                        ("nodeTaintsPolicy", c.node_taints_policy)):
        if value is not None and value not in (HONOR, IGNORE):
            raise InputError(f"unsupported {name} {value!r}", field=f"{field}.{name}",
                             expected=f"{HONOR} or {IGNORE}")


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    """``PodTopologySpreadArgs`` (kubescheduler.config.k8s.io/v1) after defaulting."""

    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> PodTopologySpreadArgs:
        """Decode, default (``defaultingType`` defaults to System) and validate raw args."""
        raw = raw or {}
        for key in raw:
            if key not in ("defaultConstraints", "defaultingType"):
                raise InputError(f"unknown field {key!r}", field=key,
                                 expected="defaultConstraints and/or defaultingType")
        defaulting = raw.get("defaultingType") or SYSTEM_DEFAULTING
        if not isinstance(defaulting, str):
            raise InputError(f"defaultingType {defaulting!r} is not a string",
                             field="defaultingType", expected=f'"{SYSTEM_DEFAULTING}" or '
                             f'"{LIST_DEFAULTING}"')
        items = raw.get("defaultConstraints") or []
        if not isinstance(items, list):
            raise InputError("defaultConstraints is not a list", field="defaultConstraints",
                             expected="a list of topology spread constraints")
        constraints = []
        for i, item in enumerate(items):
            try:
                constraints.append(msgspec.convert(item, TopologySpreadConstraint))
            except msgspec.ValidationError as err:
                raise InputError(str(err), field=f"defaultConstraints[{i}]",
                                 expected="maxSkew, topologyKey and whenUnsatisfiable, as in a "
                                 "pod's topologySpreadConstraints") from None
        args = cls(tuple(constraints), defaulting)
        args.validate()
        return args

    def validate(self) -> None:
        """Upstream ``ValidatePodTopologySpreadArgs``, stopping at the first error."""
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            raise InputError(f"unsupported defaultingType {self.defaulting_type!r}",
                             field="defaultingType",
                             expected=f'"{SYSTEM_DEFAULTING}" or "{LIST_DEFAULTING}"')
        if self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            raise InputError("defaultingType System is invalid when defaultConstraints are not "
                             "empty", field="defaultingType",
                             expected=f'"{LIST_DEFAULTING}", or no defaultConstraints')
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            field = f"defaultConstraints[{i}]"
            _validate_constraint(c, field)
            if c.label_selector is not None:
                raise InputError("constraint must not define a selector, as it is deduced for "
                                 "each pod", field=f"{field}.labelSelector",
                                 expected="no labelSelector")
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise InputError(f"duplicate constraint {{{pair[0]}, {pair[1]}}}", field=field,
                                 expected="each (topologyKey, whenUnsatisfiable) at most once")
            seen.add(pair)


# ---- constraints -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Constraint:
    max_skew: int
    key: str
    selector: LabelPredicate
    # Upstream countPodsMatchSelector counts nothing for an empty selector ({}), although the
    # same selector matches the incoming pod itself.
    counts_pods: bool
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _with_labels(extra: dict[str, str], pred: LabelPredicate) -> LabelPredicate:
    items = tuple(extra.items())
    return lambda labels: all(labels.get(k) == v for k, v in items) and pred(labels)


def _compile_constraints(constraints: Sequence[TopologySpreadConstraint], pod_labels: Labels,
                         action: str, path: str) -> list[_Constraint]:
    """Upstream ``filterTopologySpreadConstraints``: keep one action, merge matchLabelKeys."""
    out = []
    for i, c in enumerate(constraints):
        field = f"{path}[{i}]"
        _validate_constraint(c, field)
        if c.when_unsatisfiable != action:
            continue
        sel = c.label_selector
        pred = compile_label_selector(sel, f"{field}.labelSelector")
        extra: dict[str, str] = {}
        if sel is not None:
            extra = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
            if extra:
                pred = _with_labels(extra, pred)
        counts = sel is not None and bool(sel.match_labels or sel.match_expressions or extra)
        out.append(_Constraint(
            max_skew=c.max_skew, key=c.topology_key, selector=pred, counts_pods=counts,
            min_domains=c.min_domains if c.min_domains is not None else 1,
            honor_affinity=(c.node_affinity_policy or HONOR) == HONOR,
            honor_taints=(c.node_taints_policy or IGNORE) == HONOR,
        ))
    return out


def default_selector(pod: Pod) -> dict[str, str]:
    """The labels a pod's controller would select it by, or {} when it has no supported one.

    Upstream merges the selectors of the Services, ReplicationController, ReplicaSet or
    StatefulSet that own or select the pod. Without those objects we take the pod's own labels
    when its controller reference names one of those three kinds: a ReplicaSet's (and a
    ReplicationController's) selector is, in practice, exactly its template's labels (including
    ``pod-template-hash`` for ReplicaSets a Deployment manages), and for a StatefulSet we drop
    the labels its controller adds per pod or per revision, which its selector cannot contain.
    """
    refs = pod.metadata.owner_references
    if not refs:
        return {}
    owner = next((ref for ref in refs if ref.controller), None)
    if owner is None or (owner.api_version, owner.kind) not in _SELECTOR_OWNERS:
        return {}
    labels = dict(pod.metadata.labels)
    if owner.kind == "StatefulSet":
        for key in _STATEFULSET_POD_LABELS:
            labels.pop(key, None)
    return labels


def _count_per_node(snap: ClusterState, namespace: str, constraints: Sequence[_Constraint],
                    visit: BoolArray) -> list[IntArray]:
    """Per constraint, matching pods per node slot (same namespace, not terminating), for the
    node slots in ``visit``; the others stay 0. This is the one loop over pods."""
    n = snap.num_nodes
    rows: list[list[int]] = [[0] * n for _ in constraints]
    active = [(rows[i], c.selector) for i, c in enumerate(constraints) if c.counts_pods]
    if not active:
        return [np.zeros(n, dtype=np.int64) for _ in constraints]
    wanted: list[bool] = visit.tolist()
    for pi in snap.pods.values():  # one flat dict walk beats walking per-node dicts
        node = pi.node
        if node < 0 or not wanted[node]:
            continue
        meta = pi.pod.metadata
        if meta.deletion_timestamp is not None or (meta.namespace or "default") != namespace:
            continue
        labels = meta.labels
        for row, match in active:
            if match(labels):
                row[node] += 1
    return [np.array(row, dtype=np.int64) for row in rows]


# ---- cycle state -------------------------------------------------------------------------------
@dataclass(slots=True)
class _PreFilterState:
    """Matching-pod counts per topology domain of each hard constraint."""

    constraints: list[_Constraint]
    codes: list[IntArray]  # per constraint: node slot -> domain (-1 without the key); shared
    eligible: list[BoolArray]  # per constraint: node slots whose pods count; shared
    self_match: list[bool]
    namespace: str
    counts: list[IntArray]  # per constraint: domain -> matching pods
    in_map: list[BoolArray]  # per constraint: domains with an eligible node

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.constraints, self.codes, self.eligible, self.self_match,
                               self.namespace, [c.copy() for c in self.counts],
                               [m.copy() for m in self.in_map])

    def min_match(self, i: int) -> int:
        """Global minimum over eligible domains; 0 while fewer than minDomains exist."""
        mask = self.in_map[i]
        domains = int(mask.sum())
        if domains < self.constraints[i].min_domains:
            return 0
        return int(self.counts[i][mask].min()) if domains else _MAX_INT32


@dataclass(slots=True)
class _PreScoreState:
    """What Score needs per node slot for each soft constraint."""

    constraints: list[_Constraint]
    weights: list[float]
    has_label: list[BoolArray]
    slot_counts: list[IntArray]  # hostname: the node's own count; else its domain's count
    ignored: BoolArray  # candidate slots missing a topology key (scored 0)
    scored_ignored: BoolArray  # ``ignored`` for the nodes of the last score() call

    def clone(self) -> _PreScoreState:
        return self


# ---- the plugin --------------------------------------------------------------------------------
class PodTopologySpread(PreFilterPlugin, UpdateWithPod, FilterPlugin, PreScorePlugin,
                        ScorePlugin, EnqueueExtensions):
    name: ClassVar[str] = NAME

    def __init__(self, args: PodTopologySpreadArgs) -> None:
        self.args = args
        self._system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self._defaults = (SYSTEM_DEFAULT_CONSTRAINTS if self._system_defaulted
                          else args.default_constraints)
        self._domains = DomainIndex()
        # Default constraints carry no selector, so compiling them does not depend on the pod:
        # done once per action instead of once per pod.
        self._compiled_defaults: dict[str, list[_Constraint]] = {}
        self._defaults_pod_independent = all(c.label_selector is None for c in self._defaults)

    def _default_constraints(self, labels: Labels, action: str) -> list[_Constraint]:
        if not self._defaults_pod_independent:
            return _compile_constraints(self._defaults, labels, action, "defaultConstraints")
        compiled = self._compiled_defaults.get(action)
        if compiled is None:
            compiled = _compile_constraints(self._defaults, labels, action, "defaultConstraints")
            self._compiled_defaults[action] = compiled
        return compiled

    def _constraints(self, pod: Pod, action: str) -> list[_Constraint]:
        labels = pod.metadata.labels
        if pod.spec.topology_spread_constraints:
            return _compile_constraints(pod.spec.topology_spread_constraints, labels, action,
                                        "spec.topologySpreadConstraints")
        if not self._defaults:
            return []
        constraints = self._default_constraints(labels, action)
        if not constraints:
            return []
        selector = default_selector(pod)
        if not selector:
            return []
        pred = compile_label_selector(LabelSelector(match_labels=selector))
        return [replace(c, selector=pred, counts_pods=True) for c in constraints]

    def _eligible(self, snap: ClusterState, pod: Pod, constraints: Sequence[_Constraint],
                  base: BoolArray) -> list[BoolArray]:
        """Per constraint, the node slots that pass its node inclusion policies."""
        affinity: BoolArray | None = None
        taints: BoolArray | None = None
        out = []
        for c in constraints:
            mask = base
            if c.honor_affinity:
                if affinity is None:
                    affinity = required_node_affinity_mask(snap, self._domains, pod)
                mask = mask & affinity
            if c.honor_taints:
                if taints is None:
                    taints = _tolerated_mask(snap, pod.spec.tolerations)
                mask = mask & taints
            out.append(mask)
        return out

    # ---- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self._constraints(pod.pod, DO_NOT_SCHEDULE)
            if not constraints:
                return None, SKIP
            n = snap.num_nodes
            doms = [self._domains.get(snap, c.key) for c in constraints]
            base = snap.present[:n].copy()
            for dom in doms:
                base &= dom.codes >= 0
            eligible = self._eligible(snap, pod.pod, constraints, base)
        except InputError as err:
            return None, Status(Code.ERROR, (f"obtaining pod's hard topology spread "
                                             f"constraints: {err}",))
        visit = np.logical_or.reduce(eligible)
        node_counts = _count_per_node(snap, pod.namespace, constraints, visit)
        counts, in_map = [], []
        for dom, elig, per_node in zip(doms, eligible, node_counts, strict=True):
            codes = dom.codes[elig]
            domain_counts = np.zeros(len(dom.values), dtype=np.int64)
            np.add.at(domain_counts, codes, per_node[elig])
            present = np.zeros(len(dom.values), dtype=np.bool_)
            present[codes] = True
            counts.append(domain_counts)
            in_map.append(present)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(
            constraints=constraints, codes=[d.codes for d in doms], eligible=eligible,
            self_match=[c.selector(pod.labels) for c in constraints], namespace=pod.namespace,
            counts=counts, in_map=in_map,
        ))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def update_with_pod(self, state: CycleState, other: PodInfo, node: int, snap: ClusterState,
                        delta: int) -> None:
        """Upstream ``updateWithPod`` (terminating pods are not skipped here, as upstream)."""
        s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        if other.namespace != s.namespace:
            return
        labels = other.labels
        for i, c in enumerate(s.constraints):
            if not s.eligible[i][node] or not c.selector(labels):
                continue
            code = int(s.codes[i][node])
            s.counts[i][code] += delta
            s.in_map[i][code] = True

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return FilterResult.error(len(nodes), f'reading "{PRE_FILTER_STATE_KEY}" from '
                                      "cycleState: not found")
        n = len(nodes)
        codes = np.zeros(n, dtype=np.int8)
        reason_ids = np.zeros(n, dtype=np.int32)
        decided = np.zeros(n, dtype=np.bool_)
        for i, c in enumerate(s.constraints):
            domain = s.codes[i][nodes]
            missing = (domain < 0) & ~decided
            codes[missing] = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            reason_ids[missing] = 2
            decided |= missing
            # A trailing 0 makes domain -1 (label absent) read as no matching pods.
            match_num = np.append(s.counts[i], 0)[domain]
            skew = match_num + int(s.self_match[i]) - s.min_match(i)
            failed = (skew > c.max_skew) & ~decided
            codes[failed] = Code.UNSCHEDULABLE
            reason_ids[failed] = 1
            decided |= failed
        return FilterResult(codes, reason_ids, list(_REASONS))

    # ---- PreScore / Score ----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        if len(snap.node_ids()) == 0:
            return SKIP
        try:
            constraints = self._constraints(pod.pod, SCHEDULE_ANYWAY)
            if not constraints:
                return SKIP
            n = snap.num_nodes
            present = snap.present[:n]
            doms = [self._domains.get(snap, c.key) for c in constraints]
            has_all = np.ones(n, dtype=np.bool_)
            for dom in doms:
                has_all &= dom.codes >= 0
            # System defaults spread over hosts even where nodes carry no zone label.
            require_all = bool(pod.pod.spec.topology_spread_constraints) \
                or not self._system_defaulted
            included = self._eligible(snap, pod.pod, constraints,
                                      present & has_all if require_all else present)
        except InputError as err:
            return Status(Code.ERROR, (f"calculating preScoreState: {err}",))
        ignored = np.zeros(n, dtype=np.bool_)
        if require_all:
            ignored[nodes[~has_all[nodes]]] = True
        kept = nodes[~ignored[nodes]]
        # Pods are counted where Score reads them: on the candidate nodes themselves for the
        # hostname key, else on every included node of a domain some candidate is in. A node
        # without the key belongs to the domain "", as upstream reads a missing label.
        weights: list[float] = []
        domain_codes: list[IntArray] = []
        counted: list[BoolArray] = []  # per constraint: node slots whose pods feed a domain
        visit = np.zeros(n, dtype=np.bool_)
        for c, dom, incl in zip(constraints, doms, included, strict=True):
            codes = np.where(dom.codes >= 0, dom.codes, dom.index.get("", len(dom.values)))
            if c.key == LABEL_HOSTNAME:
                weights.append(math.log(len(kept) + 2))
                visit[nodes] = True
                feeds = np.zeros(n, dtype=np.bool_)
            else:
                candidate_domain = np.zeros(len(dom.values) + 1, dtype=np.bool_)
                candidate_domain[codes[kept]] = True
                weights.append(math.log(int(candidate_domain.sum()) + 2))
                feeds = incl & candidate_domain[codes]
                visit |= feeds
            domain_codes.append(codes)
            counted.append(feeds)
        node_counts = _count_per_node(snap, pod.namespace, constraints, visit)
        has_label, slot_counts = [], []
        for c, dom, codes, feeds, per_node in zip(
                constraints, doms, domain_codes, counted, node_counts, strict=True):
            has_label.append(dom.codes >= 0)
            if c.key == LABEL_HOSTNAME:
                slot_counts.append(per_node)
                continue
            domain_counts = np.zeros(len(dom.values) + 1, dtype=np.int64)
            np.add.at(domain_counts, codes[feeds], per_node[feeds])
            slot_counts.append(domain_counts[codes])
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(
            constraints=constraints, weights=weights, has_label=has_label,
            slot_counts=slot_counts, ignored=ignored,
            scored_ignored=np.zeros(0, dtype=np.bool_),
        ))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        s = pre_score_state(state, PRE_SCORE_STATE_KEY, _PreScoreState, "error reading")
        total = np.zeros(len(nodes), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            per_node = s.slot_counts[i][nodes].astype(np.float64) * s.weights[i] \
                + float(c.max_skew - 1)
            total = total + np.where(s.has_label[i][nodes], per_node, 0.0)
        scores = _round_half_away(total)
        ignored = s.ignored[nodes]
        scores[ignored] = 0
        s.scored_ignored = ignored
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        s = pre_score_state(state, PRE_SCORE_STATE_KEY, _PreScoreState, "error reading")
        ignored = s.scored_ignored
        if ignored.shape != scores.shape:
            raise RuntimeError("PodTopologySpread.normalize_score got scores for other nodes "
                               "than its last score() call")
        out = np.zeros(len(scores), dtype=np.int64)
        valid = ~ignored
        if not valid.any():
            return out
        kept = scores[valid]
        min_score = int(kept.min())
        max_score = max(int(kept.max()), 0)
        if max_score == 0:
            out[valid] = MAX_NODE_SCORE
        else:
            out[valid] = MAX_NODE_SCORE * (max_score + min_score - kept) // max_score
        return out

    # ---- queueing ------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        """Pods appearing, leaving or relabelling change counts; a new toleration matters for
        nodeTaintsPolicy Honor; nodes appearing, leaving or relabelling change domains."""
        return [
            ClusterEvent("Pod", "Add"), ClusterEvent("Pod", "UpdatePodLabel"),
            ClusterEvent("Pod", "UpdatePodToleration"), ClusterEvent("Pod", "Delete"),
            ClusterEvent("Node", "Add"), ClusterEvent("Node", "Delete"),
            ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("Node", "UpdateNodeTaint"),
        ]


def new(args: Mapping[str, Any] | None, handle: Handle) -> PodTopologySpread:
    """Registry factory: validate args (InputError names the field) and build the plugin."""
    return PodTopologySpread(PodTopologySpreadArgs.from_mapping(args))
