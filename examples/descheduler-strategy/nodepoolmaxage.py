"""NodePoolMaxAge: pods on one node pool may run at most ``maxPodAge``; older ones are evicted.

A platform team's strategy for spot (preemptible) GPU pools: the provider reclaims those nodes
without warning, so long-running work there is recycled on the team's schedule instead, oldest
first, and its owner re-creates it wherever the scheduler sees fit. ``nodeSelector`` (a label
selector string such as ``node-pool=spot``) says which nodes form the pool, ``maxPodAge`` (a Go
duration) how long a pod may run there, measured from ``status.startTime`` (the creation time
when the pod has none), and ``namespaces`` and ``labelSelector`` restrict which pods count. The
DefaultEvictor's protections, the policy's limits and PodDisruptionBudgets apply as to any
in-tree plugin.

Register it with ``--plugin nodepoolmaxage:SPEC`` or by installing this directory, which declares
it in the ``kubeberth.descheduler_plugins`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import ScopedPlugin
from kubeberth.descheduling.policy import (
    LabelRequirement,
    match_label_requirements,
    parse_label_selector_string,
)

NAME = "NodePoolMaxAge"
POINTS = ("deschedule",)


@dataclass(frozen=True, slots=True)
class Args:
    node_selector: str
    pool: tuple[LabelRequirement, ...]
    max_pod_age: float  # seconds
    scope: a.PodScope = a.EVERY_POD


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("nodeSelector", "maxPodAge", *a.SCOPE_FIELDS))
    selector = a.string(raw, "nodeSelector")
    if not selector:
        raise InputError("nodeSelector is not set", field="nodeSelector",
                         expected="a label selector naming the pool, such as node-pool=spot")
    try:
        pool = tuple(parse_label_selector_string(selector))
    except InputError as err:
        raise err.at(field="nodeSelector") from None
    max_age = a.duration(raw, "maxPodAge")
    if max_age is None or max_age <= 0:
        raise InputError(f"maxPodAge is {raw.get('maxPodAge')!r}", field="maxPodAge",
                         expected="a positive duration such as 12h")
    return Args(node_selector=selector, pool=pool, max_pod_age=max_age, scope=a.scope(raw))


class NodePoolMaxAge(ScopedPlugin[Args]):
    def deschedule(self, nodes: list[Node]) -> None:
        self.handle.evictor.evict_in_order(self._expired(nodes), NAME)

    def _expired(self, nodes: list[Node]) -> Iterator[tuple[PodView, str]]:
        """The pool's pods that ran longer than ``maxPodAge``, the longest-running first."""
        snapshot, args = self.handle.snapshot, self.args
        pool = [n for n in nodes if match_label_requirements(list(args.pool), n.metadata.labels)]
        aged = [(snapshot.now - (p.started if p.started is not None else p.created), p)
                for n in pool for p in snapshot.pods_on_node(n.metadata.name) if self.in_scope(p)]
        for age, pod in sorted((x for x in aged if x[0] > args.max_pod_age),
                               key=lambda x: -x[0]):
            yield pod, (f"pod has run {age / 3600:g}h on node {pod.node} of pool "
                        f"{args.node_selector}, more than maxPodAge ({args.max_pod_age:g}s)")


SPEC = PluginSpec(NAME, POINTS, parse_args, NodePoolMaxAge)
