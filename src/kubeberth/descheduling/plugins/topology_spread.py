"""RemovePodsViolatingTopologySpreadConstraint: rebalance domains that exceed a pod's maxSkew.

For every namespace and every distinct topology spread constraint its evictable pods declare
(``constraints`` selects DoNotSchedule and/or ScheduleAnyway ones; the default is DoNotSchedule),
pods matching the constraint's selector (with ``matchLabelKeys``) are counted per domain of the
topology key, over the nodes the constraint's node inclusion policies admit. Unbalanced
topologies are evened out as upstream's ``balanceDomains`` does: domains sorted by size, pods
moved from the largest domain to the smallest, at most half the excess skew, without taking a
domain below or above the ideal average. Within a domain the pods taken are the last in upstream's
order (pods with a node selector or affinity first, then by ascending priority), preferring those
that fit a node in a domain below the average. With ``topologyBalanceNodeFit`` (default true) a
pod is only evicted when it fits such a node and moving it would not break its other DoNotSchedule
constraints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from kubeberth.api.objects import Node, TopologySpreadConstraint
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import DeschedulerHandle, EvictError, PluginSpec, PodView
from kubeberth.descheduling.helpers import (
    ScopedPlugin,
    matches_node_selector,
    no_schedule_or_execute,
    node_fit,
    pod_fits_any_other_node,
    required_terms,
    term_selector,
    tolerates_taints,
)

NAME = "RemovePodsViolatingTopologySpreadConstraint"
POINTS = ("balance",)
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


@dataclass(frozen=True, slots=True)
class Args:
    scope: a.PodScope = a.EVERY_POD
    constraints: tuple[str, ...] = (DO_NOT_SCHEDULE,)
    topology_balance_node_fit: bool = True


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, (*a.SCOPE_FIELDS, "constraints", "topologyBalanceNodeFit"))
    constraints = a.choices(raw, "constraints", (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY),
                            "constraint {!r} is not supported",
                            f"{DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}") or (DO_NOT_SCHEDULE,)
    return Args(scope=a.scope(raw), constraints=constraints,
                topology_balance_node_fit=a.boolean(raw, "topologyBalanceNodeFit", True))


@dataclass(slots=True)
class Constraint:
    """A pod's constraint with its selector compiled (upstream ``topologySpreadConstraint``)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    min_domains: int
    matches: Callable[[Mapping[str, str]], bool]
    affinity_pod: PodView | None  # the pod whose node affinity counts (policy Honor)
    tolerations_pod: PodView | None  # the pod whose tolerations count (policy Honor)
    identity: bytes

    def admits(self, node: Node) -> bool:
        """Upstream ``matchNodeInclusionPolicies``."""
        if self.affinity_pod is not None and not matches_node_selector(self.affinity_pod.pod,
                                                                       node):
            return False
        return self.tolerations_pod is None or tolerates_taints(
            self.tolerations_pod.pod.spec.tolerations, node.spec.taints, no_schedule_or_execute)


def make_constraint(c: TopologySpreadConstraint, pod: PodView) -> Constraint:
    extra: dict[str, str] = {}
    for key in c.match_label_keys:
        if key in pod.labels:
            extra[key] = pod.labels[key]
    base = term_selector(c.label_selector)
    matches = base
    if extra and c.label_selector is not None:
        def matches(labels: Mapping[str, str]) -> bool:
            return all(labels.get(k) == v for k, v in extra.items()) and base(labels)
    affinity = (c.node_affinity_policy or "Honor") == "Honor"
    taints = (c.node_taints_policy or "Ignore") == "Honor"
    spec = pod.pod.spec
    identity = msgspec.json.encode([
        c.max_skew, c.topology_key, c.when_unsatisfiable, c.min_domains or 1, c.label_selector,
        sorted(extra.items()),
        [spec.node_selector, required_terms(pod.pod)] if affinity else None,
        spec.tolerations if taints else None,
    ])
    return Constraint(c.max_skew, c.topology_key, c.when_unsatisfiable, c.min_domains or 1,
                      matches, pod if affinity else None, pod if taints else None, identity)


@dataclass(slots=True)
class Domain:
    value: str
    pods: list[PodView]


