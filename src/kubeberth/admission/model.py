"""Kueue's objects read as Kueue serves them, with Kueue's defaulting and validation.

Admission policy code must not care whether a ClusterQueue came from a v1beta1 or a v1beta2
manifest, whether a Workload was written by hand or derived from a Job, or how a quantity was
spelled. This module turns the raw ``kueue.x-k8s.io`` documents that :mod:`config.manifests` keeps
(ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, Workload), the
``config.kueue.x-k8s.io`` Configuration, and the queue-labelled Pods, pod groups (by Kueue's label,
or by a native gang PodGroup as Kueue's KEP-13150 proposes), batch/v1 Jobs and the serving workloads
(queue-labelled Deployments and StatefulSets) into plain typed records with quantities in int
milli-units. References that Kueue rejects at admission time (a ClusterQueue quota naming a flavor
with no ResourceFlavor, a cohort cycle, a LocalQueue naming a ClusterQueue that does not exist) are
not errors here: Kueue keeps such objects and reports them as inactive or as a pending reason, so
the admission layer does too. Only input Kueue's API server would refuse (webhook validation) raises
:class:`InputError`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    NamespacedName,
    Pod,
    PodSpec,
    PriorityClass,
    Taint,
    Toleration,
)
from kubeberth.api.quantity import to_milli
from kubeberth.api.resources import pod_requests
from kubeberth.api.times import parse_time
from kubeberth.api.validation import check_int32, validate_pod_spec
from kubeberth.config.manifests import DEFAULT_NAMESPACE, Manifests
from kubeberth.config.workload_api import load_workload_api
from kubeberth.config.workloads import load_owners
from kubeberth.config.yamlsrc import Document, validation_error

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# What Kueue's Deployment webhook puts on the pod template of a queue-labelled Deployment.
MANAGED_LABEL = "kueue.x-k8s.io/managed"
SUSPENDED_BY_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
# The pod integration's default namespace selector leaves these alone.
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"

# The zero time.Time of Go (0001-01-01T00:00:00Z) in Unix seconds: "older than everything".
ZERO_TIME = -62135596800.0

WITHIN_CQ_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
BORROW_POLICIES = ("Never", "LowerPriority")
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
FUNGIBILITY_POLICIES = ("MayStopSearch", "TryNextFlavor")
FUNGIBILITY_V1BETA1 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
PREFERENCES = ("BorrowingOverPreemption", "PreemptionOverBorrowing")
FS_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
MAX_FLAVORS = 64
# Feature gates kubeberth reads from Configuration.featureGates; the others keep their defaults.
FEATURE_GATES = ("PartialAdmission",)
MAX_RESOURCE_GROUPS = 16
# AdmissionCheckState.state (kueue.x-k8s.io/v1beta2 CheckState).
CHECK_PENDING, CHECK_READY, CHECK_RETRY, CHECK_REJECTED = "Pending", "Ready", "Retry", "Rejected"
CHECK_STATES = (CHECK_PENDING, CHECK_READY, CHECK_RETRY, CHECK_REJECTED)


@dataclass(slots=True, frozen=True)
class ResourceQuota:
    """One resource of one flavor: quantities in milli-units; limits None when unset."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class FlavorQuotas:
    name: str
    resources: dict[str, ResourceQuota]


@dataclass(slots=True)
class ResourceGroup:
    covered_resources: list[str]
    flavors: list[FlavorQuotas]


@dataclass(slots=True, frozen=True)
class Preemption:
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(slots=True, frozen=True)
class FlavorFungibility:
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


@dataclass(slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[Taint] = field(default_factory=list)
    tolerations: list[Toleration] = field(default_factory=list)


@dataclass(slots=True)
class ClusterQueue:
    name: str
    cohort: str = ""
    namespace_selector: LabelSelector | None = field(default_factory=LabelSelector)
    queueing_strategy: str = "BestEffortFIFO"
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    fair_weight: float = 1.0
    admission_checks: list[str] = field(default_factory=list)
    # admissionChecksStrategy onFlavors per check; a check not listed applies to every flavor.
    check_flavors: dict[str, list[str]] = field(default_factory=dict)
    stop_policy: str = "None"


@dataclass(slots=True, frozen=True)
class ParametersRef:
    api_group: str
    kind: str
    name: str


@dataclass(slots=True)
class AdmissionCheck:
    """An AdmissionCheck: the controller that decides its state, and that controller's
    parameters object (``parameters_object``: the referenced document as read, None when the
    input has none)."""

    name: str
    controller_name: str
    parameters: ParametersRef | None = None
    parameters_object: dict[str, Any] | None = None
    # The Active condition: its controller sets it, so the input's value stands only for
    # controllers kubeberth does not model.
    active: bool = False
    inactive_message: str = ""


@dataclass(slots=True, frozen=True)
class AdmissionCheckState:
    """One entry of a Workload's ``status.admissionChecks``."""

    name: str
    state: str = CHECK_PENDING
    message: str = ""
    last_transition: float | None = None
    requeue_after_seconds: int | None = None
    retry_count: int = 0


@dataclass(slots=True)
class Cohort:
    name: str
    parent: str = ""
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_weight: float = 1.0


@dataclass(slots=True, frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


@dataclass(slots=True)
class PodSet:
    """A group of identical pods; ``requests`` are per pod, in milli-units."""

    name: str
    count: int
    requests: dict[str, int]
    min_count: int | None = None
    template: PodSpec = field(default_factory=PodSpec)
    # PodSets sharing a group name (topologyRequest.podSetGroupName) get the same flavors.
    group: str = ""


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str]
    resource_usage: dict[str, int]


@dataclass(slots=True)
class Admission:
    cluster_queue: str
    podset_assignments: list[PodSetAssignment]


@dataclass(slots=True)
class Workload(NamespacedName):
    """A Kueue Workload: what is asked (podSets), where it queues, and its admission if any."""

    namespace: str
    name: str
    queue_name: str
    podsets: list[PodSet]
    priority: int = 0
    priority_class: str = ""
    uid: str = ""
    creation_time: float = ZERO_TIME
    admission: Admission | None = None
    quota_reserved_time: float | None = None
    evicted: bool = False
    active: bool = True
    requeue_count: int = 0
    requeue_at: float | None = None
    pods_ready: bool = False
    # Set when evicted for not reaching PodsReady in time and requeuingStrategy.timestamp is
    # Eviction: the queue then orders the workload by this time instead of its creation.
    pods_ready_evicted_at: float | None = None
    # status.admissionChecks, sorted by name.
    checks: tuple[AdmissionCheckState, ...] = ()
    # Set when evicted because an admission check asked for a retry: the queue then orders
    # the workload by this time (until it reserves quota again).
    check_evicted_at: float | None = None
    # Where the Workload comes from: "Workload", "Job", "Pod" or "PodGroup".
    source: str = "Workload"
    # Pods owned by this workload (plain pods and pod groups) -> their podSet; gated until
    # admission.
    pods: dict[str, str] = field(default_factory=dict)

    @property
    def queue_time(self) -> float:
        """GetQueueOrderTimestamp: the time FIFO ordering uses."""
        if self.pods_ready_evicted_at is not None:
            return self.pods_ready_evicted_at
        if self.check_evicted_at is not None:
            return self.check_evicted_at
        return self.creation_time


@dataclass(slots=True, frozen=True)
class RequeuingStrategy:
    timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(slots=True, frozen=True)
class WaitForPodsReady:
    enable: bool = False
    timeout_seconds: float = 300.0
    block_admission: bool = False
    requeuing: RequeuingStrategy = field(default_factory=RequeuingStrategy)


@dataclass(slots=True, frozen=True)
class KueueConfiguration:
    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare",
                                              "LessThanInitialShare")
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    partial_admission: bool = True


