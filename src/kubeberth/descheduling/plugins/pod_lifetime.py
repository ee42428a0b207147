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
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import ScopedPlugin, in_states

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
    scope: a.PodScope = a.EVERY_POD
    states: tuple[str, ...] = ()
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("maxPodLifeTimeSeconds", *a.SCOPE_FIELDS, "states",
                           "includingInitContainers", "includingEphemeralContainers"))
    limit = a.uint(raw, "maxPodLifeTimeSeconds")
    if limit is None:
        raise InputError("MaxPodLifeTimeSeconds not set", field="maxPodLifeTimeSeconds",
                         expected="a number of seconds")
    states = a.choices(raw, "states", ALLOWED_STATES, "state {!r} is not supported",
                       "one of " + ", ".join(ALLOWED_STATES)) or ()
    return Args(max_pod_lifetime_seconds=limit, scope=a.scope(raw), states=states,
                including_init_containers=a.boolean(raw, "includingInitContainers"),
                including_ephemeral_containers=a.boolean(raw, "includingEphemeralContainers"))


class PodLifeTime(ScopedPlugin[Args]):
    def _in_state(self, pod: PodView) -> bool:
        return in_states(pod, self.args.states, status_reason=True,
                         init_containers=self.args.including_init_containers)

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


SPEC = PluginSpec(NAME, POINTS, parse_args, PodLifeTime)
