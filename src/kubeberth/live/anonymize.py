"""``kubeberth snapshot --anonymize``: the same cluster with nothing that names the company.

Names of nodes, namespaces, pods, owners, queues, flavors, priority classes and gangs become
``<category>-<n>`` and every reference to them (``spec.nodeName``, ownerReferences, a
LocalQueue's ClusterQueue, a Workload's admission, the Kueue and gang labels, ...) follows the
same map, so the snapshot makes the same decisions as the original. Label keys and values are
replaced consistently too, everywhere a label is written, selected or named (labels,
nodeSelector, matchLabels, matchExpressions, matchLabelKeys, topologyKey, a flavor's nodeLabels,
a Topology's levels), except the keys whose meaning the
scheduler relies on: Kubernetes' own (``*kubernetes.io/*``, ``*k8s.io/*``), Kueue's,
kubeberth's and NVIDIA's GPU labels (``nvidia.com/gpu.*``) keep key and value, and
``kubernetes.io/hostname`` maps its value with the node names. Annotations other than
kubeberth's (run times) and Kueue's are dropped, as are container commands, arguments,
environments and images. Names are numbered in the order objects are met, which is the
snapshot's own sorted order, so the result is deterministic. The map (original -> new, per
category) is returned for the mapping file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

# Category of the objects of each kind (their names share one numbering).
_CATEGORY = {
    "Namespace": "namespace", "Node": "node", "Pod": "pod",
    "PriorityClass": "priorityclass", "WorkloadPriorityClass": "workloadpriorityclass",
    "ResourceFlavor": "flavor", "Cohort": "cohort", "ClusterQueue": "clusterqueue",
    "LocalQueue": "localqueue", "AdmissionCheck": "admissioncheck", "Topology": "topology",
    "Deployment": "deployment", "ReplicaSet": "replicaset", "Job": "job",
    "PodGroup": "podgroup", "PodDisruptionBudget": "pdb", "DeviceClass": "deviceclass",
    "ResourceSlice": "resourceslice", "ResourceClaim": "resourceclaim",
    "ResourceClaimTemplate": "resourceclaimtemplate",
}
_KEPT_KEY_PARTS = ("kubernetes.io/", "k8s.io/", "kueue.x-k8s.io/", "kubeberth.io/",
                   "scheduling.x-k8s.io/", "scheduling.sigs.k8s.io/", "nvidia.com/gpu",
                   "volcano.sh/")
_KEPT_PLAIN_KEYS = ("pod-template-hash", "job-name", "controller-uid")
_KEPT_ANNOTATIONS = ("kubeberth.io/", "kueue.x-k8s.io/")
# Label keys whose value is the name of an object of a category.
_VALUE_NAMES = {
    "kubernetes.io/hostname": "node", "kubernetes.io/metadata.name": "namespace",
    "kueue.x-k8s.io/queue-name": "localqueue", "kueue.x-k8s.io/priority-class":
    "workloadpriorityclass", "scheduling.x-k8s.io/pod-group": "podgroup",
    "pod-group.scheduling.sigs.k8s.io": "podgroup", "batch.kubernetes.io/job-name": "job",
    "job-name": "job",
}
_LABEL_MAPS = ("labels", "matchLabels", "nodeSelector", "nodeLabels")


@dataclass(slots=True)
class Anonymizer:
    """Consistent replacement names per category; :attr:`mapping` is what was replaced."""

    mapping: dict[str, dict[str, str]] = field(default_factory=dict)

    def name(self, category: str, original: str) -> str:
        """The replacement of ``original`` in ``category`` (system-* priority classes and
        kube-* namespaces keep theirs: upstream gives them meaning)."""
        if not original or (category == "priorityclass" and original.startswith("system-")) \
                or (category == "namespace" and original in ("default", "kube-system")):
            return original
        table = self.mapping.setdefault(category, {})
        if original not in table:
            table[original] = f"{category}-{len(table) + 1}"
        return table[original]

    def _kept(self, key: str) -> bool:
        return key in _KEPT_PLAIN_KEYS or any(part in key for part in _KEPT_KEY_PARTS)

    def label_key(self, key: str) -> str:
        return key if self._kept(key) else self.name("label-key", key)

    def label_value(self, key: str, value: str) -> str:
        category = _VALUE_NAMES.get(key)
        if category is not None:
            return self.name(category, value)
        if self._kept(key) or value == "":
            return value
        return self.name("label-value", f"{key}={value}")

    def labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {self.label_key(k): self.label_value(k, v) for k, v in labels.items()}

    def expression(self, expr: Obj) -> Obj:
        key = str(expr.get("key", ""))
        out = {**expr, "key": self.label_key(key)}
        if isinstance(expr.get("values"), list):
            out["values"] = [self.label_value(key, str(v)) for v in expr["values"]]
        return out

    def selectors(self, value: Any) -> Any:
        """Every label map and label expression under ``value``, replaced."""
        if isinstance(value, list):
            return [self.selectors(v) for v in value]
        if not isinstance(value, dict):
            return value
        out: Obj = {}
        for k, v in value.items():
            if k in _LABEL_MAPS and isinstance(v, dict):
                out[k] = self.labels({str(a): str(b) for a, b in v.items()})
            elif k == "matchExpressions" and isinstance(v, list):
                out[k] = [self.expression(e) if isinstance(e, dict) else e for e in v]
            elif k == "matchFields" and isinstance(v, list):  # metadata.name: a node's name
                out[k] = [{**e, "values": [self.name("node", str(n))
                                           for n in e.get("values") or []]}
                          if isinstance(e, dict) and e.get("key") == "metadata.name" else e
                          for e in v]
            elif k in ("matchLabelKeys", "mismatchLabelKeys") and isinstance(v, list):
                out[k] = [self.label_key(str(key)) for key in v]
            elif k in ("topologyKey", "nodeLabel") and isinstance(v, str):
                out[k] = self.label_key(v)
            else:
                out[k] = self.selectors(v)
        return out

    def object(self, obj: Obj) -> Obj:
        """One stripped object, anonymized."""
        kind = str(obj.get("kind"))
        out: Obj = self.selectors(obj)
        meta = out.setdefault("metadata", {})
        category = _CATEGORY.get(kind, kind.lower())
        if kind == "Workload" and str(obj.get("apiVersion", "")).startswith("kueue"):
            category = "workload"
        meta["name"] = self.name(category, str(meta.get("name", "")))
        meta.pop("generateName", None)
        if meta.get("namespace"):
            meta["namespace"] = self.name("namespace", str(meta["namespace"]))
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                       if k.startswith(_KEPT_ANNOTATIONS)}
        meta.pop("annotations", None)
        if annotations:
            meta["annotations"] = annotations
        for ref in meta.get("ownerReferences") or []:
            ref["name"] = self.name(_CATEGORY.get(str(ref.get("kind")), "owner"),
                                    str(ref.get("name", "")))
        _REFERENCES.get(kind, _nothing)(self, out)
        _scrub_containers(out)
        return out


def _nothing(_a: Anonymizer, _obj: Obj) -> None:
    """A kind that names no other object beyond metadata and labels."""


def _at(obj: Obj, *path: str) -> Obj:
    cur: Any = obj
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur if isinstance(cur, dict) else {}


def _swap(a: Anonymizer, where: Obj, key: str, category: str) -> None:
    if isinstance(where.get(key), str):
        where[key] = a.name(category, where[key])


def _pod_spec(a: Anonymizer, spec: Obj) -> None:
    _swap(a, spec, "nodeName", "node")
    _swap(a, spec, "priorityClassName", "priorityclass")
    for claim in spec.get("resourceClaims") or []:
        _swap(a, claim, "resourceClaimName", "resourceclaim")
        _swap(a, claim, "resourceClaimTemplateName", "resourceclaimtemplate")


def _pod(a: Anonymizer, obj: Obj) -> None:
    _pod_spec(a, _at(obj, "spec"))
    _swap(a, _at(obj, "status"), "nominatedNodeName", "node")


def _template_owner(a: Anonymizer, obj: Obj) -> None:
    _pod_spec(a, _at(obj, "spec", "template", "spec"))


def _cluster_queue(a: Anonymizer, obj: Obj) -> None:
    spec = _at(obj, "spec")
    _swap(a, spec, "cohort", "cohort")
    _swap(a, spec, "cohortName", "cohort")
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            _swap(a, flavor, "name", "flavor")
    if isinstance(spec.get("admissionChecks"), list):
        spec["admissionChecks"] = [a.name("admissioncheck", str(c))
                                   for c in spec["admissionChecks"]]
    for rule in _at(spec, "admissionChecksStrategy").get("admissionChecks") or []:
        _swap(a, rule, "name", "admissioncheck")
        if isinstance(rule.get("onFlavors"), list):
            rule["onFlavors"] = [a.name("flavor", str(f)) for f in rule["onFlavors"]]


def _workload(a: Anonymizer, obj: Obj) -> None:
    spec = _at(obj, "spec")
    _swap(a, spec, "queueName", "localqueue")
    source = str(spec.get("priorityClassSource", ""))
    _swap(a, spec, "priorityClassName", "workloadpriorityclass"
          if "WorkloadPriorityClass" in source else "priorityclass")
    ref = _at(spec, "priorityClassRef")
    _swap(a, ref, "name", "workloadpriorityclass" if ref.get("kind") == "WorkloadPriorityClass"
          else "priorityclass")
    for ps in spec.get("podSets") or []:
        _pod_spec(a, _at(ps, "template", "spec"))
    admission = _at(obj, "status", "admission")
    _swap(a, admission, "clusterQueue", "clusterqueue")
    for psa in admission.get("podSetAssignments") or []:
        if isinstance(psa.get("flavors"), dict):
            psa["flavors"] = {r: a.name("flavor", str(f)) for r, f in psa["flavors"].items()}
    for check in _at(obj, "status").get("admissionChecks") or []:
        _swap(a, check, "name", "admissioncheck")


def _cohort(a: Anonymizer, obj: Obj) -> None:
    _swap(a, _at(obj, "spec"), "parent", "cohort")  # v1alpha1
    _swap(a, _at(obj, "spec"), "parentName", "cohort")


def _pod_group(a: Anonymizer, obj: Obj) -> None:
    _swap(a, _at(obj, "spec"), "priorityClassName", "priorityclass")


_REFERENCES: dict[str, Callable[[Anonymizer, Obj], None]] = {
    "Pod": _pod,
    "Deployment": _template_owner, "ReplicaSet": _template_owner, "Job": _template_owner,
    "LocalQueue": lambda a, o: _swap(a, _at(o, "spec"), "clusterQueue", "clusterqueue"),
    "ClusterQueue": _cluster_queue,
    "Cohort": _cohort,
    "Workload": _workload,
    "PodGroup": _pod_group,
    "ResourceSlice": lambda a, o: _swap(a, _at(o, "spec"), "nodeName", "node"),
}


def _scrub_containers(obj: Obj) -> None:
    """Commands, arguments, environments and images say what runs: gone (the scheduler reads
    none of them)."""
    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key in ("containers", "initContainers"):
                for c in value.get(key) or []:
                    if isinstance(c, dict):
                        for k in ("command", "args", "env", "envFrom", "workingDir"):
                            c.pop(k, None)
                        if "image" in c:
                            c["image"] = "image"
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(obj)
