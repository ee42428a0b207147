"""Small manifests for the Volcano scheduler's tests, run through ``explain``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubeberth.config.manifests import load_manifests
from kubeberth.config.yamlsrc import Source
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.volcano.conf import VolcanoConf, parse_volcano_conf
from kubeberth.sim.explain import explain


def node(name: str, cpu: str, gpu: str = "0", pods: str = "200") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "1000Gi", "nvidia.com/gpu": gpu,
                                       "pods": pods}}}


def queue(name: str, weight: int = 1, capability: dict[str, str] | None = None,
          guarantee: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight}
    if capability:
        spec["capability"] = capability
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}


def vcjob(name: str, replicas: int, requests: dict[str, str], *, min_available: int = 1,
          queue_name: str = "default", priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano", "queue": queue_name, "minAvailable": min_available,
        "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox",
                            "resources": {"requests": requests}}]}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name}, "spec": spec}


CONF_DRF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def conf(text: str = CONF_DRF) -> VolcanoConf:
    return parse_volcano_conf(Source("test.conf", text))


def run(tmp_path: Path, objects: list[dict[str, Any]],
        conf_text: str = CONF_DRF) -> dict[str, Any]:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return explain(load_manifests([path]), load_scheduler_config(None), in_tree_registry(),
                   volcano_conf=conf(conf_text))


def placed(data: dict[str, Any], prefix: str) -> int:
    return sum(1 for p in data["pods"] if p["pod"].startswith(prefix)
               and p["result"] == "Scheduled")


def group(data: dict[str, Any], job: str) -> dict[str, Any]:
    for name, g in data["volcano"]["podGroups"].items():
        if name.startswith(f"default/{job}-"):
            return dict(g)
    raise KeyError(job)
