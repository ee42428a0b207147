"""What the periodic controllers read from their caches, without a server: the descheduler's
Snapshot (typed objects, owners' scale for PDBs, objects the loader refuses left out), the
API-computed free-GPU signal (only Running pods, only eligible nodes, exclusions, a broken
watch is a fault) and the eviction counter's two upstream names."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from tests.live.spillenv import spill_config

from kubeberth.api.errors import InputError
from kubeberth.api.times import parse_time
from kubeberth.live.cache import TYPED_KINDS, Store, decode
from kubeberth.live.descheduler import DeschedulerMetrics, snapshot_of
from kubeberth.live.informer import SYNC
from kubeberth.live.spill import API_RESOURCES, ApiSignal
from kubeberth.spill.config import ExcludePods

NOW = 1_800_000_000.0


def _node(name: str, gpus: int, *, cordoned: bool = False, ready: bool = True) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def _pod(name: str, node: str, gpus: int, phase: str = "Running",
         labels: dict[str, str] | None = None,
         owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {},
                            "creationTimestamp": "2027-01-15T08:00:00Z"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                    "name": owner[1], "uid": "u", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "m", "image": "x", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                "limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def _typed(objects: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    """What the informers hand the descheduler: typed objects (the refused left out, as an
    informer leaves them out) and the owner kinds as dicts."""
    out: dict[str, list[Any]] = {}
    for kind, items in objects.items():
        out[kind] = []
        for item in items:
            if kind not in TYPED_KINDS:
                out[kind].append({**item, "kind": kind})
                continue
            with contextlib.suppress(InputError):
                out[kind].append(decode(item))
    return out


def test_descheduler_snapshot_reads_owners_scale_and_skips_bad_objects() -> None:
    objects = {
        "Node": [_node("a", 4), _node("b", 4)],
        "Pod": [_pod("web-1", "a", 1, owner=("ReplicaSet", "web-abc")),
                _pod("web-2", "b", 1, owner=("ReplicaSet", "web-abc")),
                {**_pod("broken", "a", 1), "spec": {"nodeName": "a", "containers": [
                    {"name": "m", "image": "x", "resources": {"requests": {"cpu": "1x"}}}]}}],
        "Deployment": [{"apiVersion": "apps/v1", "metadata": {"name": "web",
                                                              "namespace": "default"},
                        "spec": {"replicas": 5}}],
        "ReplicaSet": [{"apiVersion": "apps/v1", "metadata": {
            "name": "web-abc", "namespace": "default",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]},
            "spec": {"replicas": 5}}],
        "Job": [{"apiVersion": "batch/v1", "metadata": {"name": "etl", "namespace": "default"},
                 "spec": {"parallelism": 3}}],
    }
    snap = snapshot_of(_typed(objects), NOW)
    assert [p.key for p in snap.pods] == ["default/web-1", "default/web-2"]
    assert [n.metadata.name for n in snap.nodes] == ["a", "b"]
    assert snap.owner_replicas == {("Deployment", "default", "web"): 5,
                                   ("ReplicaSet", "default", "web-abc"): 5,
                                   ("Job", "default", "etl"): 3}
    assert snap.now == NOW
    assert snap.all_pods_on_node("a")[0].created == parse_time("2027-01-15T08:00:00Z")


def _classy(node: str) -> dict[str, Any]:
    """A Running pod naming a PriorityClass nobody defined (and no spec.priority)."""
    pod = _pod("classy", node, 1)
    pod["spec"]["priorityClassName"] = "nowhere"
    return pod


def _cache(objects: dict[str, list[dict[str, Any]]]) -> Store:
    cache = Store(API_RESOURCES)
    for kind, items in _typed(objects).items():
        cache.apply(kind, SYNC, {o.key if kind == "Pod" else o.metadata.name: o for o in items})
    return cache


def _event(cache: Store, type_: str, pod: dict[str, Any]) -> None:
    typed = decode(pod)
    cache.apply("Pod", type_, (typed.key, None if type_ == "DELETED" else typed))


def _no_refusal(kind: str, key: str, _obj: object, err: Exception, _reason: str) -> None:
    raise AssertionError(f"{kind} {key} refused: {err}")


def test_api_signal_counts_running_pods_on_eligible_nodes(tmp_path: Path) -> None:
    cache = _cache({
        "Node": [_node("gpu-1", 4), _node("gpu-2", 4, cordoned=True),
                 _node("gpu-3", 2, ready=False), _node("virtual-kubelet", 1000)],
        "Pod": [_pod("run", "gpu-1", 1), _pod("starting", "gpu-1", 1, phase="Pending"),
                _pod("done", "gpu-1", 1, phase="Succeeded"),
                _pod("batch", "gpu-1", 1, labels={"tier": "batch"}),
                _pod("cordoned", "gpu-2", 2), _pod("vk", "virtual-kubelet", 8),
                _classy("gpu-3")]})
    cfg = spill_config(tmp_path)
    assert ApiSignal(cache, list, cfg, _no_refusal).read(NOW).value == 2.0  # 4 - run - batch
    cfg.controller.exclude_pods = ExcludePods(match_labels={"tier": "batch"})
    reading = ApiSignal(cache, list, cfg, _no_refusal).read(NOW)
    assert (reading.value, reading.at, reading.fault) == (3.0, NOW, "")
    # A deletion and a new Running pod arrive through the watch.
    _event(cache, "DELETED", _pod("run", "gpu-1", 1))
    _event(cache, "ADDED", _pod("new", "gpu-1", 3))
    assert ApiSignal(cache, list, cfg, _no_refusal).read(NOW).value == 1.0
    _event(cache, "MODIFIED", _classy("gpu-1"))  # moved to a counted node: it counts
    assert ApiSignal(cache, list, cfg, _no_refusal).read(NOW).value == 0.0


def test_a_broken_watch_is_a_fault(tmp_path: Path) -> None:
    cache = _cache({"Node": [_node("gpu-1", 4)], "Pod": []})
    reading = ApiSignal(cache, lambda: ["Pod"], spill_config(tmp_path), _no_refusal).read(NOW)
    assert reading.value is None
    assert reading.fault == "signal from the API is stale: the watch of Pod is down"


def test_eviction_counter_has_both_upstream_names() -> None:
    m = DeschedulerMetrics()
    for result in ("success", "success", "error"):
        m.evicted.inc(result=result, strategy="PodLifeTime", profile="p", namespace="ns",
                      node="n1")
    text = m.exposition().decode()
    labels = 'namespace="ns",node="n1",profile="p",result="success",strategy="PodLifeTime"'
    assert f"descheduler_pods_evicted{{{labels}}} 2.0" in text
    assert f"descheduler_pods_evicted_total{{{labels}}} 2.0" in text
    assert f"descheduler_pods_evicted{{{labels.replace('success', 'error')}}} 1.0" in text
    assert "descheduler_loop_duration_seconds_bucket" in text
