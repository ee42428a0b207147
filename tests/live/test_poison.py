"""Poison objects: every live controller skips an object it cannot read or judge, with one
Warning Event on it, and goes on; any other failure stops it with ``/readyz`` failing.

Poison is planted straight into the embedded server's store (behind its validation), since an
API server refuses what it cannot read; what is planted is what a real API can hold but
kubeberth cannot model: quantities past the state's int64 milli-units, a GPU share it cannot
model, a pod naming a PriorityClass deleted since, a PodGroup or ClusterQueue with a bad spec.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2 as httpx
from lightkube.resources.core_v1 import Node as KNode
from tests.live.harness import Live, bound, node, pod, wait_for, write
from tests.live.spillenv import (
    LOW,
    VK,
    descheduler,
    gpu_node,
    node_taints,
    spill_config,
    spill_controller,
    spilled,
    vk_node,
)
from tests.live.test_admission_e2e import KUEUE, Ctl, job
from tests.live.test_controller import Probe

from kubeberth.live.controller import FAILED_TO_DECODE, INVALID_OBJECT

GPU = "nvidia.com/gpu"


def poison_node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110",
                                       **allocatable}}}


def poison_pod(name: str, requests: dict[str, str], *, node_name: str = "",
               priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def warned(live: Live, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in live.events(reason) if e["type"] == "Warning"
            and e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


def refused(ctl: Any, kind: str, reason: str) -> float:
    value = ctl.metrics.registry.get_sample_value(
        "kubeberth_objects_refused_total", {"kind": kind, "reason": reason})
    return float(value or 0)


def test_the_scheduler_skips_poison_nodes_pods_and_pod_groups_and_binds_later_pods(
        live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 8)))
    ctl = live.scheduler()
    # Past int64 milli-units: once an OverflowError that killed the scheduler's thread.
    live.plant("nodes", poison_node("huge", **{GPU: "9223372036854775807"}))
    live.plant("nodes", poison_node("overflow", cpu="1e400"))
    live.plant("pods", poison_pod("share", {"kubeberth.io/gpu-milli": "1500"}))
    live.plant("pods", poison_pod("orphan", {"cpu": "1"}, priority_class="deleted-class"))
    live.plant("podgroups", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": "gang", "namespace": "default"},
                             "spec": {"minMember": -3}})
    live.kubectl("apply", "-f", "-", input=pod("later-0", 2) + pod("later-1", 2))
    wait_for(lambda: {"default/later-0", "default/later-1"} <= set(bound(live)),
             "the later pods to bind")
    assert bound(live) == {"default/later-0": "n1", "default/later-1": "n1"}
    for kind, name, reason in [("Node", "huge", FAILED_TO_DECODE),
                               ("Node", "overflow", FAILED_TO_DECODE),
                               ("Pod", "share", FAILED_TO_DECODE),
                               ("Pod", "orphan", INVALID_OBJECT),
                               ("PodGroup", "gang", FAILED_TO_DECODE)]:
        wait_for(lambda k=kind, n=name, r=reason: bool(warned(live, k, n, r)),
                 f"the {reason} event on {kind} {name}")
    [event] = warned(live, "Node", "huge", FAILED_TO_DECODE)
    assert "status.allocatable.nvidia.com/gpu" in event["message"]
    assert event["metadata"]["namespace"] == "default"  # cluster-scoped: upstream's namespace
    assert event["source"]["component"] == "default-scheduler"
    [event] = warned(live, "Pod", "orphan", INVALID_OBJECT)
    assert "deleted-class" in event["message"]
    assert ctl.error is None and ctl.ready() and not ctl.stop.is_set()
    assert refused(ctl, "Node", FAILED_TO_DECODE) == 2
    # An update that leaves a pod as bad says nothing new.
    srv = live.server
    assert srv is not None
    api = srv.api

    def touch() -> None:
        cur = api.store.must_get(api.pods, "default", "orphan")
        api.store.replace(api.pods, {**cur, "status": {"phase": "Pending"}}, cur)

    srv.call(touch)
    live.kubectl("apply", "-f", "-", input=pod("later-2", 2))
    wait_for(lambda: "default/later-2" in bound(live), "one more pod to bind")
    assert len(warned(live, "Pod", "orphan", INVALID_OBJECT)) == 1
    # A restarted scheduler lists the same poison, binds nothing twice, binds the next pod.
    live.stop_controller(ctl)
    again = live.scheduler()
    live.kubectl("apply", "-f", "-", input=pod("later-3", 1))
    wait_for(lambda: "default/later-3" in bound(live), "the pod after the restart")
    assert again.conflicts == 0 and again.error is None
    assert sum(n == "n1" for n in bound(live).values()) == 4


def test_a_pod_made_poison_by_an_update_is_forgotten(live: Live, tmp_path: Path) -> None:
    """The watch carries a valid pod, then a version kubeberth cannot read: the scheduler
    drops what it held, as a fresh list would leave the pod out."""
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4)))
    ctl = live.scheduler()
    live.kubectl("apply", "-f", "-", input=pod("big", 8))  # more GPUs than any node: pending
    wait_for(lambda: "default/big" in ctl.pods, "the scheduler to see the pod")
    srv = live.server
    assert srv is not None
    api = srv.api

    def spoil() -> None:
        cur = api.store.must_get(api.pods, "default", "big")
        meta = {**cur["metadata"], "annotations": {"kubeberth.io/gpu-index": "x"}}
        api.store.replace(api.pods, {**cur, "metadata": meta}, cur)

    srv.call(spoil)
    wait_for(lambda: "default/big" not in ctl.pods, "the scheduler to forget the pod")
    wait_for(lambda: bool(warned(live, "Pod", "big", FAILED_TO_DECODE)), "the Warning Event")
    assert ctl.error is None


def test_the_descheduler_leaves_poison_out_of_its_pass_and_still_evicts(
        live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    live.plant("pods", poison_pod("share", {"kubeberth.io/gpu-milli": "1500"},
                                  node_name="gpu-1"))
    # Bound, readable, but naming a PriorityClass that is gone: the pass cannot judge it
    # (it used to abandon every pass).
    live.plant("pods", poison_pod("orphan", {"cpu": "1"}, node_name="gpu-1",
                                  priority_class="deleted-class"))
    ctl = descheduler(live, tmp_path)
    wait_for(lambda: ctl.passes >= 2, "two passes")
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: sorted(o.pod for o in ctl.outcomes) == on_vk, "the VK pods' evictions")
    wait_for(lambda: bool(warned(live, "Pod", "orphan", INVALID_OBJECT)), "InvalidObject")
    wait_for(lambda: bool(warned(live, "Pod", "share", FAILED_TO_DECODE)), "FailedToDecode")
    assert refused(ctl, "Pod", INVALID_OBJECT) == 1  # once, not once per pass
    assert ctl.error is None and ctl.ready()
    assert ctl.metrics.registry.get_sample_value(
        "kubeberth_descheduler_passes_total", {"outcome": "error"}) is None


def test_the_spill_controller_reads_its_signal_without_poison_and_still_flips(
        live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node()))
    live.plant("nodes", poison_node("overflow", cpu="1e400", **{GPU: "8"}))
    live.plant("pods", poison_pod("share", {"kubeberth.io/gpu-milli": "1500"},
                                  node_name="gpu-1"))
    cfg = spill_config(tmp_path, threshold=2, stabilization=0.5)
    ctl = spill_controller(live, cfg)
    # 4 free GPUs on gpu-1 (the poison node's 8 are not counted): above the threshold.
    wait_for(lambda: LOW in node_taints(live, VK), "the taint to be added", timeout=20)
    assert [t.value for t in ctl.ticks if t.value is not None][-1] == 4
    wait_for(lambda: bool(warned(live, "Node", "overflow", FAILED_TO_DECODE)), "the Node event")
    wait_for(lambda: bool(warned(live, "Pod", "share", FAILED_TO_DECODE)), "the Pod event")
    assert ctl.error is None and ctl.ready()


BAD_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
    "metadata": {"name": "broken"},
    "spec": {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}]}]},
}


def test_admission_skips_a_bad_cluster_queue_and_admits_the_rest(
        live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "kueue.yaml", KUEUE + node("a100-0", 4, 64, "{gpu: a100}")))
    live.plant("clusterqueues", BAD_QUEUE)
    ctl = Ctl(live)
    try:
        adm = ctl.start()
        live.kubectl("apply", "-f", "-", input=job("train", "team-a", 2))
        srv = live.server
        assert srv is not None

        def admitted() -> bool:
            wls = srv.call(lambda: srv.api.store.kind_items("kueue.x-k8s.io", "Workload"))
            return any((w.get("status") or {}).get("admission") for w in wls)

        wait_for(admitted, "the Job's workload to be admitted")
        wait_for(lambda: bool(warned(live, "ClusterQueue", "broken", INVALID_OBJECT)),
                 "the InvalidObject event on the bad ClusterQueue")
        [event] = warned(live, "ClusterQueue", "broken", INVALID_OBJECT)
        assert "nominalQuota" in event["message"]
        assert event["source"]["component"] == "kueue-admission"
        assert adm.error is None and adm.ready()
    finally:
        ctl.close()


def test_an_unexpected_failure_stops_the_controller_and_fails_readyz(live: Live,
                                                                     tmp_path: Path) -> None:
    """Not poison but a bug (here, in the loop's handling of an event): the controller keeps
    the error, /readyz answers 503, the loop ends after its teardown."""
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))

    class Broken(Probe):
        def apply_event(self, kind: str, type_: str, data: Any) -> None:
            if type_ == "ADDED":
                raise KeyError("a bug")
            super().apply_event(kind, type_, data)

    ctl = Broken()
    ctl.client = live.client()
    ctl.watch("Node", KNode)
    health = ctl.serve("127.0.0.1", 0)
    ctl.start()
    try:
        wait_for(ctl.ready, "the probe to sync")
        assert httpx.get(f"{health.url}/readyz").status_code == 200
        live.kubectl("apply", "-f", "-", input=node("n2", 1))
        assert ctl.thread is not None
        ctl.thread.join(timeout=30)
        assert not ctl.thread.is_alive()
        assert isinstance(ctl.error, KeyError) and not ctl.ready() and ctl.closed == 1
        assert httpx.get(f"{health.url}/readyz").status_code != 200
    finally:
        ctl.shutdown()


def test_a_failing_informer_stops_its_controller(live: Live, tmp_path: Path) -> None:
    """An informer whose sink fails is no silent dead thread with a stale cache: the
    controller hears of it and stops with the error."""
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))
    ctl = Probe()
    ctl.client = live.client()
    inf = ctl.watch("Node", KNode)
    failures: list[str] = []

    def sink(kind: str, type_: str, data: Any) -> None:
        failures.append(type_)
        raise RuntimeError("sink bug")

    inf.sink = sink
    done = threading.Event()
    thread = threading.Thread(target=lambda: (ctl.run(), done.set()), daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and done.is_set()
    assert isinstance(ctl.error, RuntimeError) and failures == ["SYNC"]
    assert not inf.thread.is_alive()



BUGGY = '''
from typing import ClassVar

from kubeberth.scheduling.framework.interface import PreScorePlugin


class Buggy(PreScorePlugin):
    name: ClassVar[str] = "Buggy"
    NAME: ClassVar[str] = "Buggy"

    @classmethod
    def new(cls, args, handle):
        return cls()

    def pre_score(self, state, pod, snap, nodes):
        raise RuntimeError("a bug in a plugin")
'''

BUGGY_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preScore:
      enabled: [{name: Buggy}]
"""


def test_a_bug_makes_the_command_exit_non_zero(live: Live, tmp_path: Path) -> None:
    """Not poison but a bug (an out-of-tree plugin that raises): `kubeberth scheduler` stops,
    says why and exits 1, never 0."""
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4) + node("n2", 4)))
    write(tmp_path / "buggy.py", BUGGY)
    config = write(tmp_path / "config.yaml", BUGGY_CONFIG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeberth", "scheduler", "--kubeconfig", str(live.kubeconfig),
         "--config", str(config), "--plugin", "buggy:Buggy", "--metrics-port", "0",
         "--no-leader-elect"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)})
    try:
        live.kubectl("apply", "-f", "-", input=pod("victim", 1))
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, out
    assert "kubeberth scheduler stopped: the controller failed: RuntimeError('a bug in a " \
        "plugin')" in out
