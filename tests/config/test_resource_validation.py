"""Container resources are validated as the API server validates them, with its messages and
field paths, offline (manifests, workload templates) and over HTTP (the embedded server
validates through the same decoder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import canonical
from kubeberth.apiserver import EmbeddedServer
from kubeberth.config.manifests import load_manifests
from kubeberth.config.workloads import load_owners


def _pod(resources: dict[str, Any], *, init: bool = False) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": resources}
    spec = {"initContainers": [container], "containers": []} if init \
        else {"containers": [container]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": spec}


# (resources, field, upstream's message): kube-apiserver 1.37's words, value as Quantity.String().
REFUSED = [
    ({"requests": {"nvidia.com/gpu": "1.5"}, "limits": {"nvidia.com/gpu": "1.5"}},
     "spec.containers[0].resources.limits[nvidia.com/gpu]",
     'Invalid value: "1500m": must be an integer'),
    ({"requests": {"nvidia.com/gpu": 1.5}},
     "spec.containers[0].resources.requests[nvidia.com/gpu]",
     'Invalid value: "1500m": must be an integer'),
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
     "spec.containers[0].resources.requests",
     'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    ({"requests": {"example.com/foo": "2k"}, "limits": {"example.com/foo": "1000"}},
     "spec.containers[0].resources.requests",
     'Invalid value: "2k": must be equal to example.com/foo limit of 1k'),
    ({"requests": {"cpu": "1.5", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
     "spec.containers[0].resources.requests",
     'Invalid value: "1500m": must be less than or equal to cpu limit of 1'),
    ({"requests": {"memory": "1.5Gi"}, "limits": {"memory": "1Gi"}},
     "spec.containers[0].resources.requests",
     'Invalid value: "1536Mi": must be less than or equal to memory limit of 1Gi'),
]


@pytest.mark.parametrize(("resources", "field", "message"), REFUSED)
def test_refused_offline_with_upstream_words(tmp_path: Path, resources: dict[str, Any],
                                             field: str, message: str) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(_pod(resources)))
    with pytest.raises(InputError) as err:
        load_manifests(path)
    assert err.value.field == field
    assert err.value.message == message
    assert err.value.source == str(path) and err.value.line is not None


def test_init_containers_and_workload_templates_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "init.yaml"
    path.write_text(yaml.safe_dump(_pod({"requests": {"nvidia.com/gpu": "0.5"}}, init=True)))
    with pytest.raises(InputError, match="must be an integer") as err:
        load_manifests(path)
    assert err.value.field == "spec.initContainers[0].resources.requests[nvidia.com/gpu]"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2.5"}}}]}}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    with pytest.raises(InputError, match='"2500m": must be an integer') as err:
        load_owners(load_manifests(path))
    assert err.value.field == \
        "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"


@pytest.mark.parametrize("resources", [
    {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
    {"limits": {"nvidia.com/gpu": 2}},
    # Read as if limits equalled requests (docs/inputs.md: upstream wants the limit).
    {"requests": {"nvidia.com/gpu": "1"}},
    {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    {"requests": {"example.com/foo": "1k"}, "limits": {"example.com/foo": "1000"}},
])
def test_accepted(tmp_path: Path, resources: dict[str, Any]) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(_pod(resources)))
    assert len(load_manifests(path).pods) == 1


@pytest.mark.parametrize(("text", "shown"), [
    ("1.5", "1500m"), ("2", "2"), ("1000", "1k"), ("1e3", "1e3"), ("12e-1", "1200e-3"),
    ("1.5Gi", "1536Mi"), ("1000Mi", "1000Mi"), ("1024", "1024"), ("0.5Ki", "512"),
    ("0", "0"), ("100m", "100m"), ("1.0001", "1000100u"), (0.25, "250m"),
])
def test_canonical_quantity_text(text: object, shown: str) -> None:
    """apimachinery's Quantity.String(): the form the API server quotes in its messages."""
    assert canonical(text) == shown


def test_refused_over_the_api_with_the_same_words() -> None:
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        for resources, field, message in REFUSED[:3]:
            resp = http.post("/api/v1/namespaces/default/pods", json=_pod(resources))
            assert resp.status_code == 422, resp.text[:300]
            body = resp.json()
            assert body["reason"] == "Invalid"
            assert body["details"]["causes"][0]["field"] == field
            assert f"{field}: {message}" in body["message"]
        ok = http.post("/api/v1/namespaces/default/pods", json=_pod(
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}))
        assert ok.status_code == 201, ok.text[:300]


def test_kueue_job_and_workload_templates_are_validated(tmp_path: Path) -> None:
    """``admit`` reads pod templates Kueue admits; the API server would have refused them."""
    from kubeberth.admission.model import load_kueue

    gpu = {"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1.5"}}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [gpu]}}}}
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "w"}, "spec": {"queueName": "q", "podSets": [
                    {"name": "main", "count": 1, "template": {"spec": {"containers": [gpu]}}}]}}
    for obj, field in ((job, "spec.template.spec.containers[0]"),
                       (workload, "spec.podSets[0].template.spec.containers[0]")):
        path = tmp_path / "obj.yaml"
        path.write_text(yaml.safe_dump(obj))
        with pytest.raises(InputError, match='"1500m": must be an integer') as err:
            load_kueue(load_manifests(path))
        assert err.value.field == f"{field}.resources.requests[nvidia.com/gpu]"
        assert err.value.line is not None
