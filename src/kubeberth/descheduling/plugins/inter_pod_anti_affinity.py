"""RemovePodsViolatingInterPodAntiAffinity: evict pods whose required anti-affinity is broken.

Node by node, pods from lowest priority (then BestEffort, Burstable, Guaranteed) are checked: a
pod with a required anti-affinity term that another pod in the term's namespaces matches, in the
same topology domain, is evicted if the evictor allows it. An evicted pod no longer counts
against the pods after it, so of two pods that repel each other only one goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import EvictError, PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    ScopedPlugin,
    anti_affinity_violated,
    sort_by_priority_low_to_high,
)

NAME = "RemovePodsViolatingInterPodAntiAffinity"
POINTS = ("deschedule",)


@dataclass(frozen=True, slots=True)
class Args:
    scope: a.PodScope = a.EVERY_POD


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, a.SCOPE_FIELDS)
    return Args(a.scope(raw))


class RemovePodsViolatingInterPodAntiAffinity(ScopedPlugin[Args]):
    def deschedule(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        node_map = {n.metadata.name: n for n in nodes}
        by_node: dict[str, list[PodView]] = {}
        by_namespace: dict[str, list[PodView]] = {}
        for n in nodes:
            for p in snapshot.pods_on_node(n.metadata.name):
                if self.in_scope(p):
                    by_node.setdefault(p.node, []).append(p)
                    by_namespace.setdefault(p.namespace, []).append(p)
        for n in nodes:
            for pod in sort_by_priority_low_to_high(by_node.get(n.metadata.name, [])):
                if not anti_affinity_violated(pod, by_namespace, node_map):
                    continue
                reason = (f"another pod on node {n.metadata.name}'s topology domain matches the "
                          "pod's required anti-affinity")
                err = evictor.evict_checked(pod, NAME, reason)
                if err is None:
                    # Upstream removes the evicted pod by name from its namespace's list.
                    pods = by_namespace[pod.namespace]
                    for k, other in enumerate(pods):
                        if other.name == pod.name:
                            del pods[k]
                            break
                elif err is EvictError.NODE_LIMIT:
                    break
                elif err is EvictError.TOTAL_LIMIT:
                    return


SPEC = PluginSpec(NAME, POINTS, parse_args, RemovePodsViolatingInterPodAntiAffinity)
