"""Watch semantics over HTTP: resume by resourceVersion, 410 Gone, bookmarks, selectors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from kubeberth.apiserver import EmbeddedServer

PodBody = Callable[..., dict[str, Any]]
PODS = "/api/v1/namespaces/default/pods"


def _watch(http: httpx.Client, path: str, count: int, **params: Any) -> list[dict[str, Any]]:
    """Read ``count`` events (or until the server ends the stream)."""
    params = {"watch": "true", "timeoutSeconds": 5, **params}
    events: list[dict[str, Any]] = []
    with http.stream("GET", path, params=params) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "application/json"
        for line in resp.iter_lines():
            if line:
                events.append(json.loads(line))
            if len(events) >= count:
                break
    return events


def _summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def test_watch_from_a_list_version_sees_later_changes(http: httpx.Client,
                                                      make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("before"))
    rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    http.post(PODS, json=make_pod("a"))
    http.patch(f"{PODS}/a", content=b'{"metadata":{"labels":{"x":"1"}}}',
               headers={"Content-Type": "application/merge-patch+json"})
    http.delete(f"{PODS}/a")
    events = _watch(http, PODS, 3, resourceVersion=rv)
    assert _summary(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_resumes_from_any_seen_version(http: httpx.Client, make_pod: PodBody) -> None:
    created = [http.post(PODS, json=make_pod(f"p{i}")).json() for i in range(4)]
    middle = created[1]["metadata"]["resourceVersion"]
    events = _watch(http, PODS, 2, resourceVersion=middle)
    assert _summary(events) == [("ADDED", "p2"), ("ADDED", "p3")]


def test_watch_without_version_starts_with_current_objects(http: httpx.Client,
                                                           make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("x"))
    assert _summary(_watch(http, "/api/v1/nodes", 3)) == [
        ("ADDED", "cpu-a"), ("ADDED", "gpu-a"), ("ADDED", "gpu-b")]
    assert _summary(_watch(http, PODS, 1, resourceVersion="0")) == [("ADDED", "x")]


def test_watch_from_compacted_version_is_410_gone(http: httpx.Client, make_pod: PodBody,
                                                  server: EmbeddedServer) -> None:
    old = http.post(PODS, json=make_pod("old")).json()["metadata"]["resourceVersion"]
    http.post(PODS, json=make_pod("later"))
    server.call(server.api.store.compact)
    events = _watch(http, PODS, 5, resourceVersion=old)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {old}")
    # A fresh list gives a version that can be watched again.
    rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    http.post(PODS, json=make_pod("new"))
    assert _summary(_watch(http, PODS, 1, resourceVersion=rv)) == [("ADDED", "new")]


def test_watch_history_is_bounded(http: httpx.Client, make_pod: PodBody) -> None:
    first = http.post(PODS, json=make_pod("first")).json()["metadata"]["resourceVersion"]
    path = "/api/v1/nodes/cpu-a"
    for i in range(210):  # the fixture keeps 200 events per resource
        http.post(PODS, json=make_pod(f"n{i}"))
    http.get(path)
    events = _watch(http, PODS, 1, resourceVersion=first)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410


def test_bookmarks_carry_the_current_version(http: httpx.Client, make_pod: PodBody) -> None:
    rv = http.post(PODS, json=make_pod("b")).json()["metadata"]["resourceVersion"]
    http.post("/api/v1/namespaces", json={"metadata": {"name": "elsewhere"}})
    events = _watch(http, PODS, 1, resourceVersion=rv, allowWatchBookmarks="true")
    assert events[0]["type"] == "BOOKMARK"
    obj = events[0]["object"]
    assert (obj["kind"], obj["apiVersion"]) == ("Pod", "v1")
    assert int(obj["metadata"]["resourceVersion"]) > int(rv)


def test_no_bookmarks_unless_asked(http: httpx.Client, make_pod: PodBody) -> None:
    rv = http.post(PODS, json=make_pod("b")).json()["metadata"]["resourceVersion"]
    assert _watch(http, PODS, 1, resourceVersion=rv, timeoutSeconds=1) == []


def test_send_initial_events_ends_with_an_annotated_bookmark(http: httpx.Client,
                                                             make_pod: PodBody) -> None:
    http.post(PODS, json=make_pod("i"))
    events = _watch(http, PODS, 2, sendInitialEvents="true", allowWatchBookmarks="true",
                    resourceVersionMatch="NotOlderThan")
    assert _summary(events)[0] == ("ADDED", "i")
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}


def test_label_selector_watch_sees_objects_enter_and_leave(http: httpx.Client,
                                                           make_pod: PodBody) -> None:
    rv = http.post(PODS, json=make_pod("s", labels={"app": "x"})).json()["metadata"][
        "resourceVersion"]
    for labels in ({"app": "y"}, {"app": "x"}, {"app": "x", "more": "1"}):
        http.patch(f"{PODS}/s", content=json.dumps({"metadata": {"labels": labels}}).encode(),
                   headers={"Content-Type": "application/strategic-merge-patch+json"})
    events = _watch(http, PODS, 3, resourceVersion=rv, labelSelector="app=x")
    assert _summary(events) == [("DELETED", "s"), ("ADDED", "s"), ("MODIFIED", "s")]


def test_field_selector_watch_on_one_node(http: httpx.Client, make_pod: PodBody,
                                          server: EmbeddedServer) -> None:
    rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    http.post(PODS, json=make_pod("elsewhere", node="gpu-b"))
    http.post(PODS, json=make_pod("here", node="gpu-a"))
    server.settle()
    events = _watch(http, "/api/v1/pods", 2, resourceVersion=rv,
                    fieldSelector="spec.nodeName=gpu-a")
    assert _summary(events) == [("ADDED", "here"), ("MODIFIED", "here")]
    assert events[1]["object"]["status"]["phase"] == "Running"


def test_watch_timeout_ends_the_stream(http: httpx.Client) -> None:
    rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    assert _watch(http, PODS, 10, resourceVersion=rv, timeoutSeconds=1) == []


def test_watch_bad_version_is_400(http: httpx.Client) -> None:
    resp = http.get(PODS, params={"watch": "true", "resourceVersion": "abc"})
    assert resp.status_code == 400
    assert resp.json()["reason"] == "BadRequest"


def test_table_watch_sends_columns_once(http: httpx.Client, make_pod: PodBody) -> None:
    rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    http.post(PODS, json=make_pod("t1"))
    http.post(PODS, json=make_pod("t2"))
    events: list[dict[str, Any]] = []
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    with http.stream("GET", PODS, params={"watch": "1", "resourceVersion": rv,
                                          "timeoutSeconds": 5},
                     headers={"Accept": accept}) as resp:
        for line in resp.iter_lines():
            events.append(json.loads(line))
            if len(events) == 2:
                break
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert events[0]["object"]["columnDefinitions"][0]["name"] == "Name"
    assert events[1]["object"]["columnDefinitions"] == []
    assert events[1]["object"]["rows"][0]["cells"][0] == "t2"


def test_namespaced_watch_sees_only_its_namespace(http: httpx.Client,
                                                  make_pod: PodBody) -> None:
    http.post("/api/v1/namespaces", json={"metadata": {"name": "team"}})
    rv = http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
    http.post("/api/v1/namespaces/team/pods", json=make_pod("t", namespace="team"))
    http.post(PODS, json=make_pod("d"))
    assert _summary(_watch(http, PODS, 1, resourceVersion=rv)) == [("ADDED", "d")]
    everywhere = _watch(http, "/api/v1/pods", 2, resourceVersion=rv)
    assert [(e["object"]["metadata"]["namespace"], e["type"]) for e in everywhere] == [
        ("team", "ADDED"), ("default", "ADDED")]


def test_watch_events_are_served_in_the_requested_version(http: httpx.Client) -> None:
    http.post("/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
              json={"metadata": {"name": "cq"}, "spec": {}})
    events = _watch(http, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", 1)
    assert events[0]["object"]["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def test_server_stop_ends_open_watches(cluster_file: Any) -> None:
    import threading

    from kubeberth.config.manifests import load_manifests

    srv = EmbeddedServer(manifests=load_manifests(cluster_file)).start()
    ended = threading.Event()

    def watch() -> None:
        with httpx.Client(base_url=srv.url, timeout=30) as client, client.stream(
                "GET", "/api/v1/nodes", params={"watch": "1", "resourceVersion": "1"}) as resp:
            for _ in resp.iter_lines():
                pass
        ended.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    nodes = srv.api.nodes
    import time

    deadline = time.monotonic() + 20
    while srv.call(lambda: srv.api.store.watcher_count(nodes)) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    srv.stop()
    assert ended.wait(20)
