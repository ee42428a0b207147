"""Pieces the in-tree scheduling plugins share, as upstream's ``plugins/helper`` package.

Upstream's helpers work on one node at a time; these work on every candidate node at once:
``DefaultNormalizeScore`` and the broken-linear shape function on int64 arrays with Go's integer
division (truncation toward zero), label columns factorised once per node change so a selector
is evaluated per distinct label value rather than per node, reason tables that turn a
per-node "which checks failed" matrix into a handful of reason tuples, and the shared all-pass
verdict most filters return most of the time. A scheduling decision has a budget of a fraction
of a millisecond, so the caches here (zero arrays per batch size, reason tables per failure
pattern) are about numpy's per-call overhead, not about large data. The small typed readers for
plugin args live here too, so every plugin reports bad args with the same field paths. This
module decides nothing by itself and holds no per-cycle state.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

import numpy as np
import numpy.typing as npt

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE, PreFilterExtensions
from kubeberth.scheduling.framework.status import (
    SUCCESS,
    Code,
    FilterResult,
    Status,
    StatusError,
)
from kubeberth.state.cluster import BoolArray, ClusterState, IntArray, PodInfo

IdArray = npt.NDArray[np.int32]


# ---- integer arithmetic as Go does it -------------------------------------------------------
def trunc_div(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's ``a / b`` on int64: the quotient truncated toward zero (numpy floors)."""
    num = np.asarray(a, dtype=np.int64)
    den = np.asarray(b, dtype=np.int64)
    q = num // den
    fix = (q < 0) & (q * den != num)
    return np.asarray(q + fix, dtype=np.int64)


def default_normalize_score(scores: IntArray, reverse: bool,
                            max_priority: int = MAX_NODE_SCORE) -> IntArray:
    """Upstream ``DefaultNormalizeScore``: scale [0, max(scores)] to [0, max_priority], reversed
    on request; all-zero scores stay zero, or become ``max_priority`` when reversed."""
    scores = np.asarray(scores, dtype=np.int64)
    max_count = int(np.maximum.reduce(scores)) if scores.size else 0
    if max_count <= 0:
        if reverse:
            return np.full(scores.shape, max_priority, dtype=np.int64)
        return scores.copy()
    out = trunc_div(scores * max_priority, max_count)
    if reverse:
        out = max_priority - out
    return out


# ---- label columns ---------------------------------------------------------------------------
@dataclass(slots=True)
class _LabelCodes:
    source: npt.NDArray[np.object_]
    codes: IntArray
    values: list[str | None]


_CODES: WeakKeyDictionary[ClusterState, dict[str, _LabelCodes]] = WeakKeyDictionary()


def label_codes(snap: ClusterState, key: str) -> tuple[IntArray, list[str | None]]:
    """Per node slot, a code into the distinct values of label ``key`` (None where absent).

    Valid as long as ``snap.label_values(key)`` returns the same array, i.e. until a node
    changes; rebuilt then."""
    source = snap.label_values(key)
    per_snap = _CODES.setdefault(snap, {})
    cached = per_snap.get(key)
    if cached is None or cached.source is not source:
        index: dict[str | None, int] = {}
        codes = np.fromiter((index.setdefault(v, len(index)) for v in source), dtype=np.int64,
                            count=len(source))
        cached = _LabelCodes(source, codes, list(index))
        per_snap[key] = cached
    return cached.codes, cached.values


def label_mask(snap: ClusterState, key: str, nodes: IntArray,
               pred: Callable[[str | None], bool]) -> BoolArray:
    """``pred(value of label key)`` for each node in ``nodes``, evaluated once per distinct
    value."""
    codes, values = label_codes(snap, key)
    per_value = np.fromiter((pred(v) for v in values), dtype=np.bool_, count=len(values))
    return np.asarray(per_value[codes[nodes]], dtype=np.bool_)


# ---- filter results --------------------------------------------------------------------------
_T = TypeVar("_T")