@dataclass(slots=True)
class KueueObjects:
    """Everything admission reads, keyed by name (LocalQueues and Workloads by ns/name)."""

    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    workloads: list[Workload] = field(default_factory=list)
    admission_checks: dict[str, AdmissionCheck] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    config: KueueConfiguration = field(default_factory=KueueConfiguration)
    # Pod groups with fewer pods than their total count: ns/group -> why no Workload yet.
    incomplete_groups: dict[str, str] = field(default_factory=dict)
    # The native (scheduling.k8s.io) PodGroups: ns/name -> the gang's minCount, 0 for a basic
    # group.
    native_groups: dict[str, int] = field(default_factory=dict)




# ---------------------------------------------------------------------------------------------
# Small typed readers over raw dicts: every error names the field.


def _map(value: object, fld: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("expected a mapping", field=fld, expected="key: value pairs")
    return value


def _list(value: object, fld: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError("expected a list", field=fld, expected="a list of items ('- ...')")
    return value


def _str(value: object, fld: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"{value!r} is not a string", field=fld, expected="a string")
    return value


def _int(value: object, fld: str, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{value!r} is not an integer", field=fld, expected="an integer")
    check_int32(value, fld)  # every integer Kueue and batch/v1 read here is an int32
    return value


def _enum(value: object, fld: str, allowed: tuple[str, ...], default: str) -> str:
    text = _str(value, fld, default)
    if text not in allowed:
        raise InputError(f"unknown value {text!r}", field=fld, expected=" or ".join(allowed))
    return text


def _quantity(resource: str, value: object, fld: str) -> int:
    try:
        milli = to_milli(resource, value)
    except InputError as err:
        raise err.at(field=fld) from None
    if milli < 0:
        raise InputError(f"quantity {value!r} is negative", field=fld,
                         expected="a non-negative quantity")
    return milli


def _weight(value: object, fld: str) -> float:
    if value is None:
        return 1.0
    try:
        milli = to_milli("cpu", value)
    except InputError as err:
        raise err.at(field=fld) from None
    if milli < 0:
        raise InputError(f"weight {value!r} is negative", field=fld,
                         expected="a non-negative quantity such as 1, 0.5 or 2")
    return milli / 1000.0


def _struct(value: object, type_: type[Any], fld: str) -> Any:
    try:
        return msgspec.convert(value, type_, strict=True)
    except msgspec.ValidationError as err:
        raise validation_error(str(err), value).at(field=fld) from None


def _name(doc: Document) -> str:
    meta = _map(doc.data.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise doc.error(f"the {doc.kind} has no name", field="metadata.name",
                        expected="a non-empty metadata.name")
    return name


def _namespace(doc: Document) -> str:
    meta = _map(doc.data.get("metadata"), "metadata")
    return _str(meta.get("namespace"), "metadata.namespace") or DEFAULT_NAMESPACE


# ---------------------------------------------------------------------------------------------
# Kinds


def _flavor(doc: Document) -> ResourceFlavor:
    spec = _map(doc.data.get("spec"), "spec")
    labels = _map(spec.get("nodeLabels"), "spec.nodeLabels")
    taints = [_struct(t, Taint, f"spec.nodeTaints[{i}]")
              for i, t in enumerate(_list(spec.get("nodeTaints"), "spec.nodeTaints"))]
    for i, t in enumerate(taints):
        if t.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise InputError(f"unknown taint effect {t.effect!r}",
                             field=f"spec.nodeTaints[{i}].effect",
                             expected="NoSchedule, PreferNoSchedule or NoExecute")
    tols = [_struct(t, Toleration, f"spec.tolerations[{i}]")
            for i, t in enumerate(_list(spec.get("tolerations"), "spec.tolerations"))]
    return ResourceFlavor(_name(doc), {str(k): str(v) for k, v in labels.items()}, taints, tols)


def _resource_groups(raw: object, fld: str, *, cohort: bool) -> list[ResourceGroup]:
    groups: list[ResourceGroup] = []
    seen_flavors: dict[str, str] = {}
    seen_resources: dict[str, str] = {}
    items = _list(raw, fld)
    if len(items) > MAX_RESOURCE_GROUPS:
        raise InputError(f"{len(items)} resource groups", field=fld,
                         expected=f"at most {MAX_RESOURCE_GROUPS}")
    for gi, g in enumerate(items):
        gf = f"{fld}[{gi}]"
        gm = _map(g, gf)
        raw_covered = _list(gm.get("coveredResources"), f"{gf}.coveredResources")
        covered = [_str(r, f"{gf}.coveredResources[{i}]") for i, r in enumerate(raw_covered)]
        if not covered:
            raise InputError("coveredResources is empty", field=f"{gf}.coveredResources",
                             expected="at least one resource name")
        for r in covered:
            if r in seen_resources:
                raise InputError(f"resource {r!r} is covered by two resource groups",
                                 field=f"{gf}.coveredResources",
                                 expected="each resource in one group "
                                          f"(first in {seen_resources[r]})")
            seen_resources[r] = gf
        flavors: list[FlavorQuotas] = []
        raw_flavors = _list(gm.get("flavors"), f"{gf}.flavors")
        if not raw_flavors or len(raw_flavors) > MAX_FLAVORS:
            raise InputError(f"{len(raw_flavors)} flavors", field=f"{gf}.flavors",
                             expected=f"between 1 and {MAX_FLAVORS} flavors")
        for fi, fq in enumerate(raw_flavors):
            ff = f"{gf}.flavors[{fi}]"
            fm = _map(fq, ff)
            fname = _str(fm.get("name"), f"{ff}.name")
            if not fname:
                raise InputError("the flavor has no name", field=f"{ff}.name",
                                 expected="the name of a ResourceFlavor")
            if fname in seen_flavors:
                raise InputError(f"flavor {fname!r} is listed twice", field=f"{ff}.name",
                                 expected="each flavor once per queue "
                                          f"(first at {seen_flavors[fname]})")
            seen_flavors[fname] = ff
            quotas: dict[str, ResourceQuota] = {}
            raw_res = _list(fm.get("resources"), f"{ff}.resources")
            names = [_str(_map(r, f"{ff}.resources[{ri}]").get("name"),
                          f"{ff}.resources[{ri}].name") for ri, r in enumerate(raw_res)]
            if names != covered:
                raise InputError(f"the flavor lists resources {names}", field=f"{ff}.resources",
                                 expected=f"exactly the covered resources, in order: {covered}")
            for ri, r in enumerate(raw_res):
                rf = f"{ff}.resources[{ri}]"
                rm = _map(r, rf)
                rname = names[ri]
                if "nominalQuota" not in rm:
                    raise InputError("nominalQuota is missing", field=f"{rf}.nominalQuota",
                                     expected="a quantity")
                nominal = _quantity(rname, rm["nominalQuota"], f"{rf}.nominalQuota")
                borrow = (None if rm.get("borrowingLimit") is None
                          else _quantity(rname, rm["borrowingLimit"], f"{rf}.borrowingLimit"))
                lend = (None if rm.get("lendingLimit") is None
                        else _quantity(rname, rm["lendingLimit"], f"{rf}.lendingLimit"))
                if lend is not None and not cohort and lend > nominal:
                    raise InputError("lendingLimit is larger than nominalQuota",
                                     field=f"{rf}.lendingLimit",
                                     expected="a lendingLimit at most the nominalQuota")
                quotas[rname] = ResourceQuota(nominal, borrow, lend)
            flavors.append(FlavorQuotas(fname, quotas))
        groups.append(ResourceGroup(covered, flavors))
    return groups


def _no_limits(groups: list[ResourceGroup], why: str) -> None:
    """Borrowing and lending limits only make sense below a parent (Kueue's webhook)."""
    for gi, g in enumerate(groups):
        for fi, fq in enumerate(g.flavors):
            for ri, (res, q) in enumerate(fq.resources.items()):
                for name, limit in (("borrowingLimit", q.borrowing_limit),
                                    ("lendingLimit", q.lending_limit)):
                    if limit is not None:
                        raise InputError(
                            f"{name} is set for {res} but {why}",
                            field=f"spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]"
                                  f".{name}",
                            expected=f"no {name} without a parent to borrow from or lend to")


def _preemption(raw: object, fld: str) -> Preemption:
    m = _map(raw, fld)
    bwc = _map(m.get("borrowWithinCohort"), f"{fld}.borrowWithinCohort")
    p = Preemption(
        within_cluster_queue=_enum(m.get("withinClusterQueue"), f"{fld}.withinClusterQueue",
                                   WITHIN_CQ_POLICIES, "Never"),
        reclaim_within_cohort=_enum(m.get("reclaimWithinCohort"), f"{fld}.reclaimWithinCohort",
                                    RECLAIM_POLICIES, "Never"),
        borrow_within_cohort=_enum(bwc.get("policy"), f"{fld}.borrowWithinCohort.policy",
                                   BORROW_POLICIES, "Never"),
        max_priority_threshold=_int(bwc.get("maxPriorityThreshold"),
                                    f"{fld}.borrowWithinCohort.maxPriorityThreshold"),
    )
    return p


def _fungibility(raw: object, fld: str) -> FlavorFungibility:
    m = _map(raw, fld)

    def policy(key: str, default: str) -> str:
        val = _str(m.get(key), f"{fld}.{key}", default)
        val = FUNGIBILITY_V1BETA1.get(val, val)
        if val not in FUNGIBILITY_POLICIES:
            raise InputError(f"unknown value {val!r}", field=f"{fld}.{key}",
                             expected=" or ".join(FUNGIBILITY_POLICIES))
        return val

    pref = m.get("preference")
    return FlavorFungibility(
        when_can_borrow=policy("whenCanBorrow", "MayStopSearch"),
        when_can_preempt=policy("whenCanPreempt", "TryNextFlavor"),
        preference=None if pref is None else _enum(pref, f"{fld}.preference", PREFERENCES, ""),
    )


def _fair_weight(spec: dict[str, Any]) -> float:
    fs = _map(spec.get("fairSharing"), "spec.fairSharing")
    return _weight(fs.get("weight"), "spec.fairSharing.weight")


def _cluster_queue(doc: Document) -> ClusterQueue:
    spec = _map(doc.data.get("spec"), "spec")
    v1beta1 = doc.api_version.endswith("v1beta1")
    # v1beta1 calls the field cohort, v1beta2 cohortName.
    key = "cohort" if v1beta1 else "cohortName"
    cohort = _str(spec.get(key), f"spec.{key}")
    ns_sel = spec.get("namespaceSelector")
    selector = None if ns_sel is None else _struct(ns_sel, LabelSelector, "spec.namespaceSelector")
    checks: list[str] = [
        _str(c, f"spec.admissionChecks[{i}]")
        for i, c in enumerate(_list(spec.get("admissionChecks"), "spec.admissionChecks"))]
    strategy = _map(spec.get("admissionChecksStrategy"), "spec.admissionChecksStrategy")
    check_flavors: dict[str, list[str]] = {}
    for i, rule in enumerate(_list(strategy.get("admissionChecks"),
                                   "spec.admissionChecksStrategy.admissionChecks")):
        rf = f"spec.admissionChecksStrategy.admissionChecks[{i}]"
        rule_map = _map(rule, rf)
        name = _str(rule_map.get("name"), f"{rf}.name")
        checks.append(name)
        on = [_str(f, f"{rf}.onFlavors[{j}]")
              for j, f in enumerate(_list(rule_map.get("onFlavors"), f"{rf}.onFlavors"))]
        if on:
            check_flavors[name] = on
    groups = _resource_groups(spec.get("resourceGroups"), "spec.resourceGroups", cohort=False)
    if not cohort:
        _no_limits(groups, "the ClusterQueue has no cohort")
    return ClusterQueue(
        name=_name(doc),
        cohort=cohort,
        # Unset, the selector matches no namespace (LabelSelectorAsSelector(nil) is Nothing);
        # {} matches every namespace.
        namespace_selector=selector,
        queueing_strategy=_enum(spec.get("queueingStrategy"), "spec.queueingStrategy",
                                QUEUEING_STRATEGIES, "BestEffortFIFO"),
        resource_groups=groups,
        preemption=_preemption(spec.get("preemption"), "spec.preemption"),
        flavor_fungibility=_fungibility(spec.get("flavorFungibility"), "spec.flavorFungibility"),
        fair_weight=_fair_weight(spec),
        admission_checks=checks,
        check_flavors=check_flavors,
        stop_policy=_enum(spec.get("stopPolicy"), "spec.stopPolicy",
                          ("None", "Hold", "HoldAndDrain"), "None"),
    )


def _cohort(doc: Document) -> Cohort:
    spec = _map(doc.data.get("spec"), "spec")
    parent = _str(spec.get("parentName") if "parentName" in spec else spec.get("parent"),
                  "spec.parentName")
    name = _name(doc)
    if parent == name:
        raise doc.error(f"Cohort {name} names itself as parent", field="spec.parentName",
                        expected="a different Cohort (or none)")
    groups = _resource_groups(spec.get("resourceGroups"), "spec.resourceGroups", cohort=True)
    if not parent:
        _no_limits(groups, "the Cohort has no parent")
    return Cohort(name, parent, groups, _fair_weight(spec))


def _local_queue(doc: Document) -> LocalQueue:
    spec = _map(doc.data.get("spec"), "spec")
    cq = _str(spec.get("clusterQueue"), "spec.clusterQueue")
    if not cq:
        raise doc.error("the LocalQueue names no ClusterQueue", field="spec.clusterQueue",
                        expected="the name of a ClusterQueue")
    return LocalQueue(_namespace(doc), _name(doc), cq)


def _requests_map(raw: object, fld: str) -> dict[str, int]:
    return {str(k): _quantity(str(k), v, f"{fld}.{k}") for k, v in _map(raw, fld).items()}


def _pod_spec(raw: object, fld: str) -> PodSpec:
    """A pod template's spec at ``fld`` (``...template.spec``), validated as the API server
    validates the pods it stands for."""
    spec: PodSpec = _struct(_map(raw, fld), PodSpec, fld)
    try:
        validate_pod_spec(spec)
    except InputError as err:
        raise err.at(field=fld.removesuffix(".spec")) from None
    return spec


def _podset_requests(spec: PodSpec, fld: str) -> dict[str, int]:
    try:
        return dict(pod_requests(Pod(spec=spec)))
    except InputError as err:
        raise err.at(field=fld) from None


def _admission(raw: object, fld: str) -> Admission:
    m = _map(raw, fld)
    cq = _str(m.get("clusterQueue"), f"{fld}.clusterQueue")
    if not cq:
        raise InputError("the admission names no ClusterQueue", field=f"{fld}.clusterQueue",
                         expected="the ClusterQueue that reserved quota")
    psas: list[PodSetAssignment] = []
    for i, p in enumerate(_list(m.get("podSetAssignments"), f"{fld}.podSetAssignments")):
        pf = f"{fld}.podSetAssignments[{i}]"
        pm = _map(p, pf)
        flavors = {str(k): _str(v, f"{pf}.flavors.{k}")
                   for k, v in _map(pm.get("flavors"), f"{pf}.flavors").items()}
        usage = _requests_map(pm.get("resourceUsage"), f"{pf}.resourceUsage")
        psas.append(PodSetAssignment(_str(pm.get("name"), f"{pf}.name", "main"),
                                     _int(pm.get("count"), f"{pf}.count", 0) or 0,
                                     flavors, usage))
    return Admission(cq, psas)


def _condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in _list(status.get("conditions"), "status.conditions"):
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def _workload(doc: Document, objs: KueueObjects, pcs: dict[str, int]) -> Workload:
    meta = _map(doc.data.get("metadata"), "metadata")
    spec = _map(doc.data.get("spec"), "spec")
    status = _map(doc.data.get("status"), "status")
    podsets: list[PodSet] = []
    raw_ps = _list(spec.get("podSets"), "spec.podSets")
    if not raw_ps:
        raise doc.error("the Workload has no podSets", field="spec.podSets",
                        expected="between 1 and 8 podSets")
    names: set[str] = set()
    for i, p in enumerate(raw_ps):
        pf = f"spec.podSets[{i}]"
        pm = _map(p, pf)
        name = _str(pm.get("name"), f"{pf}.name", "main")
        if name in names:
            raise doc.error(f"podSet {name!r} is defined twice", field=f"{pf}.name",
                            expected="unique podSet names")
        names.add(name)
        count = _int(pm.get("count"), f"{pf}.count", 1)
        assert count is not None
        if count < 0:
            raise doc.error(f"count {count} is negative", field=f"{pf}.count",
                            expected="a count of 0 or more")
        min_count = _int(pm.get("minCount"), f"{pf}.minCount")
        if min_count is not None and not 0 <= min_count <= count:
            raise doc.error(f"minCount {min_count} is outside 0..count ({count})",
                            field=f"{pf}.minCount", expected="0 <= minCount <= count")
        template = _map(pm.get("template"), f"{pf}.template")
        pspec = _pod_spec(template.get("spec"), f"{pf}.template.spec")
        topology = _map(pm.get("topologyRequest"), f"{pf}.topologyRequest")
        podsets.append(PodSet(name, count, _podset_requests(pspec, f"{pf}.template.spec"),
                              min_count, pspec,
                              _str(topology.get("podSetGroupName"),
                                   f"{pf}.topologyRequest.podSetGroupName")))
    wl = Workload(
        namespace=_namespace(doc), name=_name(doc),
        queue_name=_str(spec.get("queueName"), "spec.queueName"),
        podsets=podsets, uid=_str(meta.get("uid"), "metadata.uid"),
        active=spec.get("active", True) is not False, source="Workload")
    if meta.get("creationTimestamp") is not None:
        wl.creation_time = parse_time(meta["creationTimestamp"], "metadata.creationTimestamp")
    if "priorityClassRef" in spec:
        # v1beta2: {group, kind, name} replaces priorityClassName and priorityClassSource.
        ref = _map(spec["priorityClassRef"], "spec.priorityClassRef")
        kind = _enum(ref.get("kind"), "spec.priorityClassRef.kind",
                     ("WorkloadPriorityClass", "PriorityClass"), "")
        source = (WORKLOAD_PRIORITY_CLASS_SOURCE if kind == "WorkloadPriorityClass"
                  else POD_PRIORITY_CLASS_SOURCE)
        _set_priority(wl, ref.get("name"), source, spec.get("priority"), objs, pcs,
                      "spec.priorityClassRef.name")
    else:
        _set_priority(wl, spec.get("priorityClassName"), spec.get("priorityClassSource"),
                      spec.get("priority"), objs, pcs, "spec.priorityClassName")
    if status.get("admission") is not None:
        wl.admission = _admission(status["admission"], "status.admission")
        cond = _condition(status, "QuotaReserved")
        if cond is not None and cond.get("status") == "False":
            wl.admission = None
        elif cond is not None and cond.get("lastTransitionTime") is not None:
            wl.quota_reserved_time = parse_time(cond["lastTransitionTime"],
                                                "status.conditions.lastTransitionTime")
    evicted = _condition(status, "Evicted")
    wl.evicted = evicted is not None and evicted.get("status") == "True"
    ready = _condition(status, "PodsReady")
    wl.pods_ready = ready is not None and ready.get("status") == "True"
    wl.checks = read_check_states(status)
    if evicted is not None and evicted.get("status") == "True" and \
            evicted.get("reason") == "AdmissionCheck" and evicted.get("lastTransitionTime"):
        wl.check_evicted_at = parse_time(evicted["lastTransitionTime"],
                                         "status.conditions.lastTransitionTime")
    rq = _map(status.get("requeueState"), "status.requeueState")
    wl.requeue_count = _int(rq.get("count"), "status.requeueState.count", 0) or 0
    if rq.get("requeueAt") is not None:
        wl.requeue_at = parse_time(rq["requeueAt"], "status.requeueState.requeueAt")
    return wl


def read_check_states(status: dict[str, Any]) -> tuple[AdmissionCheckState, ...]:
    """A Workload status's ``admissionChecks``, sorted by name."""
    out: dict[str, AdmissionCheckState] = {}
    for i, raw in enumerate(_list(status.get("admissionChecks"), "status.admissionChecks")):
        fld = f"status.admissionChecks[{i}]"
        m = _map(raw, fld)
        name = _str(m.get("name"), f"{fld}.name")
        if not name or name in out:
            raise InputError(f"admission check name {name!r} is empty or repeated",
                             field=f"{fld}.name", expected="unique admission check names")
        changed = m.get("lastTransitionTime")
        out[name] = AdmissionCheckState(
            name, _enum(m.get("state"), f"{fld}.state", CHECK_STATES, CHECK_PENDING),
            _str(m.get("message"), f"{fld}.message"),
            None if changed is None else parse_time(changed, f"{fld}.lastTransitionTime"),
            _int(m.get("requeueAfterSeconds"), f"{fld}.requeueAfterSeconds"),
            _int(m.get("retryCount"), f"{fld}.retryCount", 0) or 0)
    return tuple(out[n] for n in sorted(out))


def _admission_check(doc: Document, docs: list[Document]) -> AdmissionCheck:
    spec = _map(doc.data.get("spec"), "spec")
    controller = _str(spec.get("controllerName"), "spec.controllerName")
    if not controller:
        raise doc.error("spec.controllerName is empty", field="spec.controllerName",
                        expected="the name of the controller that processes the check")
    check = AdmissionCheck(_name(doc), controller)
    if spec.get("parameters") is not None:
        p = _map(spec["parameters"], "spec.parameters")
        ref = ParametersRef(_str(p.get("apiGroup"), "spec.parameters.apiGroup"),
                            _str(p.get("kind"), "spec.parameters.kind"),
                            _str(p.get("name"), "spec.parameters.name"))
        check.parameters = ref
        # Parameters objects are cluster-scoped in Kueue; the first document that matches
        # group, kind and name is the one.
        check.parameters_object = next(
            (d.data for d in docs if d.kind == ref.kind and d.api_version.rpartition("/")[0]
             == ref.api_group and d.data.get("metadata", {}).get("name") == ref.name), None)
    active = _condition(_map(doc.data.get("status"), "status"), "Active")
    check.active = active is not None and active.get("status") == "True"
    if not check.active:
        check.inactive_message = str((active or {}).get("message") or "")
    return check


def _set_priority(wl: Workload, pc_name: object, source: object, value: object,
                  objs: KueueObjects, pcs: dict[str, int], name_field: str,
                  priority_field: str = "spec.priority") -> None:
    """A workload's priority: an explicit value, else its (Workload)PriorityClass's."""
    name = _str(pc_name, name_field)
    src = _str(source, "spec.priorityClassSource")
    wl.priority_class = name
    explicit = _int(value, priority_field)
    if explicit is not None:
        wl.priority = explicit
        return
    if not name:
        return
    if src == WORKLOAD_PRIORITY_CLASS_SOURCE or (not src and name in objs.priority_classes):
        if name not in objs.priority_classes:
            raise InputError(f"WorkloadPriorityClass {name!r} does not exist",
                             field=name_field,
                             expected="the name of a WorkloadPriorityClass in the manifests")
        wl.priority = objs.priority_classes[name]
        return
    if name not in pcs:
        raise InputError(f"PriorityClass {name!r} does not exist",
                         field=name_field,
                         expected="the name of a PriorityClass in the manifests")
    wl.priority = pcs[name]


def _pc_values(classes: list[PriorityClass]) -> dict[str, int]:
    return {pc.metadata.name: pc.value for pc in classes}


def _global_default(classes: list[PriorityClass]) -> int:
    for pc in classes:
        if pc.global_default:
            return pc.value
    return 0


def _job_workload(doc: Document, objs: KueueObjects, pcs: dict[str, int],
                  default_priority: int) -> Workload | None:
    meta = _map(doc.data.get("metadata"), "metadata")
    labels = _map(meta.get("labels"), "metadata.labels")
    queue = labels.get(QUEUE_LABEL)
    if not queue:
        return None
    spec = _map(doc.data.get("spec"), "spec")
    template = _map(spec.get("template"), "spec.template")
    pspec = _pod_spec(template.get("spec"), "spec.template.spec")
    parallelism = _int(spec.get("parallelism"), "spec.parallelism", 1)
    completions = _int(spec.get("completions"), "spec.completions")
    assert parallelism is not None
    count = parallelism if completions is None else min(parallelism, completions)
    annotations = _map(meta.get("annotations"), "metadata.annotations")
    min_count = None
    if JOB_MIN_PARALLELISM_ANNOTATION in annotations:
        raw = annotations[JOB_MIN_PARALLELISM_ANNOTATION]
        try:
            min_count = int(str(raw))
        except ValueError:
            raise doc.error(f"{raw!r} is not an integer",
                            field=f"metadata.annotations.{JOB_MIN_PARALLELISM_ANNOTATION}",
                            expected="an integer between 1 and parallelism") from None
        if not 0 < min_count <= count:
            raise doc.error(f"min parallelism {min_count} is outside 1..{count}",
                            field=f"metadata.annotations.{JOB_MIN_PARALLELISM_ANNOTATION}",
                            expected="an integer between 1 and parallelism")
    name = _name(doc)
    wl = Workload(namespace=_namespace(doc), name=f"job-{name}", queue_name=str(queue),
                  podsets=[PodSet("main", count,
                                  _podset_requests(pspec, "spec.template.spec"), min_count,
                                  pspec)],
                  uid=_str(meta.get("uid"), "metadata.uid"), source="Job")
    if meta.get("creationTimestamp") is not None:
        wl.creation_time = parse_time(meta["creationTimestamp"], "metadata.creationTimestamp")
    _priority_from_labels(wl, labels, pspec, objs, pcs, default_priority)
    return wl


def _priority_from_labels(wl: Workload, labels: dict[str, Any], pspec: PodSpec,
                          objs: KueueObjects, pcs: dict[str, int], default_priority: int) -> None:
    wpc = labels.get(PRIORITY_CLASS_LABEL)
    if wpc:
        _set_priority(wl, str(wpc), WORKLOAD_PRIORITY_CLASS_SOURCE, None, objs, pcs,
                      f"metadata.labels.{PRIORITY_CLASS_LABEL}")
        return
    if pspec.priority_class_name:
        _set_priority(wl, pspec.priority_class_name, POD_PRIORITY_CLASS_SOURCE, pspec.priority,
                      objs, pcs, "spec.priorityClassName")
        return
    wl.priority = pspec.priority if pspec.priority is not None else default_priority


def _signature(pod: Pod) -> str:
    """The pod's role: a hash of the fields that matter for admission and scheduling (KEP-976:
    non-Kueue labels, images, requests, node selection, tolerations, priority, spread,
    overhead)."""
    spec = pod.spec
    data = {"labels": sorted((k, v) for k, v in pod.metadata.labels.items()
                             if not k.startswith("kueue.x-k8s.io/")),
            "images": [c.image for c in (*spec.init_containers, *spec.containers)],
            "requests": sorted(pod_requests(pod).items()),
            "nodeSelector": sorted(spec.node_selector.items()),
            "tolerations": [msgspec.to_builtins(t) for t in spec.tolerations],
            "affinity": msgspec.to_builtins(spec.affinity) if spec.affinity else None,
            "priority": [spec.priority, spec.priority_class_name, spec.preemption_policy],
            "spread": [msgspec.to_builtins(t) for t in spec.topology_spread_constraints],
            "overhead": sorted(spec.overhead.items())}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]


def _plain_pod_workload(pod: Pod, objs: KueueObjects, pcs: dict[str, int],
                        default_priority: int) -> Workload:
    wl = Workload(namespace=pod.metadata.namespace, name=f"pod-{pod.metadata.name}",
                  queue_name=pod.metadata.labels[QUEUE_LABEL],
                  podsets=[PodSet("main", 1, dict(pod_requests(pod)), None, pod.spec)],
                  uid=pod.metadata.uid, source="Pod", pods={pod.key: "main"})
    if pod.metadata.creation_timestamp:
        wl.creation_time = parse_time(pod.metadata.creation_timestamp,
                                      "metadata.creationTimestamp")
    _priority_from_labels(wl, pod.metadata.labels, pod.spec, objs, pcs, default_priority)
    return wl


def created_pod_workload(pod: Pod, objs: KueueObjects,
                         classes: list[PriorityClass]) -> Workload | None:
    """The Workload Kueue's pod integration creates for a plain pod made after the manifests
    were read (a ReplicaSet's replacement, a scale-up); None when Kueue leaves the pod alone
    (no queue label, already bound, an unmanaged namespace, or a pod-group or native gang
    member)."""
    labels = pod.metadata.labels
    if QUEUE_LABEL not in labels or POD_GROUP_LABEL in labels or pod.spec.node_name or \
            pod.metadata.namespace in UNMANAGED_NAMESPACES or _joins_gang(pod, objs):
        return None
    return _plain_pod_workload(pod, objs, _pc_values(classes), _global_default(classes))


def _owned_by_workloads(manifests: Manifests) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of each Job and Pod a Workload in the input names as its owner:
    Kueue made that Workload for it (a cluster dump, such as ``kubeberth snapshot``, holds
    both), so the object is not turned into a second one."""
    owned: set[tuple[str, str, str]] = set()
    for doc in manifests.of_kind("Workload"):
        if not str(doc.data.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            continue
        meta = doc.data.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("kind") in ("Job", "Pod"):
                owned.add((str(ref["kind"]), _namespace(doc), str(ref.get("name"))))
    return owned


def _pod_workloads(manifests: Manifests, objs: KueueObjects, pcs: dict[str, int],
                   default_priority: int,
                   skipped: set[tuple[str, str, str]]) -> list[Workload]:
    """Plain pods (one Workload each) and pod groups (one Workload per complete group), as
    Kueue's pod integration builds them, except the pods a Workload of the input already
    stands for (``skipped``); incomplete groups are recorded, not queued. A group is named by
    the pod-group-name label or, following the "Bring your own podGroup" proposal (KEP-13150),
    by ``spec.schedulingGroup`` naming a native gang PodGroup."""
    out: list[Workload] = []
    groups: dict[tuple[str, str], list[Pod]] = {}
    native: dict[tuple[str, str], list[Pod]] = {}
    for pod in manifests.pods:
        labels = pod.metadata.labels
        if QUEUE_LABEL not in labels or pod.spec.node_name or \
                pod.metadata.namespace in UNMANAGED_NAMESPACES or \
                ("Pod", pod.metadata.namespace, pod.metadata.name) in skipped:
            continue
        group = labels.get(POD_GROUP_LABEL)
        joined = _scheduling_group(pod)
        if group and joined and joined != group:
            raise _pod_error(manifests, pod, f"the pod-group-name label says {group} but "
                             f"spec.schedulingGroup names PodGroup {joined}",
                             "spec.schedulingGroup.podGroupName",
                             "the same group name in both, or only one of them")
        if group:
            groups.setdefault((pod.metadata.namespace, group), []).append(pod)
            continue
        if _joins_gang(pod, objs):
            native.setdefault((pod.metadata.namespace, joined), []).append(pod)
            continue
        _located(manifests, pod, lambda p=pod: out.append(
            _plain_pod_workload(p, objs, pcs, default_priority)))
    for (ns, group), pods in sorted(groups.items()):
        first = pods[0]
        totals = {p.metadata.annotations.get(POD_GROUP_TOTAL_ANNOTATION) for p in pods}
        fld = f"metadata.annotations.{POD_GROUP_TOTAL_ANNOTATION}"
        raw_total = first.metadata.annotations.get(POD_GROUP_TOTAL_ANNOTATION)
        if raw_total is None:
            raise _pod_error(manifests, first, "the pod group has no total count", fld,
                             "the number of pods in the group, as a string")
        if len(totals) > 1:
            raise _pod_error(manifests, first,
                             f"the pods of group {group} disagree on the total count "
                             f"({', '.join(sorted(str(t) for t in totals))})", fld,
                             "the same total count on every pod of the group")
        try:
            total = int(raw_total)
        except ValueError:
            raise _pod_error(manifests, first, f"{raw_total!r} is not an integer", fld,
                             "the number of pods in the group") from None
        if total < len(pods):
            raise _pod_error(manifests, first,
                             f"the pod group {group} has {len(pods)} pods but a total count of "
                             f"{total}", fld, "a total count at least the number of pods in "
                             "the group")
        if total > len(pods):
            # Kueue builds the Workload only once every pod of the group exists.
            objs.incomplete_groups[f"{ns}/{group}"] = (
                f"waiting for {total - len(pods)} more pod(s) of group {group} "
                f"(total count {total})")
            continue
        out.append(_group_workload(manifests, ns, group, pods, objs, pcs, default_priority))
    for (ns, group), pods in sorted(native.items()):
        min_count = objs.native_groups.get(f"{ns}/{group}")
        if min_count is None:
            objs.incomplete_groups[f"{ns}/{group}"] = (
                f"waiting for PodGroup {group}: the pods' spec.schedulingGroup names it but it "
                "does not exist")
        elif len(pods) < min_count:
            objs.incomplete_groups[f"{ns}/{group}"] = (
                f"waiting for {min_count - len(pods)} more pod(s) of PodGroup {group} "
                f"(gang minCount {min_count})")
        else:
            out.append(_group_workload(manifests, ns, group, pods, objs, pcs, default_priority))
    return out


def serving_pod(pod: Pod, queue: str, owner_labels: dict[str, str]) -> Pod:
    """``pod`` as created from a queue-labelled Deployment's template after Kueue's Deployment
    webhook added the queue name, the managed label, the Deployment's workload priority class
    and the suspended-by-parent annotation to it: a plain pod for Kueue's pod integration."""
    labels = {**pod.metadata.labels, MANAGED_LABEL: "true", QUEUE_LABEL: queue}
    if owner_labels.get(PRIORITY_CLASS_LABEL):
        labels[PRIORITY_CLASS_LABEL] = owner_labels[PRIORITY_CLASS_LABEL]
    annotations = {**pod.metadata.annotations, SUSPENDED_BY_PARENT_ANNOTATION: "deployment"}
    meta = msgspec.structs.replace(pod.metadata, labels=labels, annotations=annotations)
    return msgspec.structs.replace(pod, metadata=meta)


def owner_document(manifests: Manifests, kind: str, namespace: str, name: str) -> Document:
    """The document of a workload controller that :func:`load_owners` read."""
    return next(d for d in manifests.of_kind(kind)
                if _name(d) == name and _namespace(d) == namespace)


def _serving_workloads(manifests: Manifests, objs: KueueObjects, pcs: dict[str, int],
                       default_priority: int) -> list[Workload]:
    """Kueue 0.19's serving integrations. A queue-labelled Deployment's pods are plain pods,
    one Workload each (its webhook puts the queue name on the pod template); the pods it
    would create are its ``replicas`` less those of the manifests with its template labels in
    its namespace (a cluster dump's, already labelled). A queue-labelled StatefulSet is one
    Workload, ``statefulset-<name>``, with one podSet ``main`` of ``replicas`` pods (Kueue's
    prebuilt pod-group Workload), admitted as a whole; with 0 replicas it has none."""
    out: list[Workload] = []
    for owner in load_owners(manifests, ("Deployment", "StatefulSet")):
        queue = owner.labels.get(QUEUE_LABEL)
        if not queue:
            continue
        doc = owner_document(manifests, owner.kind, owner.namespace, owner.name)
        if owner.kind == "Deployment":
            labels = owner.template.metadata.labels.items()
            have = sum(1 for p in manifests.pods if p.metadata.namespace == owner.namespace
                       and labels <= p.metadata.labels.items()
                       and p.status.phase not in ("Succeeded", "Failed"))
            for _ in range(owner.replicas - have):
                pod = serving_pod(owner.new_pod(), queue, owner.labels)
                with doc.located():
                    out.append(_plain_pod_workload(pod, objs, pcs, default_priority))
            continue
        if owner.replicas == 0:
            continue
        spec = owner.template.spec
        wl = Workload(namespace=owner.namespace, name=f"statefulset-{owner.name}",
                      queue_name=queue,
                      podsets=[PodSet("main", owner.replicas,
                                      _podset_requests(spec, "spec.template.spec"), None, spec)],
                      uid=owner.uid, source="StatefulSet")
        with doc.located():
            _priority_from_labels(wl, owner.labels, spec, objs, pcs, default_priority)
        out.append(wl)
    return out


def _scheduling_group(pod: Pod) -> str:
    """The native PodGroup the pod joins through ``spec.schedulingGroup``, or ``""``."""
    sg = pod.spec.scheduling_group
    return sg.pod_group_name if sg is not None and sg.pod_group_name else ""


def _joins_gang(pod: Pod, objs: KueueObjects) -> bool:
    """Whether the pod's ``spec.schedulingGroup`` names a gang PodGroup, or one that does not
    exist (yet): a basic group's pods are plain pods, as the proposal reads only gang
    minCount."""
    joined = _scheduling_group(pod)
    return bool(joined) and objs.native_groups.get(f"{pod.metadata.namespace}/{joined}", -1) != 0


def _group_workload(manifests: Manifests, ns: str, group: str, pods: list[Pod],
                    objs: KueueObjects, pcs: dict[str, int], default_priority: int) -> Workload:
    """A complete group's Workload, named after the group: one podSet per pod role."""
    first = pods[0]
    roles: dict[str, list[Pod]] = {}
    owned: dict[str, str] = {}
    for pod in pods:
        sig = _signature(pod)
        roles.setdefault(sig, []).append(pod)
        owned[pod.key] = sig
    podsets = []
    for sig, members in sorted(roles.items()):
        podsets.append(PodSet(sig, len(members), dict(pod_requests(members[0])), None,
                              members[0].spec))
    wl = Workload(namespace=ns, name=group, queue_name=first.metadata.labels[QUEUE_LABEL],
                  podsets=podsets, uid=first.metadata.uid, source="PodGroup", pods=owned)
    stamps = [parse_time(p.metadata.creation_timestamp, "metadata.creationTimestamp")
              for p in pods if p.metadata.creation_timestamp]
    if stamps:
        wl.creation_time = min(stamps)
    _located(manifests, first, lambda w=wl, p=first: _priority_from_labels(
        w, p.metadata.labels, p.spec, objs, pcs, default_priority))
    return wl


def _pod_error(manifests: Manifests, pod: Pod, message: str, fld: str,
               expected: str) -> InputError:
    doc = manifests.origin("Pod", pod.metadata.name, pod.metadata.namespace)
    err = InputError(message, field=fld, expected=expected)
    return doc.locate(err) if doc is not None else err


def _located(manifests: Manifests, pod: Pod, fn: Any) -> None:
    try:
        fn()
    except InputError as err:
        doc = manifests.origin("Pod", pod.metadata.name, pod.metadata.namespace)
        raise (doc.locate(err) if doc is not None else err) from None


def _configuration(doc: Document) -> KueueConfiguration:
    fs = _map(doc.data.get("fairSharing"), "fairSharing")
    strategies = tuple(_enum(s, f"fairSharing.preemptionStrategies[{i}]", FS_STRATEGIES, "")
                       for i, s in enumerate(_list(fs.get("preemptionStrategies"),
                                                   "fairSharing.preemptionStrategies")))
    if strategies and strategies not in (
            ("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",),
            ("LessThanOrEqualToFinalShare", "LessThanInitialShare")):
        raise InputError(f"unsupported strategy list {list(strategies)}",
                         field="fairSharing.preemptionStrategies",
                         expected="[LessThanOrEqualToFinalShare], [LessThanInitialShare] or "
                                  "[LessThanOrEqualToFinalShare, LessThanInitialShare]")
    w = _map(doc.data.get("waitForPodsReady"), "waitForPodsReady")
    rs = _map(w.get("requeuingStrategy"), "waitForPodsReady.requeuingStrategy")
    timeout = 300.0
    if w.get("timeout") is not None:
        timeout = _duration(w["timeout"], "waitForPodsReady.timeout")
    block = w.get("blockAdmission")
    if block is not None and not isinstance(block, bool):
        raise InputError(f"{block!r} is not a boolean", field="waitForPodsReady.blockAdmission",
                         expected="true or false")
    wfpr = WaitForPodsReady(
        enable=_section_enabled(doc, "waitForPodsReady"),
        timeout_seconds=timeout,
        block_admission=bool(block) if block is not None else False,
        requeuing=RequeuingStrategy(
            timestamp=_enum(rs.get("timestamp"), "waitForPodsReady.requeuingStrategy.timestamp",
                            ("Eviction", "Creation"), "Eviction"),
            backoff_limit_count=_int(rs.get("backoffLimitCount"),
                                     "waitForPodsReady.requeuingStrategy.backoffLimitCount"),
            backoff_base_seconds=_int(rs.get("backoffBaseSeconds"),
                                      "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
                                      60) or 60,
            backoff_max_seconds=_int(rs.get("backoffMaxSeconds"),
                                     "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
                                     3600) or 3600,
        ))
    gates = _map(doc.data.get("featureGates"), "featureGates")
    for gate, val in gates.items():
        if gate not in FEATURE_GATES:
            raise InputError(f"unsupported feature gate {gate!r}", field=f"featureGates.{gate}",
                             expected="one of " + ", ".join(FEATURE_GATES))
        if not isinstance(val, bool):
            raise InputError(f"{val!r} is not a boolean", field=f"featureGates.{gate}",
                             expected="true or false")
    return KueueConfiguration(
        partial_admission=gates.get("PartialAdmission", True) is not False,
        fair_sharing=_section_enabled(doc, "fairSharing"),
        preemption_strategies=strategies or ("LessThanOrEqualToFinalShare",
                                             "LessThanInitialShare"),
        wait_for_pods_ready=wfpr)


def _section_enabled(doc: Document, section: str) -> bool:
    """v1beta1 switches fairSharing and waitForPodsReady with ``enable``; v1beta2 dropped the
    field: the section being present turns the feature on."""
    data = _map(doc.data.get(section), section)
    if doc.api_version.endswith("v1beta2"):
        if "enable" in data:
            raise InputError(f"{section}.enable is not a v1beta2 field", field=f"{section}.enable",
                             expected=f"no enable field: in v1beta2 the {section} section "
                                      "itself enables the feature (or use v1beta1)")
        return section in doc.data
    enable = data.get("enable", False)
    if not isinstance(enable, bool):
        raise InputError(f"{enable!r} is not a boolean", field=f"{section}.enable",
                         expected="true or false")
    return enable


def _duration(value: object, fld: str) -> float:
    """A Go duration string such as 5m, 300s or 1h30m."""
    import re

    if not isinstance(value, str) or not value:
        raise InputError(f"{value!r} is not a duration", field=fld,
                         expected='a duration such as "300s", "5m" or "1h30m"')
    total = 0.0
    pos = 0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "ns": 1e-9}
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)", value):
        if m.start() != pos:
            break
        total += float(m[1]) * units[m[2]]
        pos = m.end()
    if pos != len(value):
        raise InputError(f"{value!r} is not a duration", field=fld,
                         expected='a duration such as "300s", "5m" or "1h30m"')
    return total


# kubeberth's bound, not Kueue's: the quota walks go up the tree once per level, and no real
# hierarchy comes near it.
MAX_COHORT_DEPTH = 100


def _check_cohort_cycles(objs: KueueObjects, docs: dict[str, Document]) -> None:
    """Cohorts form a forest no deeper than MAX_COHORT_DEPTH; each cohort is walked once."""
    depth: dict[str, int] = {}  # finished: levels from this cohort up to its root
    for start in sorted(objs.cohorts):
        path: list[str] = []
        on_path: set[str] = set()
        node = start
        while node in objs.cohorts and node not in depth:
            if node in on_path:
                cycle = [*path[path.index(node):], node]
                raise _cohort_error(docs.get(start), f"cohorts form a cycle: "
                                    f"{' -> '.join(cycle)}",
                                    "a tree of Cohorts (no Cohort is its own ancestor)")
            path.append(node)
            on_path.add(node)
            node = objs.cohorts[node].parent
        above = depth.get(node, 0)
        for i, name in enumerate(reversed(path)):
            depth[name] = above + i + 1
            if depth[name] > MAX_COHORT_DEPTH:
                raise _cohort_error(docs.get(name), f"Cohort {name} is {depth[name]} levels "
                                    "below its root", f"a Cohort tree at most {MAX_COHORT_DEPTH} "
                                    "levels deep")


def _cohort_error(doc: Document | None, message: str, expected: str) -> InputError:
    err = InputError(message, field="spec.parentName", expected=expected)
    return doc.locate(err) if doc is not None else err


def load_kueue(manifests: Manifests) -> KueueObjects:
    """Read every Kueue object (and queue-labelled Job/Pod) in ``manifests``."""
    objs = KueueObjects()
    objs.namespaces = {ns.metadata.name: dict(ns.metadata.labels) for ns in manifests.namespaces}
    pcs = _pc_values(manifests.priority_classes)
    default_priority = _global_default(manifests.priority_classes)
    docs = manifests.of_kind("WorkloadPriorityClass")
    for doc in docs:
        value = doc.data.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            raise doc.error(f"{value!r} is not an integer", field="value",
                            expected="an integer priority value")
        objs.priority_classes[_name(doc)] = value
    seen_configs: Document | None = None
    cohort_docs: dict[str, Document] = {}
    for doc in manifests.modelled():
        kind = doc.kind
        with doc.located():
            if kind == "ResourceFlavor":
                fl = _flavor(doc)
                _unique(objs.flavors, fl.name, doc)
                objs.flavors[fl.name] = fl
            elif kind == "ClusterQueue":
                cq = _cluster_queue(doc)
                _unique(objs.cluster_queues, cq.name, doc)
                objs.cluster_queues[cq.name] = cq
            elif kind == "Cohort":
                co = _cohort(doc)
                _unique(objs.cohorts, co.name, doc)
                objs.cohorts[co.name] = co
                cohort_docs[co.name] = doc
            elif kind == "AdmissionCheck":
                ac = _admission_check(doc, manifests.other)
                _unique(objs.admission_checks, ac.name, doc)
                objs.admission_checks[ac.name] = ac
            elif kind == "LocalQueue":
                lq = _local_queue(doc)
                key = f"{lq.namespace}/{lq.name}"
                _unique(objs.local_queues, key, doc)
                objs.local_queues[key] = lq
            elif kind == "Configuration":
                if seen_configs is not None:
                    raise doc.error("a second Kueue Configuration", field="kind",
                                    expected="at most one config.kueue.x-k8s.io Configuration")
                seen_configs = doc
                objs.config = _configuration(doc)
    if manifests.workload_api:
        api = load_workload_api(manifests)
        objs.native_groups = {key: g.min_count if g.gang else 0
                              for key, g in api.groups.items()}
    origins: dict[str, Document | None] = {}
    owned = _owned_by_workloads(manifests)
    for doc in manifests.modelled():
        with doc.located():
            wl: Workload | None = None
            if doc.kind == "Workload":
                wl = _workload(doc, objs, pcs)
            elif doc.kind == "Job" and ("Job", _namespace(doc), _name(doc)) not in owned:
                wl = _job_workload(doc, objs, pcs, default_priority)
        if wl is not None:
            _add_workload(objs, origins, wl, doc)
    for wl in _pod_workloads(manifests, objs, pcs, default_priority, owned):
        first = next(iter(wl.pods))
        ns, name = first.split("/", 1)
        _add_workload(objs, origins, wl, manifests.origin("Pod", name, ns))
    for wl in _serving_workloads(manifests, objs, pcs, default_priority):
        _add_workload(objs, origins, wl, None)
    _check_cohort_cycles(objs, cohort_docs)
    return objs


def _add_workload(objs: KueueObjects, origins: dict[str, Document | None], wl: Workload,
                  doc: Document | None) -> None:
    if wl.key in origins:
        first = next(w for w in objs.workloads if w.key == wl.key)
        err = InputError(f"Workload {wl.key} is defined twice (from a {first.source} and a "
                         f"{wl.source})", field="metadata.name",
                         expected="unique Workload names per namespace (Jobs become job-<name>, "
                                  "Pods pod-<name>, pod groups the group's name)")
        raise doc.locate(err) if doc is not None else err
    origins[wl.key] = doc
    objs.workloads.append(wl)


def _unique(existing: dict[str, Any], key: str, doc: Document) -> None:
    if key in existing:
        raise doc.error(f"{doc.kind} {key} is defined twice", field="metadata.name",
                        expected="unique names")
