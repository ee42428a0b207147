"""Loading Volcano's objects from manifests: Queues, PodGroups and ``batch.volcano.sh`` Jobs,
validated with errors naming the file, line and field, and each Job expanded into the PodGroup
and pods Volcano's job controller creates.

The job controller's facts reproduced here: the admission webhook's defaults (queue
``default``, schedulerName ``volcano``, maxRetry 3, a task named ``default<i>``, a task's
minAvailable its replicas, the job's minAvailable the sum of its tasks'); the PodGroup named
``<job>-<job UID>`` with minMember, minTaskMember, queue, priorityClassName and minResources (the
requests of the first minAvailable pods, tasks by priority); pods named ``<job>-<task>-<index>``
with the controller's annotations and labels, the job's schedulerName and priorityClassName
where the template has none. A manifest has no UID; the job's ``metadata.uid`` is used when
given, else a UUID derived from its namespace and name, so names are stable across runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from kubeberth.api.objects import ObjectMeta, OwnerReference, Pod, PriorityClass
from kubeberth.api.resources import pod_requests, resource_map
from kubeberth.api.validation import validate_pod
from kubeberth.api.volcano import (
    DEFAULT_MAX_RETRY,
    DEFAULT_QUEUE,
    DEFAULT_TASK_SPEC,
    GROUP_NAME_ANNOTATION,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_VERSION_KEY,
    QUEUE_NAME_KEY,
    RETRY_COUNT_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_KEY,
    VOLCANO_SCHEDULER_NAME,
    VOLCANO_SCHEDULING_API,
    VolcanoJob,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
    VolcanoQueue,
)
from kubeberth.config.manifests import Manifests, convert_object
from kubeberth.config.yamlsrc import Document

# Volcano's lifecycle events and actions (batch.volcano.sh Event and Action).
POLICY_EVENTS = ("*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown",
                 "TaskCompleted", "TaskFailed", "OutOfSync", "CommandIssued", "JobUpdated")
POLICY_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition",
                  "TerminateJob", "CompleteJob", "ResumeJob", "SyncJob", "EnqueueJob",
                  "SyncQueue", "OpenQueue", "CloseQueue")


@dataclass(slots=True)
class VolcanoObjects:
    """Volcano's queues by name, PodGroups by ``namespace/name``, the Jobs and the pods the
    Jobs' controller creates (in job, task and index order)."""

    queues: dict[str, VolcanoQueue] = field(default_factory=dict)
    pod_groups: dict[str, VolcanoPodGroup] = field(default_factory=dict)
    jobs: list[VolcanoJob] = field(default_factory=list)
    job_pods: list[Pod] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.queues or self.pod_groups or self.jobs)


def load_volcano(m: Manifests, classes: dict[str, PriorityClass] | None = None) -> VolcanoObjects:
    """Decode and validate Volcano's Queues, PodGroups and Jobs in ``m``; expand the Jobs."""
    out = VolcanoObjects()
    for doc in m.of_kind("Queue", "PodGroup"):
        if doc.data.get("apiVersion") != VOLCANO_SCHEDULING_API:
            continue
        if doc.kind == "Queue":
            q = convert_queue(doc)
            _unique(doc, out.queues, q.metadata.name, "Queue")
            out.queues[q.metadata.name] = q
        else:
            pg = convert_object(doc, VolcanoPodGroup, namespaced=True)
            _pod_group(doc, pg)
            _unique(doc, out.pod_groups, pg.key, "PodGroup")
            out.pod_groups[pg.key] = pg
    seen: dict[str, VolcanoJob] = {}
    for doc in m.volcano_jobs():
        job = convert_object(doc, VolcanoJob, namespaced=True)
        _defaults_and_checks(doc, job)
        _unique(doc, seen, job.key, "Job")
        seen[job.key] = job
        out.jobs.append(job)
        pg, pods = expand_job(job, classes or {})
        with doc.located():
            for pod in pods:  # the names and labels the job controller makes must be valid
                validate_pod(pod, fold_case=True)
        _unique(doc, out.pod_groups, pg.key, "PodGroup")
        out.pod_groups[pg.key] = pg
        out.job_pods.extend(pods)
    return out


