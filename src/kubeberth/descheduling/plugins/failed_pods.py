"""RemoveFailedPods: evict pods in phase Failed so their owners can start them again.

A failed pod still holds its name and, for Jobs, counts against backoff; evicting it lets the
owner re-create it. Filters, all optional: ``minPodLifetimeSeconds`` (default 3600: only pods at
least that old), ``reasons`` (the pod's status reason or a container's waiting/terminated
reason), ``exitCodes`` (a terminated container's non-zero exit code), ``excludeOwnerKinds``, and
``includingInitContainers`` to look at init containers too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.objects import ContainerStatus, Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import ScopedPlugin

NAME = "RemoveFailedPods"
POINTS = ("deschedule",)
DEFAULT_MIN_POD_LIFETIME_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class Args:
    min_pod_lifetime_seconds: int | None = DEFAULT_MIN_POD_LIFETIME_SECONDS
    scope: a.PodScope = a.EVERY_POD
    exclude_owner_kinds: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = False


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("minPodLifetimeSeconds", *a.SCOPE_FIELDS,
                           "excludeOwnerKinds", "reasons", "exitCodes",
                           "includingInitContainers"))
    lifetime = a.uint(raw, "minPodLifetimeSeconds")
    return Args(
        min_pod_lifetime_seconds=DEFAULT_MIN_POD_LIFETIME_SECONDS if lifetime is None
        else lifetime,
        scope=a.scope(raw), exclude_owner_kinds=a.strings(raw, "excludeOwnerKinds") or (),
        reasons=a.strings(raw, "reasons") or (), exit_codes=a.integers(raw, "exitCodes"),
        including_init_containers=a.boolean(raw, "includingInitContainers"))


def _reasons(statuses: list[ContainerStatus]) -> list[str]:
    out: list[str] = []
    for s in statuses:
        if s.state.waiting is not None and s.state.waiting.reason:
            out.append(s.state.waiting.reason)
        if s.state.terminated is not None and s.state.terminated.reason:
            out.append(s.state.terminated.reason)
    return out


def _exit_codes(statuses: list[ContainerStatus]) -> list[int]:
    return [s.state.terminated.exit_code for s in statuses
            if s.state.terminated is not None and s.state.terminated.exit_code != 0]


def _failure(pod: PodView) -> str:
    why = pod.pod.status.reason
    return f"pod failed ({why})" if why else "pod failed"


class RemoveFailedPods(ScopedPlugin[Args]):
    def _matches(self, pod: PodView) -> bool:
        """Upstream ``validateCanEvict`` for a failed pod."""
        args = self.args
        age = int(self.handle.snapshot.now - pod.created)
        if args.min_pod_lifetime_seconds is not None and age < args.min_pod_lifetime_seconds:
            return False
        if any(o.kind in args.exclude_owner_kinds for o in pod.owners):
            return False
        status = pod.pod.status
        if args.reasons:
            reasons = _reasons(status.container_statuses)
            if status.reason:
                reasons.append(status.reason)
            if args.including_init_containers:
                reasons += _reasons(status.init_container_statuses)
            if not set(args.reasons) & set(reasons):
                return False
        if args.exit_codes:
            codes = _exit_codes(status.container_statuses)
            if args.including_init_containers:
                codes += _exit_codes(status.init_container_statuses)
            if not set(args.exit_codes) & set(codes):
                return False
        return True

    def deschedule(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        for node in nodes:
            chosen = ((pod, _failure(pod)) for pod in snapshot.all_pods_on_node(node.metadata.name)
                      if pod.phase == "Failed" and self.in_scope(pod) and self._matches(pod))
            if evictor.evict_on_node(chosen, NAME):
                return


SPEC = PluginSpec(NAME, POINTS, parse_args, RemoveFailedPods)
