"""Volcano sessions in a run: pods whose schedulerName is ``volcano`` are scheduled by the
Volcano scheduler, a session every schedule period on the virtual clock (Volcano's
``--schedule-period``, default 1s), until a session changes nothing.

Used by ``kubeberth explain``: each Volcano pod's entry says where it went, in which session,
or why it waits; the ``volcano`` section gives every PodGroup's phase, placed tasks, allocated
resources and dominant share, every queue's deserved and allocated resources, and the
cluster's utilisation (docs/volcano.md).
"""

from __future__ import annotations

from typing import Any

from kubeberth.api.resources import MEMORY
from kubeberth.config.volcano import VolcanoObjects
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.plugins.volcano_proportion import QueueAttr
from kubeberth.scheduling.plugins.volcano_resource import (
    VResource,
    cluster_total,
    dominant_share,
    from_milli,
)
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.scheduling.volcano.conf import VolcanoConf
from kubeberth.scheduling.volcano.plugins import Proportion
from kubeberth.scheduling.volcano.scheduler import VolcanoScheduler
from kubeberth.state.cluster import ClusterState, PodInfo

SCHEDULE_PERIOD = 1.0  # seconds, Volcano's default --schedule-period


def kube_profile(snap: ClusterState, registry: Registry, seed: int) -> Scheduler:
    """The default kube-scheduler profile whose filters and scores Volcano's predicates and
    nodeorder plugins run."""
    def bind(_pod: PodInfo, _node: str) -> Status:
        return SUCCESS

    def evict(_victim: PodInfo, _preemptor: PodInfo) -> None:
        raise AssertionError("Volcano's predicates never evict")

    return Scheduler(load_scheduler_config(None), registry, snap, clock=lambda: 0.0,
                     seed=seed, binder=bind, evictor=evict)


def _units(r: VResource) -> dict[str, float]:
    """Volcano units back to the user's: cpu in cores, extended resources in whole units."""
    out: dict[str, float] = {}
    for k, v in sorted(r.items()):
        if v < 0.1 or k.startswith("kubeberth.io/"):
            continue
        out[k] = round(v if k == MEMORY else v / 1000, 3)
    return out


def explain_volcano(snap: ClusterState, pending: list[PodInfo], objects: VolcanoObjects,
                    conf: VolcanoConf, registry: Registry, *,
                    seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run sessions over ``pending`` until one changes nothing; the pods' explain entries and
    the ``volcano`` section."""
    kube = kube_profile(snap, registry, seed)
    fw = next(iter(kube.frameworks.values()))
    sched = VolcanoScheduler(conf, fw, seed=seed, queues=objects.queues,
                             pod_groups=objects.pod_groups)
    bound = [pi for pi in snap.pods.values()
             if pi.pod.spec.scheduler_name == pending[0].pod.spec.scheduler_name] \
        if pending else []
    waiting = list(pending)
    entries: dict[str, dict[str, Any]] = {}
    phases: dict[str, str] = {}
    # Each session places at least one task or changes a phase, else the run has settled.
    for _ in range(len(pending) + 3):
        result, missing = sched.run_session(snap, waiting, bound)
        changed = result.phases != phases
        phases = result.phases
        at = (result.number - 1) * SCHEDULE_PERIOD
        for key, message in missing.items():
            entries[key] = _entry(key, None, message, result.number, at, None)
        placed: set[str] = set()
        for d in result.decisions:
            entries[d.pod] = _entry(d.pod, d.node, d.message, d.session, at, d.job, d.order)
            if d.node is not None:
                placed.add(d.pod)
        if placed:
            bound.extend(pi for pi in waiting if pi.key in placed)
            waiting = [pi for pi in waiting if pi.key not in placed]
        if not placed and not changed:
            break
    for pi in waiting:
        entries.setdefault(pi.key, _entry(pi.key, None, "no session placed it",
                                          sched.sessions, 0.0, None))
    pods = [entries[pi.key] for pi in pending]
    return pods, _summary(snap, sched, phases, bound, conf)


def _entry(pod: str, node: str | None, message: str, session: int, at: float,
           job: str | None, order: int = 0) -> dict[str, Any]:
    return {"pod": pod, "profile": "volcano",
            "result": "Scheduled" if node is not None else "Unschedulable",
            "selectedNode": node, "nominatedNode": None, "victims": [], "nodes": {},
            "message": message,
            "volcano": {"session": session, "time": at, "podGroup": job, "order": order}}


def _summary(snap: ClusterState, sched: VolcanoScheduler, phases: dict[str, str],
             bound: list[PodInfo], conf: VolcanoConf) -> dict[str, Any]:
    total = cluster_total(snap)
    groups: dict[str, dict[str, Any]] = {}
    alloc: dict[str, VResource] = {}
    tasks: dict[str, int] = {}
    for pi in bound:
        key = sched.group_of(pi)
        a = alloc.setdefault(key, {})
        for k, v in from_milli(pi.requests).items():
            a[k] = a.get(k, 0.0) + v
        tasks[key] = tasks.get(key, 0) + 1
    used: VResource = {}
    for key, pg in sched.pod_groups.items():
        a = alloc.get(key, {})
        for k, v in a.items():
            used[k] = used.get(k, 0.0) + v
        groups[key] = {"queue": pg.spec.queue, "phase": phases.get(key, pg.status.phase),
                       "minMember": pg.spec.min_member, "tasks": tasks.get(key, 0),
                       "allocated": _units(a),
                       "dominantShare": round(dominant_share(a, total), 4)}
    queues: dict[str, Any] = {}
    for tier in sched.plugin_tiers:  # the proportion plugin's last session view
        for plugin in tier:
            if isinstance(plugin, Proportion):
                queues = {name: _queue(attr) for name, attr in sorted(plugin.attrs.items())}
    util = {k: round(used.get(k, 0.0) / v, 4) for k, v in sorted(total.items())
            if v >= 0.1 and not k.startswith("kubeberth.io/")}
    return {"sessions": sched.sessions, "schedulePeriod": f"{SCHEDULE_PERIOD:g}s",
            "actions": conf.actions,
            "tiers": [[p.name for p in tier] for tier in conf.tiers],
            "podGroups": groups, "queues": queues,
            "cluster": {"capacity": _units(total), "allocated": _units(used),
                        "utilisation": util}}


def _queue(attr: QueueAttr) -> dict[str, Any]:
    return {"weight": attr.weight, "deserved": _units(attr.deserved),
            "allocated": _units(attr.allocated), "request": _units(attr.request)}


__all__ = ["SCHEDULE_PERIOD", "explain_volcano", "kube_profile"]