class RemovePodsViolatingTopologySpreadConstraint(ScopedPlugin[Args]):
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        super().__init__(args, handle)
        in_scope, evictor = self.in_scope, handle.evictor
        self.pod_filter: Callable[[PodView], bool] = \
            lambda p: in_scope(p) and evictor.filter(p) is None

    def balance(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        node_map = {n.metadata.name: n for n in nodes}
        by_namespace: dict[str, list[PodView]] = {}
        for n in nodes:
            for p in snapshot.pods_on_node(n.metadata.name):
                if self.pod_filter(p):
                    by_namespace.setdefault(p.namespace, []).append(p)
        chosen: dict[str, tuple[PodView, str]] = {}
        for namespace, pods in by_namespace.items():
            constraints: list[Constraint] = []
            for pod in pods:
                for c in pod.pod.spec.topology_spread_constraints:
                    if c.when_unsatisfiable not in self.args.constraints:
                        continue
                    tsc = make_constraint(c, pod)
                    if all(tsc.identity != other.identity for other in constraints):
                        constraints.append(tsc)
            for tsc in constraints:
                domains: dict[str, Domain] = {}
                for n in nodes:
                    value = n.metadata.labels.get(tsc.topology_key)
                    if value is not None and value not in domains and tsc.admits(n):
                        domains[value] = Domain(value, [])
                total = 0
                for pod in pods:
                    if pod.terminating or not tsc.matches(pod.labels):
                        continue
                    node = node_map.get(pod.node)
                    value = node.metadata.labels.get(tsc.topology_key) if node else None
                    if value is None:
                        continue
                    domains.setdefault(value, Domain(value, [])).pods.append(pod)
                    total += 1
                sizes = [len(d.pods) for d in domains.values()]
                if not sizes or max(sizes) - min(sizes) <= tsc.max_skew:
                    continue
                self._balance_domains(chosen, namespace, tsc, list(domains.values()), total,
                                      nodes, pods)
        node_limited: set[str] = set()
        for pod, reason in chosen.values():
            if pod.node in node_limited or not self.pod_filter(pod):
                continue
            why = evictor.pre_eviction_filter(pod)
            if why is not None:
                evictor.refuse(pod, NAME, reason, why)
                continue
            err = evictor.evict(pod, NAME, reason)
            if err is EvictError.NODE_LIMIT:
                node_limited.add(pod.node)
            elif err is EvictError.TOTAL_LIMIT:
                return

    def _balance_domains(self, chosen: dict[str, tuple[PodView, str]], namespace: str,
                         tsc: Constraint, domains: list[Domain], total: int,
                         nodes: list[Node], namespace_pods: list[PodView]) -> None:
        snapshot = self.handle.snapshot
        evictor = self.handle.evictor
        ideal = total / len(domains)
        for d in domains:
            d.pods.sort(key=lambda p: _pod_order(p, evictor.filter(p) is None))
        domains.sort(key=lambda d: len(d.pods))
        node_fit_on = self.args.topology_balance_node_fit
        eligible = [n for n in nodes if tsc.admits(n)]
        by_value: dict[str, list[Node]] = {}
        for n in eligible:
            value = n.metadata.labels.get(tsc.topology_key)
            if value is not None:
                by_value.setdefault(value, []).append(n)
        below_avg = [n for d in domains if len(d.pods) < ideal for n in by_value.get(d.value, [])]
        i, j = 0, len(domains) - 1
        while i < j:
            if len(domains[j].pods) <= ideal:
                j -= 1
            skew = len(domains[j].pods) - len(domains[i].pods)
            if skew <= tsc.max_skew:
                i += 1
                continue
            above = math.ceil(len(domains[j].pods) - ideal)
            below = math.ceil(ideal - len(domains[i].pods))
            move = int(min(min(above, below), math.ceil((skew - tsc.max_skew) / 2)))
            if move <= 0:
                i += 1
                continue
            source = domains[j]
            source.pods.sort(key=lambda p: pod_fits_any_other_node(snapshot, p, below_avg))
            take = source.pods[len(source.pods) - move:]
            reason = (f"topology spread constraint (topologyKey {tsc.topology_key}, maxSkew "
                      f"{tsc.max_skew}) in namespace {namespace}: domain {source.value} has "
                      f"{len(source.pods)} matching pods, domain {domains[i].value} has "
                      f"{len(domains[i].pods)}, ideal average {ideal:.2f}")
            for pod in take:
                if node_fit_on and not pod_fits_any_other_node(snapshot, pod, below_avg):
                    continue
                if node_fit_on and not self._fits_other_constraints(pod, below_avg, nodes,
                                                                    namespace_pods, tsc):
                    continue
                chosen.setdefault(pod.key, (pod, reason))
            source.pods = source.pods[:len(source.pods) - move]
            domains[i].pods = domains[i].pods + take

    def _fits_other_constraints(self, pod: PodView, candidates: list[Node], nodes: list[Node],
                                namespace_pods: list[PodView], balanced: Constraint) -> bool:
        """Upstream ``podFitsAnyNodeWithoutViolatingConstraints``."""
        others = [make_constraint(c, pod) for c in pod.pod.spec.topology_spread_constraints
                  if c.when_unsatisfiable == DO_NOT_SCHEDULE
                  and not (balanced.when_unsatisfiable == DO_NOT_SCHEDULE
                           and c.topology_key == balanced.topology_key)]
        if not others:
            return True
        counts = [self._count(pod, namespace_pods, nodes, c) for c in others]
        snapshot = self.handle.snapshot
        for candidate in candidates:
            if candidate.metadata.name == pod.node or node_fit(snapshot, pod, candidate):
                continue
            ok = True
            for c, (per_domain, minimum) in zip(others, counts, strict=True):
                value = candidate.metadata.labels.get(c.topology_key)
                if value is not None and per_domain.get(value, 0) + 1 - minimum > c.max_skew:
                    ok = False
                    break
            if ok:
                return True
        return False

    @staticmethod
    def _count(pod: PodView, namespace_pods: list[PodView], nodes: list[Node],
               c: Constraint) -> tuple[dict[str, int], int]:
        eligible = {n.metadata.name: n for n in nodes if c.admits(n)}
        counts: dict[str, int] = {}
        for n in eligible.values():
            value = n.metadata.labels.get(c.topology_key)
            if value is not None:
                counts.setdefault(value, 0)
        for p in namespace_pods:
            if p is pod or p.terminating or not c.matches(p.labels):
                continue
            node = eligible.get(p.node)
            value = node.metadata.labels.get(c.topology_key) if node else None
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        minimum = min(counts.values()) if counts else 0
        if len(counts) < c.min_domains:
            minimum = 0
        return counts, minimum


def _pod_order(pod: PodView, evictable: bool) -> tuple[bool, bool, bool, int]:
    """Upstream ``sortDomains`` within a domain (the back of the list is taken first):
    non-evictable pods, then pods with a node selector or node affinity, each group by
    ascending priority (pods without priority first)."""
    spec = pod.pod.spec
    selective = bool(spec.node_selector) or (spec.affinity is not None
                                             and spec.affinity.node_affinity is not None)
    return (evictable, not selective, pod.priority is not None, pod.priority or 0)


SPEC = PluginSpec(NAME, POINTS, parse_args, RemovePodsViolatingTopologySpreadConstraint)