def convert_queue(doc: Document) -> VolcanoQueue:
    """Decode a Volcano Queue and refuse what Volcano's admission webhook refuses (a weight below
    1, quantities that do not parse)."""
    q = convert_object(doc, VolcanoQueue, namespaced=False)
    if q.spec.weight < 1:
        raise doc.error(f"queue weight is {q.spec.weight}", field="spec.weight",
                        expected="a positive integer, as Volcano's admission webhook requires")
    with doc.located():
        resource_map(q.spec.capability, "spec.capability")
        resource_map(q.spec.guarantee.resource, "spec.guarantee.resource")
        resource_map(q.spec.deserved, "spec.deserved")
    return q


def _unique(doc: Document, seen: Mapping[str, object], key: str, kind: str) -> None:
    if key in seen:
        raise doc.error(f"{kind} {key} is defined twice", field="metadata.name",
                        expected="unique names")


def _pod_group(doc: Document, pg: VolcanoPodGroup) -> None:
    if pg.spec.min_member < 0:
        raise doc.error(f"minMember is negative ({pg.spec.min_member})", field="spec.minMember",
                        expected="an integer of 0 or more")
    if pg.spec.min_resources is not None:
        with doc.located():
            resource_map(pg.spec.min_resources, "spec.minResources")
    if not pg.spec.queue:
        pg.spec.queue = DEFAULT_QUEUE
    if not pg.status.phase:
        pg.status.phase = "Pending"


def _check_policies(doc: Document, policies: list[object], where: str) -> None:
    for i, p in enumerate(policies):
        assert isinstance(p, msgspec.Struct)
        action = getattr(p, "action", "")
        if action not in POLICY_ACTIONS:
            raise doc.error(f"unknown policy action {action!r}", field=f"{where}[{i}].action",
                            expected="one of " + ", ".join(POLICY_ACTIONS))
        for ev in [getattr(p, "event", ""), *getattr(p, "events", [])]:
            if ev and ev not in POLICY_EVENTS:
                raise doc.error(f"unknown policy event {ev!r}", field=f"{where}[{i}].event",
                                expected="one of " + ", ".join(POLICY_EVENTS))


def _defaults_and_checks(doc: Document, job: VolcanoJob) -> None:
    """The mutating webhook's defaults and the validating webhook's refusals."""
    spec = job.spec
    if not spec.tasks:
        raise doc.error("the job has no tasks", field="spec.tasks",
                        expected="at least one task with replicas and a template")
    spec.queue = spec.queue or DEFAULT_QUEUE
    spec.scheduler_name = spec.scheduler_name or VOLCANO_SCHEDULER_NAME
    if spec.max_retry == 0:
        spec.max_retry = DEFAULT_MAX_RETRY
    if spec.max_retry < 0:
        raise doc.error(f"maxRetry is {spec.max_retry}", field="spec.maxRetry",
                        expected="an integer of 0 or more")
    _check_policies(doc, list(spec.policies), "spec.policies")
    names: set[str] = set()
    total = 0
    for i, task in enumerate(spec.tasks):
        where = f"spec.tasks[{i}]"
        task.name = task.name or f"{DEFAULT_TASK_SPEC}{i}"
        if task.name in names:
            raise doc.error(f"task name {task.name!r} is used twice", field=f"{where}.name",
                            expected="unique task names")
        names.add(task.name)
        if task.replicas < 0:
            raise doc.error(f"replicas is {task.replicas}", field=f"{where}.replicas",
                            expected="an integer of 0 or more")
        if task.min_available is None:
            task.min_available = task.replicas
        if not 0 <= task.min_available <= task.replicas:
            raise doc.error(f"task minAvailable is {task.min_available}",
                            field=f"{where}.minAvailable",
                            expected=f"between 0 and the task's replicas ({task.replicas})")
        if task.max_retry == 0:
            task.max_retry = DEFAULT_MAX_RETRY
        _check_policies(doc, list(task.policies), f"{where}.policies")
        with doc.located():
            pod_requests(Pod(spec=task.template.spec))
        total += task.min_available
    if spec.min_available == 0:
        spec.min_available = total
    replicas = sum(t.replicas for t in spec.tasks)
    if not 0 <= spec.min_available <= replicas:
        raise doc.error(f"minAvailable is {spec.min_available}", field="spec.minAvailable",
                        expected=f"between 0 and the total replicas of the tasks ({replicas})")


