"""Volcano's scheduler plugins: the functions each registers when a session opens.

Facts from ``pkg/scheduler/plugins``: priority orders jobs and tasks by priority; gang keeps a
job's placements all-or-nothing (JobValid, JobReady, not-ready jobs first); drf orders jobs by
dominant share and updates the share on every allocation, so a job that just got a task moves
back in the order; proportion divides the cluster among queues by weight (water-filling, capped
by capability and what the guarantees of other queues leave), orders queues by share, stops a
queue at its deserved resources and gates enqueueing at its real capability; overcommit lets
jobs in while their minResources fit in the cluster's idle resources times the factor;
binpack scores nodes by how full they would be; predicates and nodeorder run the filter and
score plugins of a kube-scheduler profile, as Volcano's plugins run kube-scheduler's.
conformance's functions choose preemption and reclaim victims, which no modelled action asks
for, so it registers none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.resources import CPU, MEMORY
from kubeberth.api.volcano import INQUEUE
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.plugins.volcano_proportion import QueueAttr, queue_attr, water_fill
from kubeberth.scheduling.plugins.volcano_resource import (
    Default,
    VResource,
    add,
    cluster_total,
    diff,
    dominant_share,
    from_milli,
    is_empty,
    less_equal,
    multi,
    share,
    sub,
)
from kubeberth.scheduling.volcano.conf import PluginOption
from kubeberth.scheduling.volcano.session import (
    ABSTAIN,
    PERMIT,
    REJECT,
    JobInfo,
    Plugin,
    QueueInfo,
    Session,
)
from kubeberth.state.cluster import PodInfo

MAX_NODE_SCORE = 100


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def le_with_dimension(left: Mapping[str, float], right: Mapping[str, float],
                      dims: Mapping[str, float]) -> bool:
    """Volcano ``LessEqualWithDimension``: ``left`` within ``right`` in the dimensions ``dims``
    asks for (within 0.1); a dimension ``right`` lacks is zero."""
    return all(left.get(k, 0.0) <= right.get(k, 0.0) + 0.1 for k, v in dims.items() if v > 0)


class Priority(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.fns.task_order[self.name] = lambda a, b: -_cmp(a.priority, b.priority)
        ssn.fns.job_order[self.name] = lambda a, b: -_cmp(a.priority, b.priority)


class Gang(Plugin):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        def valid(job: JobInfo) -> str | None:
            n = job.valid_count()
            if n < job.min_member:
                return (f"{n}/{job.min_member} tasks in gang unschedulable: not enough "
                        "valid tasks for gang-scheduling")
            return None

        def ready(job: JobInfo) -> bool:
            if job.ready_count() < job.min_member:
                return False
            mins = job.pod_group.spec.min_task_member
            if mins and job.min_member >= sum(mins.values()):
                counts: dict[str, int] = {}
                for pi in job.placed.values():
                    spec = pi.pod.metadata.annotations.get("volcano.sh/task-spec", "")
                    counts[spec] = counts.get(spec, 0) + 1
                return all(counts.get(spec, 0) >= m for spec, m in mins.items())
            return True

        def order(left: JobInfo, right: JobInfo) -> int:
            lr, rr = ready(left), ready(right)
            if lr == rr:
                return 0
            return 1 if lr else -1

        ssn.fns.job_valid[self.name] = valid
        ssn.fns.job_ready[self.name] = ready
        ssn.fns.job_order[self.name] = order


class Conformance(Plugin):
    name = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        """Its preemptable and reclaimable functions serve preempt and reclaim only."""


class Drf(Plugin):
    name = "drf"

    def __init__(self, option: PluginOption) -> None:
        super().__init__(option)
        if option.flags.get("hierarchy"):
            raise InputError("hierarchical DRF is not modelled yet",
                             field="drf.enableHierarchy", expected="no enableHierarchy")

    def on_session_open(self, ssn: Session) -> None:
        total = cluster_total(ssn.snap)
        for job in ssn.jobs.values():
            job.share = dominant_share(job.allocated, total)

        def update(job: JobInfo, _task: PodInfo) -> None:
            job.share = dominant_share(job.allocated, total)

        ssn.fns.job_order[self.name] = lambda a, b: _cmp(a.share, b.share)
        ssn.fns.on_allocate[self.name] = update
        ssn.fns.on_deallocate[self.name] = update


class Proportion(Plugin):
    name = "proportion"

    def __init__(self, option: PluginOption) -> None:
        super().__init__(option)
        self.attrs: dict[str, QueueAttr] = {}

    def on_session_open(self, ssn: Session) -> None:
        total = cluster_total(ssn.snap)
        attrs: dict[str, QueueAttr] = {}
        inqueue: dict[str, VResource] = {}
        elastic: dict[str, VResource] = {}
        for job in ssn.jobs.values():
            q = ssn.queues.get(job.queue)
            if q is None:
                continue
            attr = attrs.get(q.name)
            if attr is None:
                attr = attrs[q.name] = queue_attr(q.queue, q.name)
            add(attr.allocated, job.allocated)
            add(attr.request, job.allocated)
            for pi in job.pending:
                add(attr.request, from_milli(pi.requests))
            if job.phase == INQUEUE:
                add(inqueue.setdefault(q.name, {}), job.min_resources)
            extra, _ = diff(job.allocated, job.min_resources)
            add(elastic.setdefault(q.name, {}), extra)
        water_fill(total, list(attrs.values()))
        self.attrs = attrs

        def qshare(q: QueueInfo) -> float:
            attr = attrs.get(q.name)
            if attr is None:
                return 0.0
            return max((share(attr.allocated.get(k, 0.0), v) for k, v in attr.deserved.items()),
                       default=0.0)

        def overused(q: QueueInfo) -> bool:
            attr = attrs.get(q.name)
            return attr is not None and less_equal(attr.deserved, attr.allocated, Default.ZERO)

        def allocatable(q: QueueInfo, task: PodInfo) -> bool:
            attr = attrs.get(q.name)
            if attr is None:
                return False
            req = from_milli(task.requests)
            return le_with_dimension(add(dict(attr.allocated), req), attr.deserved, req)

        def enqueueable(job: JobInfo) -> int:
            attr = attrs.get(job.queue)
            if attr is None:
                return REJECT
            if is_empty(job.min_resources):
                return PERMIT
            need = add(add(dict(job.min_resources), attr.allocated),
                       inqueue.get(job.queue, {}))
            sub(need, elastic.get(job.queue, {}))
            real = attr.real_capability
            if real is None or le_with_dimension(need, real, job.min_resources):
                return PERMIT
            return REJECT

        def enqueued(job: JobInfo) -> None:
            add(inqueue.setdefault(job.queue, {}), job.min_resources)

        def on_allocate(job: JobInfo, task: PodInfo) -> None:
            attr = attrs.get(job.queue)
            if attr is not None:
                add(attr.allocated, from_milli(task.requests))

        def on_deallocate(job: JobInfo, task: PodInfo) -> None:
            attr = attrs.get(job.queue)
            if attr is not None:
                sub(attr.allocated, from_milli(task.requests))

        ssn.fns.queue_order[self.name] = lambda a, b: _cmp(qshare(a), qshare(b))
        ssn.fns.overused[self.name] = overused
        ssn.fns.allocatable[self.name] = allocatable
        ssn.fns.job_enqueueable[self.name] = enqueueable
        ssn.fns.job_enqueued[self.name] = enqueued
        ssn.fns.on_allocate[self.name] = on_allocate
        ssn.fns.on_deallocate[self.name] = on_deallocate


class Overcommit(Plugin):
    name = "overcommit"
    arguments = ("overcommit-factor",)
    DEFAULT_FACTOR = 1.2

    def __init__(self, option: PluginOption) -> None:
        super().__init__(option)
        raw = option.arguments.get("overcommit-factor", self.DEFAULT_FACTOR)
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            raise InputError(f"overcommit-factor is {raw!r}",
                             field="overcommit.arguments.overcommit-factor",
                             expected="a number of 1.0 or more")
        # Volcano falls back to the default below 1.0.
        self.factor = float(raw) if raw >= 1.0 else self.DEFAULT_FACTOR

    def on_session_open(self, ssn: Session) -> None:
        total = cluster_total(ssn.snap)
        used: VResource = {}
        inqueue: VResource = {}
        for job in ssn.jobs.values():
            add(used, job.allocated)
            if job.phase == INQUEUE:
                add(inqueue, job.min_resources)
        idle = sub(multi(dict(total), self.factor), used)

        def enqueueable(job: JobInfo) -> int:
            if is_empty(job.min_resources):
                return PERMIT
            if le_with_dimension(add(dict(inqueue), job.min_resources), idle,
                                 job.min_resources):
                return PERMIT
            return REJECT

        def enqueued(job: JobInfo) -> None:
            add(inqueue, job.min_resources)

        ssn.fns.job_enqueueable[self.name] = enqueueable
        ssn.fns.job_enqueued[self.name] = enqueued


class Predicates(Plugin):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        fw = ssn.kube

        def predicate(task: PodInfo, nodes: list[int]) -> tuple[list[int], str]:
            state = CycleState()
            allowed, st = fw.run_pre_filter(state, task, ssn.snap)
            if not st.ok:
                return [], st.message()
            if allowed is not None:
                nodes = [n for n in nodes if ssn.snap.node_names[n] in allowed]
                if not nodes:
                    return [], "no node passed the PreFilter plugins"
            out = fw.run_filters(state, task, ssn.snap, np.asarray(nodes, dtype=np.int64))
            feasible = [int(n) for n in out.feasible.tolist()]
            if feasible:
                return feasible, ""
            counts = out.reason_counts()
            return [], ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))

        ssn.fns.predicate[self.name] = predicate


class NodeOrder(Plugin):
    name = "nodeorder"

    def on_session_open(self, ssn: Session) -> None:
        fw = ssn.kube

        def order(task: PodInfo, nodes: list[int]) -> list[float]:
            state = CycleState()
            arr = np.asarray(nodes, dtype=np.int64)
            fw.run_pre_filter(state, task, ssn.snap)
            if not fw.run_pre_score(state, task, ssn.snap, arr).ok:
                return [0.0] * len(nodes)
            res = fw.run_score(state, task, ssn.snap, arr)
            return [float(x) for x in res.totals.tolist()]

        ssn.fns.node_order[self.name] = order


class Binpack(Plugin):
    name = "binpack"
    arguments = ("binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources")

    def __init__(self, option: PluginOption) -> None:
        super().__init__(option)
        args = option.arguments
        self.weight = _int_arg(args, "binpack.weight", 1)
        self.resources: dict[str, int] = {CPU: _int_arg(args, "binpack.cpu", 1),
                                          MEMORY: _int_arg(args, "binpack.memory", 1)}
        extra = args.get("binpack.resources", "")
        if not isinstance(extra, str):
            raise InputError(f"binpack.resources is {extra!r}",
                             field="binpack.arguments.binpack.resources",
                             expected="a comma-separated list of resource names")
        for name in (r.strip() for r in extra.split(",")):
            if name:
                self.resources[name] = _int_arg(args, f"binpack.resources.{name}", 1)
        for key in args:
            if key.startswith("binpack.resources.") and \
                    key[len("binpack.resources."):] not in self.resources:
                raise InputError(f"{key} names a resource not in binpack.resources",
                                 field=f"binpack.arguments.{key}",
                                 expected="a weight for a resource listed in binpack.resources")

    def score(self, requested: VResource, used: VResource, allocatable: VResource) -> float:
        """Volcano's BinPackingScore on one node."""
        total = 0.0
        weights = 0
        for name, req in requested.items():
            if req < 0.1:
                continue
            w = self.resources.get(name)
            if w is None:
                continue
            cap = allocatable.get(name, 0.0)
            final = req + used.get(name, 0.0)
            if cap == 0 or w == 0:
                part = 0.0
            elif final > cap:
                return 0.0
            else:
                part = final * w / cap
            total += part
            weights += w
        if weights > 0:
            total /= weights
        return total * MAX_NODE_SCORE * self.weight

    def on_session_open(self, ssn: Session) -> None:
        snap = ssn.snap
        names = snap.resources.names

        def row(matrix: Any, n: int) -> VResource:
            vals = matrix[n]
            return from_milli({name: int(vals[i]) for i, name in enumerate(names)
                               if i < vals.shape[0]})

        def order(task: PodInfo, nodes: list[int]) -> list[float]:
            req = from_milli(task.requests)
            return [self.score(req, row(snap.requested, n), row(snap.allocatable, n))
                    for n in nodes]

        ssn.fns.node_order[self.name] = order


def _int_arg(args: Mapping[str, Any], key: str, default: int) -> int:
    v = args.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise InputError(f"{key} is {v!r}", field=f"arguments.{key}",
                         expected="a non-negative integer weight")
    return v


PLUGINS: dict[str, Callable[[PluginOption], Plugin]] = {
    p.name: p for p in (Priority, Gang, Conformance, Drf, Proportion, Overcommit, Predicates,
                        NodeOrder, Binpack)
}

__all__ = ["ABSTAIN", "PLUGINS", "Binpack", "Drf", "Gang", "Proportion"]
