"""The custom resources of batch schedulers that kube-scheduler plugins read: PodGroup and
ElasticQuota (kubernetes-sigs/scheduler-plugins), and the pod annotations naming a Volcano
PodGroup or Queue (the Queue itself is :class:`kubeberth.api.volcano.VolcanoQueue`, one type for
the VolcanoProportion plugin and the Volcano scheduler).

They are typed here, as :mod:`kubeberth.api.objects` types the core kinds, so that pasted
upstream YAML decodes field for field. Only the fields the gang, capacity and fair-share plugins
read are modelled; status fields are left out because the plugins compute them from the pods.
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import ResourceMap, _K8s, _Object

# Pods name their group with this label (scheduler-plugins) or this annotation (Volcano).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Volcano's pod annotation naming a queue when the pod has no PodGroup.
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_DEFAULT_QUEUE = "default"


class PodGroupSpec(_K8s):
    """scheduler-plugins ``PodGroupSpec`` plus Volcano's ``queue``."""

    min_member: int = 0
    min_resources: ResourceMap | None = None
    schedule_timeout_seconds: int | None = None
    queue: str = ""


class PodGroup(_Object):
    api_version: str = ""
    kind: str = "PodGroup"
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)


class ElasticQuotaSpec(_K8s):
    min: ResourceMap | None = None
    max: ResourceMap | None = None


class ElasticQuota(_Object):
    api_version: str = ""
    kind: str = "ElasticQuota"
    spec: ElasticQuotaSpec = msgspec.field(default_factory=ElasticQuotaSpec)


__all__ = [
    "POD_GROUP_LABEL",
    "VOLCANO_DEFAULT_QUEUE",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_QUEUE_ANNOTATION",
    "ElasticQuota",
    "ElasticQuotaSpec",
    "PodGroup",
    "PodGroupSpec",
]