def job_uid(job: VolcanoJob) -> str:
    return job.metadata.uid or str(uuid.uuid5(uuid.NAMESPACE_URL,
                                              f"batch.volcano.sh/{job.key}"))


def _min_resources(job: VolcanoJob, classes: dict[str, PriorityClass]) -> dict[str, int]:
    """The requests of the first minAvailable pods, tasks by priority (highest first), as the
    job controller's calcPGMinResources sums them (in kubeberth milli-units)."""
    def prio(task_pc: str) -> int:
        pc = classes.get(task_pc)
        return pc.value if pc is not None else 0

    tasks = sorted(job.spec.tasks, key=lambda t: -prio(t.template.spec.priority_class_name))
    out: dict[str, int] = {}
    left = job.spec.min_available
    for task in tasks:
        if left <= 0:
            break
        n = min(task.min_available if task.min_available is not None else task.replicas, left)
        for name, v in pod_requests(Pod(spec=task.template.spec)).items():
            out[name] = out.get(name, 0) + v * n
        left -= n
    for task in tasks:  # job minAvailable above the tasks' own minimums: fill in order
        if left <= 0:
            break
        extra = min(task.replicas - (task.min_available or 0), left)
        for name, v in pod_requests(Pod(spec=task.template.spec)).items():
            out[name] = out.get(name, 0) + v * extra
        left -= extra
    return out


def expand_job(job: VolcanoJob,
               classes: dict[str, PriorityClass]) -> tuple[VolcanoPodGroup, list[Pod]]:
    """The PodGroup and the pods Volcano's job controller creates for ``job``."""
    ns, name = job.metadata.namespace, job.metadata.name
    uid = job_uid(job)
    ref = OwnerReference(api_version=job.api_version, kind="Job", name=name, uid=uid,
                         controller=True)
    pg = VolcanoPodGroup(
        metadata=ObjectMeta(name=f"{name}-{uid}", namespace=ns,
                            labels=dict(job.metadata.labels),
                            annotations=dict(job.metadata.annotations),
                            owner_references=[ref]),
        spec=VolcanoPodGroupSpec(
            min_member=job.spec.min_available,
            min_task_member={t.name: t.min_available or 0 for t in job.spec.tasks},
            queue=job.spec.queue, priority_class_name=job.spec.priority_class_name))
    pg.status.phase = "Pending"
    milli = _min_resources(job, classes)
    pods: list[Pod] = []
    for task in job.spec.tasks:
        for ix in range(task.replicas):
            tmpl = msgspec.convert(msgspec.to_builtins(task.template), type(task.template))
            annotations = dict(tmpl.metadata.annotations)
            annotations.update({
                TASK_INDEX_KEY: str(ix), TASK_SPEC_KEY: task.name,
                GROUP_NAME_ANNOTATION: pg.metadata.name, JOB_NAME_KEY: name,
                QUEUE_NAME_KEY: job.spec.queue, JOB_VERSION_KEY: "0",
                TEMPLATE_KEY: f"{name}-{task.name}", RETRY_COUNT_KEY: "0"})
            labels = dict(tmpl.metadata.labels)
            labels.update({TASK_INDEX_KEY: str(ix), JOB_NAME_KEY: name, TASK_SPEC_KEY: task.name,
                           JOB_NAMESPACE_KEY: ns, QUEUE_NAME_KEY: job.spec.queue})
            spec = tmpl.spec
            if spec.scheduler_name in ("", "default-scheduler"):
                # Decoding filled in the default; a template naming no scheduler gets the job's.
                spec.scheduler_name = job.spec.scheduler_name
            if not spec.priority_class_name and job.spec.priority_class_name:
                spec.priority_class_name = job.spec.priority_class_name
            pods.append(Pod(metadata=ObjectMeta(
                name=f"{name}-{task.name}-{ix}", namespace=ns, labels=labels,
                annotations=annotations, owner_references=[ref]), spec=spec))
    pg.spec.min_resources = {k: _quantity(k, v) for k, v in milli.items()}
    return pg, pods


def _quantity(name: str, milli: int) -> str:
    """A milli-unit total back as a Kubernetes quantity (cpu in millicores)."""
    return f"{milli}m" if name == "cpu" or milli % 1000 else str(milli // 1000)


__all__ = ["VolcanoObjects", "expand_job", "job_uid", "load_volcano"]
