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
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    ScopedPlugin,
    matches_node_selector,
    pod_fits_any_node,
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
    scope: a.PodScope = a.EVERY_POD


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("nodeAffinityType", *a.SCOPE_FIELDS))
    types = a.choices(raw, "nodeAffinityType", (REQUIRED, PREFERRED),
                      "invalid nodeAffinityType {!r}", f"{REQUIRED} or {PREFERRED}")
    if not types:
        raise InputError("nodeAffinityType needs to be set", field="nodeAffinityType",
                         expected=f"a list with {REQUIRED} and/or {PREFERRED}")
    return Args(node_affinity_type=types, scope=a.scope(raw))


class RemovePodsViolatingNodeAffinity(ScopedPlugin[Args]):
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


SPEC = PluginSpec(NAME, POINTS, parse_args, RemovePodsViolatingNodeAffinity)
