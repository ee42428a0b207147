"""The fake kubelet admits bound pods as kubelet's admission handler does: resources against
the pods the node runs, node selector and required node affinity, untolerated NoExecute taints;
a pod that does not fit fails with kubelet's reason, message and Warning Event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from kubeberth.apiserver import EmbeddedServer

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"


def _pod(http: httpx.Client, name: str) -> dict[str, Any]:
    body: dict[str, Any] = http.get(f"{PODS}/{name}").json()
    return body


def _run(http: httpx.Client, server: EmbeddedServer, body: dict[str, Any]) -> dict[str, Any]:
    assert http.post(PODS, json=body).status_code == 201
    server.settle()
    return _pod(http, body["metadata"]["name"])


def _kubelet_events(http: httpx.Client, pod: str) -> list[tuple[str, str, str]]:
    items = http.get("/api/v1/namespaces/default/events").json()["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items
            if e["involvedObject"]["name"] == pod and e["source"]["component"] == "kubelet"
            and e["type"] == "Warning"]


def test_a_fifth_gpu_on_a_four_gpu_node_is_rejected_out_of_gpu(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    for i in range(2):
        assert _run(http, server, make_pod(f"ok-{i}", gpus=2, node="gpu-a"))["status"][
            "phase"] == "Running"
    pod = _run(http, server, make_pod("fifth", gpus=1, node="gpu-a"))
    message = "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 4, capacity: 4"
    assert (pod["status"]["phase"], pod["status"]["reason"], pod["status"]["message"]) == (
        "Failed", "OutOfnvidia.com/gpu", f"Pod was rejected: {message}")
    assert _kubelet_events(http, "fifth") == [("Warning", "OutOfnvidia.com/gpu", message)]
    # Once a GPU pod is gone, its GPUs admit the next one.
    http.delete(f"{PODS}/ok-0")
    server.settle()
    assert _run(http, server, make_pod("after", gpus=2, node="gpu-a"))["status"][
        "phase"] == "Running"


def test_cpu_is_compared_in_millicores_and_checked_first(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    body = make_pod("big", gpus=8, node="cpu-a")  # cpu-a has no GPUs, and 16 cpus
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "16500m"
    pod = _run(http, server, body)
    assert pod["status"]["reason"] == "OutOfcpu"
    assert pod["status"]["message"] == ("Pod was rejected: Node didn't have enough resource: "
                                        "cpu, requested: 16500, used: 0, capacity: 16000")


def test_an_extended_resource_the_node_does_not_advertise_is_ignored_as_kubelet_does(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    pod = _run(http, server, make_pod("gpu-on-cpu", gpus=1, node="cpu-a"))
    assert pod["status"]["phase"] == "Running"


def test_the_pod_count_is_checked(http: httpx.Client, make_pod: PodBody,
                                  server: EmbeddedServer) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tiny"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "1"}}}
    assert http.post("/api/v1/nodes", json=node).status_code == 201
    assert _run(http, server, make_pod("one", node="tiny"))["status"]["phase"] == "Running"
    pod = _run(http, server, make_pod("two", node="tiny"))
    assert (pod["status"]["reason"], pod["status"]["message"]) == (
        "OutOfpods", "Pod was rejected: Node didn't have enough resource: pods, requested: 1, "
                     "used: 1, capacity: 1")


def test_node_selector_and_required_affinity_are_checked(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    body = make_pod("wrong-pool", node="gpu-a")
    body["spec"]["nodeSelector"] = {"pool": "cpu"}
    pod = _run(http, server, body)
    assert (pod["status"]["phase"], pod["status"]["reason"], pod["status"]["message"]) == (
        "Failed", "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) "
                                  "didn't match Pod's node affinity/selector")
    body = make_pod("affine", node="gpu-b")
    body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuring"
                                                 "Execution": {"nodeSelectorTerms": [
                                                     {"matchExpressions": [{
                                                         "key": "pool", "operator": "In",
                                                         "values": ["gpu"]}]}]}}}
    assert _run(http, server, body)["status"]["phase"] == "Running"
    body = make_pod("not-affine", node="cpu-a")
    body["spec"]["affinity"] = _pod(http, "affine")["spec"]["affinity"]
    assert _run(http, server, body)["status"]["reason"] == "NodeAffinity"


def test_an_untolerated_no_execute_taint_rejects_and_no_schedule_does_not(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    node = http.get("/api/v1/nodes/gpu-b").json()
    node["spec"] = {"taints": [{"key": "drain", "value": "now", "effect": "NoExecute"},
                               {"key": "quiet", "effect": "NoSchedule"}]}
    assert http.put("/api/v1/nodes/gpu-b", json=node).status_code == 200
    pod = _run(http, server, make_pod("untolerated", node="gpu-b"))
    assert (pod["status"]["reason"], pod["status"]["message"]) == (
        "TaintToleration", "Pod was rejected: Predicate TaintToleration failed: node(s) had "
                           "taints that the pod didn't tolerate")
    body = make_pod("tolerant", node="gpu-b")
    body["spec"]["tolerations"] = [{"key": "drain", "operator": "Exists",
                                    "effect": "NoExecute"}]
    assert _run(http, server, body)["status"]["phase"] == "Running"


def test_resources_come_first_and_failed_pods_hold_nothing(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    body = make_pod("both", gpus=5, node="gpu-a")
    body["spec"]["nodeSelector"] = {"pool": "cpu"}
    assert _run(http, server, body)["status"]["reason"] == "OutOfnvidia.com/gpu"
    # The rejected pod holds no GPU: four still fit.
    assert _run(http, server, make_pod("four", gpus=4, node="gpu-a"))["status"][
        "phase"] == "Running"
