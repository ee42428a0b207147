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
from kubeberth.api.objects import LabelSelector, Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, PluginSpec, PodView
from kubeberth.descheduling.helpers import pod_scope

NAME = "RemovePodsHavingTooManyRestarts"
POINTS = ("deschedule",)
ALLOWED_STATES = ("Running", "CrashLoopBackOff")


@dataclass(frozen=True, slots=True)
class Args:
    pod_restart_threshold: int
    including_init_containers: bool = False
    namespaces: a.Namespaces = a.ALL_NAMESPACES
    label_selector: LabelSelector | None = None
    states: tuple[str, ...] = ()


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("podRestartThreshold", "includingInitContainers", "namespaces",
                           "labelSelector", "states"))
    threshold = a.integer(raw, "podRestartThreshold")
    if threshold < 1:
        raise InputError("invalid PodsHavingTooManyRestarts threshold",
                         field="podRestartThreshold", expected="an integer of at least 1")
    states = a.strings(raw, "states") or ()
    for i, state in enumerate(states):
        if state not in ALLOWED_STATES:
            raise InputError(f"state {state!r} is not supported", field=f"states[{i}]",
                             expected=" or ".join(ALLOWED_STATES))
    return Args(pod_restart_threshold=threshold,
                including_init_containers=a.boolean(raw, "includingInitContainers"),
                namespaces=a.namespaces(raw), label_selector=a.label_selector(raw),
                states=states)


def restarts(pod: PodView, including_init: bool) -> int:
    status = pod.pod.status
    total = sum(s.restart_count for s in status.container_statuses)
    if including_init:
        total += sum(s.restart_count for s in status.init_container_statuses)
    return total


class RemovePodsHavingTooManyRestarts:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.in_scope = pod_scope(args.namespaces, args.label_selector)

    def _in_state(self, pod: PodView) -> bool:
        states = self.args.states
        if not states:
            return True
        status = pod.pod.status
        if status.phase in states:
            return True
        return any(s.state.waiting is not None and s.state.waiting.reason in states
                   for s in status.container_statuses)

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


def new(args: Args, handle: DeschedulerHandle) -> RemovePodsHavingTooManyRestarts:
    return RemovePodsHavingTooManyRestarts(args, handle)


SPEC = PluginSpec(NAME, POINTS, parse_args, new)
