"""Volcano's resource arithmetic and job/queue identity, shared by VolcanoDRF and
VolcanoProportion.

Volcano computes fair shares on float64 resources (cpu in millicores, memory in bytes, extended
resources in thousandths) with a tolerance of 0.1 in comparisons and per-call defaults for
extended resources one side lacks ("Zero" or "Infinity"). This module reproduces those helpers
(``api.Resource`` and ``api/helpers``) on plain dicts, so the water-filling and the dominant
shares come out as Volcano's do. It also says which job and which queue a pod belongs to: its
PodGroup (Volcano's annotation or scheduler-plugins' label), else its controller, else itself;
the queue from the PodGroup's ``spec.queue``, else the pod's queue annotation, else ``default``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from kubeberth.api.resources import CPU, MEMORY, PODS
from kubeberth.api.scheduling_crds import (
    POD_GROUP_LABEL,
    VOLCANO_DEFAULT_QUEUE,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
)
from kubeberth.scheduling.plugins.helper import is_scalar_resource
from kubeberth.state.cluster import ClusterState, PodInfo
from kubeberth.state.objects import SchedulingObjects

MIN_RESOURCE = 0.1  # Volcano's minResource tolerance
MAX_FLOAT = 1.7976931348623157e308

VResource = dict[str, float]


class Default(Enum):
    """How a dimension one side lacks counts (Volcano's DimensionDefaultValue)."""

    ZERO = "Zero"
    INFINITY = "Infinity"


def from_milli(values: Mapping[str, int]) -> VResource:
    """kubeberth milli-units to Volcano units: cpu stays in millicores, memory becomes bytes,
    extended resources stay in thousandths (Volcano's MilliValue); pods are not counted."""
    out: VResource = {}
    for name, v in values.items():
        if name == CPU:
            out[CPU] = out.get(CPU, 0.0) + float(v)
        elif name == MEMORY:
            out[MEMORY] = out.get(MEMORY, 0.0) + float(v // 1000)
        elif name != PODS and is_scalar_resource(name):
            out[name] = out.get(name, 0.0) + float(v)
    return out


def _scalars(r: Mapping[str, float]) -> list[str]:
    return [k for k in r if k not in (CPU, MEMORY)]


def add(r: VResource, other: Mapping[str, float]) -> VResource:
    for k, v in other.items():
        r[k] = r.get(k, 0.0) + v
    return r


def sub(r: VResource, other: Mapping[str, float]) -> VResource:
    for k, v in other.items():
        r[k] = r.get(k, 0.0) - v
    return r


def multi(r: VResource, ratio: float) -> VResource:
    for k in r:
        r[k] *= ratio
    return r


def _defaults(left: VResource, right: VResource, default: Default) -> None:
    fill = 0.0 if default is Default.ZERO else -1.0
    for k in _scalars(left):
        right.setdefault(k, fill)
    for k in _scalars(right):
        left.setdefault(k, fill)


def _le(a: float, b: float) -> bool:
    return a < b or abs(a - b) < MIN_RESOURCE


def less_equal(left: Mapping[str, float], right: Mapping[str, float], default: Default) -> bool:
    """Volcano ``LessEqual``: every dimension of ``left`` at most ``right`` (within 0.1)."""
    if not _le(left.get(CPU, 0.0), right.get(CPU, 0.0)):
        return False
    if not _le(left.get(MEMORY, 0.0), right.get(MEMORY, 0.0)):
        return False
    lc, rc = dict(left), dict(right)
    _defaults(lc, rc, default)
    for k in _scalars(lc):
        rv = rc[k]
        if rv == -1:
            continue
        if lc[k] == -1 or not _le(lc[k], rv):
            return False
    return True


def min_dimension(r: VResource, rr: Mapping[str, float], default: Default) -> VResource:
    """Volcano ``MinDimensionResource``: cap each dimension of ``r`` at ``rr``'s."""
    for k in (CPU, MEMORY):
        if rr.get(k, 0.0) < r.get(k, 0.0):
            r[k] = rr.get(k, 0.0)
    names = _scalars(r)
    if not names:
        return r
    if not _scalars(rr):
        if default is Default.ZERO:
            for k in names:
                r[k] = 0.0
        return r
    for k in names:
        if k in rr:
            r[k] = min(r[k], rr[k])
        elif default is Default.ZERO:
            r[k] = 0.0
    return r


def diff(r: Mapping[str, float], rr: Mapping[str, float]) -> tuple[VResource, VResource]:
    """Volcano ``Diff`` with the Zero default: the increase and the decrease from ``rr`` to
    ``r``, dimension by dimension."""
    inc: VResource = {CPU: 0.0, MEMORY: 0.0}
    dec: VResource = {CPU: 0.0, MEMORY: 0.0}
    left, right = dict(r), dict(rr)
    _defaults(left, right, Default.ZERO)
    for k in (CPU, MEMORY, *_scalars(left)):
        lv, rv = left.get(k, 0.0), right.get(k, 0.0)
        if lv > rv:
            inc[k] = inc.get(k, 0.0) + lv - rv
        else:
            dec[k] = dec.get(k, 0.0) + rv - lv
    return inc, dec


def _per_dimension(pick: Callable[[float, float], float], left: Mapping[str, float],
                   right: Mapping[str, float]) -> VResource:
    """``pick`` of the two sides in cpu, memory and every extended resource either side has (a
    missing one counts as 0), the shape of Volcano's ``helpers.Max`` and ``helpers.Min``."""
    return {k: pick(left.get(k, 0.0), right.get(k, 0.0))
            for k in (CPU, MEMORY, *_scalars(left), *_scalars(right))}


def maximum(left: Mapping[str, float], right: Mapping[str, float]) -> VResource:
    """Volcano ``helpers.Max``."""
    return _per_dimension(max, left, right)


def minimum(left: Mapping[str, float], right: Mapping[str, float]) -> VResource:
    """Volcano ``helpers.Min``."""
    return _per_dimension(min, left, right)


def is_empty(r: Mapping[str, float]) -> bool:
    return all(v < MIN_RESOURCE for v in r.values())


def names(r: Mapping[str, float]) -> list[str]:
    """Volcano ``ResourceNames``: dimensions of at least 0.1."""
    return [k for k, v in r.items() if v >= MIN_RESOURCE]


def share(allocated: float, total: float) -> float:
    """Volcano ``helpers.Share``."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def dominant_share(allocated: Mapping[str, float], total: Mapping[str, float]) -> float:
    """The largest share of any resource of ``total`` (drf ``calculateShare``)."""
    best = 0.0
    for k in names(total):
        best = max(best, share(allocated.get(k, 0.0), total[k]))
    return best


def cluster_total(snap: ClusterState) -> VResource:
    """The session's total resource: the sum of every node's allocatable."""
    ids = snap.node_ids()
    if ids.size == 0:
        return {}
    sums = snap.allocatable[ids].sum(axis=0)
    return from_milli({name: int(sums[i]) for i, name in enumerate(snap.resources.names)
                       if i < sums.shape[0]})


# ---- jobs and queues -------------------------------------------------------------------------
def job_of(pi: PodInfo) -> str:
    """Volcano's job of a pod: its PodGroup, else its controller, else the pod itself."""
    meta = pi.pod.metadata
    group = meta.annotations.get(VOLCANO_GROUP_ANNOTATION) or meta.labels.get(POD_GROUP_LABEL)
    if group:
        return f"{pi.namespace}/{group}"
    for ref in meta.owner_references:
        if ref.controller:
            return f"{pi.namespace}/{ref.kind}/{ref.name}"
    return pi.key


def queue_of(pi: PodInfo, objects: SchedulingObjects) -> str:
    pg = objects.pod_groups.get(job_of(pi))
    if pg is not None and pg.spec.queue:
        return pg.spec.queue
    return pi.pod.metadata.annotations.get(VOLCANO_QUEUE_ANNOTATION) or VOLCANO_DEFAULT_QUEUE


def job_allocations(pods: Iterable[PodInfo]) -> dict[str, VResource]:
    """Per job, the requests of its pods that are assumed or bound."""
    out: dict[str, VResource] = {}
    for pi in pods:
        add(out.setdefault(job_of(pi), {}), from_milli(pi.requests))
    return out
