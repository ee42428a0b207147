"""What the framework lends its plugins: the snapshot, the clock, a seeded RNG, waiting pods and
nominated pods. Hosts (simulator, live scheduler, explain) create one per scheduler.

Waiting pods are the Permit extension point's state: a pod that a Permit plugin answered with
Wait stays reserved on its node until every waiting plugin allows it, one rejects it, or its
timeout expires (the host enforces timeouts on its own clock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.state.cluster import ClusterState, PodInfo

if TYPE_CHECKING:
    from kubeberth.scheduling.framework.extender import HTTPExtender
    from kubeberth.scheduling.framework.runtime import Framework


@dataclass(slots=True)
class WaitingPod:
    info: PodInfo
    node: int
    profile: str
    deadline: float
    pending: set[str] = field(default_factory=set)
    rejected: Status | None = None

    def allow(self, plugin: str) -> None:
        self.pending.discard(plugin)

    def reject(self, plugin: str, message: str) -> None:
        """The first decision stands, as upstream's one-slot signal: a pod already allowed by
        every plugin, or already rejected, ignores a later rejection."""
        if self.decided:
            return
        self.rejected = Status(Code.UNSCHEDULABLE, (message,), plugin)

    @property
    def decided(self) -> bool:
        return self.rejected is not None or not self.pending


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, wp: WaitingPod) -> None:
        self._pods[wp.info.key] = wp

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def remove(self, key: str) -> WaitingPod | None:
        return self._pods.pop(key, None)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)


class Nominator:
    """Pods that preemption nominated to a node and that have not been bound yet."""

    def __init__(self) -> None:
        self._by_node: dict[int, dict[str, PodInfo]] = {}
        self._node_of: dict[str, int] = {}

    def add(self, pi: PodInfo, node: int) -> None:
        self.remove(pi)
        self._by_node.setdefault(node, {})[pi.key] = pi
        self._node_of[pi.key] = node

    def remove(self, pi: PodInfo) -> None:
        node = self._node_of.pop(pi.key, None)
        if node is not None:
            self._by_node[node].pop(pi.key, None)

    def node_of(self, key: str) -> int | None:
        return self._node_of.get(key)

    def pods_for(self, node: int) -> list[PodInfo]:
        return list(self._by_node.get(node, {}).values())

    def nodes(self) -> list[int]:
        return [n for n, pods in self._by_node.items() if pods]

    @contextmanager
    def counted_on(self, fw: Framework, state: CycleState, pod: PodInfo, snap: ClusterState,
                   node: int) -> Iterator[tuple[CycleState, Status] | None]:
        """Upstream's ``addGENominatedPods``: the pods of equal or higher priority nominated to
        ``node`` are put on it for the block, with a clone of ``state`` that the PreFilter
        extensions' AddPod saw and their status (an Error if one failed, as upstream wraps it).
        Yields None when no such pod exists; the snapshot is restored on exit."""
        extra = [p for p in self.pods_for(node)
                 if p.priority >= pod.priority and p.key != pod.key and p.node < 0]
        if not extra:
            yield None
            return
        trial = state.clone()
        st = SUCCESS
        added: list[PodInfo] = []
        try:
            for p in extra:
                snap.add_pod(p, node)
                added.append(p)
                ext = fw.run_pre_filter_extension_add_pod(trial, pod, p, node, snap)
                if not ext.ok:
                    st = Status(Code.ERROR, ext.reasons, ext.plugin)
                    break
            yield trial, st
        finally:
            for p in added:
                snap.remove_pod(p)


class Handle:
    def __init__(self, snapshot: ClusterState, *, clock: Callable[[], float],
                 rng: np.random.Generator, parallelism: int = 16) -> None:
        self.snapshot = snapshot
        self.clock = clock
        self.rng = rng
        self.parallelism = parallelism
        self.waiting_pods = WaitingPods()
        self.nominator = Nominator()
        self.frameworks: dict[str, Framework] = {}
        # The configuration's extenders; DefaultPreemption hands them its candidates.
        self.extenders: list[HTTPExtender] = []

    def now(self) -> float:
        return self.clock()
