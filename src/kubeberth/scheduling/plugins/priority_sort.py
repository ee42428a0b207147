"""PrioritySort: the queue order, higher priority first, then earlier queue timestamp.

This is upstream's ``Less``: ``p1 > p2 || (p1 == p2 && t1 < t2)``, expressed as a sort key so the
queue can keep a heap. Ties on both leave the order to the queue's insertion sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import QueuedPodInfo, QueueSortPlugin
from kubeberth.scheduling.plugins.helper import reject_args

NAME = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    name = NAME

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float]:
        return (-qpi.info.priority, qpi.timestamp)


def new(args: Mapping[str, Any] | None, handle: Handle) -> PrioritySort:
    reject_args(NAME, args)
    return PrioritySort()
