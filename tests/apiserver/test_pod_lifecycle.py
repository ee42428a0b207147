"""Binding, the fake kubelet on a manual clock, evictions and PodDisruptionBudgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from kubeberth.apiserver import EmbeddedServer

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"


def _bind(http: httpx.Client, pod: str, node: str) -> httpx.Response:
    return http.post(f"{PODS}/{pod}/binding",
                     json={"apiVersion": "v1", "kind": "Binding",
                           "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}})


def _evict(http: httpx.Client, pod: str) -> httpx.Response:
    return http.post(f"{PODS}/{pod}/eviction",
                     json={"apiVersion": "policy/v1", "kind": "Eviction",
                           "metadata": {"name": pod, "namespace": "default"}})


def _phase(http: httpx.Client, pod: str) -> str:
    return str(http.get(f"{PODS}/{pod}").json()["status"]["phase"])


def test_binding_sets_node_and_condition(http: httpx.Client, make_pod: PodBody,
                                         server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("b"))
    resp = _bind(http, "b", "gpu-a")
    assert resp.status_code == 201
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Success", "code": 201}
    pod = http.get(f"{PODS}/b").json()
    assert pod["spec"]["nodeName"] == "gpu-a"
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled[0]["status"] == "True"


def test_second_binding_conflicts(http: httpx.Client, make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("b"))
    assert _bind(http, "b", "gpu-a").status_code == 201
    resp = _bind(http, "b", "gpu-b")
    assert resp.status_code == 409
    assert resp.json()["message"].endswith('pod b is already assigned to node "gpu-a"')


def test_binding_a_gated_pod_conflicts(http: httpx.Client, make_pod: PodBody) -> None:
    body = make_pod("g")
    body["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    http.post(PODS, json=body)
    assert _bind(http, "g", "gpu-a").status_code == 409


def test_binding_errors(http: httpx.Client, make_pod: PodBody) -> None:
    assert _bind(http, "missing", "gpu-a").status_code == 404
    http.post(PODS, json=make_pod("x"))
    resp = http.post(f"{PODS}/x/binding", json={"metadata": {"name": "x"}})
    assert resp.status_code == 400
    resp = http.post(f"{PODS}/x/binding", json={"target": {"kind": "Node"}})
    assert resp.status_code == 422


def test_kubelet_runs_then_completes_after_the_annotated_duration(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("job", duration=60))
    assert _phase(http, "job") == "Pending"
    _bind(http, "job", "gpu-a")
    server.settle()
    pod = http.get(f"{PODS}/job").json()
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["startTime"] == "2026-01-01T00:00:00Z"
    assert pod["status"]["containerStatuses"][0]["state"]["running"]
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    server.advance(59.5)
    assert _phase(http, "job") == "Running"
    server.advance(0.5)
    pod = http.get(f"{PODS}/job").json()
    assert pod["status"]["phase"] == "Succeeded"
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("Completed", 0)
    assert term["finishedAt"] == "2026-01-01T00:01:00Z"


def test_pod_without_duration_runs_forever(http: httpx.Client, make_pod: PodBody,
                                           server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("svc", node="gpu-a"))
    server.advance(10**6)
    assert _phase(http, "svc") == "Running"


def test_pods_on_a_not_ready_node_stay_pending(http: httpx.Client, make_pod: PodBody,
                                               server: EmbeddedServer) -> None:
    node = http.get("/api/v1/nodes/cpu-a").json()
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    http.put("/api/v1/nodes/cpu-a/status", json=node)
    http.post(PODS, json=make_pod("p", node="cpu-a"))
    server.settle()
    assert _phase(http, "p") == "Pending"
    node = http.get("/api/v1/nodes/cpu-a").json()
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    http.put("/api/v1/nodes/cpu-a/status", json=node)
    server.settle()
    assert _phase(http, "p") == "Running"


def test_kubelet_emits_events(http: httpx.Client, make_pod: PodBody,
                              server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("ev", node="gpu-b"))
    server.settle()
    events = http.get("/api/v1/namespaces/default/events", params={
        "fieldSelector": "involvedObject.name=ev,involvedObject.kind=Pod"}).json()["items"]
    assert [(e["reason"], e["source"]["component"], e["source"]["host"]) for e in events] == [
        ("Started", "kubelet", "gpu-b")]
    assert events[0]["involvedObject"]["uid"] == http.get(f"{PODS}/ev").json()["metadata"][
        "uid"]


def test_deleting_a_node_removes_its_pods(http: httpx.Client, make_pod: PodBody,
                                          server: EmbeddedServer) -> None:
    http.post(PODS, json=make_pod("orphan", node="gpu-a"))
    http.post(PODS, json=make_pod("other", node="gpu-b"))
    server.settle()
    http.delete("/api/v1/nodes/gpu-a")
    server.settle()
    names = [p["metadata"]["name"] for p in http.get(PODS).json()["items"]]
    assert names == ["other"]


# Evictions and PDBs.

def _pdb(http: httpx.Client, **spec: Any) -> None:
    resp = http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                     json={"metadata": {"name": "budget"},
                           "spec": {"selector": {"matchLabels": {"app": "t"}}, **spec}})
    assert resp.status_code == 201, resp.text


def _running(http: httpx.Client, make_pod: PodBody, server: EmbeddedServer,
             names: list[str]) -> None:
    for i, name in enumerate(names):
        http.post(PODS, json=make_pod(name, labels={"app": "t"},
                                      node=("gpu-a", "gpu-b", "cpu-a")[i % 3]))
    server.settle()


def test_eviction_without_pdb_deletes(http: httpx.Client, make_pod: PodBody,
                                      server: EmbeddedServer) -> None:
    _running(http, make_pod, server, ["free"])
    resp = _evict(http, "free")
    assert resp.status_code == 201
    assert resp.json()["status"] == "Success"
    server.settle()
    assert http.get(f"{PODS}/free").status_code == 404


def test_pdb_status_and_429(http: httpx.Client, make_pod: PodBody,
                            server: EmbeddedServer) -> None:
    _running(http, make_pod, server, ["t1", "t2", "t3"])
    _pdb(http, minAvailable=2)
    server.settle()
    status = http.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget") \
        .json()["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"],
            status["disruptionsAllowed"]) == (3, 3, 2, 1)
    assert _evict(http, "t1").status_code == 201
    server.settle()
    resp = _evict(http, "t2")
    assert resp.status_code == 429
    body = resp.json()
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == ("Cannot evict pod as it would violate the pod's disruption "
                               "budget.")
    assert body["details"]["causes"] == [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget budget needs 2 healthy pods and has 2 currently"}]
    assert "retry-after" not in resp.headers
    assert _phase(http, "t2") == "Running"


def _deployed(http: httpx.Client, make_pod: PodBody, server: EmbeddedServer,
              replicas: int) -> None:
    """A Deployment's pods, bound and running: the budget's percentages scale by it."""
    template = make_pod("x", labels={"app": "t"})
    resp = http.post("/apis/apps/v1/namespaces/default/deployments", json={
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "t"}},
                 "template": {"metadata": {"labels": {"app": "t"}}, "spec": template["spec"]}}})
    assert resp.status_code == 201, resp.text
    server.settle()
    pods = http.get(PODS, params={"labelSelector": "app=t"}).json()["items"]
    assert len(pods) == replicas
    for i, pod in enumerate(pods):
        name = pod["metadata"]["name"]
        bound = http.post(f"{PODS}/{name}/binding", json={
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": ("gpu-a", "gpu-b", "cpu-a")[i % 3]}})
        assert bound.status_code == 201, bound.text
    server.settle()


# Upstream's disruption controller: maxUnavailable and a percentage minAvailable scale by the
# pods' controllers (here the Deployment, through its ReplicaSet); an integer minAvailable
# expects every selected pod; with neither set nothing is expected and nothing allowed.
@pytest.mark.parametrize(("spec", "allowed"), [
    ({"maxUnavailable": 1}, 1), ({"maxUnavailable": "50%"}, 2), ({"minAvailable": "50%"}, 2),
    ({"minAvailable": "25%"}, 3), ({"minAvailable": 4}, 0), ({"minAvailable": 1}, 3), ({}, 0),
])
def test_pdb_arithmetic(http: httpx.Client, make_pod: PodBody, server: EmbeddedServer,
                        spec: dict[str, Any], allowed: int) -> None:
    _deployed(http, make_pod, server, 4)
    _pdb(http, **spec)
    server.settle()
    status = http.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget") \
        .json()["status"]
    assert status["currentHealthy"] == 4
    assert status["disruptionsAllowed"] == allowed


def test_pdb_over_bare_pods_with_a_percentage_fails_safe(
        http: httpx.Client, make_pod: PodBody, server: EmbeddedServer) -> None:
    """Pods without a controller have no scale: upstream expects none of them."""
    _running(http, make_pod, server, ["a", "b"])
    _pdb(http, maxUnavailable="50%")
    server.settle()
    status = http.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget") \
        .json()["status"]
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (0, 0)
    assert _evict(http, "a").status_code == 429


def test_pending_and_finished_pods_ignore_the_budget(http: httpx.Client, make_pod: PodBody,
                                                     server: EmbeddedServer) -> None:
    _pdb(http, minAvailable=5)
    http.post(PODS, json=make_pod("pending", labels={"app": "t"}))
    http.post(PODS, json=make_pod("done", labels={"app": "t"}, node="gpu-a", duration=1))
    server.settle()
    server.advance(1)
    assert _phase(http, "done") == "Succeeded"
    assert _evict(http, "pending").status_code == 201
    assert _evict(http, "done").status_code == 201


def test_two_budgets_on_one_pod_is_an_error(http: httpx.Client, make_pod: PodBody,
                                            server: EmbeddedServer) -> None:
    _running(http, make_pod, server, ["t"])
    _pdb(http, maxUnavailable=1)
    http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
              json={"metadata": {"name": "second"},
                    "spec": {"selector": {"matchLabels": {"app": "t"}}, "maxUnavailable": 1}})
    resp = _evict(http, "t")
    assert resp.status_code == 500
    assert "more than one PodDisruptionBudget" in resp.json()["message"]


def test_bad_pdb_is_422(http: httpx.Client) -> None:
    resp = http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                     json={"metadata": {"name": "bad"},
                           "spec": {"minAvailable": 1, "maxUnavailable": 1}})
    assert resp.status_code == 422
    assert "minAvailable and maxUnavailable are both set" in resp.json()["message"]


def test_wall_clock_kubelet_completes_pods(make_pod: PodBody) -> None:
    """Without a manual clock the kubelet's timers run on real time."""
    import time

    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url) as client:
        client.post("/api/v1/nodes", json={"metadata": {"name": "n"}})
        client.post(PODS, json=make_pod("quick", node="n", duration=0.05))
        deadline = time.monotonic() + 20
        while _phase(client, "quick") != "Succeeded":
            assert time.monotonic() < deadline, "the pod never completed"
            time.sleep(0.02)
        with pytest.raises(RuntimeError, match="ManualClock"):
            srv.advance(1)


def _unready(http: httpx.Client, name: str) -> None:
    pod = http.get(f"{PODS}/{name}").json()
    for cond in pod["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["status"] = "False"
    assert http.put(f"{PODS}/{name}/status", json=pod).status_code == 200


@pytest.mark.parametrize(("policy", "healthy_pods", "code"), [
    (None, 2, 201),             # IfHealthyBudget: the budget still has its healthy pods
    (None, 1, 429),             # ... and not when it is short
    ("AlwaysAllow", 1, 201),    # unhealthy pods may always go
    ("IfHealthyBudget", 1, 429),
])
def test_unhealthy_pod_eviction_policy(http: httpx.Client, make_pod: PodBody,
                                       server: EmbeddedServer, policy: str | None,
                                       healthy_pods: int, code: int) -> None:
    _running(http, make_pod, server, ["sick", *[f"ok{i}" for i in range(healthy_pods)]])
    spec: dict[str, Any] = {"minAvailable": 2}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    _pdb(http, **spec)
    _unready(http, "sick")
    server.settle()
    assert _evict(http, "sick").status_code == code
