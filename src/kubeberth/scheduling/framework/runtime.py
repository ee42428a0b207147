"""One profile's plugins, instantiated and ordered per extension point, and the runners that call
them: the ``frameworkImpl`` of kube-scheduler.

Plugin sets are expanded the way upstream expands ``multiPoint``: a plugin enabled there joins
every extension point it implements unless that point disables it (or ``'*'``); a plugin that a
specific point also enables keeps that point's order and weight. Filter plugins run over all
candidate nodes at once, each plugin only over the nodes that every earlier plugin accepted, so
the first failing plugin per node is the one upstream would report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.scheduling.config.types import MULTI_POINT, Profile
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    MAX_NODE_SCORE,
    MAX_WEIGHT,
    MIN_NODE_SCORE,
    BindPlugin,
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import (
    SKIP,
    SUCCESS,
    Code,
    CodeArray,
    FilterResult,
    Status,
    StatusError,
)
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

# Upstream default plugins that act on objects kubeberth does not model (volumes, host ports,
# container images). Configurations may name them; they have nothing to decide here.
_INT64 = np.dtype(np.int64)
_ScoreFn = Callable[[CycleState, PodInfo, ClusterState, IntArray], IntArray]
_NormalizeFn = Callable[[CycleState, PodInfo, IntArray], "IntArray | None"]
_P = TypeVar("_P", bound=Plugin)

UNMODELLED_PLUGINS = frozenset({
    "NodePorts", "VolumeRestrictions", "NodeVolumeLimits", "EBSLimits", "GCEPDLimits",
    "AzureDiskLimits", "CinderLimits", "VolumeBinding", "VolumeZone", "ImageLocality",
    "NodeDeclaredFeatures",
})

# Unmodelled upstream plugins whose Filter reads what their PreFilter wrote, and the error that
# Filter returns on every node when a profile disables the PreFilter but not the Filter
# (upstream v1.37's wording). That error fails the pod's cycle, so such a profile keeps them.
MISSING_PRE_FILTER_ERRORS: dict[str, str] = {
    "NodePorts": 'reading "PreFilterNodePorts" from cycleState: not found',
    "VolumeRestrictions": 'cannot read "PreFilterVolumeRestrictions" from cycleState',
    "VolumeBinding": "not found",
    "NodeDeclaredFeatures": 'error reading "PreFilterNodeDeclaredFeatures" from cycle-state: '
                            "not found",
}


class _WithoutPreFilterState(FilterPlugin):
    """An unmodelled plugin's Filter whose PreFilter did not run: upstream's error on every
    node (with its PreFilter, it would have nothing to decide on kubeberth's inputs)."""

    message: ClassVar[str]

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        return FilterResult.error(len(nodes), self.message)


def _without_pre_filter_state(name: str) -> FilterPlugin:
    kind = type(name, (_WithoutPreFilterState,),
                {"name": name, "message": MISSING_PRE_FILTER_ERRORS[name]})
    plugin: FilterPlugin = kind()
    return plugin


EXTENSION_POINT_KINDS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


class FilterOutcome:
    """Filter verdicts for a batch of nodes (node slot indices in ``nodes``).

    Codes are kept per node; reasons stay inside the plugins' results until someone asks for a
    node's (:meth:`reasons_at`), because building them is most of a failing filter's cost and
    most cycles never read them. Which plugin failed a node first (``first_plugin``) is likewise
    assembled only when read, from the failures each plugin added."""

    __slots__ = ("_first", "_first_parts", "codes", "nodes", "overrides", "passed", "per_plugin",
                 "plugin_names", "segments", "with_nominated")

    def __init__(self, nodes: IntArray, codes: np.ndarray[Any, np.dtype[np.int8]],
                 first_plugin: np.ndarray[Any, np.dtype[np.int32]] | None,
                 plugin_names: list[str],
                 segments: list[tuple[_Segment, ...]] | None = None,
                 overrides: dict[int, tuple[str, ...]] | None = None,
                 first_parts: list[tuple[int, IntArray | None, CodeArray]] | None = None
                 ) -> None:
        self.nodes = nodes
        self.codes = codes
        self._first = first_plugin
        # (plugin index k, positions it judged or None for all, its codes there): k failed
        # first the judged positions whose code is not 0.
        self._first_parts = first_parts
        self.plugin_names = plugin_names
        # Per filter plugin: its results, each with the positions (relative to ``offset``) of
        # the nodes it judged, None when it judged every node of its segment. A result that
        # failed no node may be left out: no node's reasons come from it.
        self.segments: list[tuple[_Segment, ...]] = [] if segments is None else segments
        # Positions whose reasons were decided after the filters ran (nominated pods counted).
        self.overrides: dict[int, tuple[str, ...]] = {} if overrides is None else overrides
        # Only when recorded: plugin name -> its result over all ``nodes``.
        self.per_plugin: dict[str, FilterResult] = {}
        # Only when recorded: position -> plugin name -> its failing verdict with the node's
        # nominated pods counted, which stands in for the one in ``per_plugin``.
        self.with_nominated: dict[int, dict[str, Status]] = {}
        # Positions whose code is 0, when the runner already knows them; None: not known.
        # Whoever changes ``codes`` afterwards must reset it.
        self.passed: IntArray | None = None

    @property
    def first_plugin(self) -> np.ndarray[Any, np.dtype[np.int32]]:
        """Per position, the index of the first plugin that failed it (-1: none did); a
        writeable array kept from the first read on."""
        first = self._first
        if first is None:
            first = self._first = np.full(len(self.nodes), -1, dtype=np.int32)
            for k, judged, codes in self._first_parts or ():
                failed = codes != 0
                first[failed if judged is None else judged[failed]] = k
            self._first_parts = None
        return first

    def feasible_positions(self) -> IntArray:
        """Positions of the nodes every filter accepted, ascending."""
        if self.passed is not None:
            return self.passed
        passed: IntArray = (self.codes == 0).nonzero()[0]
        return passed

    @property
    def feasible(self) -> IntArray:
        feasible: IntArray = self.nodes[self.codes == 0]
        return feasible

    @classmethod
    def concat(cls, a: FilterOutcome, b: FilterOutcome) -> FilterOutcome:
        """Outcomes of two node batches as one."""
        shift = len(a.nodes)
        segments = [(*sa, *(_Segment(g.result, g.batch, g.offset + shift) for g in sb))
                    for sa, sb in zip(a.segments, b.segments, strict=True)]
        overrides = {**a.overrides, **{pos + shift: r for pos, r in b.overrides.items()}}
        return cls(
            np.concatenate([a.nodes, b.nodes]),
            np.concatenate([a.codes, b.codes]),
            np.concatenate([a.first_plugin, b.first_plugin]),
            a.plugin_names,
            segments,
            overrides,
        )

    def reasons_at(self, pos: int) -> tuple[str, ...]:
        hit = self.overrides.get(pos)
        if hit is not None:
            return hit
        k = int(self.first_plugin[pos])
        if k < 0:
            return ()
        for seg in self.segments[k]:
            local = seg.local(pos)
            if local >= 0:
                res = seg.result
                return res.reasons[int(res.reason_ids[local])]
        return ()

    def reason_counts(self) -> Counter[str]:
        """Reason -> how many nodes failed with it (the FitError histogram), counted per
        distinct reason id rather than node by node."""
        counts: Counter[str] = Counter()
        for pos, reasons in self.overrides.items():
            if self.codes[pos] != 0:
                counts.update(reasons)
        for k, segments in enumerate(self.segments):
            mine = self.first_plugin == k
            if self.overrides:
                mine[list(self.overrides)] = False
            positions = np.flatnonzero(mine)
            for seg in segments:
                local = seg.locals(positions)
                if local.size == 0:
                    continue
                res = seg.result
                ids, n = np.unique(res.reason_ids[local], return_counts=True)
                for rid, count in zip(ids.tolist(), n.tolist(), strict=True):
                    for reason in res.reasons[rid]:
                        counts[reason] += count
        return counts

    def plugin_at(self, pos: int) -> str:
        k = int(self.first_plugin[pos])
        return "" if k < 0 else self.plugin_names[k]

    def head(self, count: int) -> FilterOutcome:
        """A recorded outcome cut to its first ``count`` positions (the nodes a search that
        stopped there had judged)."""
        per_plugin = {name: FilterResult(res.codes[:count], res.reason_ids[:count],
                                         res.reasons)
                      for name, res in self.per_plugin.items()}
        segments = [tuple(_Segment(per_plugin[name], None, 0) for _ in segs)
                    for name, segs in zip(self.plugin_names, self.segments, strict=True)]
        out = FilterOutcome(self.nodes[:count], self.codes[:count],
                            self.first_plugin[:count], self.plugin_names, segments,
                            {p: r for p, r in self.overrides.items() if p < count})
        out.per_plugin = per_plugin
        out.with_nominated = {p: v for p, v in self.with_nominated.items() if p < count}
        return out


class _Segment:
    """One filter result and which outcome positions it judged."""

    __slots__ = ("batch", "offset", "result")

    def __init__(self, result: FilterResult, batch: IntArray | None, offset: int) -> None:
        self.result = result
        self.batch = batch
        self.offset = offset

    def local(self, pos: int) -> int:
        """This result's index for outcome position ``pos``, or -1 when it did not judge it."""
        rel = pos - self.offset
        if self.batch is None:
            return rel if 0 <= rel < len(self.result.codes) else -1
        i = int(np.searchsorted(self.batch, rel))
        return i if i < len(self.batch) and int(self.batch[i]) == rel else -1

    def locals(self, positions: IntArray) -> IntArray:
        """This result's indices for those outcome ``positions`` (sorted) it judged."""
        rel = positions - self.offset
        if self.batch is None:
            return rel[(rel >= 0) & (rel < len(self.result.codes))]
        i = np.searchsorted(self.batch, rel)
        hit = i < len(self.batch)
        hit[hit] = self.batch[i[hit]] == rel[hit]
        return i[hit]


@dataclass(slots=True)
class ScoreOutcome:
    nodes: IntArray
    totals: IntArray
    # plugin name -> (raw, normalized, weighted), each aligned with ``nodes``; only if recorded.
    per_plugin: dict[str, tuple[IntArray, IntArray, IntArray]] = field(default_factory=dict)
    # An Error when a plugin's Score or NormalizeScore failed (the totals then mean nothing).
    status: Status = SUCCESS


def expand_points(profile: Profile, kinds: Mapping[str, type[Plugin]],
                  plugin: Callable[[str], Plugin],
                  unmodelled: list[str] | None) -> dict[str, list[tuple[str, int]]]:
    """Upstream's multiPoint expansion, point by point: the point's own plugins that multiPoint
    also names (their weight wins), then multiPoint's that implement the point (unless the
    point disables them), then the point's others. Unmodelled upstream plugins are left out
    and noted in ``unmodelled``, except those of :data:`MISSING_PRE_FILTER_ERRORS` at the
    PreFilter and Filter points, which stay in their place (the caller decides whether their
    Filter fails); with None, a point naming one is an error (the placement points: no
    unmodelled plugin implements them)."""
    multi = profile.plugins.get(MULTI_POINT)
    multi_enabled = [(r.name, r.weight) for r in (multi.enabled if multi else [])]
    multi_names = {n for n, _ in multi_enabled}
    out: dict[str, list[tuple[str, int]]] = {}
    for point, kind in kinds.items():
        kept = frozenset(MISSING_PRE_FILTER_ERRORS) if unmodelled is not None and kind in (
            PreFilterPlugin, FilterPlugin) else frozenset()
        pset = profile.plugins.get(point)
        specific = [(r.name, r.weight) for r in (pset.enabled if pset else [])]
        disabled = set(pset.disabled if pset else [])
        specific_names = {n for n, _ in specific}
        for name, _ in specific:
            if name in UNMODELLED_PLUGINS and unmodelled is not None:
                continue
            if not isinstance(plugin(name), kind):
                raise InputError(f"plugin {name!r} does not extend {point}",
                                 field=f"profiles[{profile.index}].plugins.{point}.enabled",
                                 expected=f"a plugin that implements {point}")
        overrides = [(n, w) for n, w in specific if n in multi_names]
        from_multi: list[tuple[str, int]] = []
        if "*" not in disabled:
            for name, weight in multi_enabled:
                if name in disabled or name in specific_names or (
                        name in UNMODELLED_PLUGINS and name not in kept):
                    continue
                if name in kept or isinstance(plugin(name), kind):
                    from_multi.append((name, weight))
        rest = [(n, w) for n, w in specific if n not in multi_names]
        chosen = []
        seen: set[str] = set()
        for name, weight in overrides + from_multi + rest:
            if name in UNMODELLED_PLUGINS and unmodelled is not None:
                if name not in unmodelled:
                    unmodelled.append(name)
                if name not in kept:
                    continue
            if name in seen:
                raise InputError(f"plugin {name!r} is enabled twice for {point}",
                                 field=f"profiles[{profile.index}].plugins.{point}",
                                 expected="each plugin at most once per extension point")
            seen.add(name)
            chosen.append((name, weight))
        out[point] = chosen
    if unmodelled is not None:
        for name, _ in multi_enabled:
            if name in UNMODELLED_PLUGINS and name not in unmodelled:
                unmodelled.append(name)
    return out


def checked_weights(enabled: list[tuple[str, int]], profile: Profile, point: str,
                    what: str) -> dict[str, int]:
    """Plugin name -> its weight at a scoring point (0, unset, means 1), within upstream's
    bounds."""
    weights: dict[str, int] = {}
    for name, weight in enabled:
        w = weight or 1
        if w < 0 or w > MAX_WEIGHT:
            raise InputError(f"{what} plugin {name!r} has weight {w}",
                             field=f"profiles[{profile.index}].plugins.{point}",
                             expected=f"a weight between 1 and {MAX_WEIGHT}")
        weights[name] = w
    return weights


class Framework:
    def __init__(self, profile: Profile, registry: Registry, handle: Handle) -> None:
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self.handle = handle
        self.unmodelled: list[str] = []
        self._instances: dict[str, Plugin] = {}
        self._profile = profile
        self._registry = registry
        points = expand_points(profile, EXTENSION_POINT_KINDS, self.plugin, self.unmodelled)
        self.pre_enqueue: list[PreEnqueuePlugin] = self._typed(points, "preEnqueue")
        sorts: list[QueueSortPlugin] = self._typed(points, "queueSort")
        pre_filters = [name for name, _ in points["preFilter"]]
        self.pre_filter: list[PreFilterPlugin] = self._typed(
            {"preFilter": [(n, 0) for n in pre_filters if n not in MISSING_PRE_FILTER_ERRORS]},
            "preFilter")
        self.filter: list[FilterPlugin] = [
            _without_pre_filter_state(name) if name in MISSING_PRE_FILTER_ERRORS
            else self._typed({"filter": [(name, 0)]}, "filter")[0]
            for name, _ in points["filter"]
            if name not in MISSING_PRE_FILTER_ERRORS or name not in pre_filters]
        # Only a Filter whose PreFilter this profile does not run can answer Error (the state it
        # reads may be absent), so other profiles' cycles do not look for Errors.
        self.filter_may_fail = any(
            isinstance(p, _WithoutPreFilterState)
            or (isinstance(p, PreFilterPlugin) and p not in self.pre_filter) for p in self.filter)
        self.post_filter: list[PostFilterPlugin] = self._typed(points, "postFilter")
        self.pre_score: list[PreScorePlugin] = self._typed(points, "preScore")
        self.score: list[ScorePlugin] = self._typed(points, "score")
        self.reserve: list[ReservePlugin] = self._typed(points, "reserve")
        self.permit: list[PermitPlugin] = self._typed(points, "permit")
        self.pre_bind: list[PreBindPlugin] = self._typed(points, "preBind")
        self.bind: list[BindPlugin] = self._typed(points, "bind")
        self.post_bind: list[PostBindPlugin] = self._typed(points, "postBind")
        self.score_weights = checked_weights(points["score"], profile, "score", "score")
        where = f"profiles[{profile.index}].plugins"
        if len(sorts) != 1:
            raise InputError(f"profile {profile.scheduler_name!r} has {len(sorts)} queueSort "
                             "plugins", field=f"{where}.queueSort",
                             expected="exactly one queueSort plugin (PrioritySort by default)")
        self.queue_sort = sorts[0]
        if not self.bind:
            raise InputError(f"profile {profile.scheduler_name!r} has no bind plugin",
                             field=f"{where}.bind", expected="at least one bind plugin "
                             "(DefaultBinder by default)")
        self.filter_names = [p.name for p in self.filter]
        # What run_score needs per plugin, looked up once: the bound methods, NormalizeScore
        # only where a plugin overrides it, the weight, whether its range is checked, and the
        # last read-only scores it handed out that passed the check.
        self._score_steps: list[
            tuple[str, _ScoreFn, _NormalizeFn | None, int, bool, list[IntArray | None]]] = [
            (p.name, p.score, _normalizer(p), self.score_weights[p.name],
             not p.scores_in_range, [None])
            for p in self.score]

    # ---- construction ----------------------------------------------------------------------
    def plugin(self, name: str) -> Plugin:
        inst = self._instances.get(name)
        if inst is None:
            factory = self._registry.get(name)
            prefix = f"profiles[{self._profile.index}]"
            if factory is None:
                raise InputError(f"unknown plugin {name!r}", field=f"{prefix}.plugins",
                                 expected="one of " + ", ".join(self._registry)
                                 + " (or an out-of-tree plugin registered with --plugin)")
            args = self._profile.plugin_config.get(name)
            try:
                inst = factory(args, self.handle)
            except InputError as err:
                path = self._profile.plugin_config_path.get(name, f"{prefix}.pluginConfig")
                raise err.at(field=path) from None
            self._instances[name] = inst
        return inst

    def _typed(self, points: Mapping[str, list[tuple[str, int]]], point: str) -> list[Any]:
        return [self.plugin(name) for name, _ in points[point]]

    def enqueue_events(self) -> dict[str, list[ClusterEvent]]:
        """Plugin name -> the cluster events after which a pod it rejected may fit. Plugins
        without EnqueueExtensions are interested in every event, as upstream registers them."""
        return {name: p.events_to_register() if isinstance(p, EnqueueExtensions)
                else [ClusterEvent("*", "*")] for name, p in self._instances.items()}

    # ---- runners ---------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        return _until_failure(self.pre_enqueue, lambda p: p.pre_enqueue(pod))

    def run_pre_filter(self, state: CycleState, pod: PodInfo,
                       snap: ClusterState) -> tuple[set[str] | None, Status]:
        allowed: set[str] | None = None
        narrowing: list[str] = []
        for p in self.pre_filter:
            result, st = p.pre_filter(state, pod, snap)
            if st is not SUCCESS:
                if st is SKIP or st.code == Code.SKIP:
                    state.skip_filter.add(p.name)
                    continue
                if not st.ok:
                    return None, st.with_plugin(p.name)
            if result is not None and result.node_names is not None:
                narrowing.append(p.name)
                allowed = set(result.node_names) if allowed is None \
                    else allowed & result.node_names
                if not allowed:
                    msg = (f"node(s) didn't satisfy plugin(s) {narrowing} simultaneously"
                           if len(narrowing) > 1 else f"node(s) didn't satisfy plugin {p.name}")
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,), p.name)
        return allowed, SUCCESS

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo,
                                         to_add: PodInfo, node: int,
                                         snap: ClusterState) -> Status:
        """Tell PreFilter state that ``to_add`` is (hypothetically) on ``node``."""
        return self._run_pre_filter_extensions(state, pod, to_add, node, snap, add=True)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo,
                                            to_remove: PodInfo, node: int,
                                            snap: ClusterState) -> Status:
        """Tell PreFilter state that ``to_remove`` is (hypothetically) gone from ``node``."""
        return self._run_pre_filter_extensions(state, pod, to_remove, node, snap, add=False)

    def _run_pre_filter_extensions(self, state: CycleState, pod: PodInfo, other: PodInfo,
                                   node: int, snap: ClusterState, *, add: bool) -> Status:
        for p in self.pre_filter:
            ext = p.pre_filter_extensions()
            if ext is None or p.name in state.skip_filter:
                continue
            change = ext.add_pod if add else ext.remove_pod
            st = change(state, pod, other, node, snap)
            if not st.ok:
                return st.with_plugin(p.name)
        return SUCCESS

    def run_filters(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    nodes: IntArray, *, record: bool = False) -> FilterOutcome:
        if record:
            return self._run_filters_recorded(state, pod, snap, nodes)
        codes: CodeArray | None = None
        firsts: list[tuple[int, IntArray | None, CodeArray]] = []
        # Only plugins that fail a node get a segment (their reasons may be asked for).
        segments: list[tuple[_Segment, ...]] = [()] * len(self.filter)
        skip = state.skip_filter
        alive: IntArray | None = None  # positions every plugin so far accepted; None: all
        for k, p in enumerate(self.filter):
            if alive is None:
                if skip and p.name in skip:
                    continue
                res = p.filter(state, pod, snap, nodes)
                if res.passes_all:
                    continue
                rc = res.codes
                if not np.count_nonzero(rc):
                    continue
                segments[k] = (_Segment(res, None, 0),)
                # The first plugin to fail a node: every code so far is 0.
                codes = rc.astype(np.int8)
                firsts.append((k, None, rc))
                alive = (rc == 0).nonzero()[0]
                continue
            if alive.size == 0 or (skip and p.name in skip):
                continue
            res = p.filter(state, pod, snap, nodes[alive])
            if res.passes_all:
                continue
            rc = res.codes
            if not np.count_nonzero(rc):
                continue
            segments[k] = (_Segment(res, alive, 0),)
            assert codes is not None
            codes[alive] = rc  # every code there is 0 so far: the failures land, 0 stays 0
            firsts.append((k, alive, rc))
            alive = alive[rc == 0]
        if codes is None:
            codes = np.zeros(len(nodes), dtype=np.int8)
        out = FilterOutcome(nodes, codes, None, self.filter_names, segments, first_parts=firsts)
        out.passed = alive
        return out

    def _run_filters_recorded(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                              nodes: IntArray) -> FilterOutcome:
        """Every filter over every node (explain shows each plugin's verdict on each node);
        the first failure per node still decides its code."""
        n = len(nodes)
        codes = np.zeros(n, dtype=np.int8)
        first = np.full(n, -1, dtype=np.int32)
        segments: list[tuple[_Segment, ...]] = []
        out = FilterOutcome(nodes, codes, first, self.filter_names, segments)
        for k, p in enumerate(self.filter):
            if p.name in state.skip_filter:
                segments.append(())
                continue
            res = p.filter(state, pod, snap, nodes)
            segments.append((_Segment(res, None, 0),))
            out.per_plugin[p.name] = res
            if res.passes_all:
                continue
            failed = res.codes != 0
            if not np.logical_or.reduce(failed):
                continue
            failed &= codes == 0
            pos = failed.nonzero()[0]
            codes[pos] = res.codes[failed]
            first[pos] = k
        return out

    def run_filters_on_node(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                            node: int) -> Status:
        """All filters on one node, first failure wins (preemption's what-if checks)."""
        out = self.run_filters(state, pod, snap, np.array([node], dtype=np.int64))
        if out.codes[0] == 0:
            return SUCCESS
        return Status(Code(int(out.codes[0])), out.reasons_at(0), out.plugin_at(0))

    def run_post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                        diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        last = Status(Code.UNSCHEDULABLE)
        for p in self.post_filter:
            result, st = p.post_filter(state, pod, snap, diagnosis)
            if st.ok:
                return result, st.with_plugin(p.name)
            if st.code == Code.ERROR:
                return None, st.with_plugin(p.name)
            last = st.with_plugin(p.name)
        return None, last

    def run_pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                      nodes: IntArray) -> Status:
        for p in self.pre_score:
            st = p.pre_score(state, pod, snap, nodes)
            if st is SUCCESS:
                continue
            if st is SKIP or st.code == Code.SKIP:
                state.skip_score.add(p.name)
            elif not st.ok:
                return st.with_plugin(p.name)
        return SUCCESS

    def run_score(self, state: CycleState, pod: PodInfo, snap: ClusterState, nodes: IntArray,
                  *, record: bool = False) -> ScoreOutcome:
        totals: IntArray | None = None
        per_plugin: dict[str, tuple[IntArray, IntArray, IntArray]] = {}
        skip = state.skip_score
        for name, score, normalize, weight, check, checked in self._score_steps:
            if skip and name in skip:
                continue
            step = "Score"
            try:
                raw = score(state, pod, snap, nodes)
                if type(raw) is not np.ndarray or raw.dtype is not _INT64:
                    raw = np.asarray(raw, dtype=np.int64)
                step = "Normalize on Score"
                normalized = None if normalize is None else normalize(state, pod, raw)
            except StatusError as err:
                # Upstream's wording: the runner wraps the plugin's error twice.
                failed = Status(Code.ERROR, (f'running {step} plugins: plugin "{name}" failed '
                                             f"with: {err.status.message()}",), name)
                return ScoreOutcome(nodes, np.zeros(len(nodes), dtype=np.int64), per_plugin,
                                    failed)
            norm = raw if normalized is None else np.asarray(normalized, dtype=np.int64)
            if check and norm is not checked[0] and len(norm):
                # One pass checks both bounds: a negative score read as unsigned is huge.
                if int(np.maximum.reduce(norm.view(np.uint64))) > MAX_NODE_SCORE:
                    bad = int(norm.max() if norm.max() > MAX_NODE_SCORE else norm.min())
                    raise RuntimeError(f"plugin {name} returned score {bad} outside "
                                       f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}]")
                if not norm.flags.writeable and norm.base is None:
                    # A read-only array owning its data cannot change: a plugin handing out the
                    # same shared scores again (e.g. all-maximum) is not checked again.
                    checked[0] = norm
            weighted = norm if weight == 1 else norm * weight
            if totals is None:
                # The sum starts as a copy unless ``weighted`` is a product nobody else holds
                # (plugins may hand out shared read-only arrays; a recording keeps it).
                totals = weighted.copy() if weighted is norm or record else weighted
            else:
                totals += weighted
            if record:
                per_plugin[name] = (raw, norm, weighted)
        if totals is None:
            totals = np.zeros(len(nodes), dtype=np.int64)
        return ScoreOutcome(nodes, totals, per_plugin)

    def run_reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    node: int) -> Status:
        return _until_failure(self.reserve, lambda p: p.reserve(state, pod, snap, node))

    def run_unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                      node: int) -> None:
        for p in reversed(self.reserve):
            p.unreserve(state, pod, snap, node)

    def run_permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                   node: int) -> tuple[Status, dict[str, float]]:
        """Success, a rejection, or Wait with plugin name -> timeout seconds."""
        if not self.permit:
            return SUCCESS, {}
        waits: dict[str, float] = {}
        for p in self.permit:
            st, timeout = p.permit(state, pod, snap, node)
            if st.code == Code.WAIT:
                waits[p.name] = timeout
            elif not st.ok:
                return st.with_plugin(p.name), {}
        if waits:
            return Status(Code.WAIT), waits
        return SUCCESS, {}

    def run_pre_bind(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                     node: int) -> Status:
        return _until_failure(self.pre_bind, lambda p: p.pre_bind(state, pod, snap, node))

    def run_bind(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                 node: int) -> Status:
        for p in self.bind:
            st = p.bind(state, pod, snap, node)
            if st.code == Code.SKIP:
                continue
            return st.with_plugin(p.name)
        return Status(Code.SKIP, ("no bind plugin took the pod",))

    def run_post_bind(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                      node: int) -> None:
        for p in self.post_bind:
            p.post_bind(state, pod, snap, node)


def _until_failure(plugins: list[_P], run: Callable[[_P], Status]) -> Status:
    """Run each plugin in order until one does not succeed: its status, naming it; else
    Success."""
    for p in plugins:
        st = run(p)
        if not st.ok:
            return st.with_plugin(p.name)
    return SUCCESS


def _normalizer(p: ScorePlugin) -> _NormalizeFn | None:
    """The plugin's NormalizeScore, or None when it keeps the base class's (which changes
    nothing), so the runtime does not call it every cycle."""
    method = p.normalize_score
    if getattr(method, "__func__", None) is ScorePlugin.normalize_score:
        return None
    return method


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes a cycle looks for before it stops filtering (upstream's
    ``numFeasibleNodesToFind``): all below 100 nodes; else the percentage, adaptive when 0
    (50% minus 1% per 125 nodes, at least 5%), never fewer than 100."""
    min_nodes, min_percentage = 100, 5
    if num_all_nodes < min_nodes:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, min_percentage)
    num = num_all_nodes * pct // 100
    return max(num, min_nodes)
