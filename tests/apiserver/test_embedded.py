"""EmbeddedServer's in-process API, manifest loading, and HTTP corners kubectl does not reach."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kubeberth.api.errors import InputError
from kubeberth.apiserver import EmbeddedServer
from kubeberth.config.manifests import load_manifests

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def test_manifests_load_in_dependency_order(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("""\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team}
spec:
  priorityClassName: later
  nodeName: n
  containers: [{name: c, image: i}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: later}
value: 7
---
apiVersion: v1
kind: Node
metadata: {name: n}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: other}
spec: {clusterQueue: cq}
---
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: g, namespace: team}
spec: {schedulingPolicy: {basic: {}}}
""")
    srv = EmbeddedServer(manifests=load_manifests(path))
    # Kinds not served (configuration, the alpha native PodGroup: docs/gangs.md) are said,
    # not dropped.
    assert srv.skipped == ["KubeSchedulerConfiguration", "PodGroup"]
    api = srv.api
    pod = api.get(api.pods, "team", "p")
    assert pod["spec"]["priority"] == 7
    assert api.store.get(api.namespaces, "", "other") is not None
    with srv:
        srv.settle()
        assert srv.call(lambda: api.get(api.pods, "team", "p"))["status"]["phase"] == "Running"


def test_load_errors_name_the_document(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                    "  priorityClassName: nope\n  containers: [{name: c}]\n")
    with pytest.raises(InputError) as err:
        EmbeddedServer(manifests=load_manifests(path))
    assert str(err.value).startswith(f"{path}:1:")
    assert "no PriorityClass with name nope" in str(err.value)


def test_in_process_helpers_need_a_running_server() -> None:
    srv = EmbeddedServer()
    assert srv.call(lambda: 41 + 1) == 42  # not started: runs here
    with pytest.raises(RuntimeError, match="not running"):
        srv.settle()
    srv.stop()  # stopping a server that never started is harmless


def test_kubeconfig_shape(tmp_path: Path) -> None:
    with EmbeddedServer(token="t") as srv:
        path = srv.write_kubeconfig(tmp_path / "nested" / "kc")
        config = yaml.safe_load(path.read_text())
        assert path.stat().st_mode & 0o777 == 0o600
    assert config["current-context"] == "kubeberth"
    assert config["clusters"][0]["cluster"] == {"server": srv.url}
    assert config["users"][0]["user"] == {"token": "t"}


def test_ipv6_loopback() -> None:
    srv = EmbeddedServer(host="::1")
    try:
        srv.start()
    except InputError:
        pytest.skip("no IPv6 loopback here")
    try:
        with httpx.Client() as client:
            assert srv.url.startswith("http://[::1]:")
            assert client.get(f"{srv.url}/healthz").text == "ok"
    finally:
        srv.stop()


def test_yaml_bodies_are_accepted(http: httpx.Client) -> None:
    resp = http.post("/api/v1/namespaces/default/configmaps",
                     content=b"metadata: {name: y}\ndata: {k: v}\n",
                     headers={"Content-Type": "application/yaml"})
    assert resp.status_code == 201
    assert resp.json()["data"] == {"k": "v"}


def test_method_and_name_errors(http: httpx.Client, make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("m"))
    assert http.post(f"{PODS}/m", json=make_pod("m")).status_code == 405
    assert http.post("/api/v1", json={}).status_code == 405
    resp = http.put(f"{PODS}/m", json=make_pod("other"))
    assert resp.status_code == 400
    assert "does not match the name on the URL" in resp.json()["message"]
    assert http.post(PODS, content=b"", headers={"Content-Type": "application/json"}) \
        .status_code == 400
    assert http.post(PODS, json=make_pod("d"), params={"dryRun": "Bad"}).status_code == 400
    assert http.get(PODS, params={"limit": "many"}).status_code == 400


def test_single_object_tables_and_include_object(http: httpx.Client) -> None:
    one = http.get("/api/v1/nodes/gpu-a", headers={"Accept": TABLE}).json()
    assert one["kind"] == "Table"
    assert one["rows"][0]["cells"][0] == "gpu-a"
    full = http.get("/api/v1/nodes", params={"includeObject": "Object"},
                    headers={"Accept": TABLE}).json()
    assert full["rows"][0]["object"]["kind"] == "Node"
    old = http.get("/api/v1/nodes", headers={
        "Accept": "application/json;as=Table;v=v1beta1;g=meta.k8s.io"}).json()
    assert old["apiVersion"] == "meta.k8s.io/v1beta1"
    plain = http.get("/api/v1/nodes", headers={"Accept": "application/json"}).json()
    assert plain["kind"] == "NodeList"


def test_paged_tables_carry_continue(http: httpx.Client) -> None:
    page = http.get("/api/v1/nodes", params={"limit": 2}, headers={"Accept": TABLE}).json()
    assert len(page["rows"]) == 2
    assert page["metadata"]["continue"]


def test_events_get_defaults(http: httpx.Client) -> None:
    resp = http.post("/api/v1/namespaces/default/events", json={
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "gpu-a"},
        "reason": "Spilled", "message": "tainted"})
    event = resp.json()
    assert (event["type"], event["count"]) == ("Normal", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    table = http.get("/api/v1/namespaces/default/events", headers={"Accept": TABLE}).json()
    shown = {c["name"]: cell for c, cell in zip(table["columnDefinitions"],
                                                 table["rows"][0]["cells"], strict=True)
             if c["priority"] == 0}
    assert shown == {"Last Seen": "0s", "Type": "Normal", "Reason": "Spilled",
                     "Object": "node/gpu-a", "Message": "tainted"}


def test_version_rewrite_between_served_versions(http: httpx.Client) -> None:
    http.post("/apis/kueue.x-k8s.io/v1beta1/resourceflavors",
              json={"metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"pool": "gpu"}}})
    v2 = http.get("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/gpu").json()
    v1 = http.get("/apis/kueue.x-k8s.io/v1beta1/resourceflavors/gpu").json()
    assert (v1["apiVersion"], v2["apiVersion"]) == ("kueue.x-k8s.io/v1beta1",
                                                    "kueue.x-k8s.io/v1beta2")
    assert v1["spec"] == v2["spec"]


def test_failed_start_leaves_a_stoppable_server() -> None:
    with EmbeddedServer() as first:
        second = EmbeddedServer(port=first.port)
        with pytest.raises(InputError, match="cannot listen"):
            second.start()
        second.stop()  # returns at once: nothing is running
        assert second.call(lambda: "here") == "here"
