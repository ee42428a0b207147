"""One Volcano scheduling session: the snapshot of jobs, queues and nodes, the plugins' functions
combined across tiers, and the statement that makes a gang's placements all-or-nothing.

Volcano opens a session every schedule period, builds a JobInfo per PodGroup (its tasks are the
group's pods) and a QueueInfo per Queue, lets each plugin register its functions, runs the
configured actions in order and closes the session, writing PodGroup phases back. The functions
combine as Volcano's ``session_plugins.go`` does: an order function asks the tiers in order and
the first plugin with a verdict (non-zero) decides; predicates must all pass; node scores add
up; ``JobReady`` and ``Allocatable`` need every plugin to agree; ``Overused`` is true if any
plugin says so; ``JobEnqueueable`` takes the first tier with a verdict, a reject winning over a
permit in that tier.

Placement state lives in the ClusterState: the statement binds a task to a node in the snapshot
at once (so later tasks see the node's remaining room, as Volcano's session node info does) and
removes it again on discard.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kubeberth.api.errors import InputError
from kubeberth.api.volcano import INQUEUE, PENDING, RUNNING, VolcanoPodGroup, VolcanoQueue
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.plugins.volcano_resource import VResource, add, from_milli, sub
from kubeberth.scheduling.volcano.conf import PluginOption, VolcanoConf
from kubeberth.state.cluster import ClusterState, PodInfo


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup and its tasks in one session."""

    uid: str  # namespace/podgroup
    pod_group: VolcanoPodGroup
    queue: str
    priority: int
    order: int  # creation order: Volcano's tie-break after every plugin abstains
    min_resources: VResource
    pending: list[PodInfo] = field(default_factory=list)
    placed: dict[str, PodInfo] = field(default_factory=dict)  # allocated or bound tasks
    allocated: VResource = field(default_factory=dict)
    share: float = 0.0  # drf's dominant share, kept current by its event handlers
    fit_errors: dict[str, str] = field(default_factory=dict)  # task spec -> why it failed

    @property
    def min_member(self) -> int:
        return self.pod_group.spec.min_member

    @property
    def phase(self) -> str:
        return self.pod_group.status.phase or PENDING

    def ready_count(self) -> int:
        return len(self.placed)

    def valid_count(self) -> int:
        return len(self.placed) + len(self.pending)


@dataclass(slots=True, eq=False)
class QueueInfo:
    name: str
    queue: VolcanoQueue | None
    order: int

    @property
    def weight(self) -> int:
        return self.queue.spec.weight if self.queue is not None else 1

    @property
    def reclaimable(self) -> bool:
        return self.queue is None or self.queue.spec.reclaimable is not False


_F = TypeVar("_F")
_T = TypeVar("_T")


@dataclass(slots=True)
class Decision:
    """A task's outcome in a session: its node, or why it stayed pending."""

    pod: str
    job: str
    node: str | None
    session: int
    message: str = ""
    order: int = 0  # the placement's place in the session (1 = first), 0 when pending


class Plugin:
    """A Volcano plugin: it registers functions in :meth:`on_session_open`. ``arguments`` names
    the arguments it models (one ending in ``resources`` also covers ``<it>.<name>``); any other
    is an error, so a run never silently differs from Volcano's."""

    name = ""
    arguments: tuple[str, ...] = ()

    def __init__(self, option: PluginOption) -> None:
        self.option = option
        allowed = self.arguments
        for key in option.arguments:
            if key not in allowed and not any(key.startswith(a + ".") for a in allowed
                                              if a.endswith("resources")):
                raise InputError(f"argument {key!r} of plugin {option.name} is not modelled",
                                 field=f"{option.name}.arguments.{key}",
                                 expected="arguments among " + (", ".join(allowed) or "none")
                                 + " (see docs/volcano.md)")

    def on_session_open(self, ssn: Session) -> None:
        raise NotImplementedError


