"""The controllers that live inside the embedded cluster: workloads, the fake kubelet, PDBs, GC.

A real cluster's kube-controller-manager and kubelets turn a Deployment into pods, a bound pod
into a running one, and keep PodDisruptionBudget status current. kubeberth's own controllers
(scheduler, descheduler, spill, admission) run outside, as clients, and expect exactly that
behaviour from the cluster they talk to; these controllers provide it.

- ReplicaSet, Deployment and Job controllers create and delete pods from their templates. The
  Deployment controller replaces old ReplicaSets at once (no surge/unavailable pacing).
- The fake kubelet admits a bound pod on a Ready node as kubelet's admission handler does
  (:class:`Kubelet`: resources against the pods it runs, node selector and required node
  affinity, untolerated NoExecute taints), fails one that does not fit with kubelet's reason
  and message, runs the others (phase Running, Ready condition, container statuses) and
  completes them after their ``kubeberth.io/duration-seconds`` annotation on the server's
  clock; a pod being deleted is killed at once (containers honour SIGTERM).
- The disruption controller keeps each PodDisruptionBudget's status current.
- The garbage collector deletes dependents of a deleted owner, and pods of a deleted node.

They react to the store's change notifications through one queue processed on the server's
loop, so a test can wait for the cluster to settle (:meth:`ControllerManager.settle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import heapq
import json
import logging
from typing import Any

from kubeberth.api.objects import Node, Pod
from kubeberth.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    is_extended_resource,
    node_allocatable,
    pod_requests,
)
from kubeberth.api.selectors import compile_node_selector_term, tolerated
from kubeberth.api.times import format_micro_time, format_time, parse_time_or_none
from kubeberth.apiserver import errors
from kubeberth.apiserver.clock import Clock
from kubeberth.apiserver.disruption import (
    budget_status,
    pod_healthy,
    selector_matches,
    status_object,
)
from kubeberth.apiserver.operations import Api, set_condition
from kubeberth.apiserver.resources import ResourceType
from kubeberth.apiserver.store import Event, Obj
from kubeberth.config.manifests import ANNOTATION_DURATION, decode_object
from kubeberth.config.yamlsrc import Document, Source

_log = logging.getLogger(__name__)
TERMINAL = ("Succeeded", "Failed")
_MAX_BURST = 500  # pods one reconcile creates at most (upstream's slow-start cap)
KUBELET_MAX_PODS = 110  # kubelet's default maxPods, for a node that reports no pods allocatable


def _owner_ref(owner: Obj) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: Obj) -> str:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def _controller_of(obj: Obj) -> tuple[str, str]:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind") or ""), str(ref.get("name") or "")
    return "", ""


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _active(pod: Obj) -> bool:
    return _phase(pod) not in TERMINAL and not pod["metadata"].get("deletionTimestamp")


def _duration(pod: Obj) -> float | None:
    raw = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_DURATION)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


class ControllerManager:
    """Runs every in-cluster controller off the store's change feed."""

    def __init__(self, api: Api, clock: Clock) -> None:
        self.api = api
        self.store = api.store
        self.clock = clock
        self.queue: asyncio.Queue[tuple[ResourceType, Event]] = asyncio.Queue()
        self._timers: list[tuple[float, int, str, str, str]] = []
        self._timer_seq = 0
        self._wake: asyncio.Event | None = None
        self._rt = {rt.kind: rt for rt in api.registry.resources if rt.group in
                    ("", "apps", "batch", "policy")}
        self.kubelet = Kubelet()
        # (namespace, name) of the pods bound to each node, kept in step with the store (the
        # listener runs inside every change), so admission reads a node's pods, not all pods.
        self._bound: dict[str, set[tuple[str, str]]] = {}
        self.store.add_listener(self._notify)

    def _notify(self, rt: ResourceType, event: Event) -> None:
        if rt.kind == "Pod" and rt.group == "":
            meta = event.obj["metadata"]
            node = (event.obj.get("spec") or {}).get("nodeName")
            if node:
                key = (meta.get("namespace", ""), meta["name"])
                if event.type == "DELETED":
                    self._bound.get(node, set()).discard(key)
                else:
                    self._bound.setdefault(node, set()).add(key)
        self.queue.put_nowait((rt, event))

    # Loop plumbing.

    async def run(self) -> None:
        """Process change notifications until cancelled."""
        while True:
            rt, event = await self.queue.get()
            try:
                self.handle(rt, event)
            except errors.ApiError:
                pass  # a conflicting write: the next notification reconciles again
            except Exception:
                _log.exception("controller failed on %s %s", event.type, rt.plural)
            finally:
                self.queue.task_done()

    async def run_timers(self) -> None:
        """Complete pods when their duration has passed on the clock."""
        self._wake = asyncio.Event()
        while True:
            self.fire_due()
            timeout = None
            if self._timers and not self.clock.manual:
                timeout = max(0.0, self._timers[0][0] - self.clock.now())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()

    def poke(self) -> None:
        """The clock moved or a timer was added: look at the timers again."""
        if self._wake is not None:
            self._wake.set()

    async def settle(self) -> None:
        """Wait until every queued notification (and what it caused) is handled."""
        while True:
            self.fire_due()
            await self.queue.join()
            await asyncio.sleep(0)
            if self.queue.empty():
                return

    # Dispatch.

    def handle(self, rt: ResourceType, event: Event) -> None:
        obj = event.obj
        if event.type == "DELETED":
            self._collect_garbage(rt, obj)
            if rt.kind == "Pod":
                self.kubelet.forget(obj)
        kind = rt.kind if rt.group in ("", "apps", "batch", "policy") else ""
        if kind == "Pod":
            if event.type != "DELETED":
                self._kubelet(obj)
            owner_kind, owner_name = _controller_of(obj)
            ns = obj["metadata"].get("namespace", "")
            if owner_kind in ("ReplicaSet", "Job"):
                owner = self.store.get(self._rt[owner_kind], ns, owner_name)
                if owner is not None:
                    self._reconcile(owner_kind, owner)
            self._refresh_pdbs(ns)
        elif kind == "Node" and event.type != "DELETED":
            if event.type == "ADDED":
                self._node_lease(obj)
            # kubelet admits the pods waiting for it oldest first.
            waiting = [p for ns, name in self._bound.get(obj["metadata"]["name"], ())
                       if (p := self.store.get(self._rt["Pod"], ns, name)) is not None]
            for pod in sorted(waiting, key=_created):
                self._kubelet(pod)
        elif kind in ("ReplicaSet", "Deployment", "Job") and event.type != "DELETED":
            self._reconcile(kind, obj)
            if kind == "ReplicaSet":
                owner_kind, owner_name = _controller_of(obj)
                if owner_kind == "Deployment":
                    dep = self.store.get(self._rt["Deployment"],
                                         obj["metadata"].get("namespace", ""), owner_name)
                    if dep is not None:
                        self._reconcile("Deployment", dep)
        elif kind == "PodDisruptionBudget" and event.type != "DELETED":
            self._refresh_pdb(obj)

    def _reconcile(self, kind: str, obj: Obj) -> None:
        current = self.store.get(self._rt[kind], obj["metadata"].get("namespace", ""),
                                 obj["metadata"]["name"])
        if current is None or current["metadata"].get("deletionTimestamp"):
            return
        if kind == "ReplicaSet":
            self._replicaset(current)
        elif kind == "Deployment":
            self._deployment(current)
        else:
            self._job(current)

    # The fake kubelet.

    def _node_lease(self, node: Obj) -> None:
        """The kubelet's heartbeat Lease in kube-node-lease (renewed once: the fake kubelet
        never goes away)."""
        name = node["metadata"]["name"]
        leases = self.api.registry.of_kind("coordination.k8s.io", "Lease")
        if leases is None or self.store.get(leases, "kube-node-lease", name) is not None:
            return
        now = format_micro_time(self.clock.now())
        self.api.create(leases, "kube-node-lease", {
            "metadata": {"name": name, "namespace": "kube-node-lease",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": node["metadata"]["uid"]}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "acquireTime": now,
                     "renewTime": now}})

    def _kubelet(self, pod: Obj) -> None:
        pods = self._rt["Pod"]
        meta = pod["metadata"]
        node_name = (pod.get("spec") or {}).get("nodeName")
        current = self.store.get(pods, meta.get("namespace", ""), meta["name"])
        if not node_name or current is None or current["metadata"]["uid"] != meta["uid"]:
            return
        pod = current
        if pod["metadata"].get("deletionTimestamp"):
            if _phase(pod) in TERMINAL:
                return  # stopped; the object waits for its finalizers
            self.api.record_event(pod, "Normal", "Killing", "Stopping container "
                                  f"{_first_container(pod)}", "kubelet", node_name)
            if pod["metadata"].get("finalizers"):
                self._complete(pod)  # containers exit on SIGTERM; finalizers keep the object
            else:
                self.store.remove(pods, pod)
            return
        if _phase(pod) != "Pending":
            return
        node = self.store.get(self._rt["Node"], "", node_name)
        if node is None or not _node_ready(node):
            return
        others = [p for ns, name in sorted(self._bound.get(node_name, ()))
                  if (p := self.store.get(pods, ns, name)) is not None
                  and p["metadata"]["uid"] != meta["uid"] and _phase(p) == "Running"]
        refusal = self.kubelet.admit(pod, node, others)
        if refusal is not None:
            self._reject(pod, node_name, *refusal)
            return
        now = self.clock.now()
        started = format_time(now)
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        status["phase"] = "Running"
        status["startTime"] = started
        for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                      "PodScheduled"):
            set_condition(new, {"type": ctype, "status": "True", "lastTransitionTime": started})
        status["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "",
             "containerID": f"kubeberth://{meta['uid']}/{c.get('name', '')}",
             "ready": True, "started": True, "restartCount": 0,
             "state": {"running": {"startedAt": started}}}
            for c in (new.get("spec") or {}).get("containers") or []]
        self.api.update(pods, meta.get("namespace", ""), meta["name"], new, "status")
        for c in (new.get("spec") or {}).get("containers") or []:
            self.api.record_event(pod, "Normal", "Started",
                                  f"Started container {c.get('name', '')}", "kubelet",
                                  node_name)
        duration = _duration(pod)
        if duration is not None:
            self._timer_seq += 1
            heapq.heappush(self._timers, (now + duration, self._timer_seq,
                                          meta.get("namespace", ""), meta["name"], meta["uid"]))
            self.poke()

    def _reject(self, pod: Obj, node_name: str, reason: str, message: str) -> None:
        """kubelet's rejectPod: a Warning Event, then phase Failed with the reason."""
        self.api.record_event(pod, "Warning", reason, message, "kubelet", node_name)
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        status.update({"phase": "Failed", "reason": reason,
                       "message": f"Pod was rejected: {message}"})
        meta = pod["metadata"]
        self.api.update(self._rt["Pod"], meta.get("namespace", ""), meta["name"], new, "status")

    def fire_due(self) -> None:
        """Complete every pod whose run time is over."""
        now = self.clock.now()
        while self._timers and self._timers[0][0] <= now:
            _, _, ns, name, uid = heapq.heappop(self._timers)
            pod = self.store.get(self._rt["Pod"], ns, name)
            if pod is None or pod["metadata"]["uid"] != uid or _phase(pod) != "Running":
                continue
            self._complete(pod)

    def _complete(self, pod: Obj) -> None:
        finished = format_time(self.clock.now())
        new = copy.deepcopy(pod)
        status = new["status"]
        status["phase"] = "Succeeded"
        for ctype in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
            set_condition(new, {"type": ctype, "status": "False", "reason": "PodCompleted",
                                "lastTransitionTime": finished})
        for cs in status.get("containerStatuses") or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
            cs["ready"], cs["started"] = False, False
            cs["state"] = {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": started, "finishedAt": finished,
                                          "containerID": cs.get("containerID")}}
        meta = pod["metadata"]
        self.api.update(self._rt["Pod"], meta.get("namespace", ""), meta["name"], new,
                        "status")

    # Workload controllers.

    def _owned_pods(self, owner: Obj) -> list[Obj]:
        uid = owner["metadata"]["uid"]
        return [p for p in self.store.items(self._rt["Pod"], owner["metadata"]["namespace"])
                if controller_uid(p) == uid]

    def _create_pod(self, owner: Obj, template: Obj, component: str) -> None:
        tmeta = template.get("metadata") or {}
        body = {
            "metadata": {"generateName": f"{owner['metadata']['name']}-",
                         "namespace": owner["metadata"]["namespace"],
                         "labels": dict(tmeta.get("labels") or {}),
                         "annotations": dict(tmeta.get("annotations") or {}),
                         "ownerReferences": [_owner_ref(owner)]},
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        if not body["metadata"]["annotations"]:
            del body["metadata"]["annotations"]
        try:
            pod = self.api.create(self._rt["Pod"], owner["metadata"]["namespace"], body)
        except errors.ApiError as err:
            self.api.record_event(owner, "Warning", "FailedCreate",
                                  f"Error creating: {err.message}", component)
            raise
        self.api.record_event(owner, "Normal", "SuccessfulCreate",
                              f"Created pod: {pod['metadata']['name']}", component)

    def _delete_pod(self, owner: Obj, pod: Obj, component: str) -> None:
        self.api.delete(self._rt["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.api.record_event(owner, "Normal", "SuccessfulDelete",
                              f"Deleted pod: {pod['metadata']['name']}", component)

    def _write_status(self, kind: str, obj: Obj, status: dict[str, Any]) -> None:
        if obj.get("status") == status:
            return
        new = copy.deepcopy(obj)
        new["status"] = status
        self.api.update(self._rt[kind], obj["metadata"]["namespace"], obj["metadata"]["name"],
                        new, "status")

    def _replicaset(self, rs: Obj) -> None:
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        active = [p for p in self._owned_pods(rs) if _active(p)]
        if len(active) < want:
            for _ in range(min(want - len(active), _MAX_BURST)):
                self._create_pod(rs, spec.get("template") or {}, "replicaset-controller")
        elif len(active) > want:
            # Upstream's order: unscheduled, then pending, then not ready, then newest first.
            active.sort(key=lambda p: (bool((p.get("spec") or {}).get("nodeName")),
                                       _phase(p) != "Pending", pod_healthy(p),
                                       -(parse_time_or_none(
                                           p["metadata"].get("creationTimestamp", "")) or 0.0)))
            for pod in active[:len(active) - want]:
                self._delete_pod(rs, pod, "replicaset-controller")
        current = self.store.get(self._rt["ReplicaSet"], rs["metadata"]["namespace"],
                                 rs["metadata"]["name"])
        if current is None:
            return
        pods = [p for p in self._owned_pods(current) if _active(p)]
        ready = sum(1 for p in pods if pod_healthy(p))
        selector = spec.get("selector") or {}
        self._write_status("ReplicaSet", current, {
            "replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
            "fullyLabeledReplicas": sum(1 for p in pods if selector_matches(
                selector, p["metadata"].get("labels") or {})),
            "observedGeneration": current["metadata"].get("generation", 1)})

    def _deployment(self, dep: Obj) -> None:
        spec = dep.get("spec") or {}
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        template = copy.deepcopy(spec.get("template") or {})
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        template_hash = "".join(ch for ch in digest if ch.isalnum())[:10]
        rs_rt = self._rt["ReplicaSet"]
        owned = [rs for rs in self.store.items(rs_rt, ns)
                 if controller_uid(rs) == dep["metadata"]["uid"]]
        want = int(spec.get("replicas", 1))
        current = next((rs for rs in owned if (rs["metadata"].get("labels") or {}).get(
            "pod-template-hash") == template_hash), None)
        if current is None:
            template.setdefault("metadata", {}).setdefault("labels", {})[
                "pod-template-hash"] = template_hash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
            labels = dict(template["metadata"]["labels"])
            rs_body = {"metadata": {"name": f"{name}-{template_hash}", "namespace": ns,
                                    "labels": labels, "ownerReferences": [_owner_ref(dep)]},
                       "spec": {"replicas": want, "selector": selector, "template": template}}
            created = self.api.create(rs_rt, ns, rs_body)
            self.api.record_event(dep, "Normal", "ScalingReplicaSet",
                                  f"Scaled up replica set {created['metadata']['name']} "
                                  f"from 0 to {want}", "deployment-controller")
        elif int((current.get("spec") or {}).get("replicas", 1)) != want:
            self._scale_rs(dep, current, want)
        for rs in owned:
            if rs is not current and int((rs.get("spec") or {}).get("replicas", 1)) != 0:
                self._scale_rs(dep, rs, 0)
        dep = self.store.get(self._rt["Deployment"], ns, name) or dep
        owned = [rs for rs in self.store.items(rs_rt, ns)
                 if controller_uid(rs) == dep["metadata"]["uid"]]
        total = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in owned)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in owned)
        updated = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in owned
                      if (rs["metadata"].get("labels") or {}).get("pod-template-hash")
                      == template_hash)
        available = ready >= want
        status = {"observedGeneration": dep["metadata"].get("generation", 1),
                  "replicas": total, "updatedReplicas": updated, "readyReplicas": ready,
                  "availableReplicas": ready, "unavailableReplicas": max(0, want - ready),
                  "conditions": [{"type": "Available",
                                  "status": "True" if available else "False",
                                  "reason": "MinimumReplicasAvailable" if available
                                  else "MinimumReplicasUnavailable",
                                  "message": "Deployment has minimum availability." if available
                                  else "Deployment does not have minimum availability."}]}
        self._write_status("Deployment", dep, status)

    def _scale_rs(self, dep: Obj, rs: Obj, replicas: int) -> None:
        old = int((rs.get("spec") or {}).get("replicas", 1))
        new = copy.deepcopy(rs)
        new["spec"]["replicas"] = replicas
        self.api.update(self._rt["ReplicaSet"], rs["metadata"]["namespace"],
                        rs["metadata"]["name"], new)
        verb = "up" if replicas > old else "down"
        self.api.record_event(dep, "Normal", "ScalingReplicaSet",
                              f"Scaled {verb} replica set {rs['metadata']['name']} from {old} "
                              f"to {replicas}", "deployment-controller")

    def _job(self, job: Obj) -> None:
        spec = job.get("spec") or {}
        status = copy.deepcopy(job.get("status") or {})
        conditions = status.get("conditions") or []
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                       for c in conditions)
        pods = self._owned_pods(job)
        active = [p for p in pods if _active(p)]
        succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
        failed = sum(1 for p in pods if _phase(p) == "Failed")
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1))
        now = format_time(self.clock.now())
        if not finished:
            done = (succeeded >= completions if completions is not None
                    else succeeded >= 1 and not active)
            if done:
                for ctype in ("SuccessCriteriaMet", "Complete"):
                    set_condition({"status": status}, {"type": ctype, "status": "True",
                                           "lastProbeTime": now, "lastTransitionTime": now})
                status["completionTime"] = now
                self.api.record_event(job, "Normal", "Completed", "Job completed",
                                      "job-controller")
                finished = True
            elif failed > int(spec.get("backoffLimit", 6)):
                for ctype in ("FailureTarget", "Failed"):
                    set_condition({"status": status}, {"type": ctype, "status": "True",
                                           "reason": "BackoffLimitExceeded",
                                           "message": "Job has reached the specified backoff "
                                                      "limit", "lastProbeTime": now,
                                           "lastTransitionTime": now})
                self.api.record_event(job, "Warning", "BackoffLimitExceeded",
                                      "Job has reached the specified backoff limit",
                                      "job-controller")
                finished = True
        if finished or spec.get("suspend"):
            for pod in active:
                self._delete_pod(job, pod, "job-controller")
            active = []
        else:
            status.setdefault("startTime", now)
            want = parallelism
            if completions is not None:
                want = min(parallelism, int(completions) - succeeded)
            elif succeeded:
                want = 0
            if len(active) < want:
                for _ in range(min(want - len(active), _MAX_BURST)):
                    self._create_pod(job, spec.get("template") or {}, "job-controller")
            elif len(active) > want:
                for pod in active[want:]:
                    self._delete_pod(job, pod, "job-controller")
            active = [p for p in self._owned_pods(job) if _active(p)]
        suspended = any(c.get("type") == "Suspended" and c.get("status") == "True"
                        for c in status.get("conditions") or [])
        if spec.get("suspend") and not finished:
            # Upstream clears startTime on suspension so activeDeadlineSeconds restarts.
            status.pop("startTime", None)
            set_condition({"status": status}, {"type": "Suspended", "status": "True",
                                   "reason": "JobSuspended", "message": "Job suspended",
                                   "lastProbeTime": now, "lastTransitionTime": now})
        elif suspended:
            set_condition({"status": status}, {"type": "Suspended", "status": "False",
                                   "reason": "JobResumed", "message": "Job resumed",
                                   "lastProbeTime": now, "lastTransitionTime": now})
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if pod_healthy(p))
        status["succeeded"] = succeeded
        status["failed"] = failed
        if status.get("conditions") == []:
            del status["conditions"]
        current = self.store.get(self._rt["Job"], job["metadata"]["namespace"],
                                 job["metadata"]["name"])
        if current is not None:
            self._write_status("Job", current, _keep_times(current.get("status") or {},
                                                           status))

    # Disruption budgets and garbage collection.

    def _refresh_pdbs(self, namespace: str) -> None:
        for pdb in list(self.store.items(self._rt["PodDisruptionBudget"], namespace)):
            self._refresh_pdb(pdb)

    def _refresh_pdb(self, pdb: Obj) -> None:
        ns = pdb["metadata"]["namespace"]
        current = self.store.get(self._rt["PodDisruptionBudget"], ns, pdb["metadata"]["name"])
        if current is None:
            return
        status = status_object(current, budget_status(
            current, self.store.items(self._rt["Pod"], ns), self.api.scale_of))
        old = current.get("status") or {}
        if old.get("conditions"):
            cond = old["conditions"][0]
            if cond.get("status") == status["conditions"][0]["status"]:
                status["conditions"][0]["lastTransitionTime"] = cond.get("lastTransitionTime")
        self._write_status("PodDisruptionBudget", current, status)

    def _collect_garbage(self, rt: ResourceType, obj: Obj) -> None:
        uid = obj["metadata"].get("uid")
        namespace = obj["metadata"].get("namespace", "")
        for dep_rt in self.api.registry.resources:
            if rt.namespaced and not dep_rt.namespaced:
                continue
            for dep in list(self.store.items(dep_rt, namespace if rt.namespaced else "")):
                refs = dep["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs):
                    self._delete_quietly(dep_rt, dep)
        if rt.kind == "Node" and rt.group == "":
            for pod in list(self.store.items(self._rt["Pod"])):
                if (pod.get("spec") or {}).get("nodeName") == obj["metadata"]["name"]:
                    self.store.remove(self._rt["Pod"], pod)  # PodGC force-deletes orphans

    def _delete_quietly(self, rt: ResourceType, obj: Obj) -> None:
        with contextlib.suppress(errors.ApiError):  # already gone
            self.api.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _keep_times(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Keep condition timestamps and startTime from the stored status if nothing changed."""
    if "startTime" in old:
        new["startTime"] = old["startTime"]
    old_conds = {c.get("type"): c for c in old.get("conditions") or []}
    for cond in new.get("conditions") or []:
        prev = old_conds.get(cond.get("type"))
        if prev is not None and prev.get("status") == cond.get("status"):
            cond.update({k: prev[k] for k in ("lastProbeTime", "lastTransitionTime")
                         if k in prev})
    if "completionTime" in old:
        new["completionTime"] = old["completionTime"]
    return new


def _node_ready(node: Obj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return True


def _first_container(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name", ""))


def _created(pod: Obj) -> tuple[float, str, str]:
    meta = pod["metadata"]
    return (parse_time_or_none(meta.get("creationTimestamp")) or 0.0,
            meta.get("namespace", ""), meta["name"])


def _document(obj: Obj) -> Document:
    meta = obj.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") \
        else str(meta.get("name"))
    return Document(data=obj, source=Source(f"{obj.get('kind')} {name}", "", is_json=True),
                    index=0, line=1)


# kubelet's reasons (pkg/kubelet/lifecycle/predicate.go) and the predicates' own words.
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
INVALID_NODE_INFO = "InvalidNodeInfo"
NODE_AFFINITY = ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
TAINT_TOLERATION = ("TaintToleration", "node(s) had taints that the pod didn't tolerate")


class Kubelet:
    """kubelet's admission of a pod bound to its node (``predicateAdmitHandler.Admit``).

    In upstream's order, the first failure decides: NodeResourcesFit (the pod count, then cpu,
    memory, ephemeral storage and the other resources against allocatable minus the requests
    of the pods the node runs; extended resources the node does not advertise are dropped
    first, as kubelet drops them), then NodeAffinity (nodeSelector and required node
    affinity), then an untolerated NoExecute taint. A node that reports no allocatable at all
    (a bare Node object, no kubelet status) is not checked for resources; one that reports no
    ``pods`` gets kubelet's default of 110. NodeName holds by construction; NodePorts is not
    modelled (kubeberth's Pod has no container ports)."""

    def __init__(self) -> None:
        self._requests: dict[str, dict[str, int]] = {}  # pod uid -> requests (milli-units)

    def forget(self, pod: Obj) -> None:
        self._requests.pop(str(pod["metadata"].get("uid")), None)

    def admit(self, pod: Obj, node: Obj, others: list[Obj]) -> tuple[str, str] | None:
        """None to run the pod, else kubelet's (reason, message)."""
        try:
            typed_node = decode_object(_document(node))
        except Exception:  # an unreadable Node: kubelet cannot get its node info
            typed_node = None
        if not isinstance(typed_node, Node):
            return INVALID_NODE_INFO, "Kubelet cannot get node info."
        try:
            typed_pod = decode_object(_document(pod))
            if not isinstance(typed_pod, Pod):
                raise TypeError(f"a {pod.get('kind')} is no Pod")
            requests = self.requests(pod, typed_pod)
            reason = (self._fits(requests, typed_node, others)
                      or self._affinity(typed_pod, typed_node)
                      or self._taints(typed_pod, typed_node))
        except Exception as err:  # a pod kubeberth cannot read
            return UNEXPECTED_ADMISSION_ERROR, (f"Admission of the pod failed due to {err}, "
                                                "which is unexpected.")
        return reason

    def requests(self, raw: Obj, pod: Pod) -> dict[str, int]:
        uid = str(raw["metadata"].get("uid"))
        cached = self._requests.get(uid)
        if cached is None:
            cached = self._requests[uid] = pod_requests(pod)
        return cached

    def _used(self, others: list[Obj]) -> dict[str, int]:
        used: dict[str, int] = {}
        for other in others:
            uid = str(other["metadata"].get("uid"))
            requests = self._requests.get(uid)
            if requests is None:
                try:
                    typed = decode_object(_document(other))
                except Exception:  # running, yet unreadable: it holds nothing kubeberth can see
                    continue
                if not isinstance(typed, Pod):
                    continue
                requests = self.requests(other, typed)
            for name, milli in requests.items():
                used[name] = used.get(name, 0) + milli
        return used

    def _fits(self, requests: dict[str, int], node: Node, others: list[Obj]
              ) -> tuple[str, str] | None:
        if not node.status.allocatable:
            return None
        alloc = node_allocatable(node)
        max_pods = alloc.get(PODS, KUBELET_MAX_PODS * 1000) // 1000
        if len(others) + 1 > max_pods:
            return _insufficient(PODS, 1, len(others), max_pods)
        wanted = {k: v for k, v in requests.items() if k != PODS and v > 0
                  and not (is_extended_resource(k) and k not in alloc)}
        if not wanted:
            return None
        used = self._used(others)
        order = [r for r in (CPU, MEMORY, EPHEMERAL_STORAGE) if r in wanted]
        order += sorted(r for r in wanted if r not in order)
        for name in order:
            if wanted[name] > alloc.get(name, 0) - used.get(name, 0):
                scale = 1 if name == CPU else 1000
                return _insufficient(name, -(-wanted[name] // scale), used.get(name, 0) // scale,
                                     alloc.get(name, 0) // scale)
        return None

    @staticmethod
    def _affinity(pod: Pod, node: Node) -> tuple[str, str] | None:
        labels = {**node.metadata.labels, "kubernetes.io/hostname": node.metadata.labels.get(
            "kubernetes.io/hostname", node.metadata.name)}
        name = node.metadata.name
        matches = all(labels.get(k) == v for k, v in pod.spec.node_selector.items())
        affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
        required = affinity.required_during_scheduling_ignored_during_execution \
            if affinity else None
        if matches and required is not None:
            matches = any(compile_node_selector_term(t)(labels, name)
                          for t in required.node_selector_terms)
        return None if matches else (NODE_AFFINITY[0], _predicate(*NODE_AFFINITY))

    @staticmethod
    def _taints(pod: Pod, node: Node) -> tuple[str, str] | None:
        for taint in node.spec.taints:
            if taint.effect == "NoExecute" and not tolerated(pod.spec.tolerations, taint):
                return TAINT_TOLERATION[0], _predicate(*TAINT_TOLERATION)
        return None


def _predicate(name: str, desc: str) -> str:
    return f"Predicate {name} failed: {desc}"


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> tuple[str, str]:
    """kubelet's InsufficientResourceError: reason ``OutOf<resource>`` and its message."""
    return (f"OutOf{resource}", f"Node didn't have enough resource: {resource}, requested: "
            f"{requested}, used: {used}, capacity: {capacity}")
