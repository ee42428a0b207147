"""Volcano's actions over a session: enqueue, allocate and backfill (``pkg/scheduler/actions``).

allocate walks queues in the plugins' queue order and, in each, jobs in the plugins' job order;
it places a job's tasks (task order) through a statement until the job is ready, commits it,
and puts the job back while it has tasks left, so the job order is asked again after every
placement: with drf that re-reads each job's dominant share, which is what makes two tenants
alternate. A job that cannot become ready has its placements discarded (gang).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from kubeberth.api.volcano import INQUEUE, PENDING
from kubeberth.scheduling.volcano.session import (
    Decision,
    JobInfo,
    QueueInfo,
    Session,
    Statement,
)
from kubeberth.state.cluster import PodInfo

_T = TypeVar("_T")


def _pop_min(items: list[_T], cmp: Callable[[_T, _T], int]) -> int:
    """Index of the first item in ``cmp`` order (a priority queue's pop, re-sorted each time)."""
    best = 0
    for i in range(1, len(items)):
        if cmp(items[i], items[best]) < 0:
            best = i
    return best


def _by_queue(ssn: Session,
              jobs: list[JobInfo]) -> tuple[list[QueueInfo], dict[str, list[JobInfo]]]:
    queues: list[QueueInfo] = []
    by_queue: dict[str, list[JobInfo]] = {}
    for job in jobs:
        q = ssn.queues.get(job.queue)
        if q is None:
            _note(ssn, job, f"queue {job.queue} of job {job.uid} not found")
            continue
        if q.name not in by_queue:
            queues.append(q)
            by_queue[q.name] = []
        by_queue[q.name].append(job)
    return queues, by_queue


def _note(ssn: Session, job: JobInfo, message: str) -> None:
    for task in job.pending:
        _note_task(ssn, job, task, message)


def enqueue(ssn: Session) -> None:
    """Pending PodGroups become Inqueue while the plugins permit (proportion: the queue's real
    capability; overcommit: the cluster's idle resources times the factor)."""
    pending = [j for j in ssn.jobs.values() if j.phase == PENDING]
    queues, by_queue = _by_queue(ssn, pending)
    qcmp, jcmp = ssn.queue_order, ssn.job_order
    while queues:
        q = queues.pop(_pop_min(queues, qcmp))
        jobs = by_queue[q.name]
        if not jobs:
            continue
        job = jobs.pop(_pop_min(jobs, jcmp))
        if ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.pod_group.status.phase = INQUEUE
        else:
            _note(ssn, job, f"job {job.uid} is not enqueueable: its minResources do not fit "
                            f"queue {job.queue}'s capability or the cluster's idle resources")
        queues.append(q)


def _fits_idle(ssn: Session, task: PodInfo, nodes: list[int]) -> list[int]:
    """allocate's own predicate: the task's request fits the node's idle resources."""
    snap = ssn.snap
    need = np.zeros(snap.free.shape[1], dtype=np.int64)
    for name, v in task.requests.items():
        idx = snap.resources.get(name)
        if idx is None:
            if v > 0:
                return []
            continue
        need[idx] = v
    ok = np.asarray((snap.free[nodes] >= need).all(axis=1), dtype=bool)
    return [n for n, good in zip(nodes, ok.tolist(), strict=True) if good]


def _need_continue(job: JobInfo) -> bool:
    """After a task fails: go on with the job's other tasks unless every task is needed."""
    return job.min_member != job.valid_count()


def _spec_of(task: PodInfo) -> str:
    return task.pod.metadata.annotations.get("volcano.sh/task-spec", "")


def _place(ssn: Session, stmt: Statement | None, job: JobInfo, queue: QueueInfo,
           task: PodInfo, nodes: list[int]) -> bool | None:
    """Try one task: True placed, False failed (job may go on), None failed (stop the job)."""
    spec = _spec_of(task)
    if spec in job.fit_errors:
        _note_task(ssn, job, task, job.fit_errors[spec])
        return False
    if not ssn.allocatable(queue, task):
        _note_task(ssn, job, task, f"queue {queue.name} has no room for the task within its "
                                   "deserved resources")
        return False
    candidates = _fits_idle(ssn, task, nodes)
    why = f"0/{len(nodes)} nodes are available: insufficient resources"
    if candidates:
        candidates, reason = ssn.predicate(task, candidates)
        why = f"0/{len(nodes)} nodes are available: {reason}"
    if not candidates:
        job.fit_errors[spec] = why
        _note_task(ssn, job, task, why)
        return False if _need_continue(job) else None
    node = ssn.best_node(task, candidates)
    if stmt is None:
        ssn.allocate(job, task, node)
        job.pending.remove(task)
        ssn.record(job, task, node)
    else:
        stmt.allocate(job, task, node)
    return True


def _note_task(ssn: Session, job: JobInfo, task: PodInfo, message: str) -> None:
    """Why a task is still pending (the last reason a session found)."""
    ssn.decisions[task.key] = Decision(task.key, job.uid, None, ssn.number, message)


def allocate(ssn: Session) -> None:
    enqueue_on = "enqueue" in ssn.enabled_actions
    jobs: list[JobInfo] = []
    for job in ssn.jobs.values():
        if job.phase == PENDING:
            if enqueue_on:
                continue
            job.pod_group.status.phase = INQUEUE
        why = ssn.job_valid(job)
        if why is not None:
            _note(ssn, job, why)
            continue
        if job.pending:
            jobs.append(job)
    queues, by_queue = _by_queue(ssn, jobs)
    tasks = {job.uid: ssn.sorted_tasks(list(job.pending)) for job in jobs}
    nodes = [int(n) for n in ssn.snap.node_ids().tolist()]
    qcmp, jcmp = ssn.queue_order, ssn.job_order
    while queues:
        queue = queues.pop(_pop_min(queues, qcmp))
        if ssn.overused(queue):
            _note_queue(ssn, by_queue[queue.name], f"queue {queue.name} is overused")
            continue
        waiting = by_queue[queue.name]
        if not waiting:
            continue
        job = waiting.pop(_pop_min(waiting, jcmp))
        todo = tasks[job.uid]
        stmt = Statement(ssn)
        while todo:
            task = todo.pop(0)
            placed = _place(ssn, stmt, job, queue, task, nodes)
            if placed is None:
                break
            if placed and ssn.job_ready(job):
                break
        if ssn.job_ready(job):
            stmt.commit()
            if todo:
                waiting.append(job)
        else:
            stmt.discard()
            _note(ssn, job, f"{job.ready_count()}/{job.min_member} tasks in gang could be "
                            "placed; the gang is not ready, nothing of it was allocated")
        queues.append(queue)


def _note_queue(ssn: Session, jobs: list[JobInfo], message: str) -> None:
    for job in jobs:
        for task in job.pending:
            if task.key not in ssn.decisions:
                _note_task(ssn, job, task, message)


def backfill(ssn: Session) -> None:
    """Best-effort tasks (no requests) of jobs past enqueue go to any node that passes the
    predicates, one by one."""
    nodes = [int(n) for n in ssn.snap.node_ids().tolist()]
    for job in ssn.sorted_jobs(list(ssn.jobs.values())):
        if job.phase == PENDING:
            continue
        for task in ssn.sorted_tasks([t for t in job.pending if not any(t.requests.values())]):
            queue = ssn.queues.get(job.queue)
            if queue is not None:
                _place(ssn, None, job, queue, task, nodes)


ACTIONS: dict[str, Callable[[Session], None]] = {
    "enqueue": enqueue, "allocate": allocate, "backfill": backfill,
}

__all__ = ["ACTIONS", "allocate", "backfill", "enqueue"]
