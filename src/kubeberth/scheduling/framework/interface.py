"""Extension points, one abstract base per point, as in kube-scheduler's framework interface.

A plugin class inherits the bases of the points it serves; the runtime discovers them with
``isinstance``. Filter, PreScore and Score take every candidate node at once (an index array into
the :class:`~kubeberth.state.ClusterState`) and return arrays, which is where the speed comes from.
Plugins never apply decisions themselves: PostFilter returns victims and a nominated node, Bind
returns a verdict, and the host (simulator or live adapter) carries them out. That is what lets
one plugin run in both worlds without knowing which.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code, FilterResult, Status
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1
MAX_WEIGHT = MAX_TOTAL_SCORE // MAX_NODE_SCORE


class Plugin(ABC):
    """Every plugin has a registry name."""

    name: ClassVar[str]


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod waiting in the scheduling queue, with the bookkeeping the queue needs."""

    info: PodInfo
    timestamp: float = 0.0
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    gating_plugin: str = ""


class PreEnqueuePlugin(Plugin):
    @abstractmethod
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


class QueueSortPlugin(Plugin):
    @abstractmethod
    def sort_key(self, qpi: QueuedPodInfo) -> tuple[Any, ...]:
        """A key such that ``key(a) < key(b)`` is upstream's ``Less(a, b)``."""


class PreFilterExtensions(ABC):
    """Incremental updates of PreFilter state when preemption tries removing or adding pods."""

    @abstractmethod
    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: int,
                snap: ClusterState) -> Status: ...

    @abstractmethod
    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: int,
                   snap: ClusterState) -> Status: ...


@dataclass(slots=True)
class PreFilterResult:
    """Node names a PreFilter plugin restricts the cycle to; ``None`` means all nodes."""

    node_names: set[str] | None = None


class PreFilterPlugin(Plugin):
    @abstractmethod
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    @abstractmethod
    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult: ...


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fit nowhere: per node slot the code of the first failing filter (SUCCESS where
    the node passed or was not evaluated) and a callable that renders that node's reasons."""

    codes: npt.NDArray[np.int8]
    reasons: Callable[[int], tuple[str, ...]]
    failing_plugin: Callable[[int], str]
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_message: str = ""
    evaluated: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Reason -> number of failing nodes giving it, when the producer can count faster than
    # asking ``reasons`` node by node.
    reason_counts: Callable[[], Counter[str]] | None = None


@dataclass(slots=True)
class PostFilterResult:
    nominated_node: str | None = None
    victims: list[PodInfo] = field(default_factory=list)


class PostFilterPlugin(Plugin):
    @abstractmethod
    def post_filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]: ...


class PreScorePlugin(Plugin):
    @abstractmethod
    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status: ...


class ScorePlugin(Plugin):
    # A plugin that guarantees every score it hands the runtime (normalized, where it has
    # NormalizeScore) lies in [MIN_NODE_SCORE, MAX_NODE_SCORE] by construction sets this, and
    # the runtime skips its per-cycle range check; others are checked every cycle.
    scores_in_range: ClassVar[bool] = False

    @abstractmethod
    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        """Raw int64 scores, one per candidate node."""

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        """Return normalized scores, or None when the plugin has no NormalizeScore."""
        return None


class ReservePlugin(Plugin):
    @abstractmethod
    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status: ...

    @abstractmethod
    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  node: int) -> None: ...


class PermitPlugin(Plugin):
    @abstractmethod
    def permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               node: int) -> tuple[Status, float]:
        """Status (Success, Wait or a rejection) and, for Wait, the timeout in seconds."""


class PreBindPlugin(Plugin):
    @abstractmethod
    def pre_bind(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                 node: int) -> Status: ...


class BindPlugin(Plugin):
    @abstractmethod
    def bind(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> Status:
        """Success: this plugin takes the binding and the host records pod → node.
        Skip: let the next Bind plugin decide."""


class PostBindPlugin(Plugin):
    @abstractmethod
    def post_bind(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  node: int) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change that may make an unschedulable pod schedulable (resource and action)."""

    resource: str  # "Node", "Pod", "PodGroup", ...
    action: str  # "Add", "Delete", "Update", "UpdateNodeAllocatable", "UpdateNodeTaint", ...

    def matches(self, other: ClusterEvent) -> bool:
        if self.resource not in (other.resource, "*"):
            return False
        if self.action in (other.action, "*"):
            return True
        return self.action == "Update" and other.action.startswith("Update")


class EnqueueExtensions(ABC):
    """Plugins that reject pods name the events after which a retry may succeed."""

    @abstractmethod
    def events_to_register(self) -> list[ClusterEvent]: ...


__all__ = [
    "MAX_NODE_SCORE",
    "MAX_WEIGHT",
    "MIN_NODE_SCORE",
    "BindPlugin",
    "ClusterEvent",
    "Code",
    "Diagnosis",
    "EnqueueExtensions",
    "FilterPlugin",
    "FilterResult",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "ReservePlugin",
    "ScorePlugin",
]
