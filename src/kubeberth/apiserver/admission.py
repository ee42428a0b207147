"""Validation and defaulting of objects written to the embedded API server.

A real API server validates each kind, applies defaults and runs admission plugins before it
stores anything. This module does the parts that matter to scheduling and to kubectl users:
objects kubeberth models are checked with the same rules as the manifest loader (so a bad
quantity is a 422 naming the field); pods get upstream's defaults (requests from limits,
scheduler name, restart policy, QoS class) and the Priority admission plugin's resolution of
``priorityClassName``; workload controllers' selectors must match their templates; jobs get
their generated selector. Other admission plugins (service accounts, limit ranges, default
tolerations) are not run.

Kueue's mutating webhooks are emulated as if Kueue were installed: a Job created with the
``kueue.x-k8s.io/queue-name`` label is suspended, and a queue-labelled pod that no Job owns gets
the ``kueue.x-k8s.io/admission`` scheduling gate, so nothing queued starts before
``kubeberth admission`` admits its Workload.
"""

from __future__ import annotations

import json
from typing import Any

from kubeberth.admission.model import ADMISSION_GATE, QUEUE_LABEL, UNMANAGED_NAMESPACES
from kubeberth.api.errors import InputError
from kubeberth.apiserver import errors
from kubeberth.apiserver.resources import ResourceType
from kubeberth.config.manifests import DEFAULT_NAMESPACE, Manifests, decode_object
from kubeberth.config.workload_api import load_workload_api
from kubeberth.config.yamlsrc import Document, Source

Obj = dict[str, Any]
# The Kubernetes version the server reports (/version) and its fake kubelets report.
KUBELET_VERSION = "v1.32.0-kubeberth"
_DECODED = frozenset({"Pod", "Node", "PriorityClass", "Namespace", "PodDisruptionBudget"})
_WORKLOADS = frozenset({"Deployment", "ReplicaSet", "Job"})
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds",
                "schedulingGates")


def check_body(rt: ResourceType, obj: Any, version: str, namespace: str) -> Obj:
    """The request body is an object of the URL's kind, version and namespace."""
    if not isinstance(obj, dict):
        raise errors.bad_request("the request body must be a JSON object")
    want = rt.api_version(version)
    api = obj.get("apiVersion")
    if api is not None and api != want:
        raise errors.bad_request(f"the API version in the data ({api}) does not match the "
                                 f"expected API version ({want})")
    kind = obj.get("kind")
    if kind is not None and kind != rt.kind:
        raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected "
                                 f"kind ({rt.kind})")
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    _check_meta_types(meta)
    if rt.namespaced:
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        meta["namespace"] = namespace or meta.get("namespace") or DEFAULT_NAMESPACE
    obj["apiVersion"], obj["kind"] = want, rt.kind
    return obj


# ObjectMeta's fields with the JSON type every Kubernetes object decodes them into.
_META_STRINGS = ("name", "generateName", "namespace", "uid", "resourceVersion",
                 "creationTimestamp", "deletionTimestamp", "selfLink")
_META_STRING_MAPS = ("labels", "annotations")
_META_INTS = ("generation", "deletionGracePeriodSeconds")
_META_LISTS = ("finalizers", "ownerReferences", "managedFields")


def _check_meta_types(meta: Obj) -> None:
    """400 for a metadata field of the wrong JSON type, as upstream's decoder refuses it
    before anything else looks at the object (kinds kubeberth stores raw included)."""
    def wrong(field: str, value: Any, want: str) -> errors.ApiError:
        got = {dict: "object", list: "array", str: "string", bool: "bool",
               type(None): "null"}.get(type(value), "number")
        return errors.bad_request(f"json: cannot unmarshal {got} into Go struct field "
                                  f"ObjectMeta.metadata.{field} of type {want}")

    for field in _META_STRINGS:
        value = meta.get(field)
        if value is not None and not isinstance(value, str):
            raise wrong(field, value, "string")
    for field in _META_STRING_MAPS:
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise wrong(field, value, "map[string]string")
        bad = next((v for v in value.values() if not isinstance(v, str)), None)
        if bad is not None or any(v is None for v in value.values()):
            raise wrong(field, bad, "string")
    for field in _META_INTS:
        value = meta.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise wrong(field, value, "int64")
    for field in _META_LISTS:
        value = meta.get(field)
        if value is not None and not isinstance(value, list):
            raise wrong(field, value, "[]" + ("string" if field == "finalizers" else "object"))
    if any(not isinstance(f, str) for f in meta.get("finalizers") or []):
        raise wrong("finalizers", next(f for f in meta["finalizers"] if not isinstance(f, str)),
                    "string")
    if any(not isinstance(r, dict) for r in meta.get("ownerReferences") or []):
        raise wrong("ownerReferences", next(r for r in meta["ownerReferences"]
                                            if not isinstance(r, dict)), "OwnerReference")


