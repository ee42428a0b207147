"""PodLifeTime: evict pods older than ``maxPodLifeTimeSeconds``, oldest first.

Age is ``now − metadata.creationTimestamp`` in whole seconds, and a pod is old when the age is
strictly greater than the limit. ``states`` restricts it to pods in one of the given phases,
pod status reasons or container waiting reasons (init containers' too with
``includingInitContainers``). The pods of all nodes are evicted together from the oldest, so
limits and PodDisruptionBudgets stop the youngest.
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

NAME = "PodLifeTime"
POINTS = ("deschedule",)
ALLOWED_STATES = (
    "Running", "Pending", "Succeeded", "Failed", "Unknown",
    "NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError",
    "PodInitializing", "ContainerCreating",
    "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError", "ErrImagePull",
    "CreateContainerError", "InvalidImageName",
)


@dataclass(frozen=True, slots=True)
class Args:
    max_pod_lifetime_seconds: int
    namespaces: a.Namespaces = a.ALL_NAMESPACES
    label_selector: LabelSelector | None = None
    states: tuple[str, ...] = ()
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("maxPodLifeTimeSeconds", "namespaces", "labelSelector", "states",
                           "includingInitContainers", "includingEphemeralContainers"))
    limit = a.uint(raw, "maxPodLifeTimeSeconds")
    if limit is None:
        raise InputError("MaxPodLifeTimeSeconds not set", field="maxPodLifeTimeSeconds",
                         expected="a number of seconds")
    states = a.strings(raw, "states") or ()
    for i, state in enumerate(states):
        if state not in ALLOWED_STATES:
            raise InputError(f"state {state!r} is not supported", field=f"states[{i}]",
                             expected="one of " + ", ".join(ALLOWED_STATES))
    return Args(max_pod_lifetime_seconds=limit, namespaces=a.namespaces(raw),
                label_selector=a.label_selector(raw), states=states,
                including_init_containers=a.boolean(raw, "includingInitContainers"),
                including_ephemeral_containers=a.boolean(raw, "includingEphemeralContainers"))


class PodLifeTime:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.in_scope = pod_scope(args.namespaces, args.label_selector)

    def _in_state(self, pod: PodView) -> bool:
        states = self.args.states
        if not states:
            return True
        status = pod.pod.status
        if status.phase in states or status.reason in states:
            return True
        statuses = list(status.container_statuses)
        if self.args.including_init_containers:
            statuses += status.init_container_statuses
        return any(s.state.waiting is not None and s.state.waiting.reason in states
                   for s in statuses)

    def deschedule(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        limit = self.args.max_pod_lifetime_seconds
        old: list[tuple[PodView, int]] = []
        for node in nodes:
            for pod in snapshot.all_pods_on_node(node.metadata.name):
                age = int(snapshot.now - pod.created)
                if self.in_scope(pod) and age > limit and self._in_state(pod):
                    old.append((pod, age))
        old.sort(key=lambda item: item[0].created)
        evictor.evict_in_order(((pod, f"pod is {age}s old, more than maxPodLifeTimeSeconds "
                                 f"({limit})") for pod, age in old), NAME)


def new(args: Args, handle: DeschedulerHandle) -> PodLifeTime:
    return PodLifeTime(args, handle)


SPEC = PluginSpec(NAME, POINTS, parse_args, new)
