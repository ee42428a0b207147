"""The free-GPU signal: one reading per controller tick, from wherever the host gets it.

A reading carries a value or a fault (the source was unreachable, answered with an error, or
had no sample); the controller holds its state on a fault and reports it, and never flips a
taint on a value it cannot trust. :class:`ClusterSignal` computes the value from a snapshot
exactly as the production query (:mod:`kubeberth.spill.promql`) does from
kube-state-metrics: allocatable ``nvidia.com/gpu`` of Ready, schedulable, non-VK nodes minus the
GPU requests of Running (bound) pods on them that the exclusion selector does not match,
floored at 0. Pods assumed but not yet bound are not Running yet, as in the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kubeberth.api.resources import GPU
from kubeberth.spill.config import ExcludePods, SpillConfig
from kubeberth.state.cluster import ClusterState


@dataclass(slots=True, frozen=True)
class Reading:
    """One sample of the signal: ``value`` (None on a fault), when it was taken, and why it is
    missing."""

    value: float | None
    at: float
    fault: str = ""


class SignalSource(Protocol):
    """Anything that can read the signal at a moment; the snapshot is the simulated cluster
    (live sources ignore it)."""

    def read(self, snapshot: ClusterState, now: float) -> Reading: ...


class ClusterSignal:
    """Free in-cluster GPUs computed from the snapshot (the simulation's source)."""

    def __init__(self, vk_nodes: Iterable[str], exclude: ExcludePods) -> None:
        self.vk_nodes = frozenset(vk_nodes)
        self.exclude_labels = dict(exclude.match_labels)
        self.exclude_classes = frozenset(exclude.priority_class_names)

    @classmethod
    def for_config(cls, cfg: SpillConfig) -> ClusterSignal:
        """The signal a SpillConfig describes: its VK node left out, its pods excluded."""
        return cls([cfg.virtual_node.name], cfg.controller.exclude_pods)

    def read(self, snapshot: ClusterState, now: float) -> Reading:
        return Reading(free_gpus(snapshot, self.vk_nodes, self.exclude_labels,
                                 self.exclude_classes), now)


def free_gpus(snapshot: ClusterState, vk_nodes: frozenset[str], exclude_labels: dict[str, str],
              exclude_classes: frozenset[str]) -> float:
    col = snapshot.resources.get(GPU)
    if col is None:
        return 0.0
    allocatable = 0
    used = 0
    for idx in snapshot.node_ids():
        i = int(idx)
        if snapshot.node_names[i] in vk_nodes or not snapshot.ready[i] \
                or snapshot.unschedulable[i]:
            continue
        allocatable += int(snapshot.allocatable[i, col])
        for pi in snapshot.pods_on_node[i].values():
            if not pi.pod.spec.node_name:
                continue  # assumed, not bound: not Running yet
            if exclude_classes and pi.pod.spec.priority_class_name in exclude_classes:
                continue
            if exclude_labels and all(pi.labels.get(k) == v for k, v in exclude_labels.items()):
                continue
            used += pi.requests.get(GPU, 0)
    return max(0.0, (allocatable - used) / 1000.0)