def validate(rt: ResourceType, obj: Obj) -> None:
    """422 for an object kubeberth would reject in a manifest, in upstream's words."""
    name = str(obj["metadata"].get("name") or obj["metadata"].get("generateName") or "")
    if rt.group in ("", "scheduling.k8s.io", "policy") and rt.kind in _DECODED:
        _decode(rt, obj, name)
    elif rt.group == "scheduling.k8s.io" and rt.kind in ("Workload", "PodGroup"):
        _decode(rt, obj, name, native_groups=True)
    if rt.kind in _WORKLOADS:
        _validate_workload(rt, obj, name)


def _decode(rt: ResourceType, obj: Obj, name: str, *, native_groups: bool = False) -> None:
    data = obj
    if not obj["metadata"].get("name"):
        # generateName objects get their name at insert (checked there); validate the rest now
        # under a stand-in name, since a prefix such as "worker-" is not a valid name itself.
        data = {**obj, "metadata": {**obj["metadata"], "name": "generated"}}
    text = json.dumps(data)
    doc = Document(data=json.loads(text), source=Source(f"{rt.kind} {name}", text, is_json=True),
                   index=0, line=None)
    try:
        if native_groups:
            load_workload_api(Manifests(workload_api=[doc]))
        else:
            decode_object(doc)
    except InputError as err:
        raise _invalid(rt, name, err) from None


def _invalid(rt: ResourceType, name: str, err: InputError) -> errors.ApiError:
    message = err.message.rstrip(".")
    if err.expected:
        message += f" (expected {err.expected.rstrip('.')})"
    return errors.invalid(rt.kind, name, rt.group, [(err.field or "", message)])


def _validate_workload(rt: ResourceType, obj: Obj, name: str) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise errors.invalid(rt.kind, name, rt.group, [("spec", "Required value")])
    template = spec.get("template")
    if not isinstance(template, dict):
        raise errors.invalid(rt.kind, name, rt.group, [("spec.template", "Required value")])
    tmeta = template.setdefault("metadata", {})
    labels = tmeta.setdefault("labels", {})
    if rt.kind == "Job":
        restart = (template.get("spec") or {}).get("restartPolicy")
        if restart not in ("Never", "OnFailure"):
            raise errors.invalid(rt.kind, name, rt.group, [(
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{restart or "Always"}": supported values: "OnFailure", '
                '"Never"')])
    else:
        selector = spec.get("selector")
        if not isinstance(selector, dict) or not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions")):
            raise errors.invalid(rt.kind, name, rt.group, [
                ("spec.selector", "Required value")])
        wanted = selector.get("matchLabels") or {}
        if any(labels.get(k) != v for k, v in wanted.items()):
            raise errors.invalid(rt.kind, name, rt.group, [(
                "spec.template.metadata.labels",
                f"Invalid value: {json.dumps(labels)}: `selector` does not match template "
                "`labels`")])
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name or "template", "namespace": obj["metadata"]["namespace"],
                        **{k: v for k, v in tmeta.items() if k in ("labels", "annotations")}},
           "spec": template.get("spec") or {}}
    pod_rt = ResourceType("", ("v1",), "pods", "Pod", True)
    try:
        _decode(pod_rt, pod, name)
    except errors.ApiError as err:
        causes = (err.details or {}).get("causes") or [{"field": "", "message": err.message}]
        raise errors.invalid(rt.kind, name, rt.group, [
            (f"spec.template.{c['field']}" if c["field"] else "spec.template", c["message"])
            for c in causes]) from None


