"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate their node's NoSchedule taints.

A taint added after a pod was scheduled (``kubectl taint``, or the spill controller's
``vk.node.com/low-gpu-usage`` taint on the virtual-kubelet node) does not move the pod; this plugin
does. Only NoSchedule taints count, plus PreferNoSchedule with ``includePreferNoSchedule``;
``excludedTaints`` ignores taints by ``key`` or ``key=value``; ``includedTaints`` (when given)
considers only the taints it names. Pods that are not Succeeded or Failed are visited node by
node; reaching the per-node limit moves on to the next node, reaching the total limit ends the
plugin.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Taint
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    ScopedPlugin,
    show_taint,
    untolerated_taint,
)

NAME = "RemovePodsViolatingNodeTaints"
POINTS = ("deschedule",)


@dataclass(frozen=True, slots=True)
class Args:
    scope: a.PodScope = a.EVERY_POD
    include_prefer_no_schedule: bool = False
    excluded_taints: tuple[str, ...] = ()
    # None: every taint is considered; a (possibly empty) tuple: only the taints it names.
    included_taints: tuple[str, ...] | None = None


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, (*a.SCOPE_FIELDS, "includePreferNoSchedule",
                           "excludedTaints", "includedTaints"))
    excluded = a.strings(raw, "excludedTaints") or ()
    included = a.strings(raw, "includedTaints")
    if excluded and included:
        raise InputError("either includedTaints or excludedTaints can be set, but not both",
                         field="includedTaints", expected="only one of includedTaints and "
                         "excludedTaints")
    return Args(scope=a.scope(raw),
                include_prefer_no_schedule=a.boolean(raw, "includePreferNoSchedule"),
                excluded_taints=excluded, included_taints=included)


class RemovePodsViolatingNodeTaints(ScopedPlugin[Args]):
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        super().__init__(args, handle)
        effects = {"NoSchedule", "PreferNoSchedule"} if args.include_prefer_no_schedule \
            else {"NoSchedule"}
        excluded = frozenset(args.excluded_taints)
        included = None if args.included_taints is None else frozenset(args.included_taints)

        def named(taint: Taint, names: frozenset[str]) -> bool:
            return taint.key in names or (bool(taint.value)
                                          and f"{taint.key}={taint.value}" in names)

        def considered(taint: Taint) -> bool:
            return (taint.effect in effects and not named(taint, excluded)
                    and (included is None or named(taint, included)))

        self.considered = considered

    def deschedule(self, nodes: list[Node]) -> None:
        for node in nodes:
            if self.handle.evictor.evict_on_node(self._violations(node), NAME):
                return

    def _violations(self, node: Node) -> Iterator[tuple[PodView, str]]:
        name = node.metadata.name
        for pod in self.handle.snapshot.pods_on_node(name):
            if not self.in_scope(pod):
                continue
            taint = untolerated_taint(pod.pod.spec.tolerations, node.spec.taints,
                                      self.considered)
            if taint is not None:
                yield pod, f"pod does not tolerate taint {show_taint(taint)} of node {name}"


SPEC = PluginSpec(NAME, POINTS, parse_args, RemovePodsViolatingNodeTaints)
