"""The object store: every served object, resource versions, and the watch history.

This plays etcd plus the apiserver's watch cache. Objects are kept as the JSON dicts clients
sent (so fields kubeberth does not model round-trip untouched); one global counter stamps each
change with a ``resourceVersion``, as etcd's revision does. Each resource keeps a bounded
history of its recent changes so a watch can resume from a resourceVersion; a watch from a
version older than that history gets 410 Gone, and the client must list again. The history is
bounded by count and by bytes (:data:`DEFAULT_HISTORY_BYTES` per resource), so replacing a
large object many times does not keep every old copy alive.

The store is not thread-safe on purpose: the server runs it on one asyncio loop, and in-process
callers go through :class:`~kubeberth.apiserver.server.EmbeddedServer`, which hops onto that loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubeberth.api.times import format_time
from kubeberth.apiserver import errors
from kubeberth.apiserver.clock import Clock
from kubeberth.apiserver.resources import Registry, ResourceType

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
DEFAULT_HISTORY = 2000
# Bytes of object JSON each resource's history may hold (its newest event is always kept).
DEFAULT_HISTORY_BYTES = 32 * 2**20
_RV = re.compile(r"0*([0-9]{1,20})")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(slots=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, with the object before it (for selectors)."""

    type: str
    rv: int
    obj: Obj
    old: Obj | None
    size: int = 0  # bytes of obj as JSON, for the history's byte bound


@dataclass(slots=True, eq=False)
class Watcher:
    """A watch stream's mailbox; ``None`` in the queue closes it."""

    resource: ResourceType
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


@dataclass(slots=True)
class _Table:
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=deque)
    history_bytes: int = 0
    # Watches from a resourceVersion below this cannot be served (history dropped).
    floor: int = 0
    watchers: set[Watcher] = field(default_factory=set)


Listener = Callable[[ResourceType, Event], None]


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def parse_rv(text: str, what: str = "resourceVersion") -> int:
    """A resourceVersion as upstream parses it (ASCII digits, uint64; no sign, spaces or
    underscores, which Python's int() would accept)."""
    match = _RV.fullmatch(text)
    if match is None or int(match[1]) > 2**64 - 1:
        shown = text[:64]
        raise errors.bad_request(f'{what}: Invalid value: "{shown}": strconv.ParseUint: '
                                 f'parsing "{shown}": invalid syntax (expected a '
                                 "resourceVersion returned by this server)")
    return int(match[1])