def default_pod(pod: Obj) -> None:
    """Upstream defaulting and Kueue's pod webhook, for a pod being created (the Priority
    admission plugin, which reads the stored classes, is :func:`resolve_priority`)."""
    name = pod["metadata"].get("name") or pod["metadata"].get("generateName") or ""
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            resources = c.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for res, value in limits.items():
                    requests.setdefault(res, value)
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
    _kueue_pod_webhook(pod)
    if spec.get("nodeName") and spec.get("schedulingGates"):
        raise errors.invalid("Pod", name, "", [(
            "spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been "
            "cleared")])
    status = pod.setdefault("status", {})
    status["phase"] = "Pending"
    status["qosClass"] = qos_class(spec)
    if spec.get("schedulingGates"):
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "SchedulingGated",
                                 "message": "Scheduling is blocked due to non-empty scheduling "
                                            "gates"}]


def _kueue_pod_webhook(pod: Obj) -> None:
    """Kueue's pod webhook: gate a queue-labelled pod until its Workload is admitted. Pods
    already bound, in Kueue's excluded namespaces, or owned by a Job (Kueue manages the Job
    instead) are left alone."""
    meta = pod["metadata"]
    spec = pod["spec"]
    if not (meta.get("labels") or {}).get(QUEUE_LABEL) or spec.get("nodeName"):
        return
    if meta.get("namespace") in UNMANAGED_NAMESPACES:
        return
    if any(ref.get("controller") and ref.get("kind") == "Job"
           for ref in meta.get("ownerReferences") or []):
        return
    meta["labels"]["kueue.x-k8s.io/managed"] = "true"
    gates = spec.setdefault("schedulingGates", [])
    if not any(g.get("name") == ADMISSION_GATE for g in gates):
        gates.append({"name": ADMISSION_GATE})


def resolve_priority(pod: Obj, priority_classes: list[Obj]) -> None:
    """The Priority admission plugin: ``priorityClassName`` (or the global default) becomes
    ``priority`` and ``preemptionPolicy``; 403 for an unknown class or a conflicting value."""
    name = pod["metadata"].get("name") or pod["metadata"].get("generateName") or ""
    spec = pod["spec"]
    class_name = spec.get("priorityClassName")
    chosen: Obj | None = None
    if class_name:
        chosen = next((pc for pc in priority_classes
                       if pc["metadata"]["name"] == class_name), None)
        if chosen is None:
            raise errors.ApiError(403, "Forbidden", f'pods "{name}" is forbidden: no '
                                  f"PriorityClass with name {class_name} was found")
    else:
        chosen = next((pc for pc in priority_classes if pc.get("globalDefault")), None)
    value = int(chosen.get("value") or 0) if chosen is not None else 0
    if "priority" in spec and spec["priority"] != value:
        raise errors.ApiError(403, "Forbidden", f'pods "{name}" is forbidden: the integer value '
                              f"of priority ({spec['priority']}) must not be provided in pod "
                              f"spec; priority admission controller computed {value} from the "
                              "given PriorityClass name")
    spec["priority"] = value
    if chosen is not None:
        spec["priorityClassName"] = chosen["metadata"]["name"]
        spec.setdefault("preemptionPolicy",
                        chosen.get("preemptionPolicy") or "PreemptLowerPriority")
    else:
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def qos_class(spec: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' cpu and memory."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in requests or r in limits:
                any_set = True
            if r not in limits or str(requests.get(r, limits.get(r))) != str(limits.get(r)):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_node(node: Obj, now: str) -> None:
    """The fake kubelet registers every node Ready, with capacity and allocatable filled and
    its own version in ``nodeInfo``."""
    status = node.setdefault("status", {})
    if "allocatable" not in status and "capacity" in status:
        status["allocatable"] = dict(status["capacity"])
    if "capacity" not in status and "allocatable" in status:
        status["capacity"] = dict(status["allocatable"])
    conditions = status.setdefault("conditions", [])
    if not any(c.get("type") == "Ready" for c in conditions):
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status (kubeberth fake kubelet)",
                           "lastHeartbeatTime": now, "lastTransitionTime": now})
    info = status.setdefault("nodeInfo", {})
    # Every NodeSystemInfo field is required in the API's schema (typed clients insist).
    for key, value in (("kubeletVersion", KUBELET_VERSION), ("kubeProxyVersion", ""),
                       ("containerRuntimeVersion", "kubeberth://fake"),
                       ("operatingSystem", "linux"), ("architecture", "amd64"),
                       ("machineID", ""), ("systemUUID", ""), ("bootID", ""),
                       ("kernelVersion", ""), ("osImage", "")):
        info.setdefault(key, value)


