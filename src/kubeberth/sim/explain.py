"""``kubeberth explain``: why each pending pod goes where it goes.

The manifests' nodes and bound pods form the cluster; pending pods are attempted once each in
queue order, each decision (binding, preemption victims, nominations) applied before the next
pod, exactly as the scheduler would. Unlike a scheduling cycle, explain records every Filter
plugin's verdict on every node (not only the first failure) and every computed score, raw,
normalized and weighted. The JSON shape is a public contract documented in docs/explain.md.
"""

from __future__ import annotations

import math
from typing import Any

from kubeberth.admission.model import QUEUE_LABEL, serving_pod
from kubeberth.admission.pods import gated_pod
from kubeberth.api.objects import Pod
from kubeberth.api.times import parse_time
from kubeberth.api.volcano import VOLCANO_SCHEDULER_NAME
from kubeberth.config.configmaps import initial_config_maps, load_config_maps
from kubeberth.config.dra import load_dra
from kubeberth.config.manifests import Manifests
from kubeberth.config.scheduling_crds import load_scheduling_crds
from kubeberth.config.volcano import load_volcano
from kubeberth.config.workload_api import load_workload_api
from kubeberth.config.workloads import Owner, load_owners
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.extender import ExtenderVerdicts
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.pod_group_cycle import GroupOutcome
from kubeberth.scheduling.scheduler import CycleResult, Scheduler
from kubeberth.scheduling.volcano.conf import VolcanoConf, load_volcano_conf
from kubeberth.sim.explain_groups import render_group
from kubeberth.sim.volcano import explain_volcano
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info
from kubeberth.state.dra import show_quantity

_RESULT = {"assumed": "Scheduled", "waiting": "Waiting", "unschedulable": "Unschedulable",
           "error": "Error"}


def build_state(manifests: Manifests) -> tuple[ClusterState, list[PodInfo]]:
    """Cluster state from manifests, and the pending pods in manifest order."""
    snap = ClusterState()
    for pc in manifests.priority_classes:
        snap.priority_classes[pc.metadata.name] = pc
    for ns in manifests.namespaces:
        snap.namespaces[ns.metadata.name] = ns
    snap.pdbs = list(manifests.pdbs)
    snap.objects.load(load_scheduling_crds(manifests))
    snap.objects.load_workload_api(load_workload_api(manifests))
    snap.dra.load(load_dra(manifests))
    for node in manifests.nodes:
        snap.add_node(node)
    for key, data in initial_config_maps(load_config_maps(manifests)).items():
        snap.set_config_map(key, data)
    pending: list[PodInfo] = []
    for seq, pod in enumerate(manifests.pods):
        pi = make_pod_info(pod, snap.priority_classes, seq=seq)
        # Upstream's GetPodStartTime reads a pod without status.startTime as started now, so
        # it is the newest, first victim: later than every recorded start.
        pi.start_time = parse_time(pod.status.start_time, "status.startTime") \
            if pod.status.start_time else math.inf
        if pod.spec.node_name:
            idx = snap.node_index.get(pod.spec.node_name)
            if idx is not None and snap.present[idx]:
                snap.add_pod(pi, idx)
                snap.objects.pod_created(pi)
                continue
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        snap.objects.pod_created(pi)
        if not pod.spec.node_name:
            pending.append(pi)
    for seq, pod in enumerate(owner_pods(manifests), start=len(manifests.pods)):
        pi = make_pod_info(pod, snap.priority_classes, seq=seq)
        snap.objects.pod_created(pi)
        pending.append(pi)
    return snap, pending