def pre_score_state(state: CycleState, key: str, kind: type[_T], verb: str) -> _T:
    """What the plugin's PreScore wrote under ``key``. Without it (a profile that disables the
    plugin's PreScore) upstream's Score fails with an Error status that fails the pod's cycle;
    ``verb`` is how the plugin words it ("failed to read", "error reading")."""
    value = state.get(key)
    if isinstance(value, kind):
        return value
    raise StatusError(Status(Code.ERROR, (f'{verb} "{key}" from cycleState: not found',)))


def all_pass(n: int) -> FilterResult:
    """A verdict that passes all ``n`` candidates (shared read-only arrays)."""
    return FilterResult.passing(n)


# ---- reason tables ---------------------------------------------------------------------------
_LOOKUP_BITS = 16  # up to this many checks, combinations are grouped by a direct lookup table
_TABLE_CACHE_LIMIT = 256
# (labels, which bit patterns occur) -> (pattern -> id, reason table). A filter that fails nodes
# keeps failing them the same few ways from one cycle to the next.
_TABLES: dict[tuple[tuple[str, ...], bytes], tuple[IdArray, tuple[tuple[str, ...], ...]]] = {}


def reason_table_from_bits(bits: IntArray, labels: Sequence[str]
                           ) -> tuple[IdArray, list[tuple[str, ...]]]:
    """Reason ids and table from one int64 per node whose bit ``j`` says check ``j`` failed
    (0: the node failed nothing). Each distinct combination becomes one table entry, in
    ascending bit-pattern order, listing the labels of its failed checks in bit order."""
    if len(labels) > _LOOKUP_BITS:
        combos, inverse = np.unique(bits, return_inverse=True)
        ids = np.asarray(inverse, dtype=np.int32).reshape(-1)
        if combos.size and combos[0] == 0:
            combos = combos[1:]
        else:
            ids = ids + 1
        return ids, [(), *_reason_tuples(combos.tolist(), labels)]
    present = np.bincount(bits, minlength=1 << len(labels)) > 0
    present[0] = False
    key = (tuple(labels), present.tobytes())
    hit = _TABLES.get(key)
    if hit is None:
        # A pattern's id is its rank among the patterns present.
        rank = np.cumsum(present, dtype=np.int32)
        rank.flags.writeable = False
        hit = (rank, ((), *_reason_tuples(np.flatnonzero(present).tolist(), labels)))
        if len(_TABLES) >= _TABLE_CACHE_LIMIT:
            _TABLES.clear()
        _TABLES[key] = hit
    return hit[0].take(bits), list(hit[1])


def _reason_tuples(combos: list[int], labels: Sequence[str]) -> list[tuple[str, ...]]:
    return [tuple(label for j, label in enumerate(labels) if combo >> j & 1)
            for combo in combos]


def reason_table(fail: BoolArray, labels: Sequence[str]
                 ) -> tuple[IdArray, list[tuple[str, ...]]]:
    """Turn ``fail[node, check]`` into reason ids and a table of reason tuples.

    Each distinct combination of failed checks becomes one table entry listing ``labels`` of the
    failed checks in column order; entry 0 is the empty tuple of nodes that failed nothing."""
    n, m = fail.shape
    ids = np.zeros(n, dtype=np.int32)
    table: list[tuple[str, ...]] = [()]
    failing = np.flatnonzero(fail.any(axis=1))
    if failing.size == 0:
        return ids, table
    rows = np.ascontiguousarray(fail[failing], dtype=np.bool_)
    if m <= 63:
        # One int64 bit per check turns each combination into one integer.
        weights = np.left_shift(np.int64(1), np.arange(m, dtype=np.int64))
        sub_ids, table = reason_table_from_bits(rows.astype(np.int64) @ weights, labels)
        ids[failing] = sub_ids
        return ids, table
    combos, inverse = np.unique(rows.view(np.dtype((np.void, m))).ravel(), return_inverse=True)
    decoded = np.frombuffer(combos.tobytes(), dtype=np.bool_).reshape(-1, m)
    for row in decoded:
        table.append(tuple(labels[int(j)] for j in np.flatnonzero(row)))
    ids[failing] = np.asarray(inverse, dtype=np.int32).reshape(-1) + 1
    return ids, table


