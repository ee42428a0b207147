"""``SpillConfig`` (``kubeberth.io/v1alpha1``): the virtual-kubelet spill node and the taint
controller that decides when work may spill to it.

A full GPU cluster spills work to an external provider exposed as one virtual-kubelet (VK)
node; a controller watching free in-cluster GPUs adds a taint to that node when the cluster
has room again, so the Descheduler can bring the work back. Both halves have knobs users tune
together (threshold, averaging window, stabilization, the node's size, price and start
latency), so they live in one small YAML kind of ours, decoded here with every error naming
file, line and field. CLI flags override single fields (see docs/spill.md). Nothing here
acts: the policy is in ``plugins/spill``, the simulated node in ``sim/spill.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.resources import resource_map
from kubeberth.config.yamlsrc import Document, convert, load_documents

API_VERSION = "kubeberth.io/v1alpha1"
KIND = "SpillConfig"
SOURCES = ("cluster", "prometheus")


class _Cfg(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """Base: camelCase names and unknown fields refused (a typo must not pass silently)."""


class Outage(_Cfg):
    start_seconds: float
    duration_seconds: float


class VirtualNode(_Cfg):
    name: str = "virtual-kubelet"
    labels: dict[str, str] = msgspec.field(default_factory=lambda: {
        "type": "virtual-kubelet", "kubernetes.io/role": "agent"})
    capacity: dict[str, int | float | str] = msgspec.field(default_factory=lambda: {
        "cpu": "10000", "memory": "100Ti", "nvidia.com/gpu": 1000, "pods": 10000})
    price_per_gpu_hour: float = 2.5
    start_latency_seconds: float = 120.0
    outages: list[Outage] = []
    # Upstream's default tolerationSeconds for node.kubernetes.io/unreachable:NoExecute: pods
    # on a node unreachable for this long are deleted by the taint manager.
    lost_after_seconds: float = 300.0


class ExcludePods(_Cfg):
    """Pods whose GPU requests do not count as used (e.g. the lowest-priority batch jobs)."""

    match_labels: dict[str, str] = {}
    priority_class_names: list[str] = []


class Signal(_Cfg):
    source: str = "cluster"
    url: str = ""
    query: str = ""  # empty: the generated production query
    timeout_seconds: float = 5.0


class Controller(_Cfg):
    interval_seconds: float = 30.0
    threshold: float = 4.0
    window_seconds: float = 300.0
    stabilization_seconds: float = 600.0
    max_signal_age_seconds: float = 120.0
    exclude_pods: ExcludePods = msgspec.field(default_factory=ExcludePods)
    signal: Signal = msgspec.field(default_factory=Signal)


class SpillConfig(_Cfg):
    api_version: str = API_VERSION
    kind: str = KIND
    virtual_node: VirtualNode = msgspec.field(default_factory=VirtualNode)
    controller: Controller = msgspec.field(default_factory=Controller)


def _finite(value: float, path: str, *, positive: bool = False) -> None:
    bad = not math.isfinite(value) or value < 0 or (positive and value == 0)
    if bad:
        what = "a positive" if positive else "a non-negative"
        raise InputError(f"{value!r} is not {what} finite number", field=path,
                         expected=f"{what} number")


def validate(cfg: SpillConfig) -> SpillConfig:
    """Check ranges and cross-field rules; errors name the field path."""
    vn = cfg.virtual_node
    if not vn.name:
        raise InputError("empty node name", field="virtualNode.name",
                         expected="a node name such as virtual-kubelet")
    resource_map(vn.capacity, "virtualNode.capacity")
    _finite(vn.price_per_gpu_hour, "virtualNode.pricePerGpuHour")
    _finite(vn.start_latency_seconds, "virtualNode.startLatencySeconds")
    _finite(vn.lost_after_seconds, "virtualNode.lostAfterSeconds")
    end = -1.0
    for i, o in enumerate(vn.outages):
        _finite(o.start_seconds, f"virtualNode.outages[{i}].startSeconds")
        _finite(o.duration_seconds, f"virtualNode.outages[{i}].durationSeconds", positive=True)
        if o.start_seconds < end:
            raise InputError("outages overlap or are out of order",
                             field=f"virtualNode.outages[{i}].startSeconds",
                             expected="outages sorted by start, each after the previous ends")
        end = o.start_seconds + o.duration_seconds
    c = cfg.controller
    _finite(c.interval_seconds, "controller.intervalSeconds", positive=True)
    _finite(c.threshold, "controller.threshold")
    _finite(c.window_seconds, "controller.windowSeconds", positive=True)
    _finite(c.stabilization_seconds, "controller.stabilizationSeconds")
    _finite(c.max_signal_age_seconds, "controller.maxSignalAgeSeconds", positive=True)
    if c.window_seconds < c.interval_seconds:
        raise InputError(f"window {c.window_seconds:g}s is shorter than the interval "
                         f"{c.interval_seconds:g}s", field="controller.windowSeconds",
                         expected="a window of at least one controller interval")
    s = c.signal
    if s.source not in SOURCES:
        raise InputError(f"unknown signal source {s.source!r}", field="controller.signal.source",
                         expected=" or ".join(SOURCES))
    if s.source == "prometheus" and not s.url.startswith(("http://", "https://")):
        raise InputError(f"url {s.url!r} is not an http(s) URL", field="controller.signal.url",
                         expected="the Prometheus base URL, such as http://prometheus:9090")
    _finite(s.timeout_seconds, "controller.signal.timeoutSeconds", positive=True)
    return cfg


def _from_document(doc: Document) -> SpillConfig:
    if doc.kind != KIND or doc.api_version != API_VERSION:
        raise doc.error(f"expected a {KIND}, found {doc.api_version or '?'} {doc.kind or '?'}",
                        field="kind", expected=f"apiVersion: {API_VERSION}, kind: {KIND}")
    cfg = convert(doc, SpillConfig)
    with doc.located():
        return validate(cfg)


def load_spill_config(path: str | Path | None) -> SpillConfig:
    """Read a SpillConfig file (exactly one document); ``None`` gives the defaults."""
    if path is None:
        return validate(SpillConfig())
    docs = load_documents(path)
    if len(docs) != 1:
        raise InputError(f"found {len(docs)} documents", source=str(path),
                         expected=f"exactly one {KIND} document")
    return _from_document(docs[0])


__all__ = ["API_VERSION", "KIND", "Controller", "ExcludePods", "Outage", "Signal",
           "SpillConfig", "VirtualNode", "load_spill_config", "validate"]
