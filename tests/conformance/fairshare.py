"""Harnesses for the conformance cases checked through package functions: CapacityScheduling's
PreFilter against a fixed quota snapshot and Volcano's proportion water-filling."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from kubeberth.api.objects import Pod
from kubeberth.api.resources import resource_map
from kubeberth.api.scheduling_crds import ElasticQuota
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.plugins.capacity_scheduling import CapacityScheduling
from kubeberth.scheduling.plugins.volcano_proportion import QueueAttr, water_fill
from kubeberth.scheduling.plugins.volcano_resource import from_milli
from kubeberth.state.cluster import ClusterState, make_pod_info


def _quantities(values: dict[str, Any]) -> dict[str, str]:
    return {k: f"{v}m" if k == "cpu" else str(v) for k, v in values.items()}


def capacity_pre_filter_codes(quotas: dict[str, Any], pods: list[dict[str, Any]]
                              ) -> dict[str, str]:
    """Each pod's CapacityScheduling PreFilter code against ``quotas`` (min, max, used)."""
    snap = ClusterState()
    for ns, q in quotas.items():
        eq = msgspec.convert({"metadata": {"name": "eq", "namespace": ns},
                              "spec": {"min": _quantities(q["min"]),
                                       "max": _quantities(q["max"])}}, ElasticQuota)
        snap.objects.elastic_quotas[ns] = eq
    plugin = CapacityScheduling(Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(0)))
    for ns, q in quotas.items():
        plugin.infos[ns].used = resource_map(_quantities(q.get("used") or {}), "used")
    codes: dict[str, str] = {}
    for doc in pods:
        pi = make_pod_info(msgspec.convert(doc, Pod))
        _, st = plugin.pre_filter(CycleState(), pi, snap)
        codes[pi.name] = st.code.label
    return codes


def proportion_deserved(total: dict[str, Any], queues: dict[str, Any]
                        ) -> tuple[dict[str, dict[str, float]], int]:
    """Deserved resources (Volcano units) per queue and the number of water-filling rounds."""
    attrs = [QueueAttr(name, q["weight"],
                       request=from_milli(resource_map(_quantities(q["request"]), "request")))
             for name, q in queues.items()]
    rounds = water_fill(from_milli(resource_map(_quantities(total), "total")), attrs)
    return {a.name: a.deserved for a in attrs}, rounds
