"""RemovePodsViolatingNodeAffinity: evict pods whose node no longer suits their node affinity.

``nodeAffinityType`` (required) lists what to enforce, in order:
``requiredDuringSchedulingIgnoredDuringExecution`` evicts a pod with required node affinity whose
node no longer matches its node selector and affinity, provided it fits some ready node;
``preferredDuringSchedulingIgnoredDuringExecution`` evicts a pod with preferred terms when some
node it fits scores a higher total weight than its current node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import LabelSelector, Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    matches_node_selector,
    pod_fits_any_node,
    pod_scope,
    preferred_weight,
    required_terms,
)

NAME = "RemovePodsViolatingNodeAffinity"
POINTS = ("deschedule",)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class Args:
    node_affinity_type: tuple[str, ...]
    namespaces: a.Namespaces = a.ALL_NAMESPACES
    label_selector: LabelSelector | None = None


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("nodeAffinityType", "namespaces", "labelSelector"))
    types = a.strings(raw, "nodeAffinityType") or ()
    if not types:
        raise InputError("nodeAffinityType needs to be set", field="nodeAffinityType",
                         expected=f"a list with {REQUIRED} and/or {PREFERRED}")
    for i, t in enumerate(types):
        if t not in (REQUIRED, PREFERRED):
            raise InputError(f"invalid nodeAffinityType {t!r}", field=f"nodeAffinityType[{i}]",
                             expected=f"{REQUIRED} or {PREFERRED}")
    return Args(node_affinity_type=types, namespaces=a.namespaces(raw),
                label_selector=a.label_selector(raw))


class RemovePodsViolatingNodeAffinity:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.in_scope = pod_scope(args.namespaces, args.label_selector)

    def deschedule(self, nodes: list[Node]) -> None:
        snapshot = self.handle.snapshot
        for kind in self.args.node_affinity_type:
            if kind == REQUIRED:
                def violates(pod: PodView, node: Node) -> str | None:
                    if required_terms(pod.pod) is None or matches_node_selector(pod.pod, node):
                        return None
                    if not pod_fits_any_node(snapshot, pod, nodes):
                        return None
                    return (f"node {node.metadata.name} no longer matches the pod's required "
                            "node affinity")
            else:
                def violates(pod: PodView, node: Node) -> str | None:
                    aff = pod.pod.spec.affinity
                    if aff is None or aff.node_affinity is None or not aff.node_affinity \
                            .preferred_during_scheduling_ignored_during_execution:
                        return None
                    if not pod_fits_any_node(snapshot, pod, nodes):
                        return None
                    here = preferred_weight(pod.pod, node)
                    best = max((preferred_weight(pod.pod, n) for n in nodes), default=0)
                    if best <= here:
                        return None
                    return (f"another node scores {best} on the pod's preferred node affinity, "
                            f"node {node.metadata.name} scores {here}")
            if self._process(nodes, violates):
                return

    def _process(self, nodes: list[Node], violates: Callable[[PodView, Node], str | None]
                 ) -> bool:
        """Evict the violating pods node by node; True when the total limit was reached."""
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        for node in nodes:
            scoped = (p for p in snapshot.pods_on_node(node.metadata.name) if self.in_scope(p))
            chosen = ((p, reason) for p in scoped if (reason := violates(p, node)) is not None)
            if evictor.evict_on_node(chosen, NAME):
                return True
        return False


def new(args: Args, handle: DeschedulerHandle) -> RemovePodsViolatingNodeAffinity:
    return RemovePodsViolatingNodeAffinity(args, handle)


SPEC = PluginSpec(NAME, POINTS, parse_args, new)
