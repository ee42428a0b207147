"""The informer on its own: list then watch, SYNC on every (re-)list, absent resources."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Node
from tests.live.harness import Live, node, wait_for, write

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
        assert seen[0] == ("Widget", SYNC, [])
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
        assert seen[0][1] == SYNC and [o["metadata"]["name"] for o in seen[0][2]] == ["n1"]
        api = srv.api
        srv.call(lambda: api.create(api.nodes, "", {"apiVersion": "v1", "kind": "Node",
                                                     "metadata": {"name": "n2"}}))
        wait_for(lambda: any(t == "ADDED" and o["metadata"]["name"] == "n2"
                             for _, t, o in seen[1:]), "the watch event")

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
        assert {o["metadata"]["name"] for o in last_sync} >= {"n1", "n2", "n8"}
    finally:
        stop.set()
        srv.call(lambda: srv.api.store.close_watches())
        inf.thread.join(timeout=5)


def test_an_undecodable_object_does_not_kill_the_informer(live: Live, tmp_path: Path) -> None:
    """An object lightkube's typed model cannot decode (here an Event without the
    involvedObject the model requires, stored behind the API's validation) fails the list.
    The informer keeps running, reports the error and syncs once the object is gone."""
    from lightkube.resources.core_v1 import Event

    srv = live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))
    api = srv.api
    srv.call(lambda: api.store.insert(api.events, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "odd", "namespace": "default"}, "reason": "Odd"}))
    seen: list[tuple[str, str, Any]] = []
    stop = threading.Event()
    inf = Informer(live.client(), "Event", Event, lambda *e: seen.append(e),
                   stop=stop, absent_retry=0.05).start()
    try:
        wait_for(lambda: inf.error is not None, "the decoding error")
        assert inf.thread.is_alive() and not inf.synced.is_set()
        srv.call(lambda: api.store.remove(api.events,
                                          api.store.must_get(api.events, "default", "odd")))
        wait_for(inf.synced.is_set, "the informer to sync once the object is gone")
        assert seen[0] == ("Event", SYNC, [])
        assert inf.thread.is_alive()
    finally:
        stop.set()
        inf.thread.join(timeout=5)
