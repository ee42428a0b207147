"""Loading native workload-aware scheduling objects (``scheduling.k8s.io``): 1.37's v1beta1 and
1.36's v1alpha2 Workloads and PodGroups, and 1.35's v1alpha1 Workloads, into
:class:`NativeGroup` records the scheduler reads.

A v1beta1 or v1alpha2 PodGroup is the scheduling unit; its pods name it in
``spec.schedulingGroup.podGroupName``. Fields of 1.37's alpha and beta gates that kubeberth does
not model (composite pod groups, a group's resourceClaims, preemptionPolicy Never) are refused by
name rather than dropped. A v1alpha1 Workload embedded its pod groups and pods joined one with
``spec.workloadRef`` (``name``, ``podGroup``, ``podGroupReplicaKey``). 1.36 replaced that with
templates and standalone PodGroups; we convert as that migration does: each embedded group
becomes a template, and each (workload, group, replica key) a PodGroup named
``<workload>-<group>`` (``-<replicaKey>`` appended when set) with the template's policy
(docs/gangs.md). Every error names the file, line and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubeberth.api.objects import NamespacedName, PodSpec, PriorityClass, class_priority
from kubeberth.api.workload_api import (
    V1ALPHA1,
    V1BETA1,
    DisruptionMode,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    Workload,
    WorkloadV1alpha1,
)
from kubeberth.config.manifests import Manifests, convert_object
from kubeberth.config.yamlsrc import Document

MAX_POD_GROUP_TEMPLATES = 8


@dataclass(frozen=True, slots=True)
class NativeGroup(NamespacedName):
    """One PodGroup as the scheduler reads it, its policy resolved."""

    namespace: str
    name: str
    # Gang policy: at least ``min_count`` pods bind together or none. Basic: min_count 1.
    gang: bool
    min_count: int
    topology_key: str = ""
    priority_class_name: str = ""
    # The group's priority as the Priority admission plugin resolves it (KEP-5710): scheduling
    # and preempting the group, and any member as a victim, use it rather than the pods' own.
    priority: int = 0
    disruption_mode: str = "Single"
    # "workload/template" when created from a Workload's template, else "".
    template: str = ""

    @property
    def policy(self) -> str:
        return "Gang" if self.gang else "Basic"


@dataclass(slots=True)
class WorkloadApi:
    """The PodGroups by ``namespace/name`` and the v1alpha1 groups pods may join by
    ``workloadRef``, keyed ``(namespace, workload, group)``."""

    groups: dict[str, NativeGroup] = field(default_factory=dict)
    v1alpha1: dict[tuple[str, str, str], NativeGroup] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    # The global default PriorityClass's value (0 without one): v1alpha1 groups carry no class.
    default_priority: int = 0

    def group_name(self, namespace: str, spec: PodSpec) -> str:
        """``namespace/name`` of the native PodGroup a pod joins, or ``""``."""
        sg = spec.scheduling_group
        if sg is not None and sg.pod_group_name:
            return f"{namespace}/{sg.pod_group_name}"
        ref = spec.workload_ref
        if ref is not None and ref.name:
            name = converted_name(ref.name, ref.pod_group, ref.pod_group_replica_key)
            return f"{namespace}/{name}"
        return ""

    def group_for(self, namespace: str, spec: PodSpec) -> NativeGroup | None:
        """The PodGroup a pod joins; a ``workloadRef`` pod's group is made from its v1alpha1
        Workload's embedded group. None when the pod joins none or its group does not exist."""
        key = self.group_name(namespace, spec)
        if not key:
            return None
        found = self.groups.get(key)
        if found is not None:
            return found
        ref = spec.workload_ref
        if ref is None or spec.scheduling_group is not None:
            return None
        template = self.v1alpha1.get((namespace, ref.name, ref.pod_group))
        if template is None:
            return None
        made = NativeGroup(namespace, key.split("/", 1)[1], template.gang, template.min_count,
                           priority=self.default_priority, template=template.template)
        self.groups[key] = made
        return made


def converted_name(workload: str, group: str, replica_key: str) -> str:
    """The PodGroup name a v1alpha1 ``workloadRef`` converts to (docs/gangs.md)."""
    name = f"{workload}-{group}"
    return f"{name}-{replica_key}" if replica_key else name


def _policy(doc: Document, policy: PodGroupSchedulingPolicy | None,
            path: str) -> tuple[bool, int]:
    if policy is None or (policy.basic is None) == (policy.gang is None):
        raise doc.error("the scheduling policy must set exactly one of basic or gang",
                        field=path, expected="basic: {} or gang: {minCount: N}")
    if policy.gang is None:
        return False, 1
    if policy.gang.min_count < 1:
        raise doc.error(f"gang minCount is {policy.gang.min_count}", field=f"{path}.gang.minCount",
                        expected="a positive integer")
    return True, policy.gang.min_count


