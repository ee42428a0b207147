"""Hostile requests against a real ``kubeberth serve``: each gets the exact Status upstream's
API server gives (poison quantities, NaN, alias bombs, deep nesting, oversize bodies, bad
resourceVersions), nothing bad is stored, ``/healthz`` and ``/metrics`` keep answering, and
the process's memory stays bounded. Slow clients and memory retention are checked on an
in-process server whose limits a test can shorten."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.apiserver.conftest import pod_body
from tests.apiserver.hostile import Served, serve

from kubeberth.apiserver import EmbeddedServer
from kubeberth.apiserver.limits import MAX_BODY_BYTES, MAX_DEPTH
from kubeberth.apiserver.store import DEFAULT_HISTORY_BYTES

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
CQS = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
YAML = {"Content-Type": "application/yaml"}
# 9 x 9 x ... aliases: 517 bytes of YAML that expand to ~10^9 scalars.
ALIAS_BOMB = "apiVersion: v1\nkind: Pod\nmetadata: {name: bomb}\nx:\n" + "".join(
    f"  {n}: &{n} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, n in zip(["", "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=True))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("hostile")
    cluster = tmp / "cluster.yaml"
    cluster.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n"
                       "  allocatable: {cpu: '8', memory: 32Gi, pods: '110'}\n")
    with serve(cluster, tmp) as srv:
        yield srv


@pytest.fixture
def http(served: Served) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


def status_of(resp: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    """The response is a Kubernetes Status with this code and reason."""
    assert resp.status_code == code, resp.text[:500]
    assert resp.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = resp.json()
    assert (body["kind"], body["apiVersion"], body["status"]) == ("Status", "v1", "Failure")
    assert (body["code"], body["reason"]) == (code, reason), body
    return body


def poison_pod(cpu: Any, name: str = "poison") -> dict[str, Any]:
    body = pod_body(name)
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return body


@pytest.mark.parametrize("cpu", ["1e400", "1e999999999", "18446744073709551616", "-1e400",
                                 "9223372036854776"])
def test_poison_pod_quantities_are_422_and_not_stored(http: httpx.Client, cpu: str) -> None:
    err = status_of(http.post(PODS, json=poison_pod(cpu)), 422, "Invalid")
    cause = err["details"]["causes"][0]
    assert cause["field"] == "spec.containers[0].resources.requests.cpu"
    assert err["message"].startswith('Pod "poison" is invalid: '
                                     "spec.containers[0].resources.requests.cpu: Invalid value")
    status_of(http.get(f"{PODS}/poison"), 404, "NotFound")


def test_poison_node_and_cluster_queue_are_422(http: httpx.Client) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"},
            "status": {"capacity": {"cpu": "1e400"}}}
    err = status_of(http.post(NODES, json=node), 422, "Invalid")
    assert err["details"]["causes"][0]["field"] == "status.capacity.cpu"
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
          "metadata": {"name": "cq"},
          "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
              {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1e999"}]}]}]}}
    err = status_of(http.post(CQS, json=cq), 422, "Invalid")
    assert err["details"]["causes"][0]["field"] == \
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    status_of(http.get(f"{CQS}/cq"), 404, "NotFound")
    # A poison status written through the subresource is refused the same way.
    node["metadata"]["name"] = "good"
    node["status"] = {"capacity": {"cpu": "4"}}
    assert http.post(NODES, json=node).status_code == 201
    current = http.get(f"{NODES}/good").json()
    current["status"]["allocatable"] = {"cpu": "1e400"}
    status_of(http.put(f"{NODES}/good/status", json=current), 422, "Invalid")
    assert http.get("/metrics").status_code == 200


def test_nan_and_infinite_numbers_are_400(http: httpx.Client) -> None:
    raw = json.dumps(pod_body("nan")).replace('"cpu": "1"', '"cpu": NaN')
    status_of(http.post(PODS, content=raw, headers={"Content-Type": "application/json"}),
              400, "BadRequest")
    raw = json.dumps(pod_body("inf")).replace('"cpu": "1"', '"cpu": 1e400')
    status_of(http.post(PODS, content=raw, headers={"Content-Type": "application/json"}),
              400, "BadRequest")
    body = yaml.safe_dump(pod_body("yamlnan")).replace("cpu: '1'", "cpu: .nan")
    assert "cpu: .nan" in body
    status_of(http.post(PODS, content=body, headers=YAML), 400, "BadRequest")
    status_of(http.get(f"{PODS}/yamlnan"), 404, "NotFound")


def test_yaml_alias_bomb_is_refused_with_bounded_memory(served: Served,
                                                        http: httpx.Client) -> None:
    assert len(ALIAS_BOMB) < 600
    before = served.rss_bytes()
    for _ in range(3):
        err = status_of(http.post(PODS, content=ALIAS_BOMB, headers=YAML), 400, "BadRequest")
        assert "expands (through its aliases)" in err["message"]
    assert served.rss_bytes() - before < 64 * 2**20
    assert http.get("/healthz").text == "ok"


def test_a_few_aliases_are_fine(http: httpx.Client) -> None:
    body = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: anchors, labels: &l {a: b}}\n"
            "data: {x: &v hello, y: *v}\n")
    resp = http.post("/api/v1/namespaces/default/configmaps", content=body, headers=YAML)
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"] == {"x": "hello", "y": "hello"}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 100_000])
def test_deep_json_and_yaml_are_400(http: httpx.Client, depth: int) -> None:
    deep = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deep"}, "x": ' + \
        "[" * depth + "]" * depth + "}"
    err = status_of(http.post(PODS, content=deep, headers={"Content-Type": "application/json"}),
                    400, "BadRequest")
    assert "max depth" in err["message"] or "deeper" in err["message"]
    status_of(http.post(PODS, content=deep, headers=YAML), 400, "BadRequest")
    patch = "[" * depth + "]" * depth
    status_of(http.patch(f"{NODES}/n1", content=patch,
                         headers={"Content-Type": "application/merge-patch+json"}),
              400, "BadRequest")


def test_oversize_bodies_get_a_413_status(http: httpx.Client) -> None:
    big = b'{"kind": "Pod", "x": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
    err = status_of(http.post(PODS, content=big, headers={"Content-Type": "application/json"}),
                    413, "RequestEntityTooLarge")
    assert err["message"] == f"Request entity too large: limit is {MAX_BODY_BYTES}"

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while it is read
        for _ in range(5):
            yield b"a" * 2**20

    status_of(http.put(f"{NODES}/n1", content=chunks(),
                       headers={"Content-Type": "application/json"}),
              413, "RequestEntityTooLarge")


@pytest.mark.parametrize("rv", ["1_0", " 10", "+1", "0x10", "-1", "1e3", "١٠"])
def test_malformed_resource_versions_are_400(http: httpx.Client, rv: str) -> None:
    for params in ({"watch": "true", "resourceVersion": rv}, {"resourceVersion": rv}):
        err = status_of(http.get(PODS, params=params), 400, "BadRequest")
        assert "resourceVersion" in err["message"]


def test_future_resource_version_is_504_and_too_old_is_410(http: httpx.Client) -> None:
    current = int(http.get(PODS).json()["metadata"]["resourceVersion"])
    future = str(current + 1_000_000)
    for params in ({"watch": "true", "resourceVersion": future}, {"resourceVersion": future}):
        err = status_of(http.get(PODS, params=params), 504, "Timeout")
        assert err["message"] == f"Timeout: Too large resource version: {future}, current: " \
            f"{current}"
        assert err["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    http.post(PODS, json=pod_body("bump"))
    status_of(http.get(PODS, params={"resourceVersion": str(current),
                                     "resourceVersionMatch": "Exact"}), 410, "Expired")


def test_wrong_or_missing_token_is_401(served: Served) -> None:
    with httpx.Client(base_url=served.url, verify=False, timeout=10) as anonymous:
        status_of(anonymous.get(PODS), 401, "Unauthorized")
        status_of(anonymous.get("/metrics"), 401, "Unauthorized")
        status_of(anonymous.get(PODS, headers={"Authorization": f"Bearer {served.token}x"}),
                  401, "Unauthorized")
        assert anonymous.get("/healthz").text == "ok"


def test_metrics_and_health_survive_everything_above(served: Served,
                                                     http: httpx.Client) -> None:
    assert served.alive()
    assert http.get("/metrics").status_code == 200
    assert http.get("/healthz").text == "ok"


# In-process servers whose limits a test shortens.

def test_slowloris_connections_are_closed_after_the_header_timeout() -> None:
    with EmbeddedServer(header_timeout=1.0) as srv:
        socks = []
        for _ in range(50):
            sock = socket.create_connection((srv.host, srv.port))
            sock.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(sock)
        with httpx.Client(base_url=srv.url, timeout=10) as http:
            assert http.get("/healthz").text == "ok"
            # A watch (a request that streams for longer) is not cut by the header timeout.
            with http.stream("GET", "/api/v1/namespaces", params={
                    "watch": "true", "timeoutSeconds": "3"}) as watch:
                lines = list(watch.iter_lines())
            assert len(lines) >= 4 and all(json.loads(x)["type"] == "ADDED" for x in lines)
        for sock in socks:
            sock.settimeout(30)
            assert sock.recv(1024) == b""  # closed by the server
            sock.close()


def test_replaced_large_objects_are_not_retained() -> None:
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        path = "/api/v1/namespaces/default/configmaps"
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "big"}, "data": {"v": ""}}
        for i in range(40):
            body["data"]["v"] = str(i) * (2_500_000 // len(str(i)))
            resp = (http.post(path, json=body) if i == 0 else
                    http.put(f"{path}/big", json=body))
            assert resp.status_code in (200, 201), resp.text[:300]

        def held() -> int:
            table = srv.cluster.store._tables[("", "configmaps")]
            return table.history_bytes

        assert srv.call(held) <= DEFAULT_HISTORY_BYTES
        assert http.get("/healthz").text == "ok"


def test_healthz_answers_while_big_bodies_are_decoded() -> None:
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        big = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "wide"},
                          "data": {f"k{i}": "v" for i in range(120_000)}})
        assert len(big) < MAX_BODY_BYTES

        done = threading.Event()
        answers: list[int] = []

        def poll() -> None:
            with httpx.Client(base_url=srv.url, timeout=30) as probe:
                while not done.is_set():
                    answers.append(probe.get("/healthz").status_code)
                    time.sleep(0.01)

        prober = threading.Thread(target=poll)
        prober.start()
        try:
            for i in range(3):
                http.post("/api/v1/namespaces/default/configmaps",
                          content=big.replace('"wide"', f'"wide{i}"'),
                          headers={"Content-Type": "application/json"})
        finally:
            done.set()
            prober.join()
        assert answers and set(answers) == {200}


def test_kubeconfig_is_private(tmp_path: Path) -> None:
    with EmbeddedServer(token="t") as srv:
        path = srv.write_kubeconfig(tmp_path / "kc")
        assert path.stat().st_mode & 0o777 == 0o600
        assert "token: t" in path.read_text()


def test_metrics_skip_stored_objects_they_cannot_read() -> None:
    """Objects that bypassed validation (written before it existed, or by a bug) must not
    take /metrics down for everyone."""
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        store, api = srv.cluster.store, srv.api
        poison = pod_body("poison")
        poison["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1e400"
        broken = pod_body("broken")
        broken["spec"]["containers"] = "not a list"
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "odd"},
                "spec": {"taints": "not a list"},
                "status": {"capacity": {"cpu": "1e999999999", "memory": float("nan")}}}
        srv.call(lambda: [store.insert(api.pods, poison), store.insert(api.pods, broken),
                          store.insert(api.nodes, node)])
        http.post(PODS, json=pod_body("fine"))
        resp = http.get("/metrics")
        assert resp.status_code == 200
        assert 'kube_pod_info{' in resp.text and 'pod="fine"' in resp.text
        lines = resp.text.splitlines()
        # The node's series read before the unreadable field stay.
        assert any(x.startswith("kube_node_info{") and 'node="odd"' in x for x in lines)


@pytest.mark.parametrize(("meta", "field"), [
    ({"name": [None]}, "name"), ({"name": "ok", "labels": {"a": 1}}, "labels"),
    ({"name": "ok", "labels": ["a"]}, "labels"), ({"name": "ok", "finalizers": [1]},
                                                  "finalizers"),
    ({"name": "ok", "generation": "1"}, "generation"),
    ({"name": "ok", "ownerReferences": ["x"]}, "ownerReferences")])
def test_metadata_of_the_wrong_type_is_400_for_every_kind(http: httpx.Client,
                                                          meta: dict[str, Any],
                                                          field: str) -> None:
    for path, kind, api in ((CQS, "ClusterQueue", "kueue.x-k8s.io/v1beta2"),
                            ("/api/v1/namespaces/default/configmaps", "ConfigMap", "v1")):
        err = status_of(http.post(path, json={"apiVersion": api, "kind": kind,
                                              "metadata": meta}), 400, "BadRequest")
        assert f"ObjectMeta.metadata.{field}" in err["message"]


@pytest.mark.parametrize("options", [{"gracePeriodSeconds": "soon"}, {"preconditions": [1]},
                                     {"propagationPolicy": "Sideways"}])
def test_bad_delete_options_are_400(http: httpx.Client, options: dict[str, Any]) -> None:
    assert http.post(PODS, json=pod_body("victim")).status_code in (201, 409)
    status_of(http.request("DELETE", f"{PODS}/victim", json=options), 400, "BadRequest")
    status_of(http.post(f"{PODS}/victim/eviction", json={
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "victim"},
        "deleteOptions": options}), 400, "BadRequest")
    assert http.get(f"{PODS}/victim").status_code == 200