def owner_pods(manifests: Manifests) -> list[Pod]:
    """The pods the manifests' Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs would
    create now, as their controllers top up to the desired count: pods in the manifests that
    match an owner's template labels in its namespace count as its own (a cluster dump keeps its
    pods), a StatefulSet creates what one sync of its controller would (with OrderedReady only
    the first missing ordinal, once the ones before it are Running and Ready), a DaemonSet one
    pod for each eligible node that has none, a ReplicaSet whose controlling Deployment is in
    the manifests is left to it, and a suspended Job — or one Kueue holds, labelled with a queue
    name — creates none."""
    def key_of(meta: dict[str, Any]) -> tuple[str, str]:
        return str(meta.get("namespace") or "default"), str(meta.get("name"))

    deployments = {key_of(d.data.get("metadata") or {}) for d in manifests.of_kind("Deployment")}
    managed: set[tuple[str, str]] = set()
    suspended: set[tuple[str, str]] = set()
    for doc in manifests.of_kind("ReplicaSet", "Job"):
        meta = doc.data.get("metadata") or {}
        key = key_of(meta)
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Deployment" and \
                    (key[0], str(ref.get("name"))) in deployments:
                managed.add(key)
        if doc.kind == "Job" and ((doc.data.get("spec") or {}).get("suspend")
                                  or QUEUE_LABEL in (meta.get("labels") or {})):
            suspended.add(key)
    created: list[Pod] = []
    for owner in load_owners(manifests):
        key = (owner.namespace, owner.name)
        if (owner.kind == "ReplicaSet" and key in managed) or key in suspended:
            continue
        if owner.kind == "StatefulSet":
            create, _ = owner.stateful_sync(owner.replicas, owner.ordinals_in(manifests.pods))
            created.extend(_held_by_kueue(owner, [owner.new_pod(o) for o in create]))
            continue
        if owner.kind == "DaemonSet":
            served = {owner.daemon_node_of(p) for p in manifests.pods if owner.claims(p)
                      and p.status.phase not in ("Succeeded", "Failed")}
            created.extend(owner.daemon_pod(n.metadata.name) for n in manifests.nodes
                           if n.metadata.name not in served and owner.daemon_should_run(n)[0])
            continue
        labels = owner.template.metadata.labels.items()
        mine = [p for p in manifests.pods if p.metadata.namespace == owner.namespace
                and labels <= p.metadata.labels.items()]
        active = sum(1 for p in mine if p.status.phase not in ("Succeeded", "Failed"))
        if owner.kind == "Job":
            want = owner.parallelism
            if owner.completions is not None:
                succeeded = sum(1 for p in mine if p.status.phase == "Succeeded")
                want = min(want, max(0, owner.completions - succeeded))
        else:
            want = owner.replicas
        created.extend(_held_by_kueue(owner, [owner.new_pod()
                                              for _ in range(max(0, want - active))]))
    return created


def _held_by_kueue(owner: Owner, pods: list[Pod]) -> list[Pod]:
    """A queue-labelled Deployment's or StatefulSet's pods as Kueue's webhooks leave them:
    gated until admission (a Deployment's also carrying its queue name, as plain pods)."""
    queue = owner.labels.get(QUEUE_LABEL)
    if not queue or owner.kind not in ("Deployment", "StatefulSet"):
        return pods
    if owner.kind == "Deployment":
        pods = [serving_pod(p, queue, owner.labels) for p in pods]
    return [gated_pod(p) for p in pods]


