"""The kube-state-metrics series served at /metrics, and the spill controller's GPU arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kubeberth.apiserver import EmbeddedServer

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"
Samples = list[tuple[str, dict[str, str], float]]


def _scrape(http: httpx.Client) -> Samples:
    resp = http.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain; version=")
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(resp.text)
            for s in fam.samples]


def _values(samples: Samples, name: str, **labels: str) -> list[float]:
    return [v for n, lab, v in samples if n == name
            and all(lab.get(k) == want for k, want in labels.items())]


def test_node_series(http: httpx.Client) -> None:
    http.patch("/api/v1/nodes/gpu-b", content=b'{"spec":{"unschedulable":true,"taints":'
               b'[{"key":"spill","value":"on","effect":"NoSchedule"}]}}',
               headers={"Content-Type": "application/merge-patch+json"})
    s = _scrape(http)
    assert _values(s, "kube_node_status_allocatable", node="gpu-a",
                   resource="nvidia_com_gpu", unit="integer") == [4.0]
    assert _values(s, "kube_node_status_allocatable", node="gpu-a", resource="cpu",
                   unit="core") == [32.0]
    assert _values(s, "kube_node_status_allocatable", node="gpu-a", resource="memory",
                   unit="byte") == [128 * 2**30]
    assert _values(s, "kube_node_spec_unschedulable", node="gpu-b") == [1.0]
    assert _values(s, "kube_node_spec_unschedulable", node="gpu-a") == [0.0]
    assert _values(s, "kube_node_spec_taint", node="gpu-b", key="spill", value="on",
                   effect="NoSchedule") == [1.0]
    assert _values(s, "kube_node_status_condition", node="gpu-a", condition="Ready",
                   status="true") == [1.0]
    assert _values(s, "kube_node_status_condition", node="gpu-a", condition="Ready",
                   status="false") == [0.0]
    assert _values(s, "kube_node_labels", node="cpu-a", label_pool="cpu") == [1.0]
    assert _values(s, "kube_node_labels", node="gpu-a",
                   label_node_role_kubernetes_io_worker="") == [1.0]


def test_pod_series(http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("train", gpus=2, labels={"app": "t"}, node="gpu-a"))
    http.post(PODS, json=make_pod("wait", gpus=1))
    server.settle()
    s = _scrape(http)
    assert _values(s, "kube_pod_container_resource_requests", pod="train", container="main",
                   node="gpu-a", resource="nvidia_com_gpu", unit="integer") == [2.0]
    assert _values(s, "kube_pod_container_resource_requests", pod="train",
                   resource="cpu", unit="core") == [1.0]
    assert _values(s, "kube_pod_status_phase", pod="train", phase="Running") == [1.0]
    assert _values(s, "kube_pod_status_phase", pod="train", phase="Pending") == [0.0]
    assert _values(s, "kube_pod_status_phase", pod="wait", phase="Pending") == [1.0]
    assert _values(s, "kube_pod_info", pod="train", node="gpu-a", namespace="default") == [1.0]
    assert _values(s, "kube_pod_info", pod="wait", node="") == [1.0]
    assert _values(s, "kube_pod_labels", pod="train", label_app="t") == [1.0]
    assert _values(s, "kube_pod_owner", pod="train", owner_kind="<none>") == [1.0]


def test_free_gpus_as_the_spill_query_computes_them(http: httpx.Client, make_pod: PodBody,
                                                    server: EmbeddedServer) -> None:
    """sum(allocatable gpu on schedulable Ready nodes) - sum(requests of running pods)."""
    http.post(PODS, json=make_pod("a", gpus=3, node="gpu-a"))
    http.post(PODS, json=make_pod("b", gpus=1, node="gpu-b", duration=5))
    http.post(PODS, json=make_pod("c", gpus=4))  # pending: not using a GPU yet
    server.settle()

    def free() -> float:
        s = _scrape(http)
        ready = {lab["node"] for n, lab, v in s if n == "kube_node_status_condition"
                 and lab["condition"] == "Ready" and lab["status"] == "true" and v == 1}
        cordoned = {lab["node"] for n, lab, v in s
                    if n == "kube_node_spec_unschedulable" and v == 1}
        alloc = sum(v for n, lab, v in s if n == "kube_node_status_allocatable"
                    and lab["resource"] == "nvidia_com_gpu" and lab["node"] in ready - cordoned)
        running = {lab["pod"] for n, lab, v in s if n == "kube_pod_status_phase"
                   and lab["phase"] == "Running" and v == 1}
        used = sum(v for n, lab, v in s if n == "kube_pod_container_resource_requests"
                   and lab["resource"] == "nvidia_com_gpu" and lab["pod"] in running)
        return alloc - used

    assert free() == 8 - 4
    server.advance(5)
    assert free() == 8 - 3
    http.patch("/api/v1/nodes/gpu-b", content=b'{"spec":{"unschedulable":true}}',
               headers={"Content-Type": "application/merge-patch+json"})
    assert free() == 4 - 3


def test_each_server_has_its_own_registry(cluster_file: Any) -> None:
    from kubeberth.config.manifests import load_manifests

    with EmbeddedServer(manifests=load_manifests(cluster_file)) as one, \
            EmbeddedServer() as two, httpx.Client() as client:
        first = client.get(f"{one.url}/metrics").text
        second = client.get(f"{two.url}/metrics").text
    assert 'node="gpu-a"' in first
    assert 'node="gpu-a"' not in second


def test_label_names_are_sanitised_like_kube_state_metrics(http: httpx.Client,
                                                           make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("l", labels={"app.kubernetes.io/name": "x",
                                               "kueue.x-k8s.io/queue-name": "q"}))
    s = _scrape(http)
    assert _values(s, "kube_pod_labels", pod="l", label_app_kubernetes_io_name="x",
                   label_kueue_x_k8s_io_queue_name="q") == [1.0]


def test_resource_units() -> None:
    from kubeberth.apiserver.metrics import resource_unit, sanitize

    assert resource_unit("cpu") == ("cpu", "core")
    assert resource_unit("memory") == ("memory", "byte")
    assert resource_unit("hugepages-2Mi") == ("hugepages_2Mi", "byte")
    assert resource_unit("ephemeral-storage") == ("ephemeral_storage", "byte")
    assert resource_unit("nvidia.com/gpu") == ("nvidia_com_gpu", "integer")
    assert resource_unit("kubeberth.io/gpu-milli") == ("kubeberth_io_gpu_milli", "integer")
    assert sanitize("a.b/c-d") == "a_b_c_d"


def test_owner_and_scheduled_series(http: httpx.Client, server: EmbeddedServer) -> None:
    http.post("/apis/apps/v1/namespaces/default/replicasets", json={
        "metadata": {"name": "rs"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    server.settle()
    pod = http.get(PODS).json()["items"][0]["metadata"]["name"]
    http.post(f"{PODS}/{pod}/binding", json={"target": {"kind": "Node", "name": "cpu-a"}})
    s = _scrape(http)
    assert _values(s, "kube_pod_owner", pod=pod, owner_kind="ReplicaSet", owner_name="rs",
                   owner_is_controller="true") == [1.0]
    assert _values(s, "kube_pod_info", pod=pod, created_by_kind="ReplicaSet",
                   created_by_name="rs") == [1.0]
    assert _values(s, "kube_pod_status_scheduled", pod=pod, condition="true") == [1.0]