@dataclass(slots=True)
class _Fns:
    job_order: dict[str, Callable[[JobInfo, JobInfo], int]] = field(default_factory=dict)
    queue_order: dict[str, Callable[[QueueInfo, QueueInfo], int]] = field(default_factory=dict)
    task_order: dict[str, Callable[[PodInfo, PodInfo], int]] = field(default_factory=dict)
    job_ready: dict[str, Callable[[JobInfo], bool]] = field(default_factory=dict)
    job_valid: dict[str, Callable[[JobInfo], str | None]] = field(default_factory=dict)
    job_enqueueable: dict[str, Callable[[JobInfo], int]] = field(default_factory=dict)
    job_enqueued: dict[str, Callable[[JobInfo], None]] = field(default_factory=dict)
    overused: dict[str, Callable[[QueueInfo], bool]] = field(default_factory=dict)
    allocatable: dict[str, Callable[[QueueInfo, PodInfo], bool]] = field(default_factory=dict)
    predicate: dict[str, Callable[[PodInfo, list[int]], tuple[list[int], str]]] = \
        field(default_factory=dict)
    node_order: dict[str, Callable[[PodInfo, list[int]], list[float]]] = \
        field(default_factory=dict)
    on_allocate: dict[str, Callable[[JobInfo, PodInfo], None]] = field(default_factory=dict)
    on_deallocate: dict[str, Callable[[JobInfo, PodInfo], None]] = field(default_factory=dict)


PERMIT, ABSTAIN, REJECT = 1, 0, -1


