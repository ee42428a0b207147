"""DefaultEvictor: which pods may be evicted at all (filter) and just before eviction.

Upstream's evictor plugin, with its pod protections: by default pods with local storage
(hostPath/emptyDir), DaemonSet pods, system-critical pods (priority at or above
2000000000, and below ``priorityThreshold`` when one is set) and failed bare pods are
protected; ``podProtections.defaultDisabled`` lifts some of those and
``podProtections.extraEnabled`` adds PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims and
PodsWithPDBBlockingSingleReplicaOwner. When ``podProtections`` is empty the legacy booleans
(``evictLocalStoragePods``, ``evictDaemonSetPods``, ``evictSystemCriticalPods``,
``evictFailedBarePods``, ``ignorePvcPods``, ``ignorePodsWithoutPDB``) decide, as upstream still
accepts them. Mirror, static and terminating pods are never evicted; the
``descheduler.alpha.kubernetes.io/evict`` annotation overrides every check. Then
``labelSelector``, ``minReplicas`` and ``minPodAge`` (measured from ``status.startTime``; a pod
without one is protected, as upstream).

PreEvictionFilter applies ``nodeFit``: the pod must fit some other ready node matching the
evictor's ``nodeSelector`` (selector/affinity, taints, requests, cordon, anti-affinity), and
``namespaceLabelSelector``: the pod's namespace must carry those labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import LabelSelector
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import (
    DeschedulerHandle,
    PluginSpec,
    PodView,
)
from kubeberth.descheduling.helpers import (
    EVICT_ANNOTATION,
    NO_EVICTION_ANNOTATION,
    has_local_storage,
    has_pvc,
    has_resource_claims,
    is_critical,
    is_daemonset,
    is_mirror,
    is_static,
    label_filter,
    pod_fits_any_other_node,
)
from kubeberth.descheduling.pdb import SnapshotBudgets
from kubeberth.descheduling.policy import (
    LabelRequirement,
    match_label_requirements,
    parse_label_selector_string,
)

NAME = "DefaultEvictor"
POINTS = ("filter", "preEvictionFilter")

LOCAL_STORAGE = "PodsWithLocalStorage"
DAEMONSET = "DaemonSetPods"
SYSTEM_CRITICAL = "SystemCriticalPods"
FAILED_BARE = "FailedBarePods"
PVC = "PodsWithPVC"
WITHOUT_PDB = "PodsWithoutPDB"
RESOURCE_CLAIMS = "PodsWithResourceClaims"
PDB_SINGLE_REPLICA = "PodsWithPDBBlockingSingleReplicaOwner"
DEFAULT_PROTECTIONS = (LOCAL_STORAGE, SYSTEM_CRITICAL, FAILED_BARE, DAEMONSET)
EXTRA_PROTECTIONS = (PVC, WITHOUT_PDB, RESOURCE_CLAIMS, PDB_SINGLE_REPLICA)
NO_EVICTION_POLICIES = ("Preferred", "Mandatory")
_FIELDS = (
    "nodeSelector", "labelSelector", "priorityThreshold", "nodeFit", "minReplicas", "minPodAge",
    "noEvictionPolicy", "podProtections", "namespaceLabelSelector", "evictLocalStoragePods",
    "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods", "ignorePodsWithoutPDB",
    "evictFailedBarePods",
)


@dataclass(frozen=True, slots=True)
class Args:
    node_selector: str = ""
    label_selector: LabelSelector | None = None
    priority_threshold_value: int | None = None
    priority_threshold_name: str = ""
    node_fit: bool = False
    min_replicas: int = 0
    min_pod_age: float | None = None
    no_eviction_policy: str = ""
    extra_enabled: tuple[str, ...] = ()
    default_disabled: tuple[str, ...] = ()
    protected_storage_classes: tuple[str, ...] = ()
    namespace_labels: tuple[tuple[str, str], ...] = ()
    evict_local_storage_pods: bool = False
    evict_daemonset_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    ignore_pods_without_pdb: bool = False
    evict_failed_bare_pods: bool = False

    def protections(self) -> tuple[str, ...]:
        """Upstream ``getEffectivePodProtections``: podProtections when given, else the legacy
        booleans."""
        if self.extra_enabled or self.default_disabled:
            kept = tuple(p for p in DEFAULT_PROTECTIONS if p not in self.default_disabled)
            return kept + self.extra_enabled
        out: list[str] = []
        for flag, name in ((self.evict_local_storage_pods, LOCAL_STORAGE),
                           (self.evict_daemonset_pods, DAEMONSET),
                           (self.evict_system_critical_pods, SYSTEM_CRITICAL),
                           (self.evict_failed_bare_pods, FAILED_BARE)):
            if not flag:
                out.append(name)
        if self.ignore_pvc_pods:
            out.append(PVC)
        if self.ignore_pods_without_pdb:
            out.append(WITHOUT_PDB)
        return tuple(out)


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, _FIELDS)
    node_selector = a.string(raw, "nodeSelector")
    try:
        parse_label_selector_string(node_selector)
    except InputError as err:
        raise err.at(field="nodeSelector") from None
    value, name = _priority_threshold(raw)
    min_replicas = a.uint(raw, "minReplicas") or 0
    policy = a.string(raw, "noEvictionPolicy")
    if policy and policy not in NO_EVICTION_POLICIES:
        raise InputError(f"noEvictionPolicy {policy!r} is not supported", field="noEvictionPolicy",
                         expected=" or ".join(NO_EVICTION_POLICIES))
    extra, disabled, classes = _protections(raw)
    return Args(
        node_selector=node_selector,
        label_selector=a.label_selector(raw),
        priority_threshold_value=value,
        priority_threshold_name=name,
        node_fit=a.boolean(raw, "nodeFit"),
        min_replicas=min_replicas,
        min_pod_age=a.duration(raw, "minPodAge"),
        no_eviction_policy=policy,
        extra_enabled=extra,
        default_disabled=disabled,
        protected_storage_classes=classes,
        namespace_labels=_namespace_labels(raw),
        evict_local_storage_pods=a.boolean(raw, "evictLocalStoragePods"),
        evict_daemonset_pods=a.boolean(raw, "evictDaemonSetPods"),
        evict_system_critical_pods=a.boolean(raw, "evictSystemCriticalPods"),
        ignore_pvc_pods=a.boolean(raw, "ignorePvcPods"),
        ignore_pods_without_pdb=a.boolean(raw, "ignorePodsWithoutPDB"),
        evict_failed_bare_pods=a.boolean(raw, "evictFailedBarePods"),
    )


def _priority_threshold(raw: Mapping[str, Any]) -> tuple[int | None, str]:
    value = raw.get("priorityThreshold")
    if value is None:
        return None, ""
    if not isinstance(value, Mapping):
        raise InputError("priorityThreshold is not a mapping", field="priorityThreshold",
                         expected="priorityThreshold: {value: <int>} or {name: <PriorityClass>}")
    a.reject_unknown(value, ("value", "name"), "priorityThreshold")
    try:
        number = a.integer(value, "value") if value.get("value") is not None else None
        name = a.string(value, "name")
    except InputError as err:
        raise err.at(field="priorityThreshold") from None
    if number is not None and name:
        raise InputError("priority threshold misconfigured, only one of priorityThreshold fields "
                         "can be set", field="priorityThreshold",
                         expected="either priorityThreshold.value or priorityThreshold.name")
    return number, name


def _protections(raw: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...],
                                                  tuple[str, ...]]:
    value = raw.get("podProtections")
    if value is None:
        return (), (), ()
    where = "podProtections"
    if not isinstance(value, Mapping):
        raise InputError("podProtections is not a mapping", field=where,
                         expected="a mapping with extraEnabled, defaultDisabled and config")
    a.reject_unknown(value, ("extraEnabled", "defaultDisabled", "config"), where)
    try:
        extra = a.strings(value, "extraEnabled") or ()
        disabled = a.strings(value, "defaultDisabled") or ()
    except InputError as err:
        raise err.at(field=where) from None
    for key, names, allowed in (("extraEnabled", extra, EXTRA_PROTECTIONS),
                                ("defaultDisabled", disabled, DEFAULT_PROTECTIONS)):
        for i, n in enumerate(names):
            if n not in allowed:
                raise InputError(f"{n!r} is not a valid {key} protection",
                                 field=f"{where}.{key}[{i}]",
                                 expected="one of " + ", ".join(allowed))
            if names.index(n) != i:
                raise InputError(f"protection {n!r} is listed twice", field=f"{where}.{key}[{i}]",
                                 expected="each protection once")
    classes: tuple[str, ...] = ()
    config = value.get("config")
    if config is not None:
        classes = _storage_classes(config, f"{where}.config")
        if classes and PVC not in extra:
            raise InputError("protectedStorageClasses is set but PodsWithPVC is not enabled",
                             field=f"{where}.config.PodsWithPVC",
                             expected=f"{PVC} in podProtections.extraEnabled")
    return extra, disabled, classes


def _storage_classes(config: Any, where: str) -> tuple[str, ...]:
    if not isinstance(config, Mapping):
        raise InputError("config is not a mapping", field=where, expected="config: {PodsWithPVC: "
                         "{protectedStorageClasses: [{name: <class>}]}}")
    a.reject_unknown(config, (PVC,), where)
    pvc = config.get(PVC) or {}
    if not isinstance(pvc, Mapping):
        raise InputError(f"{PVC} is not a mapping", field=f"{where}.{PVC}",
                         expected="a mapping with protectedStorageClasses")
    a.reject_unknown(pvc, ("protectedStorageClasses",), f"{where}.{PVC}")
    out: list[str] = []
    for i, item in enumerate(pvc.get("protectedStorageClasses") or []):
        at = f"{where}.{PVC}.protectedStorageClasses[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) \
                or not item["name"]:
            raise InputError("a storage class needs a name", field=at,
                             expected="{name: <storage class name>}")
        out.append(item["name"])
    return tuple(out)


def _namespace_labels(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    sel = a.label_selector(raw, "namespaceLabelSelector")
    return tuple(sorted(sel.match_labels.items())) if sel is not None else ()


Constraint = Callable[[PodView], str | None]


class DefaultEvictor:
    def __init__(self, args: Args, handle: DeschedulerHandle) -> None:
        self.args = args
        self.handle = handle
        self.snapshot = handle.snapshot
        self.node_requirements: list[LabelRequirement] = \
            parse_label_selector_string(args.node_selector)
        self.constraints: list[Constraint] = self._constraints()

    def _constraints(self) -> list[Constraint]:
        args = self.args
        enabled = set(args.protections())
        out: list[Constraint] = []
        if SYSTEM_CRITICAL in enabled:
            out.append(lambda p: "pod has system critical priority and is protected against "
                       "eviction" if is_critical(p) else None)
            threshold = self._threshold()
            if threshold is not None:
                out.append(lambda p: "pod has higher priority than specified priority class "
                           f"threshold ({threshold})"
                           if p.priority is not None and p.priority >= threshold else None)
        if FAILED_BARE in enabled:
            out.append(lambda p: None if p.owners else "pod does not have any ownerRefs")
        else:
            out.append(lambda p: None if p.owners or p.phase == "Failed"
                       else "pod does not have any ownerRefs and is not in failed phase")
        if LOCAL_STORAGE in enabled:
            out.append(lambda p: "pod has local storage and is protected against eviction"
                       if has_local_storage(p) else None)
        if DAEMONSET in enabled:
            out.append(lambda p: "daemonset pods are protected against eviction"
                       if is_daemonset(p) else None)
        if PVC in enabled:
            out.append(self._pvc_constraint())
        if WITHOUT_PDB in enabled or PDB_SINGLE_REPLICA in enabled:
            budgets = SnapshotBudgets(self.snapshot)
            if WITHOUT_PDB in enabled:
                out.append(lambda p: None if budgets.covering(p) else
                           "pod does not have a PodDisruptionBudget and is protected against "
                           "eviction")
            if PDB_SINGLE_REPLICA in enabled:
                out.append(lambda p: self._single_replica(p, bool(budgets.covering(p))))
        if RESOURCE_CLAIMS in enabled:
            out.append(lambda p: "pod has ResourceClaims and descheduler is configured to "
                       "protect ResourceClaims pods" if has_resource_claims(p) else None)
        matches = label_filter(args.label_selector)
        if args.label_selector is not None:
            out.append(lambda p: None if matches(p) else
                       "pod labels do not match the labelSelector filter in the policy parameter")
        if args.min_replicas > 1:
            out.append(self._min_replicas_constraint())
        if args.min_pod_age is not None:
            age = args.min_pod_age
            now = self.snapshot.now
            out.append(lambda p: None if p.started is not None and now - p.started >= age else
                       f"pod age is not older than minPodAge ({_show_seconds(age)})")
        return out

    def _threshold(self) -> int | None:
        args = self.args
        if args.priority_threshold_value is not None:
            return args.priority_threshold_value
        if args.priority_threshold_name:
            pc = self.snapshot.priority_classes.get(args.priority_threshold_name)
            if pc is None:
                raise InputError(f"PriorityClass {args.priority_threshold_name!r} named by "
                                 "DefaultEvictor priorityThreshold does not exist",
                                 field="priorityThreshold.name",
                                 expected="the name of a PriorityClass in the manifests")
            return pc.value
        # Upstream defaults the threshold to SystemCriticalPriority, which is exactly the
        # critical-pod check above.
        return None

    def _pvc_constraint(self) -> Constraint:
        if not self.args.protected_storage_classes:
            return lambda p: "pod with PVC is protected against eviction" if has_pvc(p) else None
        # kubeberth does not model PersistentVolumeClaims: a pod naming one cannot be resolved
        # to its storage class, which upstream treats as protected.
        return lambda p: "pod refers to a PersistentVolumeClaim whose storage class is unknown " \
            "to kubeberth" if has_pvc(p) else None

    def _single_replica(self, pod: PodView, covered: bool) -> str | None:
        if not covered:
            return None
        for ref in pod.owners:
            replicas = self.snapshot.owner_replicas.get((ref.kind, pod.namespace, ref.name))
            if ref.kind in ("Deployment", "StatefulSet", "ReplicaSet") and replicas == 1:
                return None
        return "pod is covered by PodDisruptionBudget"

    def _min_replicas_constraint(self) -> Constraint:
        counts: dict[tuple[str, ...], int] = {}
        for p in self.snapshot.pods:
            for ref in p.owners:
                key = _owner_key(p, ref.uid, ref.kind, ref.name)
                counts[key] = counts.get(key, 0) + 1
        need = self.args.min_replicas

        def check(p: PodView) -> str | None:
            if len(p.owners) != 1:
                return None
            ref = p.owners[0]
            have = counts.get(_owner_key(p, ref.uid, ref.kind, ref.name), 0)
            if have < need:
                return f"owner has {have} replicas which is less than minReplicas of {need}"
            return None

        return check

    # ---- extension points ------------------------------------------------------------------
    def filter(self, pod: PodView) -> str | None:
        annotations = pod.pod.metadata.annotations
        if EVICT_ANNOTATION in annotations:
            return None
        if self.args.no_eviction_policy == "Mandatory" and NO_EVICTION_ANNOTATION in annotations:
            return f"pod carries the {NO_EVICTION_ANNOTATION} annotation"
        reasons: list[str] = []
        if is_mirror(pod):
            reasons.append("pod is a mirror pod")
        if is_static(pod):
            reasons.append("pod is a static pod")
        if pod.terminating:
            reasons.append("pod is terminating")
        for check in self.constraints:
            why = check(pod)
            if why is not None:
                reasons.append(why)
        return "; ".join(reasons) if reasons else None

    def pre_eviction_filter(self, pod: PodView) -> str | None:
        if self.args.node_fit:
            nodes = [n for n in self.snapshot.nodes if n.ready
                     and match_label_requirements(self.node_requirements, n.metadata.labels)]
            if not pod_fits_any_other_node(self.snapshot, pod, nodes):
                return ("pod does not fit on any other node because of nodeSelector(s), "
                        "Taint(s), or nodes marked as unschedulable (nodeFit)")
        if self.args.namespace_labels:
            ns = self.snapshot.namespaces.get(pod.namespace)
            labels = ns.metadata.labels if ns is not None else {}
            if any(labels.get(k) != v for k, v in self.args.namespace_labels):
                return "pod namespace does not match the namespaceLabelSelector filter"
        return None


def _owner_key(pod: PodView, uid: str, kind: str, name: str) -> tuple[str, ...]:
    return (uid,) if uid else (pod.namespace, kind, name)


def _show_seconds(seconds: float) -> str:
    return f"{seconds:g}s"


SPEC = PluginSpec(NAME, POINTS, parse_args, DefaultEvictor)
