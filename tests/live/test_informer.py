"""The informer on its own: list then watch, SYNC on every (re-)list, absent resources, objects
decoded once into the typed model and refused ones left out and counted."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Node
from tests.live.harness import Live, node, wait_for, write

from kubeberth.api import objects as kb
from kubeberth.live.cache import decode
from kubeberth.live.informer import SYNC, Informer

Widget = create_namespaced_resource("example.com", "v1", "Widget", "widgets")


def test_absent_resource_is_an_empty_synced_cache(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))
    seen: list[tuple[str, str, Any]] = []
    stop = threading.Event()
    inf = Informer(live.client(), "Widget", Widget, lambda *e: seen.append(e), stop=stop,
                   absent_retry=0.05).start()
    try:
        wait_for(inf.synced.is_set, "the informer to call the absent resource synced")
        assert seen[0] == ("Widget", SYNC, {})
        assert inf.error is not None
    finally:
        stop.set()
        inf.thread.join(timeout=5)


def test_events_follow_the_list_and_relists_after_410(live: Live, tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)), history=3)
    seen: list[tuple[str, str, Any]] = []
    stop = threading.Event()
    inf = Informer(live.client(), "Node", Node, lambda *e: seen.append(e), stop=stop).start()
    try:
        wait_for(inf.synced.is_set, "the first list")
        assert seen[0][1] == SYNC and list(seen[0][2]) == ["n1"]
        api = srv.api
        srv.call(lambda: api.create(api.nodes, "", {"apiVersion": "v1", "kind": "Node",
                                                     "metadata": {"name": "n2"}}))
        wait_for(lambda: any(t == "ADDED" and o[0] == "n2" for _, t, o in seen[1:]),
                 "the watch event")

        def drop() -> None:
            # The stream ends, then more changes than the history keeps: the resume is a 410.
            api.store.compact()
            api.store.close_watches()
            for i in range(3, 9):
                api.create(api.nodes, "", {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": f"n{i}"}})

        srv.call(drop)
        wait_for(lambda: inf.stats.lists >= 2, "a re-list")
        assert inf.stats.gone >= 1
        last_sync = [o for _, t, o in seen if t == SYNC][-1]
        assert set(last_sync) >= {"n1", "n2", "n8"}
    finally:
        stop.set()
        srv.call(lambda: srv.api.store.close_watches())
        inf.thread.join(timeout=5)


def test_objects_arrive_typed_and_refused_ones_are_counted(live: Live, tmp_path: Path) -> None:
    """With a decoder, list items and watch events reach the sink as kubeberth's typed objects
    (apiVersion and kind filled in where the API leaves them out); an object the manifest
    loader refuses (stored behind the API's validation) is logged, counted and left out, and a
    deletion arrives as its key alone."""
    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))
    api = srv.api
    bad = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"},
           "status": {"allocatable": {"cpu": "lots"}}}
    srv.call(lambda: api.store.insert(api.nodes, bad))
    seen: list[tuple[str, str, Any]] = []
    stop = threading.Event()
    inf = Informer(live.client(), "Node", Node, lambda *e: seen.append(e), stop=stop,
                   decode=decode).start()
    try:
        wait_for(inf.synced.is_set, "the first list")
        kind, type_, objects = seen[0]
        assert (kind, type_, list(objects)) == ("Node", SYNC, ["n1"])
        assert isinstance(objects["n1"], kb.Node) and objects["n1"].metadata.name == "n1"
        assert inf.stats.ignored == 1
        srv.call(lambda: api.create(api.nodes, "", {"apiVersion": "v1", "kind": "Node",
                                                     "metadata": {"name": "n2"}}))
        srv.call(lambda: api.store.insert(api.nodes, {**bad, "metadata": {"name": "bad2"}}))
        srv.call(lambda: api.delete(api.nodes, "", "n1"))
        wait_for(lambda: any(t == "DELETED" for _, t, _o in seen), "the deletion")
        assert [(t, o[0], type(o[1])) for _, t, o in seen[1:]] == [
            ("ADDED", "n2", kb.Node), ("DELETED", "n1", type(None))]
        assert inf.stats.ignored == 2
    finally:
        stop.set()
        inf.thread.join(timeout=5)
