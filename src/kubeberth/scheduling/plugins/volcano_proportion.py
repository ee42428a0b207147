"""VolcanoProportion: Volcano's proportion queues as a kube-scheduler PreFilter.

Volcano divides the cluster between Queues (``scheduling.volcano.sh/v1beta1``) by weight: each
round hands every unsatisfied queue ``remaining × weight / Σweights``, capped by the queue's
capability (and what the guarantees of other queues leave) and by what its jobs request; queues
whose request is met, or whose share stopped growing, drop out, and the rounds continue until
nothing remains to hand out (water-filling, ``proportion.go``'s OnSessionOpen). A queue's
*deserved* resources are the result. In allocation a pod may only be placed while its queue's
allocated resources plus the pod's request stay within the queue's deserved (the plugin's
AllocatableFn); that check is this plugin's PreFilter.

Where it lives: Volcano recomputes deserved at the start of each session; here it is recomputed
from the snapshot and the scheduling-objects store whenever either changed since the last cycle,
which costs a pass over the existing pods (fine for the example sizes it is meant for, slow on
a trace of many thousands of pods). Queue ordering by share, reclaim and enqueue gating
(``capability`` against ``minResources`` at the Inqueue step) are not modelled; jobs are ordered
by VolcanoDRF when it is the queueSort plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeberth.api.objects import ResourceMap
from kubeberth.api.resources import resource_map
from kubeberth.api.scheduling_crds import VOLCANO_DEFAULT_QUEUE
from kubeberth.api.volcano import VolcanoQueue
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    PreFilterPlugin,
    PreFilterResult,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.scheduling.plugins.volcano_resource import (
    MAX_FLOAT,
    Default,
    VResource,
    add,
    cluster_total,
    diff,
    from_milli,
    is_empty,
    less_equal,
    maximum,
    min_dimension,
    minimum,
    multi,
    queue_of,
    sub,
)
from kubeberth.state.cluster import ClusterState, PodInfo

NAME = "VolcanoProportion"


@dataclass(slots=True)
class QueueAttr:
    """One queue in a session: its weight and limits, what its jobs hold and ask for, and the
    deserved share the water-filling gives it."""

    name: str
    weight: int
    capability: VResource | None = None
    guarantee: VResource = field(default_factory=dict)
    allocated: VResource = field(default_factory=dict)
    request: VResource = field(default_factory=dict)
    deserved: VResource = field(default_factory=dict)
    real_capability: VResource | None = None


def _capability(raw: ResourceMap) -> VResource | None:
    """A queue's capability in Volcano units; a non-positive cpu or memory is unlimited."""
    if not raw:
        return None
    cap = from_milli(resource_map(raw, "spec.capability"))
    for k in ("cpu", "memory"):
        if cap.get(k, 0.0) <= 0:
            cap[k] = MAX_FLOAT
    return cap


def queue_attr(queue: VolcanoQueue | None, name: str) -> QueueAttr:
    """Attributes of a Queue object (an absent ``default`` queue has weight 1, no limits)."""
    if queue is None:
        return QueueAttr(name, 1)
    return QueueAttr(name, queue.spec.weight, _capability(queue.spec.capability),
                     from_milli(resource_map(queue.spec.guarantee.resource,
                                             "spec.guarantee.resource")))


def water_fill(total: Mapping[str, float], queues: list[QueueAttr]) -> int:
    """Volcano's deserved computation; fills ``q.deserved`` and returns the number of rounds.

    ``q.request`` and ``q.guarantee`` must be set; real capabilities are derived here."""
    total_guarantee: VResource = {}
    for q in queues:
        add(total_guarantee, q.guarantee)
    for q in queues:
        real = add(sub(dict(total), total_guarantee), q.guarantee)
        q.real_capability = real if q.capability is None else minimum(real, q.capability)
        q.deserved = {}
    remaining = dict(total)
    meet: set[str] = set()
    rounds = 0
    while True:
        total_weight = sum(q.weight for q in queues if q.name not in meet)
        if total_weight == 0:
            break
        rounds += 1
        old_remaining = dict(remaining)
        increased: VResource = {}
        decreased: VResource = {}
        for q in queues:
            if q.name in meet:
                continue
            old = dict(q.deserved)
            add(q.deserved, multi(dict(remaining), q.weight / total_weight))
            if q.real_capability is not None:
                min_dimension(q.deserved, q.real_capability, Default.INFINITY)
            min_dimension(q.deserved, q.request, Default.ZERO)
            if less_equal(q.request, q.deserved, Default.ZERO) or q.deserved == old:
                meet.add(q.name)
            q.deserved = maximum(q.deserved, q.guarantee)
            inc, dec = diff(q.deserved, old)
            add(increased, inc)
            add(decreased, dec)
        add(sub(remaining, increased), decreased)
        if is_empty(remaining) or remaining == old_remaining:
            break
    return rounds


def session_queues(snap: ClusterState) -> dict[str, QueueAttr]:
    """The queues that have jobs, with the requests of their pods: allocated for pods assumed
    or bound, requested for those plus the pending ones."""
    objects = snap.objects
    out: dict[str, QueueAttr] = {}
    for pi in objects.pods.values():
        name = queue_of(pi, objects)
        attr = out.get(name)
        if attr is None:
            queue = objects.queues.get(name)
            if queue is None and name != VOLCANO_DEFAULT_QUEUE:
                continue
            attr = out[name] = queue_attr(queue, name)
        req = from_milli(pi.requests)
        add(attr.request, req)
        if pi.key in snap.pods:
            add(attr.allocated, req)
    return out


class VolcanoProportion(PreFilterPlugin, EnqueueExtensions):
    """Volcano's proportion plugin: a pod fits only within its queue's deserved share."""

    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._version: tuple[int, int] = (-1, -1)
        self._queues: dict[str, QueueAttr] = {}

    def queues(self, snap: ClusterState) -> dict[str, QueueAttr]:
        """The session's queues with their deserved shares, recomputed when pods changed."""
        version = (snap.generation, snap.objects.version)
        if version != self._version:
            self._queues = session_queues(snap)
            water_fill(cluster_total(snap), list(self._queues.values()))
            self._version = version
        return self._queues

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        name = queue_of(pod, snap.objects)
        attr = self.queues(snap).get(name)
        if attr is None:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                (f"queue {name} of pod {pod.namespace}/{pod.name} not found",))
        free, _ = diff(attr.deserved, attr.allocated)
        if not less_equal(from_milli(pod.requests), free, Default.ZERO):
            return None, Status(Code.UNSCHEDULABLE, (
                f"queue {name} is overused: deserved {_show(attr.deserved)}, allocated "
                f"{_show(attr.allocated)}",))
        return None, SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Queue", "*")]


def _show(r: VResource) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.items()))


def new(args: Mapping[str, Any] | None, handle: Handle) -> VolcanoProportion:
    reject_args(NAME, args)
    return VolcanoProportion(handle)
