"""Workload controllers as typed structs: Deployment, ReplicaSet and Job (apps/v1, batch/v1).

The simulator needs the objects that own pods, because an evicted pod comes back only when a
controller re-creates it, and a PodDisruptionBudget given as a percentage or as maxUnavailable
is measured against the controller's scale. Only the fields those two behaviours read are
modelled: replicas, selector, the pod template, and for Jobs completions, parallelism and
backoffLimit. Rollouts, revision history and pod failure policies are not.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from kubeberth.api.objects import LabelSelector, ObjectMeta, PodSpec, _K8s


class PodTemplateSpec(_K8s):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class ReplicaSetSpec(_K8s):
    replicas: int = 1
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class ReplicaSet(_K8s):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "ReplicaSet"
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)


class DeploymentSpec(_K8s):
    replicas: int = 1
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class Deployment(_K8s):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "Deployment"
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)


class JobSpec(_K8s):
    completions: int | None = None
    parallelism: int | None = None
    backoff_limit: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class Job(_K8s):
    API_VERSION: ClassVar[str] = "batch/v1"
    KIND: ClassVar[str] = "Job"
    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