def explain(manifests: Manifests, config: SchedulerConfiguration, registry: Registry,
            *, seed: int = 0, volcano_conf: VolcanoConf | None = None) -> dict[str, Any]:
    snap, pending = build_state(manifests)
    volcano = load_volcano(manifests, snap.priority_classes)
    first = max((pi.seq for pi in snap.objects.pods.values()), default=-1) + 1
    for seq, pod in enumerate(volcano.job_pods, start=first):
        pi = make_pod_info(pod, snap.priority_classes, seq=seq)
        snap.objects.pod_created(pi)
        pending.append(pi)

    def evict(victim: PodInfo, _preemptor: PodInfo) -> None:
        snap.remove_pod(victim)
        snap.objects.pod_deleted(victim.key)
        snap.dra.pod_deleted(victim.key)

    def bind(_pod: PodInfo, _node: str) -> Status:
        return SUCCESS

    sched = Scheduler(config, registry, snap, clock=lambda: 0.0, seed=seed,
                      binder=bind, evictor=evict)
    skipped: list[dict[str, Any]] = []
    by_volcano: list[PodInfo] = []
    for pi in pending:
        if sched.responsible_for(pi):
            sched.add(pi)
        elif pi.pod.spec.scheduler_name == VOLCANO_SCHEDULER_NAME:
            by_volcano.append(pi)
        else:
            skipped.append({"pod": pi.key, "result": "NotOurs", "selectedNode": None,
                            "nominatedNode": None, "victims": [], "nodes": {},
                            "message": f"schedulerName {pi.pod.spec.scheduler_name!r} matches "
                                       "no profile"})
    pods: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    groups: list[GroupOutcome] = []
    while True:
        res = sched.schedule_one(record=True)
        if res is None:
            break
        if sched.extenders and res.extenders is None:
            res.extenders = ExtenderVerdicts()  # the cycle ended before any extender ran
        entry = _render(res, snap)
        if res.group is not None:
            entry["podGroup"] = res.group.group.key
            entry["nodes"] = {}  # decided by the group's placements: see "podGroups"
            if res.opens_group:
                groups.append(res.group)
                pre = res.group.preemption
                if pre is not None and pre.code == Code.SUCCESS and pre.victims:
                    # Its victims are gone: the group's next cycle runs now, as upstream's
                    # does once their deletion requeues it; its pods' entries show that one.
                    sched.queue.activate(res.group.pods)
            earlier = by_key.get(res.pod.key)
            if earlier is not None:
                earlier.clear()
                earlier.update(entry)
                entry = earlier
        if by_key.get(res.pod.key) is not entry:
            pods.append(entry)
            by_key[res.pod.key] = entry
        if res.outcome == "assumed":
            _bind(sched, res, entry)
        for done in sched.resolve_waiting(0.0):
            target = by_key.get(done.pod.key)
            if target is None:
                continue
            if done.outcome == "assumed":
                target["result"] = "Scheduled"
                target["selectedNode"] = done.node
                _bind(sched, done, target)
            else:
                target["result"] = _RESULT[done.outcome]
                target["selectedNode"] = None
                target["message"] = done.message
    for qpi in sched.queue.gated_pods():
        gated: dict[str, Any] = {
            "pod": qpi.info.key, "result": "SchedulingGated", "selectedNode": None,
            "nominatedNode": None, "victims": [], "nodes": {},
            "message": qpi.gating_plugin and f"blocked by {qpi.gating_plugin}"}
        if qpi.info.pod.spec.resource_claims:
            gated["resourceClaims"] = _claims(qpi.info, False, snap)
        pods.append(gated)
    unmodelled = sorted({n for fw in sched.frameworks.values() for n in fw.unmodelled})
    out: dict[str, Any] = {"pods": pods, "unmodelledPlugins": unmodelled}
    if groups:
        out["podGroups"] = [render_group(g) for g in groups]
    if by_volcano:
        vpods, out["volcano"] = explain_volcano(
            snap, by_volcano, volcano, volcano_conf or load_volcano_conf(None), registry,
            seed=seed)
        pods.extend(vpods)
    pods.extend(skipped)
    return out


def _bind(sched: Scheduler, res: CycleResult, entry: dict[str, Any]) -> None:
    st = sched.bind(res)
    if res.extenders is not None:
        entry["extenders"] = {"ignoredErrors": dict(sorted(res.extenders.ignored_errors.items())),
                              "boundBy": res.bound_by or None}
    if not st.ok:
        entry["result"] = "Error"
        entry["selectedNode"] = None
        entry["message"] = st.message()


