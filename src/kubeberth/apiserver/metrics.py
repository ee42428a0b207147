"""A kube-state-metrics-compatible ``/metrics`` for the embedded cluster.

Controllers that decide from Prometheus (the spill controller's "free in-cluster GPUs" query)
are written against kube-state-metrics' series. Serving the same names, labels and units from
the store lets that PromQL run unchanged against a Prometheus scraping kubeberth. Each server
has its own registry, so several servers in one process (tests) do not mix their series.

Deviation: kube-state-metrics exports only allow-listed labels in ``kube_*_labels``; here every
label is exported (as with ``--metric-labels-allowlist=nodes=[*],pods=[*]``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample

from kubeberth.apiserver.quantities import value_or_none
from kubeberth.apiserver.store import Store

_log = logging.getLogger(__name__)

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")
_BYTES = ("memory", "ephemeral-storage")


def sanitize(name: str) -> str:
    """kube-state-metrics' label and resource name sanitising: invalid characters become _."""
    return _INVALID.sub("_", name)


def resource_unit(resource: str) -> tuple[str, str]:
    """(sanitized resource, unit) as kube-state-metrics labels them."""
    if resource == "cpu":
        return "cpu", "core"
    if resource in _BYTES or resource.startswith("hugepages-"):
        return sanitize(resource), "byte"
    return sanitize(resource), "integer"


def _value(raw: Any) -> float | None:
    """The sample value of a stored quantity; None (no sample) for one that is not a
    quantity the server would accept now (the server refuses them on write)."""
    value = value_or_none(raw)
    return float(value) if value is not None else None


def _each(objects: list[dict[str, Any]], add: Callable[[dict[str, Any]], None]) -> None:
    """``add`` every object's series; an object whose fields cannot be read is skipped and
    logged, so one stored object never fails the scrape for everyone."""
    for obj in objects:
        try:
            add(obj)
        except Exception:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            _log.exception("/metrics: skipped %s %r", obj.get("kind") if isinstance(
                obj, dict) else "object", (meta or {}).get("name"))


def _conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


