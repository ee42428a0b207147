"""The chaos tests' fault hook: off without KUBEBERTH_TEST_FAULTS; with it, bindings and
evictions fail (not carried out), are lost (carried out, answered 500) or wait; a bad value is
refused naming the variable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubeberth.api.errors import InputError
from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.apiserver.faults import ENV, Faults
from kubeberth.config.manifests import load_manifests

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"


def _bind(http: httpx.Client, pod: str, node: str) -> httpx.Response:
    return http.post(f"{PODS}/{pod}/binding",
                     json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                           "target": {"kind": "Node", "name": node}})


def test_off_unless_the_variable_is_set() -> None:
    assert Faults.from_env({}) is None
    assert Faults.from_env({ENV: " "}) is None


@pytest.mark.parametrize("value", ["bind.fail=2", "bind.delay=-1", "bind.fail", "drop=1",
                                   "evict.lost=x"])
def test_a_bad_value_names_the_variable(value: str) -> None:
    with pytest.raises(InputError) as info:
        Faults.from_env({ENV: value})
    assert info.value.field == ENV


def _server(cluster_file: Path, monkeypatch: pytest.MonkeyPatch, faults: str) -> EmbeddedServer:
    monkeypatch.setenv(ENV, faults)
    return EmbeddedServer(manifests=load_manifests(cluster_file), clock=ManualClock())


def test_failed_bindings_are_not_carried_out(cluster_file: Path, make_pod: PodBody,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with _server(cluster_file, monkeypatch, "bind.fail=1") as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as http:
        http.post(PODS, json=make_pod("p"))
        resp = _bind(http, "p", "gpu-a")
        assert resp.status_code == 500
        assert resp.json()["message"] == "injected fault: binding not carried out"
        assert "nodeName" not in http.get(f"{PODS}/p").json()["spec"]


def test_lost_bindings_are_carried_out_and_answered_500(
        cluster_file: Path, make_pod: PodBody, monkeypatch: pytest.MonkeyPatch) -> None:
    with _server(cluster_file, monkeypatch, "bind.lost=1,bind.delay=0.01") as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as http:
        http.post(PODS, json=make_pod("p"))
        assert _bind(http, "p", "gpu-a").status_code == 500
        assert http.get(f"{PODS}/p").json()["spec"]["nodeName"] == "gpu-a"
        assert _bind(http, "p", "gpu-b").status_code == 409  # the API kept the first
        # Other requests are untouched.
        assert http.post(PODS, json=make_pod("q")).status_code == 201
