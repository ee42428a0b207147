"""Volcano's own objects: ``batch.volcano.sh/v1alpha1`` Job and ``scheduling.volcano.sh/v1beta1``
PodGroup and Queue as the Volcano scheduler reads them.

They are typed apart from scheduler-plugins' PodGroup (:mod:`kubeberth.api.scheduling_crds`):
the kinds share names but not groups or fields, and the Volcano scheduler reads a PodGroup's
``priorityClassName`` and ``status.phase`` and a Queue's ``reclaimable`` and ``parent``.
Only the fields the job controller and the scheduler read are modelled.
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import ResourceMap, _K8s, _Object
from kubeberth.api.workloads import PodTemplateSpec

VOLCANO_BATCH_API = "batch.volcano.sh/v1alpha1"
VOLCANO_SCHEDULING_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_SPEC = "default"

# The annotations and labels Volcano's job controller puts on the pods it creates.
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_VERSION_KEY = "volcano.sh/job-version"
TEMPLATE_KEY = "volcano.sh/template-uid"
RETRY_COUNT_KEY = "volcano.sh/job-retry-count"

# PodGroup phases (scheduling.volcano.sh PodGroupPhase).
PENDING = "Pending"
INQUEUE = "Inqueue"
RUNNING = "Running"


class LifecyclePolicy(_K8s):
    """``action`` on an ``event`` (or one of ``events``, or an ``exitCode``)."""

    action: str = ""
    event: str = ""
    events: list[str] = msgspec.field(default_factory=list)
    exit_code: int | None = None
    timeout: str | None = None


class TaskSpec(_K8s):
    name: str = ""
    replicas: int = 0
    min_available: int | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    policies: list[LifecyclePolicy] = msgspec.field(default_factory=list)
    max_retry: int = 0


class VolcanoJobSpec(_K8s):
    scheduler_name: str = ""
    min_available: int = 0
    queue: str = ""
    max_retry: int = 0
    priority_class_name: str = ""
    tasks: list[TaskSpec] = msgspec.field(default_factory=list)
    policies: list[LifecyclePolicy] = msgspec.field(default_factory=list)
    plugins: dict[str, list[str]] = msgspec.field(default_factory=dict)


class VolcanoJob(_Object):
    api_version: str = VOLCANO_BATCH_API
    kind: str = "Job"
    spec: VolcanoJobSpec = msgspec.field(default_factory=VolcanoJobSpec)


class VolcanoPodGroupSpec(_K8s):
    min_member: int = 0
    min_task_member: dict[str, int] = msgspec.field(default_factory=dict)
    min_resources: ResourceMap | None = None
    queue: str = ""
    priority_class_name: str = ""


class VolcanoPodGroupStatus(_K8s):
    phase: str = ""


class VolcanoPodGroup(_Object):
    api_version: str = VOLCANO_SCHEDULING_API
    kind: str = "PodGroup"
    spec: VolcanoPodGroupSpec = msgspec.field(default_factory=VolcanoPodGroupSpec)
    status: VolcanoPodGroupStatus = msgspec.field(default_factory=VolcanoPodGroupStatus)


class VolcanoGuarantee(_K8s):
    resource: ResourceMap = msgspec.field(default_factory=dict)


class VolcanoQueueSpec(_K8s):
    weight: int = 1
    capability: ResourceMap = msgspec.field(default_factory=dict)
    guarantee: VolcanoGuarantee = msgspec.field(default_factory=VolcanoGuarantee)
    deserved: ResourceMap = msgspec.field(default_factory=dict)
    reclaimable: bool | None = None
    parent: str = ""


class VolcanoQueue(_Object):
    api_version: str = VOLCANO_SCHEDULING_API
    kind: str = "Queue"
    spec: VolcanoQueueSpec = msgspec.field(default_factory=VolcanoQueueSpec)