def _topology(doc: Document, constraints: PodGroupSchedulingConstraints | None,
              path: str) -> str:
    if constraints is None or not constraints.topology:
        return ""
    if len(constraints.topology) > 1:
        raise doc.error(f"{len(constraints.topology)} topology constraints",
                        field=f"{path}.topology",
                        expected="at most one topology constraint, as Kubernetes 1.37 accepts")
    key = constraints.topology[0].key
    if not key:
        raise doc.error("the topology constraint has no key", field=f"{path}.topology[0].key",
                        expected="a node label key such as topology.kubernetes.io/rack")
    return key


def _disruption(doc: Document, mode: DisruptionMode | None, path: str) -> str:
    if mode is None:
        return "Single"
    if (mode.single is None) == (mode.all is None):
        raise doc.error("disruptionMode must set exactly one of single or all", field=path,
                        expected="single: {} or all: {}")
    return "All" if mode.all is not None else "Single"


def _priority(doc: Document, name: str | None, explicit: int | None,
              classes: Mapping[str, PriorityClass], path: str) -> int:
    """The group's priority as 1.37's Priority admission plugin resolves it: its class's value,
    else the global default class's, else 0. A ``priority`` already set (an admitted object
    carries both) must be that value."""
    value = class_priority(name or "", classes)
    if value is None:
        raise doc.error(f"no PriorityClass with name {name} was found",
                        field=f"{path}.priorityClassName",
                        expected="the name of a PriorityClass in the manifests, "
                                 "system-cluster-critical or system-node-critical")
    if explicit is not None and explicit != value:
        raise doc.error(f"priority set in the pod group ({explicit}) must match the priority "
                        f"computed ({value}) based on the priority class set in the spec",
                        field=f"{path}.priority",
                        expected="no priority (admission fills it in), or the class's value")
    return value


def _unmodelled(doc: Document, path: str, claims: list[PodGroupResourceClaim] | None,
                preemption: str | None) -> None:
    """A 1.37 gated field kubeberth does not model yet is refused, never dropped."""
    if claims:
        raise doc.error("a pod group's resourceClaims (DRAWorkloadResourceClaims) are not "
                        "modelled yet", field=f"{path}.resourceClaims",
                        expected="claims on the pods themselves (docs/dra.md)")
    if preemption not in (None, "PreemptLowerPriority", "Never"):
        raise doc.error(f"preemptionPolicy {preemption!r}", field=f"{path}.preemptionPolicy",
                        expected="PreemptLowerPriority or Never")
    if preemption == "Never":
        raise doc.error("preemptionPolicy Never on a pod group (PodGroupPreemptionPolicy) is "
                        "not modelled yet", field=f"{path}.preemptionPolicy",
                        expected="PreemptLowerPriority, or no preemptionPolicy")


def _template_of(doc: Document, spec: PodGroupSpec) -> str:
    """``workload/template`` from the version's own reference field; the other version's
    field is an error, as the API server would not know it."""
    v1beta1 = doc.api_version == V1BETA1
    theirs, ours = (("podGroupTemplateRef", "workloadRef") if v1beta1
                    else ("workloadRef", "podGroupTemplateRef"))
    if (spec.pod_group_template_ref if v1beta1 else spec.workload_ref) is not None:
        raise doc.error(f"{doc.api_version} PodGroup has no field {theirs}",
                        field=f"spec.{theirs}", expected=f"spec.{ours}")
    if v1beta1:
        if spec.parent_composite_pod_group_name:
            raise doc.error("composite pod groups (CompositePodGroup, alpha in 1.37) are not "
                            "modelled yet", field="spec.parentCompositePodGroupName",
                            expected="a root PodGroup (no parent)")
        _unmodelled(doc, "spec", spec.resource_claims, spec.preemption_policy)
        ref = spec.workload_ref
        return f"{ref.workload_name}/{ref.template_name}" if ref is not None else ""
    for name, value in (("resourceClaims", spec.resource_claims),
                        ("preemptionPolicy", spec.preemption_policy),
                        ("parentCompositePodGroupName", spec.parent_composite_pod_group_name)):
        if value is not None:
            raise doc.error(f"{doc.api_version} PodGroup has no field {name}",
                            field=f"spec.{name}", expected=f"apiVersion: {V1BETA1}")
    old = spec.pod_group_template_ref
    if old is None or old.workload is None:
        return ""
    return f"{old.workload.workload_name}/{old.workload.pod_group_template_name}"


