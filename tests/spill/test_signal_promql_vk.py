"""The free-GPU signal from a snapshot, the production query text, and the VK node model."""

from __future__ import annotations

import msgspec
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, ObjectMeta, Pod, PriorityClass
from kubeberth.spill.config import ExcludePods, SpillConfig, VirtualNode, validate
from kubeberth.spill.promql import free_gpu_query, ksm_label_name
from kubeberth.spill.signal import ClusterSignal
from kubeberth.spill.vk import (
    LOW_GPU_TAINT,
    VK_TAINT,
    has_taint,
    virtual_node,
    with_ready,
    with_taint,
    without_taint,
)
from kubeberth.state.cluster import ClusterState, make_pod_info


def node(name: str, gpus: int, *, ready: bool = True, unschedulable: bool = False) -> Node:
    return msgspec.convert({
        "metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": gpus},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }, Node)


def gpu_pod(name: str, gpus: int, *, labels: dict[str, str] | None = None,
            priority_class: str = "", bound: bool = True) -> Pod:
    return msgspec.convert({
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"priorityClassName": priority_class, "nodeName": "x" if bound else "",
                 "containers": [{"resources": {"requests": {"nvidia.com/gpu": gpus},
                                               "limits": {"nvidia.com/gpu": gpus}}}]},
    }, Pod)


def state() -> ClusterState:
    snap = ClusterState()
    for n in (node("a", 8), node("b", 8), node("down", 8, ready=False),
              node("cordoned", 8, unschedulable=True)):
        snap.add_node(n)
    snap.add_node(virtual_node(VirtualNode()))
    return snap


LOW = PriorityClass(metadata=ObjectMeta(name="low"), value=1)


def place(snap: ClusterState, pod: Pod, node_name: str) -> None:
    snap.add_pod(make_pod_info(pod, {"low": LOW}), snap.node_index[node_name])


def test_free_gpus_counts_ready_schedulable_in_cluster_nodes() -> None:
    snap = state()
    place(snap, gpu_pod("p1", 3), "a")
    place(snap, gpu_pod("p2", 2), "down")  # on a node that does not count
    place(snap, gpu_pod("p3", 50), "virtual-kubelet")
    sig = ClusterSignal(["virtual-kubelet"], ExcludePods())
    assert sig.read(snap, 5.0).value == 16 - 3


def test_excluded_pods_and_unbound_pods_do_not_count() -> None:
    snap = state()
    place(snap, gpu_pod("batch", 4, labels={"tier": "batch"}), "a")
    place(snap, gpu_pod("low", 2, priority_class="low"), "a")
    place(snap, gpu_pod("assumed", 1, bound=False), "b")
    place(snap, gpu_pod("serving", 1), "b")
    excl = ExcludePods(match_labels={"tier": "batch"}, priority_class_names=["low"])
    assert ClusterSignal(["virtual-kubelet"], excl).read(snap, 0).value == 15
    assert ClusterSignal(["virtual-kubelet"], ExcludePods()).read(snap, 0).value == 9


def test_floored_at_zero() -> None:
    snap = ClusterState()
    snap.add_node(node("a", 2))
    place(snap, gpu_pod("big", 2), "a")
    snap.update_node(node("a", 1))  # allocatable shrank below what is requested
    assert ClusterSignal([], ExcludePods()).read(snap, 0).value == 0.0


def test_query_uses_kube_state_metrics_series() -> None:
    q = free_gpu_query(["virtual-kubelet"], ExcludePods())
    for series in ('kube_node_status_allocatable{resource="nvidia_com_gpu"',
                   "kube_node_spec_unschedulable == 0",
                   'kube_node_status_condition{condition="Ready",status="true"} == 1',
                   'kube_pod_container_resource_requests{resource="nvidia_com_gpu"',
                   'kube_pod_status_phase{phase="Running"} == 1', "clamp_min(", "or vector(0)"):
        assert series in q
    assert 'node!~"virtual-kubelet"' in q
    assert "kube_pod_labels" not in q and "kube_pod_info" not in q


def test_query_exclusions() -> None:
    q = free_gpu_query(["vk.a", "vk-b"], ExcludePods(
        match_labels={"app.kubernetes.io/tier": "batch", "team": "data"},
        priority_class_names=["z-low", "a-low"]))
    assert 'node!~"vk\\\\.a|vk-b"' in q
    assert ('unless on(namespace, pod) kube_pod_labels{label_app_kubernetes_io_tier="batch",'
            'label_team="data"}') in q
    assert 'unless on(namespace, pod) kube_pod_info{priority_class=~"a-low|z-low"}' in q
    assert q.count("(") == q.count(")") and q.count("{") == q.count("}")


def test_ksm_label_names() -> None:
    assert ksm_label_name("app.kubernetes.io/name") == "label_app_kubernetes_io_name"


def test_virtual_node_model() -> None:
    vk = virtual_node(VirtualNode(name="vk", capacity={"nvidia.com/gpu": 64, "cpu": "512"}))
    assert vk.metadata.name == "vk" and vk.spec.taints == [VK_TAINT]
    assert vk.status.allocatable["kubeberth.io/gpu-milli"] == 64000
    assert vk.metadata.labels["type"] == "virtual-kubelet"
    tainted = with_taint(with_taint(vk, LOW_GPU_TAINT), LOW_GPU_TAINT)
    assert [t.key for t in tainted.spec.taints] == ["vk.node.com", "vk.node.com/low-gpu-usage"]
    assert not has_taint(vk, LOW_GPU_TAINT)  # the original is untouched
    assert without_taint(tainted, LOW_GPU_TAINT).spec.taints == [VK_TAINT]
    assert not with_ready(vk, False).ready and with_ready(vk, True).ready


@pytest.mark.parametrize(("change", "field"), [
    ({"controller": {"windowSeconds": 5, "intervalSeconds": 30}}, "controller.windowSeconds"),
    ({"controller": {"threshold": -1}}, "controller.threshold"),
    ({"controller": {"signal": {"source": "graphite"}}}, "controller.signal.source"),
    ({"controller": {"signal": {"source": "prometheus"}}}, "controller.signal.url"),
    ({"virtualNode": {"capacity": {"nvidia.com/gpu": "many"}}}, "virtualNode.capacity"),
    ({"virtualNode": {"outages": [{"startSeconds": 100, "durationSeconds": 50},
                                  {"startSeconds": 120, "durationSeconds": 5}]}},
     "virtualNode.outages[1].startSeconds"),
    ({"virtualNode": {"pricePerGpuHour": -2}}, "virtualNode.pricePerGpuHour"),
])
def test_config_validation(change: dict[str, object], field: str) -> None:
    cfg = msgspec.convert(change, SpillConfig)
    with pytest.raises(InputError) as info:
        validate(cfg)
    assert field in (info.value.field or "")
