"""The Kubernetes objects kubeberth reads, as typed msgspec Structs.

Only the fields scheduling, admission and descheduling look at are modelled; unknown fields in a
manifest are ignored, as a tolerant client would. Field names follow the Kubernetes JSON names
(camelCase on the wire, snake_case here) so a pasted manifest converts without a mapping table.
Quantities stay as written (``int | float | str``) until :mod:`kubeberth.api.resources` turns them
into milli-units, which keeps round-tripping a manifest lossless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kubeberth.api.quantity import enc_hook

# Readers that hold numbers (the openb CSV) put a quantity.Milli here: an int in milli-units.
QuantityValue = int | float | str
ResourceMap = dict[str, QuantityValue]


class _K8s(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base for every Kubernetes struct: camelCase names, defaults left out when encoding."""


class OwnerReference(_K8s):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_K8s):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    finalizers: list[str] = []


class _Object(_K8s):
    """Base for a top-level object. A subclass gives ``api_version`` and ``kind`` their
    defaults; redefined fields keep their place, so the wire order stays apiVersion, kind,
    metadata, spec."""

    api_version: str
    kind: str
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    @property
    def key(self) -> str:
        """``namespace/name`` (no namespace reads ``default``), the identity used in every report
        of a namespaced object."""
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


class NamespacedName:
    """Mixin for the records kubeberth derives from an object (a workload, a pod group, a pod's
    disruption view): ``key`` is ``namespace/name``, as in :attr:`_Object.key`."""

    __slots__ = ()
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class LabelSelectorRequirement(_K8s):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_K8s):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class NodeSelectorRequirement(_K8s):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_K8s):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_K8s):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_K8s):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_K8s):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class PodAffinityTerm(_K8s):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class WeightedPodAffinityTerm(_K8s):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_K8s):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_K8s):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(_K8s):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class Taint(_K8s):
    key: str
    effect: str
    value: str = ""
    time_added: str | None = None


class TopologySpreadConstraint(_K8s):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class ResourceClaimRef(_K8s):
    """A container's use of one of its pod's ``spec.resourceClaims`` (by name)."""

    name: str = ""
    request: str = ""


class ResourceRequirements(_K8s):
    requests: ResourceMap = {}
    limits: ResourceMap = {}
    claims: list[ResourceClaimRef] = []


class Container(_K8s):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None


class PodSchedulingGate(_K8s):
    name: str


class PodSchedulingGroup(_K8s):
    """``spec.schedulingGroup`` (Kubernetes 1.36): the native PodGroup the pod belongs to."""

    pod_group_name: str | None = None


class WorkloadReference(_K8s):
    """``spec.workloadRef`` (Kubernetes 1.35, scheduling.k8s.io/v1alpha1 Workloads)."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class PodSpec(_K8s):
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: ResourceMap = {}
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    scheduling_gates: list[PodSchedulingGate] = []
    restart_policy: str = "Always"
    termination_grace_period_seconds: int | None = None
    volumes: list[Volume] = []
    resource_claims: list[PodResourceClaim] = []
    scheduling_group: PodSchedulingGroup | None = None
    workload_ref: WorkloadReference | None = None


class PodCondition(_K8s):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class PodStatus(_K8s):
    phase: str = ""
    nominated_node_name: str = ""
    start_time: str | None = None
    conditions: list[PodCondition] = []
    reason: str = ""
    qos_class: str = ""
    container_statuses: list[ContainerStatus] = []
    init_container_statuses: list[ContainerStatus] = []
    ephemeral_container_statuses: list[ContainerStatus] = []


class Pod(_Object):
    api_version: str = "v1"
    kind: str = "Pod"
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class PodHolder:
    """The pod's name, namespace and labels for a record that wraps a ``pod`` (the scheduler's
    PodInfo, the descheduler's PodView): one definition of the empty namespace as ``default``."""

    __slots__ = ()
    pod: Pod

    @property
    def name(self) -> str:
        return self.pod.metadata.name

    @property
    def namespace(self) -> str:
        return self.pod.metadata.namespace or "default"

    @property
    def labels(self) -> dict[str, str]:
        return self.pod.metadata.labels


class NodeCondition(_K8s):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class NodeSpec(_K8s):
    unschedulable: bool = False
    taints: list[Taint] = []
    provider_id: str = ""


class NodeStatus(_K8s):
    capacity: ResourceMap = {}
    allocatable: ResourceMap = {}
    conditions: list[NodeCondition] = []


class Node(_Object):
    api_version: str = "v1"
    kind: str = "Node"
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def ready(self) -> bool:
        """A node without a Ready condition counts as ready, as in hand-written manifests."""
        for cond in self.status.conditions:
            if cond.type == "Ready":
                return cond.status == "True"
        return True


class PriorityClass(_Object):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    value: int = 0
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    description: str = ""


# The two classes every cluster has without a PriorityClass object (apiserver's SystemPriority*).
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000,
                           "system-node-critical": 2000001000}


def class_priority(name: str, classes: Mapping[str, PriorityClass]) -> int | None:
    """The value the Priority admission plugin derives from a ``priorityClassName``: the named
    class's (a system class's without an object), None when no such class exists; without a
    name, the global default class's, else 0. Pods and native PodGroups both resolve this way."""
    if name:
        pc = classes.get(name)
        if pc is not None:
            return pc.value
        return SYSTEM_PRIORITY_CLASSES.get(name)
    for pc in classes.values():
        if pc.global_default:
            return pc.value
    return 0


class Namespace(_Object):
    api_version: str = "v1"
    kind: str = "Namespace"


class PodDisruptionBudgetSpec(_K8s):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(_K8s):
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    disrupted_pods: dict[str, str] = {}


class PodDisruptionBudget(_Object):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


# ---- volumes, resource claims and container statuses (read by the descheduler) -------------
class PersistentVolumeClaimVolumeSource(_K8s):
    claim_name: str = ""
    read_only: bool = False


class Volume(_K8s):
    """A pod volume; only the source kinds that decide evictability are typed."""

    name: str = ""
    host_path: dict[str, Any] | None = None
    empty_dir: dict[str, Any] | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: dict[str, Any] | None = None


class PodResourceClaim(_K8s):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class ContainerStateWaiting(_K8s):
    reason: str = ""
    message: str = ""


class ContainerStateTerminated(_K8s):
    exit_code: int = 0
    reason: str = ""
    message: str = ""


class ContainerState(_K8s):
    waiting: ContainerStateWaiting | None = None
    running: dict[str, Any] | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(_K8s):
    name: str = ""
    restart_count: int = 0
    ready: bool = False
    state: ContainerState = msgspec.field(default_factory=ContainerState)


def to_dict(obj: msgspec.Struct) -> dict[str, Any]:
    """Encode a struct back to its Kubernetes JSON form (camelCase, defaults omitted)."""
    result: dict[str, Any] = msgspec.to_builtins(obj, enc_hook=enc_hook)
    return result
