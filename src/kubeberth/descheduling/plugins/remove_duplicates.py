"""RemoveDuplicates: spread pods of one owner that pile up on a node.

Two evictable pods on the same node are duplicates when they have the same owner references
(namespace, kind, name) and the same container images. For each owner, the nodes where such pods
could run (tolerating NoSchedule/NoExecute taints and matching node selector and required
affinity; only pods with more than one such node contribute) set an even share,
``ceil(pods of the owner / feasible nodes)``; every node keeps that many and the rest of its
duplicates are evicted. Owners with fewer than two feasible nodes are left alone.
``excludeOwnerKinds`` skips pods owned by those kinds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, EvictError, PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    matches_node_selector,
    namespace_filter,
    no_schedule_or_execute,
    required_terms,
    tolerates_taints,
)

NAME = "RemoveDuplicates"
POINTS = ("balance",)

OwnerKey = tuple[str, str, str, str]  # namespace, kind, name, images joined by "#"


@dataclass(frozen=True, slots=True)
class Args:
    exclude_owner_kinds: tuple[str, ...] = ()
    namespaces: a.Namespaces = a.ALL_NAMESPACES


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("excludeOwnerKinds", "namespaces"))
    return Args(exclude_owner_kinds=a.strings(raw, "excludeOwnerKinds") or (),
                namespaces=a.namespaces(raw))


class RemoveDuplicates:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.in_namespaces = namespace_filter(args.namespaces.include, args.namespaces.exclude)
        self.excluded_kinds = frozenset(args.exclude_owner_kinds)

    def balance(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        duplicates: dict[OwnerKey, dict[str, list[PodView]]] = {}
        occurrences: dict[OwnerKey, int] = {}
        for node in nodes:
            name = node.metadata.name
            seen: dict[str, list[list[str]]] = {}
            for pod in snapshot.pods_on_node(name):
                if not self.in_namespaces(pod) or evictor.filter_both(pod) is not None:
                    continue
                owners = pod.owners
                if not owners or any(o.kind in self.excluded_kinds for o in owners):
                    continue
                images = sorted(c.image for c in pod.pod.spec.containers)
                images_hash = "#".join(images)
                keys: list[str] = []
                owner_keys: list[OwnerKey] = []
                for o in owners:
                    ok = (pod.namespace, o.kind, o.name, images_hash)
                    owner_keys.append(ok)
                    occurrences[ok] = occurrences.get(ok, 0) + 1
                    keys.extend("/".join((pod.namespace, o.kind, o.name, img)) for img in images)
                keys.sort()
                first = keys[0] if keys else ""
                existing = seen.setdefault(first, [])
                if keys in existing:
                    for ok in owner_keys:
                        duplicates.setdefault(ok, {}).setdefault(name, []).append(pod)
                else:
                    existing.append(keys)
        for owner, by_node in duplicates.items():
            targets = self._target_nodes(by_node, nodes)
            if len(targets) < 2:
                continue
            upper = math.ceil(occurrences[owner] / len(targets))
            for node_name, pods in by_node.items():
                if len(pods) + 1 <= upper:
                    continue
                reason = (f"{len(pods) + 1} pods of {owner[1]} {owner[0]}/{owner[2]} with the same "
                          f"images run on node {node_name}; an even spread over "
                          f"{len(targets)} feasible nodes allows {upper}")
                for pod in pods[upper - 1:]:
                    err = evictor.evict(pod, NAME, reason)
                    if err is EvictError.NODE_LIMIT:
                        break
                    if err is EvictError.TOTAL_LIMIT:
                        return

    @staticmethod
    def _target_nodes(by_node: dict[str, list[PodView]], nodes: list[Node]) -> set[str]:
        """Upstream ``getTargetNodes``: nodes that some duplicate could run on, counting only
        duplicates that could run on more than one node."""
        targets: set[str] = set()
        seen: set[bytes] = set()
        for pods in by_node.values():
            for pod in pods:
                spec = pod.pod.spec
                # Pods with equal tolerations, node selector and required affinity land alike.
                placement = msgspec.json.encode([spec.tolerations, spec.node_selector,
                                                 required_terms(pod.pod)])
                if placement in seen:
                    continue
                seen.add(placement)
                matching = [n.metadata.name for n in nodes
                            if tolerates_taints(spec.tolerations, n.spec.taints,
                                                no_schedule_or_execute)
                            and matches_node_selector(pod.pod, n)]
                if len(matching) > 1:
                    targets.update(matching)
        return targets


SPEC = PluginSpec(NAME, POINTS, parse_args, RemoveDuplicates)