class Store:
    """Objects by resource, with resourceVersions, history and watchers."""

    def __init__(self, registry: Registry, clock: Clock, *,
                 history: int = DEFAULT_HISTORY,
                 history_bytes: int = DEFAULT_HISTORY_BYTES) -> None:
        self.registry = registry
        self.clock = clock
        self.rv = 1
        self.history_size = history
        self.history_bytes = history_bytes
        self._tables: dict[tuple[str, str], _Table] = {r.key: _Table()
                                                       for r in registry.resources}
        self._listeners: list[Listener] = []
        self._uids = 0
        self._names = 0

    # Reading.

    def table(self, rt: ResourceType) -> dict[Key, Obj]:
        return self._tables[rt.key].objects

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self._tables[rt.key].objects.get((namespace if rt.namespaced else "", name))

    def must_get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.get(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return obj

    def items(self, rt: ResourceType, namespace: str = "") -> Iterator[Obj]:
        """Objects in key order (namespace, name), as etcd lists them."""
        objects = self._tables[rt.key].objects
        for key in sorted(objects):
            if not namespace or key[0] == namespace:
                yield objects[key]

    def kind_items(self, group: str, kind: str) -> list[Obj]:
        rt = self.registry.of_kind(group, kind)
        return list(self.items(rt)) if rt is not None else []

    # Writing.

    def add_listener(self, listener: Listener) -> None:
        """Called synchronously after every change (controllers queue work from it)."""
        self._listeners.append(listener)

    def new_uid(self, seed: str) -> str:
        self._uids += 1
        digest = hashlib.sha256(f"{seed}/{self._uids}".encode()).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-a{digest[17:20]}-{digest[20:32]}"

    def generate_name(self, prefix: str) -> str:
        """``prefix`` plus five characters from upstream's alphabet, deterministic per store."""
        self._names += 1
        digest = int(hashlib.sha256(f"{prefix}/{self._names}".encode()).hexdigest(), 16)
        chars = []
        for _ in range(5):
            digest, idx = divmod(digest, len(_SUFFIX_ALPHABET))
            chars.append(_SUFFIX_ALPHABET[idx])
        return prefix + "".join(chars)

    def insert(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Store a new, already validated object: name, uid, timestamps and version are set.
        ``dry_run`` returns what would be stored and stores nothing."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            prefix = meta.get("generateName") or ""
            if not prefix:
                raise errors.invalid(rt.kind, "", rt.group, [
                    ("metadata.name", "Required value: name or generateName is required")])
            for _ in range(10):
                meta["name"] = self.generate_name(prefix)
                if self.get(rt, meta.get("namespace", ""), meta["name"]) is None:
                    break
        name = meta["name"]
        if len(name) > 253 or not _NAME.match(name):
            raise errors.invalid(rt.kind, name, rt.group, [(
                "metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                "consist of lower case alphanumeric characters, '-' or '.', and must start and "
                "end with an alphanumeric character")])
        if not rt.namespaced:
            meta.pop("namespace", None)
        key = object_key(obj)
        table = self._tables[rt.key]
        if key in table.objects:
            raise errors.already_exists(rt.plural, name, rt.group)
        meta["uid"] = self.new_uid(f"{rt.plural}/{key[0]}/{name}")
        meta["creationTimestamp"] = format_time(self.clock.now())
        meta["generation"] = 1
        for drop in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                     "managedFields", "selfLink"):
            meta.pop(drop, None)
        obj["apiVersion"] = rt.api_version(_version_of(obj, rt))
        obj["kind"] = rt.kind
        if not dry_run:
            self._commit(rt, "ADDED", obj, None)
        return obj

    def replace(self, rt: ResourceType, obj: Obj, old: Obj, *, dry_run: bool = False) -> Obj:
        """Store a new version of ``old`` (the caller checked preconditions and validity)."""
        return self.commit_replace(rt, prepare_replace(obj, old), old, dry_run=dry_run)

    def commit_replace(self, rt: ResourceType, obj: Obj, old: Obj, *,
                       dry_run: bool = False) -> Obj:
        """Store what :func:`prepare_replace` made of ``old`` (``old`` itself: nothing)."""
        if obj is old:
            return old  # a no-op write keeps its resourceVersion, as upstream
        if not dry_run:
            self._commit(rt, "MODIFIED", obj, old)
        return obj

    def mark_deleting(self, rt: ResourceType, obj: Obj, grace: int, *,
                      dry_run: bool = False) -> Obj:
        new = _new_metadata(obj)
        meta = new["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = format_time(self.clock.now() + grace)
            meta["deletionGracePeriodSeconds"] = grace
            if not dry_run:
                self._commit(rt, "MODIFIED", new, obj)
            return new
        return obj

    def remove(self, rt: ResourceType, obj: Obj) -> Obj:
        """Drop an object for good; the DELETED event carries a fresh resourceVersion."""
        key = object_key(obj)
        table = self._tables[rt.key]
        current = table.objects.get(key)
        if current is None:
            return obj
        gone = _new_metadata(current)
        self._commit(rt, "DELETED", gone, current)
        return gone

    def _commit(self, rt: ResourceType, kind: str, obj: Obj, old: Obj | None) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        table = self._tables[rt.key]
        key = object_key(obj)
        if kind == "DELETED":
            table.objects.pop(key, None)
        else:
            table.objects[key] = obj
        event = Event(kind, self.rv, obj, old, len(msgspec.json.encode(obj)))
        table.history.append(event)
        table.history_bytes += event.size
        while len(table.history) > self.history_size or (
                table.history_bytes > self.history_bytes and len(table.history) > 1):
            dropped = table.history.popleft()
            table.history_bytes -= dropped.size
            table.floor = dropped.rv
        for watcher in table.watchers:
            watcher.queue.put_nowait(event)
        for listener in self._listeners:
            listener(rt, event)

    # Watching.

    def compact(self) -> None:
        """Forget every resource's history (as etcd compaction): older watches get 410."""
        for table in self._tables.values():
            table.history.clear()
            table.history_bytes = 0
            table.floor = self.rv

    def watch(self, rt: ResourceType, since: int | None) -> tuple[Watcher, list[Event]]:
        """Register a watcher; return it with the events it missed after ``since``.

        ``since`` None means "now": the caller sends the current objects itself. A ``since``
        older than the retained history raises 410 Gone.
        """
        table = self._tables[rt.key]
        backlog: list[Event] = []
        if since is not None:
            if since < table.floor:
                raise errors.gone(f"too old resource version: {since} ({table.floor})")
            backlog = [e for e in table.history if e.rv > since]
        watcher = Watcher(rt)
        table.watchers.add(watcher)
        return watcher, backlog

    def watcher_count(self, rt: ResourceType) -> int:
        """Open watches on ``rt`` (tests wait for a client's watch to be established)."""
        return len(self._tables[rt.key].watchers)

    def unwatch(self, watcher: Watcher) -> None:
        self._tables[watcher.resource.key].watchers.discard(watcher)

    def close_watches(self) -> None:
        for table in self._tables.values():
            for watcher in table.watchers:
                watcher.queue.put_nowait(None)
            table.watchers.clear()


def prepare_replace(obj: Obj, old: Obj) -> Obj:
    """``obj`` as it would replace ``old``: identity and timestamps kept from ``old``,
    generation bumped when the spec changed; ``old`` itself when nothing would change. Pure
    (reads only the two objects), so the API server computes it off its event loop."""
    meta = obj.setdefault("metadata", {})
    old_meta = old.get("metadata") or {}
    for keep in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                 "deletionGracePeriodSeconds"):
        if keep in old_meta:
            meta[keep] = old_meta[keep]
        else:
            meta.pop(keep, None)
    meta.pop("managedFields", None)
    generation = int(old_meta.get("generation") or 1)
    if _spec_of(obj) != _spec_of(old):
        generation += 1
    meta["generation"] = generation
    obj["apiVersion"], obj["kind"] = old["apiVersion"], old["kind"]
    meta["resourceVersion"] = old_meta.get("resourceVersion")
    return old if obj == old else obj


def _new_metadata(obj: Obj) -> Obj:
    """A new version of ``obj`` whose metadata's own fields (deletion, resourceVersion) may be
    set: stored objects are never changed in place, so everything below is shared (a deep copy
    of a big object would hold the event loop)."""
    return {**obj, "metadata": dict(obj["metadata"])}


def _version_of(obj: Obj, rt: ResourceType) -> str:
    api = str(obj.get("apiVersion") or "")
    version = api.rpartition("/")[2]
    return version if version in rt.versions else rt.versions[0]


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
