"""Deployment, ReplicaSet and Job controllers, garbage collection, namespaces."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from kubeberth.apiserver import EmbeddedServer

APPS = "/apis/apps/v1/namespaces/default"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def _deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": copy.deepcopy(TEMPLATE)}}


def _pods(http: httpx.Client, selector: str = "") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = http.get(PODS, params={"labelSelector": selector}).json()[
        "items"]
    return items


def _bind_all(http: httpx.Client, server: EmbeddedServer) -> None:
    for pod in _pods(http):
        if not pod["spec"].get("nodeName"):
            http.post(f"{PODS}/{pod['metadata']['name']}/binding",
                      json={"target": {"kind": "Node", "name": "cpu-a"}})
    server.settle()


def test_deployment_creates_replicaset_and_pods(http: httpx.Client,
                                                server: EmbeddedServer) -> None:
    assert http.post(f"{APPS}/deployments", json=_deployment(3)).status_code == 201
    server.settle()
    rs = http.get(f"{APPS}/replicasets").json()["items"]
    assert len(rs) == 1
    assert rs[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    template_hash = rs[0]["metadata"]["labels"]["pod-template-hash"]
    assert rs[0]["metadata"]["name"] == f"web-{template_hash}"
    pods = _pods(http, "app=web")
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"web-{template_hash}-")
        assert pod["metadata"]["labels"]["pod-template-hash"] == template_hash
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs[0]["metadata"]["uid"]
        assert pod["status"]["phase"] == "Pending"
    _bind_all(http, server)
    dep = http.get(f"{APPS}/deployments/web").json()
    assert (dep["status"]["readyReplicas"], dep["status"]["availableReplicas"]) == (3, 3)
    assert dep["status"]["conditions"][0]["status"] == "True"
    reasons = [e["reason"] for e in http.get("/api/v1/namespaces/default/events").json()[
        "items"] if e["involvedObject"]["kind"] in ("Deployment", "ReplicaSet")]
    assert reasons.count("SuccessfulCreate") == 3
    assert reasons.count("ScalingReplicaSet") == 1


def test_scale_subresource(http: httpx.Client, server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(3))
    server.settle()
    scale = http.get(f"{APPS}/deployments/web/scale").json()
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 3)
    scale["spec"]["replicas"] = 1
    assert http.put(f"{APPS}/deployments/web/scale", json=scale).status_code == 200
    server.settle()
    assert len(_pods(http, "app=web")) == 1
    rs = http.get(f"{APPS}/replicasets").json()["items"][0]
    assert rs["spec"]["replicas"] == 1
    assert rs["status"]["replicas"] == 1


def test_replicaset_replaces_deleted_and_finished_pods(http: httpx.Client,
                                                       server: EmbeddedServer) -> None:
    body = {"metadata": {"name": "rs"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": TEMPLATE}}
    body["spec"]["template"] = copy.deepcopy(TEMPLATE)
    body["spec"]["template"]["metadata"]["annotations"] = {
        "kubeberth.io/duration-seconds": "10"}
    http.post(f"{APPS}/replicasets", json=body)
    server.settle()
    first = {p["metadata"]["name"] for p in _pods(http)}
    http.delete(f"{PODS}/{sorted(first)[0]}")
    server.settle()
    second = {p["metadata"]["name"] for p in _pods(http)}
    assert len(second) == 2 and second != first
    _bind_all(http, server)
    server.advance(10)
    active = [p for p in _pods(http) if p["status"]["phase"] not in ("Succeeded", "Failed")]
    assert len(active) == 2


def test_template_change_rolls_to_a_new_replicaset(http: httpx.Client,
                                                   server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(2))
    server.settle()
    dep = http.get(f"{APPS}/deployments/web").json()
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert http.put(f"{APPS}/deployments/web", json=dep).status_code == 200
    server.settle()
    rs = {r["metadata"]["name"]: r for r in http.get(f"{APPS}/replicasets").json()["items"]}
    assert len(rs) == 2
    assert sorted(r["spec"]["replicas"] for r in rs.values()) == [0, 2]
    images = {p["spec"]["containers"][0]["image"] for p in _pods(http, "app=web")}
    assert images == {"nginx:2"}
    assert http.get(f"{APPS}/deployments/web").json()["metadata"]["generation"] == 2


def test_deleting_a_deployment_cascades(http: httpx.Client, server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(2))
    server.settle()
    http.delete(f"{APPS}/deployments/web")
    server.settle()
    assert http.get(f"{APPS}/replicasets").json()["items"] == []
    assert _pods(http) == []


def test_orphan_propagation_keeps_dependents(http: httpx.Client,
                                             server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(1))
    server.settle()
    http.delete(f"{APPS}/deployments/web", params={"propagationPolicy": "Orphan"})
    server.settle()
    rs = http.get(f"{APPS}/replicasets").json()["items"]
    assert len(rs) == 1
    assert rs[0]["metadata"].get("ownerReferences") == []
    assert len(_pods(http)) == 1


def test_selector_must_match_template(http: httpx.Client) -> None:
    body = _deployment(1)
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    resp = http.post(f"{APPS}/deployments", json=body)
    assert resp.status_code == 422
    assert "`selector` does not match template `labels`" in resp.json()["message"]
    body["spec"].pop("selector")
    assert http.post(f"{APPS}/deployments", json=body).status_code == 422


def test_bad_pod_template_is_422_with_template_path(http: httpx.Client) -> None:
    body = _deployment(1)
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "x"
    resp = http.post(f"{APPS}/deployments", json=body)
    assert resp.status_code == 422
    assert "spec.template.spec.containers[0].resources.requests.cpu" in resp.json()["message"]


def _job(completions: int | None, parallelism: int, **extra: Any) -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["annotations"] = {"kubeberth.io/duration-seconds": "30"}
    template["spec"]["restartPolicy"] = "Never"
    spec: dict[str, Any] = {"parallelism": parallelism, "template": template, **extra}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": spec}


def test_job_runs_to_completion(http: httpx.Client, server: EmbeddedServer) -> None:
    created = http.post(JOBS, json=_job(3, 2))
    assert created.status_code == 201
    job = created.json()
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["backoffLimit"] == 6
    server.settle()
    assert len(_pods(http, "batch.kubernetes.io/job-name=train")) == 2
    for _ in range(3):
        _bind_all(http, server)
        server.advance(30)
    job = http.get(f"{JOBS}/train").json()
    assert job["status"]["succeeded"] == 3
    assert job["status"]["active"] == 0
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions == {"SuccessCriteriaMet": "True", "Complete": "True"}
    assert len(_pods(http, "job-name=train")) == 3


def test_suspended_job_creates_no_pods(http: httpx.Client, server: EmbeddedServer) -> None:
    http.post(JOBS, json=_job(1, 1, suspend=True))
    server.settle()
    assert _pods(http) == []
    job = http.get(f"{JOBS}/train").json()
    assert job["status"]["conditions"][0]["type"] == "Suspended"
    http.patch(f"{JOBS}/train", content=b'{"spec":{"suspend":false}}',
               headers={"Content-Type": "application/merge-patch+json"})
    server.settle()
    assert len(_pods(http)) == 1
    job = http.get(f"{JOBS}/train").json()
    suspended = [c for c in job["status"]["conditions"] if c["type"] == "Suspended"]
    assert [(c["status"], c["reason"]) for c in suspended] == [("False", "JobResumed")]
    assert "startTime" in job["status"]


def test_job_needs_never_or_onfailure(http: httpx.Client) -> None:
    body = _job(1, 1)
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    resp = http.post(JOBS, json=body)
    assert resp.status_code == 422
    assert "spec.template.spec.restartPolicy" in resp.json()["message"]


def test_deleting_a_namespace_deletes_its_objects(http: httpx.Client,
                                                  server: EmbeddedServer) -> None:
    http.post("/api/v1/namespaces", json={"metadata": {"name": "team"}})
    http.post("/apis/apps/v1/namespaces/team/deployments",
              json={**_deployment(1), "metadata": {"name": "web", "namespace": "team"}})
    server.settle()
    assert len(http.get("/api/v1/namespaces/team/pods").json()["items"]) == 1
    http.delete("/api/v1/namespaces/team")
    server.settle()
    assert http.get("/api/v1/namespaces/team").status_code == 404
    assert http.get("/api/v1/pods").json()["items"] == []


def _fail(http: httpx.Client, name: str) -> None:
    pod = http.get(f"{PODS}/{name}").json()
    pod["status"]["phase"] = "Failed"
    assert http.put(f"{PODS}/{name}/status", json=pod).status_code == 200


def test_job_fails_after_backoff_limit(http: httpx.Client, server: EmbeddedServer) -> None:
    http.post(JOBS, json=_job(1, 1, backoffLimit=1))
    server.settle()
    for _ in range(2):
        active = [p for p in _pods(http) if p["status"]["phase"] == "Pending"]
        assert len(active) == 1
        _fail(http, active[0]["metadata"]["name"])
        server.settle()
    job = http.get(f"{JOBS}/train").json()
    assert job["status"]["failed"] == 2
    failed = {c["type"]: c for c in job["status"]["conditions"]}
    assert failed["Failed"]["reason"] == "BackoffLimitExceeded"
    assert [p["status"]["phase"] for p in _pods(http)] == ["Failed", "Failed"]
    rows = http.get(JOBS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert rows.json()["rows"][0]["cells"][1:3] == ["Failed", "0/1"]


def test_work_queue_job_completes_on_first_success(http: httpx.Client,
                                                   server: EmbeddedServer) -> None:
    http.post(JOBS, json=_job(None, 2))
    server.settle()
    assert len(_pods(http)) == 2
    _bind_all(http, server)
    server.advance(30)
    job = http.get(f"{JOBS}/train").json()
    assert job["status"]["succeeded"] == 2
    assert any(c["type"] == "Complete" for c in job["status"]["conditions"])
    assert len(_pods(http)) == 2  # no replacements once one succeeded


def test_scale_down_removes_unscheduled_pods_first(http: httpx.Client,
                                                   server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(3))
    server.settle()
    names = sorted(p["metadata"]["name"] for p in _pods(http))
    http.post(f"{PODS}/{names[1]}/binding", json={"target": {"kind": "Node", "name": "cpu-a"}})
    server.settle()
    http.patch(f"{APPS}/deployments/web", content=b'{"spec":{"replicas":1}}',
               headers={"Content-Type": "application/strategic-merge-patch+json"})
    server.settle()
    assert [p["metadata"]["name"] for p in _pods(http)] == [names[1]]


def test_deployment_reports_unavailable_until_pods_run(http: httpx.Client,
                                                       server: EmbeddedServer) -> None:
    http.post(f"{APPS}/deployments", json=_deployment(2))
    server.settle()
    status = http.get(f"{APPS}/deployments/web").json()["status"]
    assert (status["replicas"], status["readyReplicas"], status["unavailableReplicas"]) == (
        2, 0, 2)
    assert status["conditions"][0]["reason"] == "MinimumReplicasUnavailable"
    assert status["observedGeneration"] == 1