def defaulted_job(job: Obj) -> Obj:
    """``job`` with upstream's Job defaults and its generated selector (manualSelector unset).
    Only the dicts this changes are copied; the rest (the pod template's spec, which may be
    big) is shared with ``job``, which is left as it was."""
    spec = dict(job["spec"])
    spec.setdefault("parallelism", 1)
    if "completions" not in spec:
        spec["completions"] = 1 if spec["parallelism"] == 1 else None
    if spec["completions"] is None:
        del spec["completions"]
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if (job["metadata"].get("labels") or {}).get(QUEUE_LABEL):
        spec["suspend"] = True  # Kueue's job webhook: queued Jobs start suspended
    uid = job["metadata"]["uid"]
    name = job["metadata"]["name"]
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = dict(spec["template"])
        tmeta = dict(template["metadata"])
        tmeta["labels"] = {**(tmeta.get("labels") or {}),
                           "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                           "batch.kubernetes.io/job-name": name, "job-name": name}
        template["metadata"] = tmeta
        spec["template"] = template
    return {**job, "metadata": dict(job["metadata"]), "spec": spec}


def check_pod_update(name: str, old: Obj, new: Obj) -> None:
    """Pod specs are immutable except the fields upstream lets an update change."""
    old_spec, new_spec = dict(old.get("spec") or {}), dict(new.get("spec") or {})
    old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in new_spec.get("schedulingGates") or []]
    if any(g not in old_gates for g in new_gates):
        raise errors.invalid("Pod", name, "", [(
            "spec.schedulingGates", "Forbidden: only deletion is allowed, but found new "
            "scheduling gate")])
    if old_gates:
        # Gated pods accept additions to nodeSelector (upstream's mutable scheduling
        # directives, what Kueue uses to steer an admitted pod to its flavor).
        old_sel = old_spec.pop("nodeSelector", None) or {}
        new_sel = new_spec.pop("nodeSelector", None) or {}
        if any(new_sel.get(k) != v for k, v in old_sel.items()):
            raise errors.invalid("Pod", name, "", [(
                "spec.nodeSelector", f"Invalid value: {json.dumps(new_sel)}: only additions "
                "to spec.nodeSelector are allowed (no mutations or deletions)")])
    if old_spec.get("nodeName") != new_spec.get("nodeName"):
        raise errors.invalid("Pod", name, "", [(
            "spec.nodeName", "Forbidden: pod updates may not change nodeName (bind a pod "
            "through its binding subresource)")])
    for key in _POD_MUTABLE:
        old_spec.pop(key, None)
        new_spec.pop(key, None)
    for spec in (old_spec, new_spec):
        for key in ("containers", "initContainers"):
            spec[key] = [{k: v for k, v in c.items() if k != "image"}
                         for c in spec.get(key) or []]
    if old_spec != new_spec:
        changed = sorted(k for k in set(old_spec) | set(new_spec)
                         if old_spec.get(k) != new_spec.get(k))
        raise errors.invalid("Pod", name, "", [(
            "spec", "Forbidden: pod updates may not change fields other than "
            "`spec.containers[*].image`, `spec.initContainers[*].image`, "
            "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
            "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
            f"was previously negative), `spec.schedulingGates` (changed: {', '.join(changed)})"
        )])
