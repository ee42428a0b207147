"""Fuzzing a real ``kubeberth serve``: mutated objects, bodies, headers, paths and query
strings. Every answer must be a Kubernetes Status (or a valid object, list or watch stream),
never a 500 or a dropped connection; ``/healthz`` answers throughout and the process's memory
stays bounded. Hypothesis is derandomised under CI (same inputs every run)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.apiserver.conftest import pod_body
from tests.apiserver.hostile import Served, serve

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fz", "labels": {"a": "b"}},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}}}
CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
      "metadata": {"name": "fz"},
      "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
          {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fz"}, "data": {"k": "v"}}
DELETE_OPTIONS = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                  "preconditions": {"uid": "u"}, "propagationPolicy": "Background",
                  "dryRun": ["All"]}
EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "fz"},
            "deleteOptions": DELETE_OPTIONS}
BASES: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces/default/pods", DELETE_OPTIONS),
    ("/api/v1/namespaces/default/pods", EVICTION),
    ("/api/v1/namespaces/default/pods", pod_body("fz", gpus=1)),
    ("/api/v1/nodes", NODE),
    ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", CQ),
    ("/api/v1/namespaces/default/configmaps", CM),
]
CONTENT_TYPES = ["application/json", "application/yaml", "application/merge-patch+json",
                 "application/json-patch+json", "application/strategic-merge-patch+json",
                 "application/apply-patch+yaml", "application/vnd.kubernetes.protobuf",
                 "text/plain", ""]
QUERY_KEYS = ["watch", "resourceVersion", "resourceVersionMatch", "labelSelector",
              "fieldSelector", "limit", "continue", "timeoutSeconds", "dryRun",
              "gracePeriodSeconds", "propagationPolicy", "allowWatchBookmarks",
              "sendInitialEvents", "includeObject"]
HOSTILE_VALUES = ["1e400", "1e999999999", "-1", "NaN", ".nan", "18446744073709551616", "",
                  "1_0", "\x00", "🙂", "0" * 5000, "100m", "16Gi", "a" * 300]

leaf = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                 st.sampled_from(HOSTILE_VALUES))
json_value = st.recursive(leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_object(draw: st.DrawFn) -> tuple[str, Any]:
    """A base object with a few of its values (anywhere) replaced by hostile ones."""
    collection, base = draw(st.sampled_from(BASES))
    obj = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(obj)))
        if not path:
            continue
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(json_value)
    return collection, obj


def _encode(obj: Any, how: str) -> bytes:
    if how == "yaml":
        import yaml

        return yaml.safe_dump(obj).encode()
    return json.dumps(obj, allow_nan=True).encode()  # NaN/Infinity literals on purpose


@st.composite
def request(draw: st.DrawFn) -> dict[str, Any]:
    collection, obj = draw(mutated_object())
    name = quote(str((obj.get("metadata") or {}).get("name") if isinstance(obj, dict) and
                     isinstance(obj.get("metadata"), dict) else "fz"), safe="")
    path = draw(st.sampled_from([collection, f"{collection}/{name}",
                                 f"{collection}/{name}/status", f"{collection}/{name}/scale",
                                 f"{collection}/fz/binding", f"{collection}/fz/eviction",
                                 "/api", "/apis/kueue.x-k8s.io", "/api/v1/nope",
                                 "/apis/x/y/z/w/v", "/metrics", "/version"]))
    if draw(st.booleans()):
        path += draw(st.sampled_from(["/", "//", "/%00", "/..", "?x", "/" + "a" * 300]))
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD",
                                   "OPTIONS"]))
    query = draw(st.dictionaries(st.sampled_from(QUERY_KEYS),
                                 st.one_of(st.text(max_size=12), st.sampled_from(
                                     [*HOSTILE_VALUES, "true", "1", "All", "Exact"])),
                                 max_size=3))
    if query.get("watch") in ("true", "1"):
        query["timeoutSeconds"] = "1"  # a watch answers with a stream; keep it short
    body_kind = draw(st.sampled_from(["json", "yaml", "bytes", "json-value", "none"]))
    if body_kind == "bytes":
        body: bytes | None = draw(st.binary(max_size=200))
    elif body_kind == "json-value":
        body = _encode(draw(json_value), "json")
    elif body_kind == "none":
        body = None
    else:
        body = _encode(obj, body_kind)
    headers = {"Content-Type": draw(st.sampled_from(CONTENT_TYPES))}
    if draw(st.integers(0, 9)) == 0:
        headers["Accept"] = draw(st.sampled_from([
            "application/json;as=Table;v=v1;g=meta.k8s.io", "*/*", "text/html", "\x7f"]))
    return {"method": method, "url": path, "params": query, "content": body,
            "headers": headers}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("fuzz")
    cluster = tmp / "cluster.yaml"
    cluster.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n"
                       "  allocatable: {cpu: '8', memory: 32Gi, pods: '110'}\n")
    with serve(cluster, tmp) as srv:
        yield srv


def check_answer(resp: httpx.Response, body: bytes) -> None:
    """A Status for every failure, JSON for every success (a watch: JSON lines)."""
    assert resp.status_code != 500, body[:2000]
    if any(not 0x20 <= ord(c) < 0x7f for c in resp.request.headers.get("Accept", "")) or \
            len(resp.request.url.raw_path) > 8190:
        # Not HTTP (a control character in a header) or a request line past 8 KiB: the HTTP
        # parser answers in plain text before any Kubernetes handling, as Go's net/http does
        # for kube-apiserver.
        assert resp.status_code in (400, 414, 431), resp.status_code
        return
    if resp.request.method == "HEAD" or (resp.request.url.path in (
            "/metrics", "/healthz", "/readyz", "/livez") and resp.status_code == 200):
        return
    if resp.status_code >= 400:
        status = json.loads(body)
        assert status["kind"] == "Status" and status["code"] == resp.status_code, body[:500]
        return
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    watch = resp.request.url.params.get("watch") in ("true", "1")
    assert lines or watch, f"empty {resp.status_code} answer"  # a quiet watch may send none
    for line in lines:
        assert isinstance(line, dict) and ("kind" in line or "type" in line or
                                           "gitVersion" in line), line


@settings(max_examples=int(os.environ.get("KUBEBERTH_FUZZ_EXAMPLES", "300")), deadline=None,
          derandomize=bool(os.environ.get("CI")), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(req=request())
def test_every_answer_is_a_status_or_an_object(served: Served, req: dict[str, Any]) -> None:
    with served.client(timeout=30) as http:
        with http.stream(**req) as resp:
            body = resp.read()
        check_answer(resp, body)
        assert http.get("/healthz").text == "ok"
    assert served.alive()


def test_memory_stays_bounded_after_fuzzing(served: Served) -> None:
    # Runs after the fuzz test in this module (same server): every request above was bounded.
    with served.client() as http:
        assert http.get("/metrics").status_code == 200
        assert http.get("/healthz").text == "ok"
    assert served.rss_bytes() < 600 * 2**20