def _render(res: CycleResult, snap: ClusterState) -> dict[str, Any]:
    nodes: dict[str, Any] = {}
    filters = res.filters
    pos_of: dict[int, int] = {}
    if filters is not None:
        pos_of = {int(n): i for i, n in enumerate(filters.nodes.tolist())}
    score_pos: dict[int, int] = {}
    if res.scores is not None:
        score_pos = {int(n): i for i, n in enumerate(res.scores.nodes.tolist())}
    for slot in snap.node_ids().tolist():
        name = snap.node_names[slot]
        node_entry: dict[str, Any] = {"filter": {}, "score": {}, "total": 0,
                                      "feasible": False, "scored": False}
        pos = pos_of.get(slot)
        if filters is not None and pos is not None:
            nominated = filters.with_nominated.get(pos, {})
            for plugin, fr in filters.per_plugin.items():
                st = nominated.get(plugin) or fr.status(pos, plugin)
                node_entry["filter"][plugin] = {"code": st.code.label,
                                                "reasons": list(st.reasons)}
            node_entry["feasible"] = bool(filters.codes[pos] == 0)
        spos = score_pos.get(slot)
        if res.scores is not None and spos is not None:
            for plugin, (raw, norm, weighted) in res.scores.per_plugin.items():
                node_entry["score"][plugin] = {"raw": int(raw[spos]),
                                               "normalized": int(norm[spos]),
                                               "weighted": int(weighted[spos])}
            node_entry["total"] = int(res.scores.totals[spos])
            node_entry["scored"] = True
        if res.extenders is not None:
            node_entry["extenders"] = _extender_verdicts(res, name)
        nodes[name] = node_entry
    entry: dict[str, Any] = {
        "pod": res.pod.key,
        "profile": res.profile,
        "result": _RESULT[res.outcome],
        "selectedNode": res.node if res.outcome == "assumed" else None,
        "nominatedNode": res.nominated_node,
        "victims": [v.key for v in res.victims],
        "gpuDevices": list(res.pod.gpu_devices) if res.outcome == "assumed" else [],
        "message": res.message,
        "nodes": nodes,
    }
    if res.extenders is not None:
        entry["extenders"] = {"ignoredErrors": dict(sorted(res.extenders.ignored_errors.items())),
                              "boundBy": None}
    if res.pod.pod.spec.resource_claims:
        entry["resourceClaims"] = _claims(res.pod, res.outcome in ("assumed", "waiting"), snap)
    return entry


def _claims(pod: PodInfo, placed: bool, snap: ClusterState) -> list[dict[str, Any]]:
    """The pod's claims (a missing one says so) and, once the pod is placed, each claim's
    allocation (devices, the node it is pinned to) and the pods it is reserved for."""
    dra = snap.dra
    out: list[dict[str, Any]] = []
    for name, key, claim, missing in dra.pod_claims(pod.pod):
        alloc = dra.allocations.get(key) if placed else None
        item: dict[str, Any] = {"name": name, "claim": key, "allocation": None,
                                "reservedFor": list(dra.reserved.get(key, []))}
        if claim is None:
            item["message"] = missing
        if alloc is not None:
            item["allocation"] = {
                "node": alloc.node,
                "devices": [{"request": r.request, "driver": r.driver, "pool": r.pool,
                             "device": r.device, "adminAccess": r.admin_access,
                             "consumedCapacity": {k: show_quantity(v)
                                                  for k, v in sorted(r.consumed.items())}}
                            for r in alloc.results]}
        out.append(item)
    return out


def _extender_verdicts(res: CycleResult, node: str) -> dict[str, Any]:
    """Extender name -> its filter verdict and score for one node, where it gave them."""
    assert res.extenders is not None
    out: dict[str, Any] = {}
    for ext, verdicts in res.extenders.filters.items():
        if node in verdicts:
            code, reasons = verdicts[node]
            out.setdefault(ext, {})["filter"] = {"code": code.label, "reasons": list(reasons)}
    for ext, scores in res.extenders.scores.items():
        if node in scores:
            raw, added = scores[node]
            out.setdefault(ext, {})["score"] = {"raw": raw, "weighted": added}
    return out