class Session:
    """The jobs, queues and nodes of one scheduling period and the plugins' functions."""

    def __init__(self, conf: VolcanoConf, snap: ClusterState, jobs: dict[str, JobInfo],
                 queues: dict[str, QueueInfo], plugins: list[list[Plugin]], number: int,
                 pick: Callable[[list[int]], int], kube: Framework) -> None:
        self.conf = conf
        self.snap = snap
        self.jobs = jobs
        self.queues = queues
        self.tiers = plugins
        self.number = number
        self.pick = pick  # one node among equally best ones (seeded)
        self.kube = kube  # the kube-scheduler profile whose filters and scores plugins reuse
        self.fns = _Fns()
        self.decisions: dict[str, Decision] = {}
        self.placements = 0
        self.total: VResource = {}
        self.job_of_task: dict[str, JobInfo] = {}
        for job in jobs.values():
            for pi in [*job.pending, *job.placed.values()]:
                self.job_of_task[pi.key] = job
        self.enabled_actions = set(conf.actions)

    # ---- registration ------------------------------------------------------------------------
    def _enabled(self, plugin: Plugin, switch: str) -> bool:
        return plugin.option.enabled(switch)

    def _walk(self, table: dict[str, _F], switch: str) -> list[list[_F]]:
        """The registered functions of ``table``, tier by tier, whose plugin has ``switch``."""
        out: list[list[_F]] = []
        for tier in self.tiers:
            fns = [table[p.name] for p in tier if p.name in table and self._enabled(p, switch)]
            out.append(fns)
        return out

    # ---- combined functions (session_plugins.go) ---------------------------------------------
    def _order(self, table: dict[str, Callable[[_T, _T], int]], switch: str, left: _T,
               right: _T, tie: tuple[int, int]) -> int:
        """The first non-zero verdict, tier by tier; when every plugin abstains, ``tie`` (the
        left and right creation order) decides, as Volcano's order functions do."""
        for tier in self._walk(table, switch):
            for fn in tier:
                j = fn(left, right)
                if j != 0:
                    return int(j)
        return (tie[0] > tie[1]) - (tie[0] < tie[1])

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        return self._order(self.fns.job_order, "job_order", left, right,
                           (left.order, right.order))

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        return self._order(self.fns.queue_order, "queue_order", left, right,
                           (left.order, right.order))

    def task_order(self, left: PodInfo, right: PodInfo) -> int:
        return self._order(self.fns.task_order, "task_order", left, right, (left.seq, right.seq))

    def job_ready(self, job: JobInfo) -> bool:
        return all(fn(job) for tier in self._walk(self.fns.job_ready, "job_ready")
                   for fn in tier)

    def job_valid(self, job: JobInfo) -> str | None:
        for tier in self._walk(self.fns.job_valid, "job_valid"):
            for fn in tier:
                why = fn(job)
                if why is not None:
                    return str(why)
        return None

    def job_enqueueable(self, job: JobInfo) -> bool:
        for tier in self._walk(self.fns.job_enqueueable, "job_enqueued"):
            verdict = ABSTAIN
            for fn in tier:
                v = fn(job)
                if v == REJECT:
                    return False
                if v == PERMIT:
                    verdict = PERMIT
            if verdict == PERMIT:
                return True
        return True

    def job_enqueued(self, job: JobInfo) -> None:
        for tier in self._walk(self.fns.job_enqueued, "job_enqueued"):
            for fn in tier:
                fn(job)

    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for tier in self._walk(self.fns.overused, "overused")
                   for fn in tier)

    def allocatable(self, queue: QueueInfo, task: PodInfo) -> bool:
        return all(fn(queue, task)
                   for tier in self._walk(self.fns.allocatable, "allocatable")
                   for fn in tier)

    def predicate(self, task: PodInfo, nodes: list[int]) -> tuple[list[int], str]:
        """The nodes every predicate passes, and the first failure's reason when none does."""
        for tier in self._walk(self.fns.predicate, "predicate"):
            for fn in tier:
                nodes, why = fn(task, nodes)
                if not nodes:
                    return [], str(why)
        return nodes, ""

    def best_node(self, task: PodInfo, nodes: list[int]) -> int:
        scores = [0.0] * len(nodes)
        for tier in self._walk(self.fns.node_order, "node_order"):
            for fn in tier:
                for i, s in enumerate(fn(task, nodes)):
                    scores[i] += s
        top = max(scores)
        return self.pick([n for n, s in zip(nodes, scores, strict=True) if s == top])

    # ---- sorting helpers --------------------------------------------------------------------
    def sorted_jobs(self, jobs: list[JobInfo]) -> list[JobInfo]:
        return sorted(jobs, key=functools.cmp_to_key(self.job_order))

    def sorted_tasks(self, tasks: list[PodInfo]) -> list[PodInfo]:
        return sorted(tasks, key=functools.cmp_to_key(self.task_order))

    # ---- placements ---------------------------------------------------------------------------
    def allocate(self, job: JobInfo, task: PodInfo, node: int) -> None:
        self.snap.add_pod(task, node)
        job.placed[task.key] = task
        add(job.allocated, from_milli(task.requests))
        for tier in self._walk(self.fns.on_allocate, ""):
            for fn in tier:
                fn(job, task)

    def deallocate(self, job: JobInfo, task: PodInfo) -> None:
        self.snap.remove_pod(task)
        del job.placed[task.key]
        sub(job.allocated, from_milli(task.requests))
        for tier in self._walk(self.fns.on_deallocate, ""):
            for fn in tier:
                fn(job, task)

    def record(self, job: JobInfo, task: PodInfo, node: int) -> None:
        """A committed placement."""
        self.placements += 1
        self.decisions[task.key] = Decision(task.key, job.uid, self.snap.node_names[node],
                                            self.number, order=self.placements)

    def close(self) -> None:
        """Write PodGroup phases back: a job with minMember tasks placed is Running."""
        for job in self.jobs.values():
            if job.phase in (INQUEUE, RUNNING) and job.ready_count() >= job.min_member and \
                    job.placed:
                job.pod_group.status.phase = RUNNING


class Statement:
    """Volcano's Statement: a job's allocations, committed together or discarded together."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[JobInfo, PodInfo, int]] = []

    def allocate(self, job: JobInfo, task: PodInfo, node: int) -> None:
        self.ssn.allocate(job, task, node)
        self.ops.append((job, task, node))

    def commit(self) -> None:
        for job, task, node in self.ops:
            if task in job.pending:
                job.pending.remove(task)
            self.ssn.record(job, task, node)
        self.ops.clear()

    def discard(self) -> None:
        for job, task, _node in reversed(self.ops):
            self.ssn.deallocate(job, task)
        self.ops.clear()


__all__ = ["ABSTAIN", "PERMIT", "REJECT", "Decision", "JobInfo", "Plugin", "QueueInfo",
           "Session", "Statement"]