class KubeStateCollector(Collector):
    """Builds the series from the store on every scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        yield from self._nodes()
        yield from self._pods()

    def _nodes(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("kube_node_info", "Information about a cluster node.",
                                 labels=["node", "kubelet_version", "provider_id",
                                         "internal_ip"])
        unsched = GaugeMetricFamily("kube_node_spec_unschedulable",
                                    "Whether a node can schedule new pods.", labels=["node"])
        taint = GaugeMetricFamily("kube_node_spec_taint", "The taint of a cluster node.",
                                  labels=["node", "key", "value", "effect"])
        cond = GaugeMetricFamily("kube_node_status_condition",
                                 "The condition of a cluster node.",
                                 labels=["node", "condition", "status"])
        alloc = GaugeMetricFamily("kube_node_status_allocatable",
                                  "The allocatable for different resources of a node that are "
                                  "available for scheduling.",
                                  labels=["node", "resource", "unit"])
        cap = GaugeMetricFamily("kube_node_status_capacity",
                                "The capacity for different resources of a node.",
                                labels=["node", "resource", "unit"])
        label_rows: list[tuple[dict[str, str], str]] = []

        def add_node(node: dict[str, Any]) -> None:
            name = node["metadata"]["name"]
            status, spec = node.get("status") or {}, node.get("spec") or {}
            info.add_metric([name, str((status.get("nodeInfo") or {}).get("kubeletVersion", "")),
                             str(spec.get("providerID", "")), ""], 1)
            label_rows.append(({f"label_{sanitize(k)}": str(v) for k, v in
                                (node["metadata"].get("labels") or {}).items()}, name))
            unsched.add_metric([name], 1.0 if spec.get("unschedulable") else 0.0)
            for t in spec.get("taints") or []:
                taint.add_metric([name, str(t.get("key", "")), str(t.get("value", "")),
                                  str(t.get("effect", ""))], 1)
            for c in _conditions(node):
                for st in ("true", "false", "unknown"):
                    cond.add_metric([name, str(c.get("type", "")), st],
                                    1.0 if str(c.get("status", "")).lower() == st else 0.0)
            for family, key in ((alloc, "allocatable"), (cap, "capacity")):
                for res, raw in sorted((status.get(key) or {}).items()):
                    value = _value(raw)
                    if value is not None:
                        family.add_metric([name, *resource_unit(res)], value)

        _each(self.store.kind_items("", "Node"), add_node)
        node_labels = _labels_family("kube_node_labels", "Kubernetes labels converted to "
                                     "Prometheus labels.", ["node"], label_rows)
        yield from (info, node_labels, unsched, taint, cond, alloc, cap)

    def _pods(self) -> Iterator[Metric]:
        ids = ["namespace", "pod", "uid"]
        info = GaugeMetricFamily("kube_pod_info", "Information about pod.",
                                 labels=[*ids, "host_ip", "pod_ip", "node", "created_by_kind",
                                         "created_by_name", "priority_class", "host_network"])
        phase = GaugeMetricFamily("kube_pod_status_phase", "The pods current phase.",
                                  labels=[*ids, "phase"])
        scheduled = GaugeMetricFamily("kube_pod_status_scheduled",
                                      "Describes the status of the scheduling process for the "
                                      "pod.", labels=[*ids, "condition"])
        owner = GaugeMetricFamily("kube_pod_owner", "Information about the Pod's owner.",
                                  labels=[*ids, "owner_kind", "owner_name",
                                          "owner_is_controller"])
        requests = GaugeMetricFamily("kube_pod_container_resource_requests",
                                     "The number of requested request resource by a container.",
                                     labels=[*ids, "container", "node", "resource", "unit"])
        limits = GaugeMetricFamily("kube_pod_container_resource_limits",
                                   "The number of requested limit resource by a container.",
                                   labels=[*ids, "container", "node", "resource", "unit"])
        label_rows: list[tuple[dict[str, str], str]] = []

        def add_pod(pod: dict[str, Any]) -> None:
            meta = pod["metadata"]
            key = [str(meta.get("namespace", "")), meta["name"], str(meta.get("uid", ""))]
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            node = str(spec.get("nodeName", ""))
            refs = meta.get("ownerReferences") or []
            ctrl = next((r for r in refs if r.get("controller")), None)
            info.add_metric([*key, str(status.get("hostIP", "")), str(status.get("podIP", "")),
                             node, str(ctrl.get("kind", "")) if ctrl else "",
                             str(ctrl.get("name", "")) if ctrl else "",
                             str(spec.get("priorityClassName", "")),
                             "true" if spec.get("hostNetwork") else "false"], 1)
            label_rows.append(({f"label_{sanitize(k)}": str(v) for k, v in
                                (meta.get("labels") or {}).items()}, "\x00".join(key)))
            current = status.get("phase") or ""
            for p in PHASES:
                phase.add_metric([*key, p], 1.0 if p == current else 0.0)
            for c in _conditions(pod):
                if c.get("type") == "PodScheduled":
                    for st in ("true", "false", "unknown"):
                        scheduled.add_metric([*key, st],
                                             1.0 if str(c.get("status")).lower() == st else 0.0)
            if not refs:
                owner.add_metric([*key, "<none>", "<none>", "<none>"], 1)
            for r in refs:
                owner.add_metric([*key, str(r.get("kind", "")), str(r.get("name", "")),
                                  "true" if r.get("controller") else "false"], 1)
            for c in spec.get("containers") or []:
                res = c.get("resources") or {}
                for family, field in ((requests, "requests"), (limits, "limits")):
                    for name, raw in sorted((res.get(field) or {}).items()):
                        value = _value(raw)
                        if value is not None:
                            family.add_metric([*key, str(c.get("name", "")), node,
                                               *resource_unit(name)], value)

        _each(self.store.kind_items("", "Pod"), add_pod)
        yield info
        yield _labels_family("kube_pod_labels", "Kubernetes labels converted to Prometheus "
                             "labels.", ids, label_rows)
        yield from (phase, scheduled, owner, requests, limits)


def _labels_family(name: str, doc: str, id_labels: list[str],
                   rows: list[tuple[dict[str, str], str]]) -> GaugeMetricFamily:
    """One series per object with its labels; label sets differ per object, so each sample
    names its own label keys."""
    family = GaugeMetricFamily(name, doc, labels=id_labels)
    for labels, key in rows:
        ids = dict(zip(id_labels, key.split("\x00"), strict=True))
        family.samples.append(Sample(name, {**ids, **labels}, 1.0, None, None))
    return family


def registry_for(store: Store) -> CollectorRegistry:
    """A registry holding only this store's kube-state-metrics collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KubeStateCollector(store))
    return registry
