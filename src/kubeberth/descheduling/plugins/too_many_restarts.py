"""RemovePodsHavingTooManyRestarts: evict pods whose containers keep restarting.

A pod whose containers' restart counts sum to at least ``podRestartThreshold`` (init containers
included with ``includingInitContainers``) is evicted, in the hope that another node suits it
better. ``states`` restricts it to pods Running or with a container waiting in CrashLoopBackOff.
On each node the pods with the most restarts go first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import ScopedPlugin, in_states

NAME = "RemovePodsHavingTooManyRestarts"
POINTS = ("deschedule",)
ALLOWED_STATES = ("Running", "CrashLoopBackOff")


@dataclass(frozen=True, slots=True)
class Args:
    pod_restart_threshold: int
    including_init_containers: bool = False
    scope: a.PodScope = a.EVERY_POD
    states: tuple[str, ...] = ()


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("podRestartThreshold", "includingInitContainers", *a.SCOPE_FIELDS,
                           "states"))
    threshold = a.integer(raw, "podRestartThreshold")
    if threshold < 1:
        raise InputError("invalid PodsHavingTooManyRestarts threshold",
                         field="podRestartThreshold", expected="an integer of at least 1")
    states = a.choices(raw, "states", ALLOWED_STATES, "state {!r} is not supported",
                       " or ".join(ALLOWED_STATES)) or ()
    return Args(pod_restart_threshold=threshold,
                including_init_containers=a.boolean(raw, "includingInitContainers"),
                scope=a.scope(raw), states=states)


def restarts(pod: PodView, including_init: bool) -> int:
    status = pod.pod.status
    total = sum(s.restart_count for s in status.container_statuses)
    if including_init:
        total += sum(s.restart_count for s in status.init_container_statuses)
    return total


class RemovePodsHavingTooManyRestarts(ScopedPlugin[Args]):
    def _in_state(self, pod: PodView) -> bool:
        """Init containers' waiting reasons never count here, even with
        ``includingInitContainers`` (which only adds their restarts)."""
        return in_states(pod, self.args.states, status_reason=False, init_containers=False)

    def deschedule(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        threshold = self.args.pod_restart_threshold
        for node in nodes:
            counted = [(p, restarts(p, self.args.including_init_containers))
                       for p in snapshot.all_pods_on_node(node.metadata.name)
                       if self.in_scope(p) and self._in_state(p)]
            counted = [(p, n) for p, n in counted if n >= threshold]
            counted.sort(key=lambda item: -item[1])
            if evictor.evict_on_node(((pod, f"containers restarted {n} times "
                                       f"(podRestartThreshold {threshold})")
                                      for pod, n in counted), NAME):
                return


SPEC = PluginSpec(NAME, POINTS, parse_args, RemovePodsHavingTooManyRestarts)
