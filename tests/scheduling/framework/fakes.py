"""Tiny plugins for exercising the framework without the in-tree ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    BindPlugin,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Code, FilterResult, Status
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo


class Sort(QueueSortPlugin):
    name: ClassVar[str] = "Sort"

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[Any, ...]:
        return (-qpi.info.priority, qpi.timestamp)


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    def bind(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> Status:
        return SUCCESS


class EvenOnly(FilterPlugin):
    """Rejects odd node slots."""

    name: ClassVar[str] = "EvenOnly"

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        return FilterResult.from_mask(nodes % 2 == 1, Code.UNSCHEDULABLE, ["odd node"])


class NotZero(FilterPlugin):
    name: ClassVar[str] = "NotZero"

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        return FilterResult.from_mask(nodes == 0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                      ["node zero"])


class SlotScore(ScorePlugin):
    """Scores a node by its slot index, normalized to 0..100."""

    name: ClassVar[str] = "SlotScore"

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        return nodes.astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: IntArray) -> IntArray | None:
        top = int(scores.max()) if scores.size else 0
        return scores * 100 // top if top else scores


class Flat(ScorePlugin):
    name: ClassVar[str] = "Flat"

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        return np.full(len(nodes), 50, dtype=np.int64)


class OnlyNamed(PreFilterPlugin):
    """Restricts the cycle to nodes named in the pod's annotation ``only``."""

    name: ClassVar[str] = "OnlyNamed"

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        only = pod.pod.metadata.annotations.get("only")
        if only is None:
            return None, Status(Code.SKIP)
        return PreFilterResult(set(only.split(","))), SUCCESS


def _factory(cls: type) -> Any:
    def new(args: Mapping[str, Any] | None, handle: Handle) -> Any:
        return cls()
    return new


def registry() -> Registry:
    return Registry({c.name: _factory(c) for c in (Sort, Binder, EvenOnly, NotZero, SlotScore,
                                                   Flat, OnlyNamed)})
