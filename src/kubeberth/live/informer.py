"""List-and-watch informers: the live controllers' only view of the cluster.

Each informer lists one resource, then watches from the list's resourceVersion and hands every
change to its sink as ``(kind, type, data)``. A watch that ends (server timeout, dropped
connection) or answers 410 Gone ("too old resource version") is followed by a fresh list, passed
on as one ``SYNC`` event carrying every current object: the consumer replaces its view, so
deletions missed while the stream was down are not lost. That is client-go's reflector, minus
the shared-informer fan-out: each controller owns its informers.

The API's JSON is decoded once, on the informer's thread, straight into what the controller
reads: with a ``decode`` function (kubeberth's typed objects, validated as manifests are) or
as the plain JSON dict. lightkube builds the requests and speaks HTTP; its models are skipped,
since the controllers would only turn them back into dicts.

A poison object (one ``decode`` refuses, whatever it raises) never reaches the controller: it is
counted in :attr:`InformerStats.ignored`, handed to ``refuse`` (the controller's log line and
Warning Event) and left out of a list; a watch event that makes a known object poison is passed
on as its deletion, so the view is what a fresh list would give. Any other failure on the
informer's thread is a bug: it goes to ``on_fail`` and the thread ends (the controller stops
and exits non-zero), never a silent dead informer with a stale cache.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.core.generic_client import ALL_NS, GenericSyncClient
from lightkube.core.resource import NamespacedResource, Resource, api_info
from lightkube.core.selector import build_selector
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import Status
from lightkube.resources.core_v1 import Namespace, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.resources.scheduling_v1 import PriorityClass

from kubeberth.api.errors import InputError

log = logging.getLogger("kubeberth.informer")

SYNC = "SYNC"
Obj = dict[str, Any]
# What a controller reads of one object: a typed object, or the JSON dict without a decoder.
Decode = Callable[[Obj], Any]
Sink = Callable[[str, str, Any], None]
# Told about a poison object: (kind, key, object, what decoding raised).
Refuse = Callable[[str, str, Obj, Exception], None]
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
# Kubernetes 1.37's native PodGroup (404, so empty, where the API is not turned on).
NativePodGroup = create_namespaced_resource("scheduling.k8s.io", "v1beta1", "PodGroup",
                                            "podgroups")

# What the scheduler watches, by the kind name the controller dispatches on.
SCHEDULER_RESOURCES: dict[str, type[Resource]] = {
    "Node": Node,
    "Pod": Pod,
    "PriorityClass": PriorityClass,
    "Namespace": Namespace,
    "PodDisruptionBudget": PodDisruptionBudget,
    "PodGroup": PodGroup,
    "NativePodGroup": NativePodGroup,
}

__all__ = ["SCHEDULER_RESOURCES", "SYNC", "Informer", "NativePodGroup", "key_of",
           "list_objects"]


class _ListMeta(msgspec.Struct):
    version: str | None = msgspec.field(name="resourceVersion", default=None)
    next: str | None = msgspec.field(name="continue", default=None)


class _Page(msgspec.Struct):
    items: list[Obj] | None = None
    metadata: _ListMeta | None = None


class _Event(msgspec.Struct):
    type: str
    object: Obj


# Built here, at import, once: msgspec builds a type's decoding tables on first use, and
# several threads doing that at the same moment crashed the process (SIGSEGV).
_PAGE = msgspec.json.Decoder(_Page)
_EVENT = msgspec.json.Decoder(_Event)


def key_of(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    watch_restarts: int = 0
    gone: int = 0
    ignored: int = 0  # objects ``decode`` refused


class Informer:
    """List + watch one resource on a daemon thread, re-listing after 410s and dropped
    streams; ``synced`` is set once the first list has been delivered.

    The sink gets ``(kind, SYNC, {key: object})`` for a list and ``(kind, type, (key,
    object))`` for a watch event (``object`` is None for a DELETED one: only its key counts).
    """

    def __init__(self, client: Client, kind: str, resource: type[Resource], sink: Sink, *,
                 stop: threading.Event, decode: Decode | None = None,
                 labels: dict[str, Any] | None = None, watch_timeout: int = 300,
                 retry_delay: float = 0.2, absent_retry: float = 30.0,
                 refuse: Refuse | None = None,
                 on_fail: Callable[[BaseException], None] | None = None) -> None:
        self.http: GenericSyncClient = client._client  # requests built by lightkube, sent raw
        self.kind = kind
        self.resource = resource
        self.sink = sink
        self.decode = decode
        self.stats = InformerStats()
        self.stop = stop
        self.synced = threading.Event()
        self.error: BaseException | None = None
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.absent_retry = absent_retry
        self.refuse = refuse or _log_refusal
        self.on_fail = on_fail
        info = api_info(resource).resource
        # List items come without apiVersion and kind; the decoders want both.
        self._type = {"apiVersion": f"{info.group}/{info.version}" if info.group
                      else info.version, "kind": info.kind}
        # Namespaced resources are watched in every namespace.
        self._namespace = ALL_NS if issubclass(resource, NamespacedResource) else None
        self._selector = build_selector(labels) if labels else None
        self.thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as err:
            self.error = err
            log.exception("the %s informer failed", self.kind)
            if self.on_fail is not None:
                self.on_fail(err)

    def _loop(self) -> None:
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
                    self.sink(self.kind, SYNC, {})
                    self.synced.set()
                    self.stop.wait(self.absent_retry)
                else:
                    self.error = err
                    self.stop.wait(self.retry_delay)
            except (httpx.HTTPError, OSError) as err:
                # Connection refused or dropped mid-stream: back off and list again.
                self.error = err
                self.stop.wait(self.retry_delay)
            except msgspec.DecodeError as err:
                # An answer that is not a list or an event (a proxy's error page, a server
                # bug): the thread must not die with a stale cache; say so and list again
                # now and then, as for a resource that is not served.
                self.error = err
                log.warning("cannot decode %s from the API (%s); listing again in %gs",
                            self.kind, err, self.absent_retry)
                self.stop.wait(self.absent_retry)
            self.stats.watch_restarts += 1

    def _request(self, params: dict[str, Any], *, watch: bool = False,
                 stream: bool = False) -> httpx.Response:
        return list_request(self.http, self.resource, self._namespace,
                            {**params, "labelSelector": self._selector}, watch=watch,
                            stream=stream)

    def _list(self) -> str:
        objects: dict[str, Any] = {}
        params: dict[str, Any] = {}
        while True:
            page = _PAGE.decode(self._request(params).content)
            for item in page.items or ():
                key = key_of(item)
                obj = self._decoded(key, item)
                if obj is not None:
                    objects[key] = obj
            meta = page.metadata or _ListMeta()
            if not meta.next:
                break
            params["continue"] = meta.next
        self.stats.lists += 1
        self.sink(self.kind, SYNC, objects)
        self.synced.set()
        self.error = None
        return meta.version or ""

    def _watch(self, version: str) -> None:
        """Stream changes from ``version``; a stream the server ends resumes from the last
        version seen (a 410 or a broken connection raises, and the loop lists again)."""
        while not self.stop.is_set():
            for event in self._stream(version):
                if self.stop.is_set():
                    return
                obj = event.object
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if event.type == "BOOKMARK":
                    continue
                key = key_of(obj)
                if event.type == "DELETED":
                    self.sink(self.kind, "DELETED", (key, None))
                    continue
                decoded = self._decoded(key, obj)
                if decoded is not None:
                    self.sink(self.kind, event.type, (key, decoded))
                elif event.type == "MODIFIED":
                    # A poison version of an object: the controller forgets the previous one.
                    self.sink(self.kind, "DELETED", (key, None))

    def _stream(self, version: str) -> Iterator[_Event]:
        resp = self._request({"resourceVersion": version or None,
                              "timeoutSeconds": self.watch_timeout}, watch=True, stream=True)
        try:
            for line in resp.iter_lines():
                if not line:
                    continue
                event = _EVENT.decode(line)
                if event.type == "ERROR":
                    raise ApiError(status=cast(Status, Status.from_dict(event.object)))
                yield event
        finally:
            resp.close()

    def _decoded(self, key: str, obj: Obj) -> Any:
        """What the controller reads of ``obj``; None (counted, refused) if it is poison."""
        if not (obj.get("apiVersion") and obj.get("kind")):
            obj = {**obj, **{k: obj.get(k) or v for k, v in self._type.items()}}
        if self.decode is None:
            return obj
        try:
            return self.decode(obj)
        except Exception as err:  # poison: whatever the decoder raised, this object is unread
            self.stats.ignored += 1
            self.refuse(self.kind, key, obj, err)
            return None


PAGE_SIZE = 500  # kubectl's --chunk-size default


def list_request(http: GenericSyncClient, resource: type[Resource], namespace: str | None,
                 params: dict[str, Any], *, watch: bool = False,
                 stream: bool = False) -> httpx.Response:
    """One list (or watch) request built by lightkube and sent raw; an error answer raises
    ApiError."""
    br = http.prepare_request("list", resource, namespace=namespace, watch=watch, params=params)
    if watch:
        br.timeout = http._watch_timeout  # no read timeout: the server ends it
    resp: httpx.Response = http.send(http.build_adapter_request(br), stream=stream)
    if resp.is_error:
        if stream:
            resp.read()
            resp.close()
        http.raise_for_status(resp)  # type: ignore[no-untyped-call]
    return resp


def list_objects(http: GenericSyncClient, resource: type[Resource],
                 namespace: str | None) -> list[Obj]:
    """Every object of one list, in pages of :data:`PAGE_SIZE` as kubectl reads them (items
    without apiVersion and kind, as served)."""
    items: list[Obj] = []
    params: dict[str, Any] = {"limit": PAGE_SIZE}
    while True:
        page = _PAGE.decode(list_request(http, resource, namespace, dict(params)).content)
        items.extend(page.items or ())
        meta = page.metadata or _ListMeta()
        if not meta.next:
            return items
        params["continue"] = meta.next


def describe(err: Exception) -> str:
    """An error as one line: InputError's own words, else the exception's type and text."""
    return str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"


def _log_refusal(kind: str, key: str, _obj: Obj, err: Exception) -> None:
    log.warning("ignoring %s %s: %s", kind, key, describe(err))
