"""The API objects batch-scheduling plugins list besides nodes: PodGroups, ElasticQuotas,
Volcano Queues, and every pod that exists (pending ones included).

Upstream, Coscheduling counts a group's pods through a pod lister and CapacityScheduling keeps
quotas from an informer; the scheduler snapshot alone (bound and assumed pods) is not enough.
This store is that lister: the host (simulator, explain, a live adapter) tells it when a pod is
created or deleted, and the plugins read it. It never changes on its own, so plugins stay pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubeberth.api.scheduling_crds import POD_GROUP_LABEL, ElasticQuota, PodGroup
from kubeberth.api.volcano import VolcanoQueue
from kubeberth.config.scheduling_crds import SchedulingCrds
from kubeberth.config.workload_api import NativeGroup, WorkloadApi

if TYPE_CHECKING:
    from kubeberth.state.cluster import PodInfo


def pod_group_key(pi: PodInfo) -> str:
    """``namespace/name`` of the scheduler-plugins PodGroup a pod belongs to, or ``""``."""
    name = pi.labels.get(POD_GROUP_LABEL, "")
    return f"{pi.namespace}/{name}" if name else ""


class SchedulingObjects:
    """PodGroups (by ``namespace/name``, with creation time and order), ElasticQuotas (by
    namespace), Volcano Queues (by name) and the existing pods, indexed by pod group."""

    def __init__(self) -> None:
        self.pod_groups: dict[str, PodGroup] = {}
        self.pod_group_created: dict[str, tuple[float, int]] = {}
        self.elastic_quotas: dict[str, ElasticQuota] = {}
        self.queues: dict[str, VolcanoQueue] = {}
        self.pods: dict[str, PodInfo] = {}
        self._members: dict[str, dict[str, PodInfo]] = {}
        # Native (scheduling.k8s.io) PodGroups and their existing pods, by ``namespace/name``.
        self.workload_api = WorkloadApi()
        self._native_members: dict[str, dict[str, PodInfo]] = {}
        self.version = 0

    def load(self, crds: SchedulingCrds) -> None:
        for c in crds.pod_groups:
            self.pod_groups[c.group.key] = c.group
            self.pod_group_created[c.group.key] = (c.created, c.order)
        for eq in crds.elastic_quotas:
            self.elastic_quotas[eq.metadata.namespace] = eq
        for q in crds.queues:
            self.queues[q.metadata.name] = q
        self.version += 1

    def load_workload_api(self, api: WorkloadApi) -> None:
        self.workload_api = api
        self.version += 1

    def pod_created(self, pi: PodInfo) -> None:
        self.pods[pi.key] = pi
        group = pod_group_key(pi)
        if group:
            self._members.setdefault(group, {})[pi.key] = pi
        native = self.native_group_name(pi)
        if native:
            self._native_members.setdefault(native, {})[pi.key] = pi
        self.version += 1

    def pod_deleted(self, key: str) -> None:
        pi = self.pods.pop(key, None)
        if pi is None:
            return
        group = pod_group_key(pi)
        if group:
            self._members.get(group, {}).pop(key, None)
        native = self.native_group_name(pi)
        if native:
            self._native_members.get(native, {}).pop(key, None)
        self.version += 1

    def members(self, group: str) -> dict[str, PodInfo]:
        """The existing pods labelled with pod group ``namespace/name``."""
        return self._members.get(group, {})

    def native_group_name(self, pi: PodInfo) -> str:
        """``namespace/name`` of the native PodGroup the pod joins (it may not exist), or ``""``."""
        return self.workload_api.group_name(pi.namespace, pi.pod.spec)

    def native_group(self, pi: PodInfo) -> NativeGroup | None:
        """The native PodGroup the pod joins, None when it joins none or the group is missing."""
        return self.workload_api.group_for(pi.namespace, pi.pod.spec)

    def native_members(self, group: str) -> dict[str, PodInfo]:
        """The existing pods of native PodGroup ``namespace/name``, in creation order."""
        return self._native_members.get(group, {})


__all__ = ["SchedulingObjects", "pod_group_key"]
