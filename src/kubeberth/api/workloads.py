"""Workload controllers as typed structs: Deployment, ReplicaSet, StatefulSet, DaemonSet and Job
(apps/v1, batch/v1).

The simulator needs the objects that own pods, because an evicted pod comes back only when a
controller re-creates it, and a PodDisruptionBudget given as a percentage or as maxUnavailable
is measured against the controller's scale. Only the fields those two behaviours read are
modelled: replicas, selector, the pod template, for StatefulSets the pod management policy, the
first ordinal and the governing Service's name, and for Jobs completions, parallelism and
backoffLimit. Rollouts, revision history, volume claim templates and pod failure policies are
not.
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import LabelSelector, ObjectMeta, PodSpec, _K8s, _Object


class PodTemplateSpec(_K8s):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class ReplicatedSpec(_K8s):
    """The spec of a ReplicaSet and of a Deployment: what the simulator reads of the two is the
    same (a Deployment's strategy and revision history are not modelled)."""

    replicas: int = 1
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class Replicated(_Object):
    """A ReplicaSet or a Deployment: apps/v1 with a :class:`ReplicatedSpec`; each sets its kind."""

    api_version: str = "apps/v1"
    kind: str = ""
    spec: ReplicatedSpec = msgspec.field(default_factory=ReplicatedSpec)


class ReplicaSet(Replicated):
    kind: str = "ReplicaSet"


class Deployment(Replicated):
    kind: str = "Deployment"


class JobSpec(_K8s):
    completions: int | None = None
    parallelism: int | None = None
    backoff_limit: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class Job(_Object):
    api_version: str = "batch/v1"
    kind: str = "Job"
    spec: JobSpec = msgspec.field(default_factory=JobSpec)


class StatefulSetOrdinals(_K8s):
    start: int = 0


class StatefulSetSpec(ReplicatedSpec):
    """A ReplicatedSpec (its fields keep their place on the wire) and the StatefulSet's own."""

    pod_management_policy: str = "OrderedReady"
    service_name: str = ""
    ordinals: StatefulSetOrdinals | None = None


class StatefulSet(_Object):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    spec: StatefulSetSpec = msgspec.field(default_factory=StatefulSetSpec)


class DaemonSetSpec(_K8s):
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class DaemonSet(_Object):
    api_version: str = "apps/v1"
    kind: str = "DaemonSet"
    spec: DaemonSetSpec = msgspec.field(default_factory=DaemonSetSpec)
