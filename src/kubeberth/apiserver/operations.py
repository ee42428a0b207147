"""The verbs of the API (create, get, list, update, patch, delete, bind, evict, scale).

This is the API server without HTTP: the HTTP layer parses a request into a call here, and the
controllers inside the server (workloads, the fake kubelet, the disruption controller) call the
same methods, so every write, wherever it comes from, passes the same validation, optimistic
concurrency and watch notification.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from kubeberth.api.times import format_time
from kubeberth.apiserver import admission, errors, limits, patch, quantities
from kubeberth.apiserver.disruption import pod_view, scale_lookup, typed_pdb
from kubeberth.apiserver.resources import Registry, ResourceType
from kubeberth.apiserver.selectors import parse_field_selector, parse_label_selector
from kubeberth.apiserver.store import Obj, Store, parse_rv, prepare_replace
from kubeberth.state.disruption import MULTIPLE_PDBS, VIOLATES_BUDGET, DisruptionBudgets

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_STRUCT_SPECS = frozenset({"Pod", "Node", "Namespace", "PodDisruptionBudget", "Deployment",
                           "ReplicaSet", "Job"})
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(slots=True)
class Prepared:
    """A create checked and defaulted off the loop; ``error`` is raised by its store step."""

    obj: Obj
    error: errors.ApiError | None = None


@dataclass(slots=True)
class ListResult:
    items: list[Obj]
    resource_version: int
    continue_token: str
    remaining: int | None


class Api:
    """Every verb, on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.registry: Registry = store.registry
        self.pods = self._rt("", "Pod")
        self.nodes = self._rt("", "Node")
        self.namespaces = self._rt("", "Namespace")
        self.events = self._rt("", "Event")
        self.pdbs = self._rt("policy", "PodDisruptionBudget")
        self.priority_classes = self._rt("scheduling.k8s.io", "PriorityClass")
        for ns in SYSTEM_NAMESPACES:
            self.create(self.namespaces, "", {"metadata": {"name": ns}})

    def scale_of(self, kind: str, namespace: str, name: str) -> int | None:
        """A controller's scale for PDB arithmetic (see :mod:`kubeberth.apiserver.disruption`)."""
        return scale_lookup(self._get_kind)(kind, namespace, name)

    def _get_kind(self, kind: str, namespace: str, name: str) -> Obj | None:
        group = {"Deployment": "apps", "ReplicaSet": "apps", "StatefulSet": "apps",
                 "ReplicationController": ""}.get(kind)
        rt = self.registry.of_kind(group, kind) if group is not None else None
        return self.store.get(rt, namespace, name) if rt is not None else None

    def _rt(self, group: str, kind: str) -> ResourceType:
        rt = self.registry.of_kind(group, kind)
        assert rt is not None
        return rt

    # Create and read.

    def create(self, rt: ResourceType, namespace: str, body: Any, version: str = "", *,
               dry_run: bool = False) -> Obj:
        return self.commit_create(rt, self.prepare_create(rt, namespace, body, version),
                                  dry_run=dry_run)

    def prepare_create(self, rt: ResourceType, namespace: str, body: Any,
                       version: str = "") -> Prepared:
        """The CPU-heavy half of a create (copy, checks, validation, defaulting): it reads
        nothing from the store, so the HTTP layer runs it on a worker thread. Errors found after
        the body's shape is known wait in the result, so the namespace check (which needs the
        store) still comes first, as before the split."""
        obj = admission.check_body(rt, json_copy(body), version or rt.versions[0],
                                   namespace)
        try:
            quantities.check(rt, obj)
            admission.validate(rt, obj)
            if rt.kind not in ("Node", "Event", "Lease"):
                obj.pop("status", None)  # status is written through its subresource
            if rt.kind in _STRUCT_SPECS and rt.group in ("", "apps", "batch", "policy"):
                obj.setdefault("spec", {})  # Go structs always encode spec and status
                obj.setdefault("status", {})
            if rt.kind == "Pod":
                admission.default_pod(obj)
            elif rt.kind == "Namespace":
                obj["status"] = {"phase": "Active"}
            elif rt.kind == "ReplicaSet":
                obj["status"] = {"replicas": 0}  # not omitempty in Go; typed clients require it
        except errors.ApiError as err:
            return Prepared(obj, err)
        return Prepared(obj)

    def commit_create(self, rt: ResourceType, prepared: Prepared, *,
                      dry_run: bool = False) -> Obj:
        """The store half of a create, on the loop: namespace, priority class, clock, insert."""
        obj = prepared.obj
        ns = obj["metadata"].get("namespace", "")
        if rt.namespaced and self.store.get(self.namespaces, "", ns) is None:
            raise errors.not_found("namespaces", ns)
        if prepared.error is not None:
            raise prepared.error
        if rt.kind == "Pod":
            admission.resolve_priority(obj, list(self.store.items(self.priority_classes)))
        elif rt.kind == "Node":
            admission.default_node(obj, format_time(self.store.clock.now()))
        elif rt.kind == "Event":
            _default_event(obj, format_time(self.store.clock.now()))
        if rt.kind == "Job":
            stored = self.store.insert(rt, obj, dry_run=dry_run)
            new = admission.defaulted_job(stored)
            return new if dry_run else self.store.replace(rt, new, stored)
        return self.store.insert(rt, obj, dry_run=dry_run)

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        return self.store.must_get(rt, namespace, name)

    def list_objects(self, rt: ResourceType, namespace: str, *, label_selector: str = "",
             field_selector: str = "", limit: int = 0, continue_token: str = "") -> ListResult:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.kind)
        start = ""
        if continue_token:
            try:
                start = str(json.loads(bytes.fromhex(continue_token))["start"])
            except (ValueError, KeyError, TypeError):
                raise errors.bad_request("continue key is not valid: pass the continue token "
                                         "a previous list returned") from None
        items: list[Obj] = []
        matched = 0
        last = ""
        for obj in self.store.items(rt, namespace):
            key = _sort_key(obj)
            if start and key <= start:
                continue
            if not labels(obj["metadata"].get("labels") or {}) or not fields(obj):
                continue
            matched += 1
            if limit and len(items) >= limit:
                continue
            items.append(obj)
            last = key
        token, remaining = "", None
        if limit and matched > len(items):
            token = json.dumps({"start": last}).encode().hex()
            remaining = matched - len(items)
        return ListResult(items, self.store.rv, token, remaining)

    # Update and patch.

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any,
               subresource: str = "", version: str = "", *, dry_run: bool = False) -> Obj:
        old = self.store.must_get(rt, namespace, name)
        return self.commit_write(rt, old, self.prepare_update(
            rt, old, namespace, body, subresource, version), dry_run=dry_run)

    def prepare_update(self, rt: ResourceType, old: Obj, namespace: str, body: Any,
                       subresource: str = "", version: str = "") -> Obj:
        """What a PUT of ``body`` over ``old`` would store: pure, so it runs off the loop."""
        name = old["metadata"]["name"]
        new = admission.check_body(rt, json_copy(body), version or rt.versions[0],
                                   namespace)
        if new["metadata"].get("name") not in (None, name):
            raise errors.bad_request(f"the name of the object ({new['metadata']['name']}) does "
                                     f"not match the name on the URL ({name})")
        new["metadata"]["name"] = name
        return self._prepare_write(rt, old, new, subresource)

    def _prepare_write(self, rt: ResourceType, old: Obj, new: Obj, subresource: str) -> Obj:
        """Preconditions, validation and the store's merge of ``new`` over ``old`` (``old``
        itself when the write changes nothing); reads only ``old``, never the store."""
        name = old["metadata"]["name"]
        want = new["metadata"].get("resourceVersion")
        if want and str(want) != old["metadata"]["resourceVersion"]:
            parse_rv(str(want))
            raise errors.conflict(rt.plural, name, rt.group, "the object has been modified; "
                                  "please apply your changes to the latest version and try "
                                  "again")
        if subresource == "status":
            merged = json_copy(old)
            merged["status"] = new.get("status") or {}
            new = merged
        elif subresource:
            raise errors.not_found(f"{rt.plural}/{subresource}", name, rt.group)
        else:
            if "status" in rt.subresources:
                if "status" in old:
                    new["status"] = json_copy(old["status"])
                else:
                    new.pop("status", None)
        quantities.check(rt, new)
        if not subresource:
            admission.validate(rt, new)
            if rt.kind == "Pod":
                admission.check_pod_update(name, old, new)
        return prepare_replace(new, old)

    def commit_write(self, rt: ResourceType, old: Obj, new: Obj, *,
                     dry_run: bool = False) -> Obj:
        """Store a prepared replacement of ``old`` (the caller made sure ``old`` is still the
        stored object), and finish a deletion it unblocked."""
        stored = self.store.commit_replace(rt, new, old, dry_run=dry_run)
        meta = stored["metadata"]
        if dry_run:
            return stored
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and (
                rt.kind != "Pod" or not _pod_running_on_node(stored)):
            return self.store.remove(rt, stored)
        return stored

    async def guaranteed_update(self, rt: ResourceType, namespace: str, name: str,
                                prepare: Callable[[Obj], Obj],
                                off_loop: Callable[[Callable[[], Obj]], Awaitable[Obj]], *,
                                dry_run: bool = False) -> Obj:
        """A write whose prepare step (``prepare(current)``) runs through ``off_loop`` while
        the loop serves others, stored only if the object did not change meanwhile; otherwise
        (or when the prepare failed on what had become a stale object) it is prepared again on
        the newer object, as kube-apiserver's GuaranteedUpdate retries its tryUpdate. A
        resourceVersion precondition is checked against the newer object, hence 409 then."""
        while True:
            old = self.store.must_get(rt, namespace, name)
            try:
                new = await off_loop(functools.partial(prepare, old))
            except errors.ApiError:
                if self.store.get(rt, namespace, name) is old:
                    raise
                continue
            if self.store.get(rt, namespace, name) is old:
                return self.commit_write(rt, old, new, dry_run=dry_run)

    def patch(self, rt: ResourceType, namespace: str, name: str, content_type: str,
              body: Any, subresource: str = "", version: str = "", *,
              dry_run: bool = False) -> Obj:
        old = self.store.must_get(rt, namespace, name)
        return self.commit_write(rt, old, self.prepare_patch(
            rt, old, namespace, content_type, body, subresource, version), dry_run=dry_run)

    def prepare_patch(self, rt: ResourceType, old: Obj, namespace: str, content_type: str,
                      body: Any, subresource: str = "", version: str = "") -> Obj:
        """The PATCH ``body`` (decoded, or JSON bytes) applied to ``old`` as the URL's version
        serves it (stored objects keep the version they were written in; the kinds we serve
        differ only in apiVersion), checked as an update: pure, so it runs off the loop."""
        version = version or rt.versions[0]
        result = _apply_patch({**old, "apiVersion": rt.api_version(version)}, content_type,
                              body)
        new = admission.check_body(rt, json_copy(result), version, namespace)
        new["metadata"]["name"] = old["metadata"]["name"]
        return self._prepare_write(rt, old, new, subresource)

    def patch_scale(self, rt: ResourceType, namespace: str, name: str, content_type: str,
                    body: Any) -> Obj:
        """PATCH on the scale subresource (what ``kubectl scale`` sends)."""
        return self.update_scale(rt, namespace, name,
                                 _apply_patch(self.scale(rt, namespace, name), content_type,
                                              body))

    # Delete.

    def delete(self, rt: ResourceType, namespace: str, name: str,
               options: dict[str, Any] | None = None) -> Obj:
        obj = self.store.must_get(rt, namespace, name)
        opts = options or {}
        dry_run = bool(opts.get("dryRun"))
        pre = opts.get("preconditions") or {}
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(rt.plural, name, rt.group, f"Precondition failed: UID in "
                                  f"precondition: {pre['uid']}, UID in object meta: "
                                  f"{meta.get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise errors.conflict(rt.plural, name, rt.group, "Precondition failed: "
                                  f"ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {meta['resourceVersion']}")
        if dry_run:
            return self._delete_preview(rt, obj, opts)
        if opts.get("propagationPolicy") == "Orphan":
            self._orphan(obj)
        if rt.kind == "Pod":
            grace = opts.get("gracePeriodSeconds")
            if grace is None:
                grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if int(grace) > 0 and _pod_running_on_node(obj):
                return self.store.mark_deleting(rt, obj, int(grace))
        if meta.get("finalizers"):
            return self.store.mark_deleting(rt, obj, 0)
        if rt.kind == "Namespace":
            self._empty_namespace(name)
        return self.store.remove(rt, obj)

    def _delete_preview(self, rt: ResourceType, obj: Obj, opts: dict[str, Any]) -> Obj:
        """What a delete would return, changing nothing (dryRun)."""
        grace = 0
        if rt.kind == "Pod" and _pod_running_on_node(obj):
            grace = int(opts.get("gracePeriodSeconds",
                                 (obj.get("spec") or {}).get("terminationGracePeriodSeconds",
                                                             30)))
        if grace > 0 or obj["metadata"].get("finalizers"):
            return self.store.mark_deleting(rt, obj, grace, dry_run=True)
        return obj

    def delete_collection(self, rt: ResourceType, namespace: str, label_selector: str,
                          field_selector: str, options: dict[str, Any] | None) -> list[Obj]:
        listed = self.list_objects(rt, namespace, label_selector=label_selector,
                           field_selector=field_selector)
        return [self.delete(rt, o["metadata"].get("namespace", ""), o["metadata"]["name"],
                            options) for o in listed.items]

    def _orphan(self, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        for rt in self.registry.resources:
            for obj in list(self.store.items(rt)):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs):
                    new = copy.deepcopy(obj)
                    new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                    self.store.replace(rt, new, obj)

    def _empty_namespace(self, namespace: str) -> None:
        for rt in self.registry.resources:
            if rt.namespaced:
                for obj in list(self.store.items(rt, namespace)):
                    self.store.remove(rt, obj)

    # Pod subresources.

    def bind(self, namespace: str, name: str, body: Any) -> Obj:
        """POST pods/<name>/binding: set spec.nodeName once, mark PodScheduled."""
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise errors.bad_request("a Binding needs target: {kind: Node, name: <node>}")
        node = str(body["target"].get("name") or "")
        if not node:
            raise errors.invalid("Binding", name, "", [("target.name", "Required value")])
        pod = self.store.must_get(self.pods, namespace, name)
        meta = pod["metadata"]
        want_uid = (body.get("metadata") or {}).get("uid")
        if want_uid and want_uid != meta.get("uid"):
            raise errors.conflict("pods", name, "", "Precondition failed: UID mismatch")
        if meta.get("deletionTimestamp"):
            raise errors.conflict("pods", name, "", "pod is being deleted, cannot be assigned "
                                  "to a host")
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            raise errors.conflict("pods", name, "", f"pod {name} is already assigned to node "
                                  f'"{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise errors.conflict("pods", name, "", f"pod {name} has non-empty "
                                  "schedulingGates; it cannot be bound")
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node
        set_condition(new, {"type": "PodScheduled", "status": "True",
                             "lastTransitionTime": format_time(self.store.clock.now())})
        self.store.replace(self.pods, new, pod)
        return _success(201)

    def evict(self, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> Obj:
        """POST pods/<name>/eviction: delete unless a PodDisruptionBudget forbids it (429)."""
        pod = self.store.must_get(self.pods, namespace, name)
        options = dict(((body or {}).get("deleteOptions") if isinstance(body, dict) else None)
                       or {})
        options["dryRun"] = dry_run
        budgets = DisruptionBudgets.compute(
            [typed_pdb(p) for p in self.store.items(self.pdbs, namespace)],
            [pod_view(p) for p in self.store.items(self.pods, namespace)], self.scale_of)
        verdict = budgets.check(pod_view(pod))
        if verdict.code == MULTIPLE_PDBS:
            raise errors.ApiError(500, "InternalError", verdict.message)
        if not verdict.allowed:
            raise errors.ApiError(429, "TooManyRequests", VIOLATES_BUDGET, details={
                "causes": [{"reason": "DisruptionBudget", "message": verdict.detail}]})
        self.delete(self.pods, namespace, name, options)
        return _success(201)

    def scale(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.must_get(rt, namespace, name)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: obj["metadata"][k] for k in
                             ("name", "namespace", "uid", "resourceVersion",
                              "creationTimestamp") if k in obj["metadata"]},
                "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
                "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                           "selector": ",".join(f"{k}={v}" for k, v in selector.items())}}

    def update_scale(self, rt: ResourceType, namespace: str, name: str, body: Any) -> Obj:
        if not isinstance(body, dict) or not isinstance((body.get("spec") or {}).get(
                "replicas"), int):
            raise errors.bad_request("a Scale needs spec.replicas (an integer)")
        old = self.store.must_get(rt, namespace, name)
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = body["spec"]["replicas"]
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want:
            new["metadata"]["resourceVersion"] = want
        self.commit_write(rt, old, self._prepare_write(rt, old, new, ""))
        return self.scale(rt, namespace, name)

    # Events.

    def record_event(self, involved: Obj, type_: str, reason: str, message: str,
                     component: str, host: str = "") -> Obj:
        """Create a core/v1 Event about ``involved`` (as a controller's recorder would)."""
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        body = {
            "metadata": {"namespace": namespace, "generateName": f"{meta['name']}."},
            "involvedObject": {"kind": involved.get("kind"), "namespace": meta.get("namespace"),
                               "name": meta["name"], "uid": meta.get("uid"),
                               "apiVersion": involved.get("apiVersion"),
                               "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message, "source": source,
            "reportingComponent": component, "reportingInstance": host or component,
        }
        return self.create(self.events, namespace, body)


def json_copy(obj: Any) -> Any:
    """A deep copy of JSON data (what every object here is), through msgspec's C encoder:
    ten times faster than copy.deepcopy on big objects, which would otherwise hold the event
    loop."""
    return msgspec.json.decode(msgspec.json.encode(obj))


def patch_type(content_type: str) -> str:
    """The patch type a PATCH's Content-Type names; 415 for one the server does not apply
    (checked before the body is read, as upstream)."""
    kind = content_type.split(";")[0].strip()
    if kind in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
        return kind
    if kind == APPLY_PATCH:
        raise errors.ApiError(415, "UnsupportedMediaType", "server-side apply is not "
                              "supported by kubeberth's API server; use client-side "
                              "kubectl apply (without --server-side)")
    raise errors.ApiError(415, "UnsupportedMediaType", f"the body of the request was "
                          f"in an unknown format - accepted media types include: "
                          f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}")


def _apply_patch(old: Obj, content_type: str, data: Any) -> Obj:
    """``old`` with a PATCH body (decoded, or JSON bytes) applied, by the patch type its
    Content-Type names."""
    kind = patch_type(content_type)
    if isinstance(data, bytes):
        data = limits.decode_json(data or b"null", "the patch")
    if kind == JSON_PATCH:
        result = patch.json_patch(old, data)
    elif kind == MERGE_PATCH:
        result = patch.json_merge_patch(old, _object_patch(data))
    else:
        result = patch.strategic_merge_patch(old, _object_patch(data))
    if not isinstance(result, dict):
        raise errors.bad_request("the patch does not leave an object")
    limits.check_json_data(result, "the patched object")
    return result


def _object_patch(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise errors.bad_request("a merge patch must be a JSON object")
    return data


def _sort_key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _pod_running_on_node(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded",
                                                                           "Failed")


def set_condition(obj: Obj, condition: dict[str, Any]) -> None:
    """Replace or append the status condition of the same type."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            conditions[i] = condition
            return
    conditions.append(condition)


def _default_event(event: Obj, now: str) -> None:
    event.setdefault("firstTimestamp", now)
    event.setdefault("lastTimestamp", now)
    event.setdefault("count", 1)
    event.setdefault("type", "Normal")
    event.setdefault("involvedObject", {})


def _success(code: int) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": code}
