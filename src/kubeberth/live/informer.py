"""List-and-watch informers: the live controllers' only view of the cluster.

Each informer lists one resource, then watches from the list's resourceVersion and hands every
change to its sink as ``(kind, type, object dict)``. A watch that ends (server timeout, dropped
connection) or answers 410 Gone ("too old resource version") is followed by a fresh list, passed
on as one ``SYNC`` event carrying every current object: the consumer replaces its view, so
deletions missed while the stream was down are not lost. That is client-go's reflector, minus
the shared-informer fan-out: each controller owns its informers.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.core.decoders import WatchEvent, decode_list, decode_object, decode_watch_event
from lightkube.core.exceptions import NotReadyError
from lightkube.core.generic_client import ALL_NS
from lightkube.core.resource import NamespacedResource, Resource
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Namespace, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.resources.scheduling_v1 import PriorityClass

log = logging.getLogger("kubeberth.informer")

SYNC = "SYNC"
Obj = dict[str, Any]
Sink = Callable[[str, str, Any], None]
Events = queue.Queue[tuple[str, str, Any]]


def drain(events: Events, timeout: float, apply: Sink) -> None:
    """Apply every queued informer event on the control loop, waiting up to ``timeout`` for
    the first (informers only enqueue; the loop alone changes its cache)."""
    try:
        item = events.get(timeout=timeout) if timeout > 0 else events.get_nowait()
    except queue.Empty:
        return
    while True:
        apply(*item)
        try:
            item = events.get_nowait()
        except queue.Empty:
            return

PodGroup = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup",
                                      "podgroups")

# What the scheduler watches, by the kind name the controller dispatches on.
SCHEDULER_RESOURCES: dict[str, type[Resource]] = {
    "Node": Node,
    "Pod": Pod,
    "PriorityClass": PriorityClass,
    "Namespace": Namespace,
    "PodDisruptionBudget": PodDisruptionBudget,
    "PodGroup": PodGroup,
}

__all__ = ["SCHEDULER_RESOURCES", "SYNC", "Informer", "prepare_decoding", "to_dict"]


_warm_lock = threading.Lock()
_warm: set[type[Any]] = set()


def prepare_decoding(*resources: type[Any]) -> None:
    """Build msgspec's decoders for ``resources`` (one object, a list page, a watch event)
    once, under a lock. msgspec builds a type's decoding tables lazily on first use; several
    controller threads doing that first decode at the same moment crashed the process
    (SIGSEGV in lightkube's ``decode_list``, reproduced with ``kubeberth up``)."""
    with _warm_lock:
        for res in resources:
            if res in _warm:
                continue
            decode_list(b'{"items": []}', res)
            # Required fields are missing from {}: the tables are built all the same.
            with contextlib.suppress(msgspec.ValidationError):
                decode_object(b"{}", res)
            _warm.add(res)
        if WatchEvent not in _warm:
            decode_watch_event(b'{"type": "ADDED", "object": {}}')
            _warm.add(WatchEvent)


def to_dict(obj: Any) -> Obj:
    """A lightkube object (typed or generic) as the plain JSON dict the API sent."""
    out: Obj = obj.to_dict()
    return out


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    watch_restarts: int = 0
    gone: int = 0


class Informer:
    """List + watch one resource on a daemon thread, re-listing after 410s and dropped
    streams; ``synced`` is set once the first list has been delivered."""

    def __init__(self, client: Client, kind: str, resource: type[Resource], sink: Sink, *,
                 stop: threading.Event, watch_timeout: int = 300, retry_delay: float = 0.2,
                 absent_retry: float = 30.0) -> None:
        prepare_decoding(resource)
        self.client = client
        self.kind = kind
        self.resource = resource
        self.sink = sink
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.absent_retry = absent_retry
        self.synced = threading.Event()
        self.stats = InformerStats()
        self.error: BaseException | None = None
        # Namespaced resources are watched in every namespace.
        self._scope: dict[str, Any] = (
            {"namespace": ALL_NS} if issubclass(resource, NamespacedResource) else {})
        self.thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                version = self._list()
                self._watch(version)
            except ApiError as err:
                if err.status.code == 410:
                    self.stats.gone += 1
                elif err.status.code == 404 and not self.synced.is_set():
                    # The resource is not served (a CRD such as PodGroup not installed): the
                    # cache holds none of it; look again now and then.
                    self.error = err
                    log.warning("%s is not served by the API (404); treating it as empty",
                                self.kind)
                    self.sink(self.kind, SYNC, [])
                    self.synced.set()
                    self.stop.wait(self.absent_retry)
                else:
                    self.error = err
                    self.stop.wait(self.retry_delay)
            except (httpx.HTTPError, OSError) as err:
                # Connection refused or dropped mid-stream: back off and list again.
                self.error = err
                self.stop.wait(self.retry_delay)
            except msgspec.ValidationError as err:
                # An object lightkube's typed model cannot decode (a server leaving out a field
                # the model requires): the thread must not die with a stale cache; say so and
                # list again now and then, as for a resource that is not served.
                self.error = err
                log.warning("cannot decode a %s from the API (%s); listing again in %gs",
                            self.kind, err, self.absent_retry)
                self.stop.wait(self.absent_retry)
            self.stats.watch_restarts += 1

    def _list(self) -> str:
        listing = self.client.list(self.resource, **self._scope)  # type: ignore[type-var]
        items = [to_dict(o) for o in listing]
        self.stats.lists += 1
        self.sink(self.kind, SYNC, items)
        self.synced.set()
        self.error = None
        return _version(listing)

    def _watch(self, version: str) -> None:
        stream = self.client.watch(  # type: ignore[type-var]
            self.resource, **self._scope, resource_version=version or None,
            server_timeout=self.watch_timeout, on_error=_stop_on_end)
        # lightkube resumes a stream the server ended from the last version it saw; a 410
        # or a broken connection comes back here as an exception, and the loop lists again.
        for kind, obj in stream:
            if self.stop.is_set():
                return
            self.sink(self.kind, kind, to_dict(obj))


def _version(listing: Any) -> str:
    try:
        return str(listing.resourceVersion)
    except NotReadyError:  # a list answered without metadata.resourceVersion
        return ""


def _stop_on_end(err: Exception, _count: int) -> Any:
    """Hand every watch error to the informer loop (it re-lists) instead of lightkube's own
    retry, which would resume without re-listing."""
    raise err