# ---- resources -------------------------------------------------------------------------------
def is_scalar_resource(name: str) -> bool:
    """Upstream ``IsScalarResourceName``: extended, hugepages, prefixed native (kubernetes.io/)
    and attachable-volume resources; cpu, memory, ephemeral-storage and pods are not."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource a scoring plugin looks at, with its weight (upstream ``config.ResourceSpec``)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def parse_resource_specs(items: list[Any], where: str) -> tuple[ResourceSpec, ...]:
    """``[{name, weight}]`` with upstream defaulting: an empty list is cpu and memory with
    weight 1, and a missing or zero weight is 1. Weights are validated by the caller, whose rules
    differ (NodeResourcesFit: 1..100, BalancedAllocation: exactly 1)."""
    if not items:
        return DEFAULT_RESOURCES
    out: list[ResourceSpec] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        raw = args_mapping(item, at)
        reject_unknown(raw, ("name", "weight"), at)
        name = args_str(raw, "name", at)
        if not name:
            raise InputError("Required value: resource name", field=f"{at}.name",
                             expected="a resource name such as cpu, memory or nvidia.com/gpu")
        out.append(ResourceSpec(name, args_int(raw, "weight", at) or 1))
    return tuple(out)


# ---- PreFilter extensions ---------------------------------------------------------------------
class UpdateWithPod(PreFilterExtensions):
    """AddPod and RemovePod as upstream's plugins write them: one ``updateWithPod`` that counts
    the pod in (+1) or out (-1) of the PreFilter state preemption's dry runs edit."""

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: int,
                snap: ClusterState) -> Status:
        self.update_with_pod(state, to_add, node, snap, 1)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: int,
                   snap: ClusterState) -> Status:
        self.update_with_pod(state, to_remove, node, snap, -1)
        return SUCCESS

    @abstractmethod
    def update_with_pod(self, state: CycleState, other: PodInfo, node: int, snap: ClusterState,
                        delta: int) -> None: ...


# ---- args readers ----------------------------------------------------------------------------
def args_mapping(raw: object, where: str | None = None) -> Mapping[str, Any]:
    """``raw`` as a mapping (None is empty); ``where`` names it in the error."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{raw!r} is not a mapping", field=where, expected="a mapping of fields")
    return raw


def reject_args(name: str, args: Mapping[str, Any] | None) -> None:
    """For the plugins upstream gives no args type: any pluginConfig args are an error."""
    if args:
        raise InputError(f"{name} takes no args", expected="no pluginConfig args for " + name)


def reject_unknown(raw: Mapping[str, Any], allowed: Sequence[str], where: str | None) -> None:
    """Upstream decodes plugin args strictly: an unknown field is an error, not ignored."""
    for key in raw:
        if key not in allowed:
            raise InputError(f"unknown field {key!r}", field=join_field(where, str(key)),
                             expected="one of " + ", ".join(allowed))


def join_field(where: str | None, child: str) -> str:
    if not where:
        return child
    return where + child if child.startswith("[") else f"{where}.{child}"


def args_list(raw: Mapping[str, Any], key: str, where: str | None) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{value!r} is not a list", field=join_field(where, key),
                         expected="a list")
    return value


def args_int(raw: Mapping[str, Any], key: str, where: str | None, default: int = 0) -> int:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{value!r} is not an integer", field=join_field(where, key),
                         expected="an integer")
    return value


def args_str(raw: Mapping[str, Any], key: str, where: str | None, default: str = "") -> str:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{value!r} is not a string", field=join_field(where, key),
                         expected="a string")
    return value


_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = ("a qualified name: an optional DNS subdomain prefix and '/', then at most 63 "
                  "alphanumeric characters, '-', '_' or '.', starting and ending alphanumeric")


def validate_qualified_name(value: str, field: str) -> None:
    """Upstream ``ValidateLabelName`` (a qualified name such as ``example.com/gpu``)."""
    prefix, slash, name = value.rpartition("/")
    ok = bool(_NAME_PART.match(name)) and len(name) <= 63
    if slash:
        ok = ok and bool(prefix) and len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))
    if not ok:
        raise InputError(f"Invalid value: {value!r}: name part must consist of alphanumeric "
                         "characters, '-', '_' or '.'", field=field, expected=QUALIFIED_NAME)
