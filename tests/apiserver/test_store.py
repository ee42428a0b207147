"""The store alone: resource versions, no-op writes, history floors, watch backlogs, names."""

from __future__ import annotations

import asyncio
import re

import pytest

from kubeberth.api.times import format_time, parse_time_or_none
from kubeberth.apiserver.clock import ManualClock
from kubeberth.apiserver.errors import ApiError
from kubeberth.apiserver.resources import Registry, ResourceType
from kubeberth.apiserver.store import Store, parse_rv


@pytest.fixture
def store() -> Store:
    return Store(Registry(), ManualClock(), history=3)


@pytest.fixture
def nodes(store: Store) -> ResourceType:
    rt = store.registry.by_path("", "v1", "nodes")
    assert rt is not None
    return rt


def test_insert_stamps_metadata(store: Store, nodes: ResourceType) -> None:
    obj = store.insert(nodes, {"metadata": {"name": "n", "namespace": "ignored",
                                            "resourceVersion": "99"}})
    meta = obj["metadata"]
    assert meta["resourceVersion"] == "2"
    assert "namespace" not in meta
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert meta["generation"] == 1
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}",
                        meta["uid"])
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "Node")
    with pytest.raises(ApiError) as err:
        store.insert(nodes, {"metadata": {"name": "n"}})
    assert err.value.code == 409


def test_uids_and_generated_names_are_deterministic(nodes: ResourceType) -> None:
    def run() -> list[str]:
        s = Store(Registry(), ManualClock())
        made = [s.insert(nodes, {"metadata": {"generateName": "node-"}}) for _ in range(3)]
        return [m["metadata"]["name"] + " " + m["metadata"]["uid"] for m in made]

    first = run()
    assert first == run()
    names = [entry.split()[0] for entry in first]
    uids = [entry.split()[1] for entry in first]
    # Three distinct objects: distinct generated names and uids, in the generateName form.
    assert len(set(names)) == 3 and len(set(uids)) == 3
    assert all(re.fullmatch(r"node-[a-z0-9]{5}", n) for n in names), names


def test_replace_bumps_version_and_generation(store: Store, nodes: ResourceType) -> None:
    old = store.insert(nodes, {"metadata": {"name": "n"}, "spec": {}})
    same = store.replace(nodes, {"metadata": {"name": "n"}, "spec": {}}, old)
    assert same is old
    labelled = store.replace(nodes, {"metadata": {"name": "n", "labels": {"a": "b"}},
                                     "spec": {}}, old)
    assert labelled["metadata"]["resourceVersion"] == "3"
    assert labelled["metadata"]["generation"] == 1
    assert labelled["metadata"]["uid"] == old["metadata"]["uid"]
    specced = store.replace(nodes, {"metadata": {"name": "n"}, "spec": {"unschedulable": True}},
                            labelled)
    assert specced["metadata"]["generation"] == 2


def test_history_floor_and_backlog(store: Store, nodes: ResourceType) -> None:
    for i in range(5):
        store.insert(nodes, {"metadata": {"name": f"n{i}"}})
    # Five events (versions 2..6); three are kept (4, 5, 6), so the floor is 3.
    with pytest.raises(ApiError) as err:
        store.watch(nodes, 2)
    assert err.value.code == 410
    assert err.value.message == "too old resource version: 2 (3)"
    watcher, backlog = store.watch(nodes, 3)
    assert [e.rv for e in backlog] == [4, 5, 6]
    store.insert(nodes, {"metadata": {"name": "late"}})
    assert watcher.queue.get_nowait() is not None
    assert store.watcher_count(nodes) == 1
    store.unwatch(watcher)
    assert store.watcher_count(nodes) == 0


def test_compaction_keeps_the_current_version_watchable(store: Store,
                                                         nodes: ResourceType) -> None:
    store.insert(nodes, {"metadata": {"name": "a"}})
    store.compact()
    watcher, backlog = store.watch(nodes, store.rv)
    assert backlog == []
    store.close_watches()
    assert asyncio.run(watcher.queue.get()) is None


def test_remove_emits_deleted_with_a_new_version(store: Store, nodes: ResourceType) -> None:
    obj = store.insert(nodes, {"metadata": {"name": "a"}})
    events: list[tuple[str, int]] = []
    store.add_listener(lambda rt, e: events.append((e.type, e.rv)))
    gone = store.remove(nodes, obj)
    assert events == [("DELETED", 3)]
    assert gone["metadata"]["resourceVersion"] == "3"
    assert store.get(nodes, "", "a") is None
    assert store.remove(nodes, obj) is obj  # already gone: no event
    assert events == [("DELETED", 3)]


def test_mark_deleting_is_idempotent(store: Store, nodes: ResourceType) -> None:
    obj = store.insert(nodes, {"metadata": {"name": "a"}})
    marked = store.mark_deleting(nodes, obj, 30)
    assert marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    assert store.mark_deleting(nodes, marked, 5) is marked


def test_items_are_in_key_order(store: Store) -> None:
    pods = store.registry.by_path("", "v1", "pods")
    assert pods is not None
    for ns, name in (("b", "x"), ("a", "z"), ("a", "y")):
        store.insert(pods, {"metadata": {"name": name, "namespace": ns}})
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in store.items(pods)] \
        == [("a", "y"), ("a", "z"), ("b", "x")]
    assert [p["metadata"]["name"] for p in store.items(pods, "b")] == ["x"]


@pytest.mark.parametrize("name", ["UPPER", "under_score", "-lead", "trail-", "a" * 254])
def test_invalid_names(store: Store, nodes: ResourceType, name: str) -> None:
    with pytest.raises(ApiError) as err:
        store.insert(nodes, {"metadata": {"name": name}})
    assert err.value.code == 422


def test_missing_name_and_generate_name(store: Store, nodes: ResourceType) -> None:
    with pytest.raises(ApiError, match="name or generateName is required"):
        store.insert(nodes, {"metadata": {}})


def test_parse_rv() -> None:
    assert parse_rv("12") == 12
    for bad in ("x", "-1", "1.5"):
        with pytest.raises(ApiError):
            parse_rv(bad)


def test_clock_helpers() -> None:
    clock = ManualClock(start=0)
    clock.advance(1.5)
    assert clock.now() == 1.5
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert format_time(1.9) == "1970-01-01T00:00:01Z"
    assert parse_time_or_none("1970-01-01T00:00:02Z") == 2.0
    assert parse_time_or_none("yesterday") is None
