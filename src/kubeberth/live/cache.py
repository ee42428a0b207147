"""An informer-fed object cache for the periodic controllers (descheduler, spill controller).

The scheduler reacts to every change; the descheduler and the spill controller instead judge
the whole cluster at intervals. They need one consistent copy of a few resources, taken at once,
from which a pure policy computes its decisions. :class:`ObjectCache` keeps the latest object of
each kind by ``namespace/name`` from :class:`~kubeberth.live.informer.Informer` events (a
re-list after a 410 or a dropped stream replaces a kind wholesale, so deletions missed while the
stream was down are dropped too) and hands out copies under one lock. :func:`decode` turns an
API object into kubeberth's typed object with the manifest loader's validation, so the policy
code reads live objects exactly as it reads files.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from lightkube import Client
from lightkube.core.resource import Resource

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
from kubeberth.config.manifests import decode_object
from kubeberth.config.yamlsrc import Document, Source
from kubeberth.live.informer import SYNC, Informer

log = logging.getLogger("kubeberth.cache")

Obj = dict[str, Any]
Typed = Node | Pod | PriorityClass | Namespace | PodDisruptionBudget


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def document(obj: Obj) -> Document:
    """An API object as a manifest document (errors then name the object, not a file)."""
    meta = obj.get("metadata") or {}
    name = f"{obj.get('kind', '?')} {key_of(obj) or meta.get('name', '?')}"
    return Document(data=obj, source=Source(name, json.dumps(obj), is_json=True), index=0,
                    line=None)


def decode(obj: Obj) -> Typed | None:
    """The typed object (validated as manifests are), or None when the API sent an object the
    loader refuses: it is logged and left out rather than stopping the controller."""
    try:
        return decode_object(document(obj))
    except InputError as err:
        log.warning("ignoring %s %s: %s", obj.get("kind"), key_of(obj), err)
        return None


class ObjectCache:
    """Latest objects per kind, kept by one informer per resource."""

    def __init__(self, client: Client, resources: dict[str, type[Resource]], *,
                 stop: threading.Event, watch_timeout: int = 300) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Obj]] = {kind: {} for kind in resources}
        self.informers = [Informer(client, kind, res, self._sink, stop=stop,
                                   watch_timeout=watch_timeout)
                          for kind, res in resources.items()]

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    def join(self, timeout: float = 0.1) -> None:
        for inf in self.informers:
            inf.thread.join(timeout=timeout)

    def synced(self) -> bool:
        """Every informer has delivered its first list."""
        return all(inf.synced.is_set() for inf in self.informers)

    def broken(self) -> list[str]:
        """Kinds whose stream is down now (last list or watch failed, not yet re-listed)."""
        return [inf.kind for inf in self.informers if inf.error is not None]

    def _sink(self, kind: str, type_: str, data: Any) -> None:
        with self._lock:
            objects = self._objects[kind]
            if type_ == SYNC:
                objects.clear()
                for item in data:
                    objects[key_of(item)] = item
            elif type_ in ("ADDED", "MODIFIED"):
                objects[key_of(data)] = data
            elif type_ == "DELETED":
                objects.pop(key_of(data), None)
            # BOOKMARK: nothing changes

    def snapshot(self) -> dict[str, list[Obj]]:
        """Every kind's objects at one instant, sorted by namespace and name (the order the
        API lists them in)."""
        with self._lock:
            return {kind: [objs[k] for k in sorted(objs)] for kind, objs in self._objects.items()}

    def get(self, kind: str, key: str) -> Obj | None:
        with self._lock:
            return self._objects[kind].get(key)