def load_workload_api(m: Manifests) -> WorkloadApi:
    """Decode and validate every scheduling.k8s.io Workload and PodGroup in ``m``."""
    classes = {pc.metadata.name: pc for pc in m.priority_classes}
    out = WorkloadApi(default_priority=class_priority("", classes) or 0)
    seen: dict[tuple[str, str, str], Document] = {}
    for doc in m.workload_api:
        if doc.kind == "Workload" and doc.api_version == V1ALPHA1:
            wl1 = convert_object(doc, WorkloadV1alpha1, namespaced=True)
            key = ("Workload", wl1.metadata.namespace, wl1.metadata.name)
            names: set[str] = set()
            for i, pg in enumerate(wl1.spec.pod_groups):
                path = f"spec.podGroups[{i}]"
                _name(doc, pg.name, names, path)
                gang, min_count = _policy(doc, pg.policy, f"{path}.policy")
                out.v1alpha1[(wl1.metadata.namespace, wl1.metadata.name, pg.name)] = \
                    NativeGroup(wl1.metadata.namespace, pg.name, gang, min_count,
                                template=f"{wl1.metadata.name}/{pg.name}")
        elif doc.kind == "Workload":
            wl = convert_object(doc, Workload, namespaced=True)
            key = ("Workload", wl.metadata.namespace, wl.metadata.name)
            templates = wl.spec.pod_group_templates
            if wl.spec.composite_pod_group_templates:
                raise doc.error("composite pod groups (CompositePodGroup, alpha in 1.37) are not "
                                "modelled yet", field="spec.compositePodGroupTemplates",
                                expected="spec.podGroupTemplates")
            if len(templates) > MAX_POD_GROUP_TEMPLATES:
                raise doc.error(f"{len(templates)} podGroupTemplates",
                                field="spec.podGroupTemplates",
                                expected=f"at most {MAX_POD_GROUP_TEMPLATES}")
            names = set()
            for i, t in enumerate(templates):
                path = f"spec.podGroupTemplates[{i}]"
                _name(doc, t.name, names, path)
                _policy(doc, t.scheduling_policy, f"{path}.schedulingPolicy")
                _topology(doc, t.scheduling_constraints, f"{path}.schedulingConstraints")
                _disruption(doc, t.disruption_mode, f"{path}.disruptionMode")
                _priority(doc, t.priority_class_name, t.priority, classes, path)
                if doc.api_version == V1BETA1:
                    _unmodelled(doc, path, t.resource_claims, t.preemption_policy)
                elif t.resource_claims is not None or t.preemption_policy is not None:
                    raise doc.error(f"{doc.api_version} templates have no resourceClaims or "
                                    "preemptionPolicy", field=path,
                                    expected=f"apiVersion: {V1BETA1}")
            out.workloads[f"{wl.metadata.namespace}/{wl.metadata.name}"] = wl
        else:
            pg2 = convert_object(doc, PodGroup, namespaced=True)
            key = ("PodGroup", pg2.metadata.namespace, pg2.metadata.name)
            spec = pg2.spec
            gang, min_count = _policy(doc, spec.scheduling_policy, "spec.schedulingPolicy")
            template = _template_of(doc, spec)
            group = NativeGroup(
                pg2.metadata.namespace, pg2.metadata.name, gang, min_count,
                topology_key=_topology(doc, spec.scheduling_constraints,
                                       "spec.schedulingConstraints"),
                priority_class_name=spec.priority_class_name or "",
                priority=_priority(doc, spec.priority_class_name, spec.priority, classes, "spec"),
                disruption_mode=_disruption(doc, spec.disruption_mode, "spec.disruptionMode"),
                template=template)
            out.groups[group.key] = group
        first = seen.get(key)
        if first is not None:
            shown = f"{key[1]}/{key[2]}"
            raise doc.error(f"scheduling.k8s.io {key[0]} {shown} is defined twice",
                            field="metadata.name", expected="unique names")
        seen[key] = doc
    return out


def _name(doc: Document, name: str, names: set[str], path: str) -> None:
    if not name:
        raise doc.error("the pod group has no name", field=f"{path}.name",
                        expected="a DNS label")
    if name in names:
        raise doc.error(f"pod group {name!r} is listed twice", field=f"{path}.name",
                        expected="unique names within the Workload")
    names.add(name)


__all__ = ["NativeGroup", "WorkloadApi", "converted_name", "load_workload_api"]
