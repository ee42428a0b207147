"""The custom resources of batch schedulers that kube-scheduler plugins read: PodGroup,
ElasticQuota (kubernetes-sigs/scheduler-plugins) and Volcano's Queue and PodGroup.

They are typed here, as :mod:`kubeberth.api.objects` types the core kinds, so that pasted
upstream YAML decodes field for field. Only the fields the gang, capacity and fair-share plugins
read are modelled; status fields are left out because the plugins compute them from the pods.
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import ObjectMeta, ResourceMap

# Pods name their group with this label (scheduler-plugins) or this annotation (Volcano).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Volcano's pod annotation naming a queue when the pod has no PodGroup.
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_DEFAULT_QUEUE = "default"


class _Crd(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """camelCase field names as the CRDs spell them."""


class PodGroupSpec(_Crd):
    """scheduler-plugins ``PodGroupSpec`` plus Volcano's ``queue``."""

    min_member: int = 0
    min_resources: ResourceMap | None = None
    schedule_timeout_seconds: int | None = None
    queue: str = ""


class PodGroup(_Crd):
    api_version: str = ""
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


class ElasticQuotaSpec(_Crd):
    min: ResourceMap | None = None
    max: ResourceMap | None = None


class ElasticQuota(_Crd):
    api_version: str = ""
    kind: str = "ElasticQuota"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ElasticQuotaSpec = msgspec.field(default_factory=ElasticQuotaSpec)


class Guarantee(_Crd):
    resource: ResourceMap = {}


class QueueSpec(_Crd):
    """Volcano ``QueueSpec``: the fields the proportion plugin reads."""

    weight: int = 1
    capability: ResourceMap = {}
    guarantee: Guarantee = msgspec.field(default_factory=Guarantee)


class Queue(_Crd):
    api_version: str = ""
    kind: str = "Queue"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: QueueSpec = msgspec.field(default_factory=QueueSpec)


__all__ = [
    "POD_GROUP_LABEL",
    "VOLCANO_DEFAULT_QUEUE",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_QUEUE_ANNOTATION",
    "ElasticQuota",
    "ElasticQuotaSpec",
    "Guarantee",
    "PodGroup",
    "PodGroupSpec",
    "Queue",
    "QueueSpec",
]
