"""VolcanoDRF: Volcano's dominant-resource-fairness job order as a kube-scheduler QueueSort.

A job's dominant share is the largest fraction of any cluster resource its running pods hold
(``drf.go``'s ``calculateShare`` over the sum of node allocatable). Volcano's default tiers order
jobs by priority first (the ``priority`` plugin) and then by the lowest dominant share (``drf``);
this plugin's sort key is the same: priority, then dominant share, then the time the pod entered
the queue. A job is a pod's PodGroup, else its controller, else the pod itself.

Deviation: Volcano re-sorts its jobs every session; the scheduling queue here is a heap whose
keys are computed when a pod enters activeQ (on arrival and on every retry), so a share is the
one the job had then. Hierarchical DRF and namespace fair share are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import QueuedPodInfo, QueueSortPlugin
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.scheduling.plugins.volcano_resource import (
    VResource,
    cluster_total,
    dominant_share,
    job_allocations,
    job_of,
)

NAME = "VolcanoDRF"


class VolcanoDRF(QueueSortPlugin):
    """Priority first, then the lowest dominant share of the pod's job."""

    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._generation = -1
        self._total: VResource = {}
        self._allocated: dict[str, VResource] = {}

    def share(self, job: str) -> float:
        """The job's dominant share in the current snapshot."""
        snap = self.handle.snapshot
        if snap.generation != self._generation:
            self._total = cluster_total(snap)
            self._allocated = job_allocations(snap.pods.values())
            self._generation = snap.generation
        return dominant_share(self._allocated.get(job, {}), self._total)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float, float]:
        pi = qpi.info
        return (-pi.priority, self.share(job_of(pi)), qpi.timestamp)


def new(args: Mapping[str, Any] | None, handle: Handle) -> VolcanoDRF:
    reject_args(NAME, args)
    return VolcanoDRF(handle)
