"""Loading the batch-scheduling custom resources (PodGroup, ElasticQuota, Volcano Queue) from
manifests, validated with errors that name the file, line and field.

The manifest loader keeps these documents raw; this module decodes them for the gang,
capacity and fair-share plugins. It validates what the upstream CRD schemas and webhooks
refuse (negative minMember or timeouts, unparsable quantities, a Volcano queue weight below 1)
plus what would make a run ambiguous (two objects with one name, two ElasticQuotas in one
namespace, of which scheduler-plugins silently uses the first). It does not check that pods and
groups reference each other: a pod naming a missing PodGroup stays pending with upstream's
reason, as it would in a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeberth.api.objects import Pod, ResourceMap
from kubeberth.api.resources import resource_map
from kubeberth.api.scheduling_crds import ElasticQuota, PodGroup
from kubeberth.api.volcano import VolcanoQueue
from kubeberth.config.manifests import Manifests, convert_object, pod_timing
from kubeberth.config.volcano import convert_queue
from kubeberth.config.yamlsrc import Document


@dataclass(slots=True)
class CreatedPodGroup:
    """A PodGroup and when it was created on the simulated clock (its
    ``kubeberth.io/arrival-seconds`` annotation, default 0) and in what manifest order."""

    group: PodGroup
    created: float
    order: int


@dataclass(slots=True)
class SchedulingCrds:
    pod_groups: list[CreatedPodGroup] = field(default_factory=list)
    elastic_quotas: list[ElasticQuota] = field(default_factory=list)
    queues: list[VolcanoQueue] = field(default_factory=list)


def _quantities(doc: Document, values: ResourceMap | None, path: str) -> None:
    if values is None:
        return
    with doc.located():
        resource_map(values, path)


def _non_negative(doc: Document, value: int | None, path: str) -> None:
    if value is not None and value < 0:
        raise doc.error(f"{path.rsplit('.', 1)[-1]} is negative ({value})", field=path,
                        expected="an integer of 0 or more")


def load_scheduling_crds(m: Manifests) -> SchedulingCrds:
    """Decode and validate every PodGroup, ElasticQuota and Volcano Queue in ``m``."""
    out = SchedulingCrds()
    seen: dict[tuple[str, str, str], Document] = {}
    quota_ns: dict[str, Document] = {}
    for order, doc in enumerate(m.of_kind("PodGroup", "ElasticQuota", "Queue")):
        if doc.kind == "PodGroup":
            pg = convert_object(doc, PodGroup, namespaced=True)
            _non_negative(doc, pg.spec.min_member, "spec.minMember")
            _non_negative(doc, pg.spec.schedule_timeout_seconds, "spec.scheduleTimeoutSeconds")
            _quantities(doc, pg.spec.min_resources, "spec.minResources")
            with doc.located():
                # The pod annotation's rules apply: a PodGroup is created at its arrival time.
                created, _ = pod_timing(Pod(metadata=pg.metadata))
            key = ("PodGroup", pg.metadata.namespace, pg.metadata.name)
            out.pod_groups.append(CreatedPodGroup(pg, created, order))
        elif doc.kind == "ElasticQuota":
            eq = convert_object(doc, ElasticQuota, namespaced=True)
            _quantities(doc, eq.spec.min, "spec.min")
            _quantities(doc, eq.spec.max, "spec.max")
            ns = eq.metadata.namespace
            first = quota_ns.get(ns)
            if first is not None:
                raise doc.error(f"namespace {ns!r} has a second ElasticQuota",
                                field="metadata.namespace",
                                expected="one ElasticQuota per namespace, as CapacityScheduling "
                                f"supports (the first is at {_where(first)})")
            quota_ns[ns] = doc
            key = ("ElasticQuota", ns, eq.metadata.name)
            out.elastic_quotas.append(eq)
        else:
            q = convert_queue(doc)
            key = ("Queue", "", q.metadata.name)
            out.queues.append(q)
        first_doc = seen.get(key)
        if first_doc is not None:
            shown = f"{key[1]}/{key[2]}" if key[1] else key[2]
            raise doc.error(f"{key[0]} {shown} is defined twice", field="metadata.name",
                            expected=f"unique names (the first is at {_where(first_doc)})")
        seen[key] = doc
    return out


def _where(doc: Document) -> str:
    line = doc.line if doc.line is not None else doc.line_of("")
    return f"{doc.source.name}:{line}" if line is not None else doc.source.name


__all__ = ["CreatedPodGroup", "SchedulingCrds", "load_scheduling_crds"]
