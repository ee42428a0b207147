"""The embedded server behaves as a cluster with Kueue installed: queue-labelled Jobs are
created suspended and queue-labelled pods gated, and a gated pod accepts the node selector
additions Kueue makes when it admits the pod."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from kubeberth.apiserver import EmbeddedServer

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
QUEUED = {"kueue.x-k8s.io/queue-name": "main"}
GATE = {"name": "kueue.x-k8s.io/admission"}
SPEC = {"containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m"}}}]}


def _job(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"annotations": {"kubeberth.io/duration-seconds": "30"}},
                "spec": {**copy.deepcopy(SPEC), "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "labels": labels},
            "spec": {"parallelism": 2, "template": template, **spec}}


def _pod(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {**copy.deepcopy(SPEC), **spec}}


def test_queued_job_is_created_suspended_and_runs_no_pod(http: httpx.Client,
                                                         server: EmbeddedServer) -> None:
    job = http.post(JOBS, json=_job(QUEUED, suspend=False)).json()
    assert job["spec"]["suspend"] is True
    server.settle()
    assert http.get(PODS).json()["items"] == []
    # Unsuspended (what the admission controller does), its pods are created ungated: the
    # Job's workload is admitted, not the pods'.
    http.patch(f"{JOBS}/train", content=b'{"spec":{"suspend":false}}',
               headers={"Content-Type": "application/merge-patch+json"})
    server.settle()
    pods = http.get(PODS).json()["items"]
    assert len(pods) == 2
    assert all(not p["spec"].get("schedulingGates") for p in pods)


def test_unlabelled_job_is_not_suspended(http: httpx.Client, server: EmbeddedServer) -> None:
    job = http.post(JOBS, json=_job({})).json()
    assert job["spec"]["suspend"] is False


def test_queued_pod_is_gated(http: httpx.Client) -> None:
    pod = http.post(PODS, json=_pod("nb", QUEUED)).json()
    assert pod["spec"]["schedulingGates"] == [GATE]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
    plain = http.post(PODS, json=_pod("plain", {})).json()
    assert not plain["spec"].get("schedulingGates")


def test_gated_pod_accepts_node_selector_additions_only(http: httpx.Client) -> None:
    http.post(PODS, json=_pod("nb", QUEUED, nodeSelector={"zone": "a"}))
    pod = http.get(f"{PODS}/nb").json()
    changed = copy.deepcopy(pod)
    changed["spec"]["nodeSelector"] = {"zone": "b", "gpu": "a100"}
    answer = http.put(f"{PODS}/nb", json=changed)
    assert answer.status_code == 422
    assert "only additions to spec.nodeSelector" in answer.json()["message"]
    added = copy.deepcopy(pod)
    added["spec"]["nodeSelector"] = {"zone": "a", "gpu": "a100"}
    added["spec"]["schedulingGates"] = []
    answer = http.put(f"{PODS}/nb", json=added)
    assert answer.status_code == 200, answer.text
    assert answer.json()["spec"]["nodeSelector"] == {"zone": "a", "gpu": "a100"}
    # Ungated, the selector is immutable again.
    later = answer.json()
    later["spec"]["nodeSelector"] = {"zone": "a", "gpu": "a100", "more": "x"}
    assert http.put(f"{PODS}/nb", json=later).status_code == 422
