"""The Volcano scheduler's driver: a session per schedule period over the pods whose
schedulerName is ``volcano``.

A session's jobs are PodGroups: a pod's ``scheduling.k8s.io/group-name`` annotation names its
group; a pod without one gets the group Volcano's PodGroup controller would create for it
(``podgroup-<pod>``, minMember 1, the queue of its ``scheduling.volcano.sh/queue-name``
annotation or ``default``, the pod's priority class). Queues are the Queue objects plus
``default`` (weight 1), which Volcano creates. Pods stay in the ClusterState once placed: the
host binds them; nothing here acts on the world.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubeberth.api.objects import ObjectMeta
from kubeberth.api.resources import resource_map
from kubeberth.api.scheduling_crds import VOLCANO_QUEUE_ANNOTATION
from kubeberth.api.volcano import (
    DEFAULT_QUEUE,
    GROUP_NAME_ANNOTATION,
    PENDING,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
    VolcanoQueue,
)
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.plugins.volcano_resource import add, from_milli
from kubeberth.scheduling.volcano.actions import ACTIONS
from kubeberth.scheduling.volcano.conf import VolcanoConf
from kubeberth.scheduling.volcano.plugins import PLUGINS
from kubeberth.scheduling.volcano.session import Decision, JobInfo, Plugin, QueueInfo, Session
from kubeberth.state.cluster import ClusterState, PodInfo


@dataclass(slots=True)
class SessionResult:
    number: int
    decisions: list[Decision]
    phases: dict[str, str] = field(default_factory=dict)  # podgroup -> phase after close


class VolcanoScheduler:
    """Volcano's scheduler over a ClusterState: call :meth:`run_session` once per period."""

    def __init__(self, conf: VolcanoConf, kube: Framework, *, seed: int = 0,
                 queues: dict[str, VolcanoQueue] | None = None,
                 pod_groups: dict[str, VolcanoPodGroup] | None = None) -> None:
        self.conf = conf
        self.kube = kube
        self.rng = np.random.default_rng(seed)
        self.queues = dict(queues or {})
        self.pod_groups = dict(pod_groups or {})
        self._order: dict[str, int] = {k: i for i, k in enumerate(self.pod_groups)}
        # Build every plugin once, so bad arguments fail before the first session.
        self.plugin_tiers: list[list[Plugin]] = [[PLUGINS[o.name](o) for o in tier]
                                                  for tier in conf.tiers]
        self.sessions = 0

    def _pick(self, nodes: list[int]) -> int:
        return nodes[int(self.rng.integers(len(nodes)))] if len(nodes) > 1 else nodes[0]

    def group_of(self, pi: PodInfo) -> str:
        """``namespace/name`` of the pod's PodGroup, creating the implicit one if it has none."""
        meta = pi.pod.metadata
        name = meta.annotations.get(GROUP_NAME_ANNOTATION)
        if name:
            return f"{pi.namespace}/{name}"
        key = f"{pi.namespace}/podgroup-{meta.name}"
        if key not in self.pod_groups:
            pg = VolcanoPodGroup(
                metadata=ObjectMeta(name=f"podgroup-{meta.name}", namespace=pi.namespace),
                spec=VolcanoPodGroupSpec(
                    min_member=1,
                    queue=meta.annotations.get(VOLCANO_QUEUE_ANNOTATION) or DEFAULT_QUEUE,
                    priority_class_name=pi.pod.spec.priority_class_name))
            pg.status.phase = PENDING
            self.pod_groups[key] = pg
            self._order[key] = len(self._order)
        return key

    def run_session(self, snap: ClusterState, pending: list[PodInfo],
                    bound: list[PodInfo]) -> tuple[SessionResult, dict[str, str]]:
        """One session over the pending and bound Volcano pods; returns the decisions and, for
        pods whose PodGroup does not exist, why they wait."""
        self.sessions += 1
        missing: dict[str, str] = {}
        jobs: dict[str, JobInfo] = {}

        def job(key: str) -> JobInfo | None:
            found = jobs.get(key)
            if found is not None:
                return found
            pg = self.pod_groups.get(key)
            if pg is None:
                return None
            pc = snap.priority_classes.get(pg.spec.priority_class_name)
            min_res = from_milli(resource_map(pg.spec.min_resources or {},
                                              "spec.minResources"))
            found = jobs[key] = JobInfo(key, pg, pg.spec.queue or DEFAULT_QUEUE,
                                        pc.value if pc is not None else 0,
                                        self._order.get(key, 0), min_res)
            return found

        for pi in bound:
            j = job(self.group_of(pi))
            if j is not None:
                j.placed[pi.key] = pi
                add(j.allocated, from_milli(pi.requests))
        for pi in pending:
            key = self.group_of(pi)
            j = job(key)
            if j is None:
                missing[pi.key] = f"PodGroup {key} of pod {pi.key} not found"
                continue
            j.pending.append(pi)
        queues: dict[str, QueueInfo] = {
            DEFAULT_QUEUE: QueueInfo(DEFAULT_QUEUE, self.queues.get(DEFAULT_QUEUE), 0)}
        for i, (name, q) in enumerate(self.queues.items(), start=1):
            queues[name] = QueueInfo(name, q, i)
        ordered = dict(sorted(jobs.items(), key=lambda kv: kv[1].order))
        ssn = Session(self.conf, snap, ordered, queues, self.plugin_tiers, self.sessions,
                      self._pick, self.kube)
        for tier in self.plugin_tiers:
            for plugin in tier:
                plugin.on_session_open(ssn)
        for action in self.conf.actions:
            ACTIONS[action](ssn)
        ssn.close()
        phases = {k: j.phase for k, j in ordered.items()}
        return SessionResult(self.sessions, list(ssn.decisions.values()), phases), missing


__all__ = ["SessionResult", "VolcanoScheduler"]
