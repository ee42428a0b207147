"""Kubernetes' native workload-aware scheduling objects: ``scheduling.k8s.io/v1beta1`` (1.37)
and ``v1alpha2`` (1.36) Workload (pod group templates) and PodGroup (one runtime group), and the
1.35 ``scheduling.k8s.io/v1alpha1`` Workload whose embedded pod groups pods joined through
``spec.workloadRef``.

v1beta1 is v1alpha2 with the PodGroup's template reference flattened
(``spec.workloadRef: {workloadName, templateName}`` for v1alpha2's
``spec.podGroupTemplateRef.workload: {workloadName, podGroupTemplateName}``) and some fields
added behind alpha or beta gates (preemptionPolicy, resourceClaims, composite groups); one
struct serves both versions, and the loader refuses the fields of the other version.

These are distinct from scheduler-plugins' ``scheduling.x-k8s.io`` PodGroup
(:mod:`kubeberth.api.scheduling_crds`), which Coscheduling reads: same kind name, another group.
Field names follow KEP-4671, KEP-5832, KEP-5732 and KEP-5710 so pasted YAML decodes as is.
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import _K8s, _Object

API_GROUP = "scheduling.k8s.io"
V1BETA1 = f"{API_GROUP}/v1beta1"
V1ALPHA2 = f"{API_GROUP}/v1alpha2"
V1ALPHA1 = f"{API_GROUP}/v1alpha1"


class Empty(_K8s):
    """A policy or mode whose presence is its whole meaning (``basic: {}``, ``all: {}``)."""


class GangSchedulingPolicy(_K8s):
    min_count: int = 0


class PodGroupSchedulingPolicy(_K8s):
    """Exactly one of ``basic`` or ``gang``."""

    basic: Empty | None = None
    gang: GangSchedulingPolicy | None = None


class TopologyConstraint(_K8s):
    key: str = ""


class PodGroupSchedulingConstraints(_K8s):
    topology: list[TopologyConstraint] = msgspec.field(default_factory=list)


class DisruptionMode(_K8s):
    """Exactly one of ``single`` or ``all`` (KEP-5710); unset means Single."""

    single: Empty | None = None
    all: Empty | None = None


class PodGroupResourceClaim(_K8s):
    """v1beta1 (DRAWorkloadResourceClaims): a claim the group's pods share."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupTemplate(_K8s):
    name: str = ""
    scheduling_policy: PodGroupSchedulingPolicy = msgspec.field(
        default_factory=PodGroupSchedulingPolicy)
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    disruption_mode: DisruptionMode | None = None
    resource_claims: list[PodGroupResourceClaim] | None = None  # v1beta1
    preemption_policy: str | None = None  # v1beta1 (PodGroupPreemptionPolicy)


class TypedLocalObjectReference(_K8s):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class WorkloadSpec(_K8s):
    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: list[PodGroupTemplate] = msgspec.field(default_factory=list)
    # v1beta1 (CompositePodGroup, alpha): read to be refused by name, never dropped.
    composite_pod_group_templates: list[dict[str, object]] | None = None


class Workload(_Object):
    api_version: str = V1ALPHA2
    kind: str = "Workload"
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


class WorkloadPodGroupTemplateReference(_K8s):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(_K8s):
    workload: WorkloadPodGroupTemplateReference | None = None


class WorkloadReference(_K8s):
    """v1beta1's ``spec.workloadRef``: the Workload and template a PodGroup was made from."""

    workload_name: str = ""
    template_name: str = ""


class PodGroupSpec(_K8s):
    pod_group_template_ref: PodGroupTemplateReference | None = None  # v1alpha2
    workload_ref: WorkloadReference | None = None  # v1beta1
    parent_composite_pod_group_name: str | None = None  # v1beta1 (CompositePodGroup)
    resource_claims: list[PodGroupResourceClaim] | None = None  # v1beta1
    preemption_policy: str | None = None  # v1beta1 (PodGroupPreemptionPolicy)
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    disruption_mode: DisruptionMode | None = None


class PodGroup(_Object):
    api_version: str = V1ALPHA2
    kind: str = "PodGroup"
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)


# ---- v1alpha1 (Kubernetes 1.35): pod groups embedded in the Workload --------------------------
class WorkloadPodGroupV1alpha1(_K8s):
    name: str = ""
    policy: PodGroupSchedulingPolicy = msgspec.field(default_factory=PodGroupSchedulingPolicy)


class WorkloadSpecV1alpha1(_K8s):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroupV1alpha1] = msgspec.field(default_factory=list)


class WorkloadV1alpha1(_Object):
    api_version: str = V1ALPHA1
    kind: str = "Workload"
    spec: WorkloadSpecV1alpha1 = msgspec.field(default_factory=WorkloadSpecV1alpha1)


__all__ = [
    "API_GROUP",
    "V1ALPHA1",
    "V1ALPHA2",
    "V1BETA1",
    "DisruptionMode",
    "Empty",
    "GangSchedulingPolicy",
    "PodGroup",
    "PodGroupResourceClaim",
    "PodGroupSchedulingConstraints",
    "PodGroupSchedulingPolicy",
    "PodGroupSpec",
    "PodGroupTemplate",
    "PodGroupTemplateReference",
    "TopologyConstraint",
    "TypedLocalObjectReference",
    "Workload",
    "WorkloadPodGroupTemplateReference",
    "WorkloadPodGroupV1alpha1",
    "WorkloadReference",
    "WorkloadSpec",
    "WorkloadSpecV1alpha1",
    "WorkloadV1alpha1",
]
