"""The HTTP face of the embedded cluster, and :class:`EmbeddedServer` to run it in-process.

aiohttp serves the Kubernetes REST paths on loopback: discovery, the resource verbs, watch
streams (chunked JSON lines, with bookmarks and 410 Gone as ERROR events, as upstream), Table
output for kubectl, ``/metrics`` in kube-state-metrics form, and ``/healthz``. Requests are
parsed here and handed to :class:`~kubeberth.apiserver.operations.Api`; every failure leaves as a
Kubernetes ``Status`` with ``Content-Type: application/json`` (lightkube matches it exactly).

Hostile requests are bounded (see :mod:`kubeberth.apiserver.limits`): bodies over 3 MiB get
413, bodies are decoded on a worker thread so the event loop keeps answering other clients,
connections that do not complete a request within ``header_timeout`` are closed, and with a
token every path but the probes and ``/version`` (and ``/metrics`` only when
``metrics_public``) needs it, compared in constant time.

:class:`EmbeddedServer` runs the server and the in-cluster controllers on a private event loop
thread, so tests and ``kubeberth up`` can start a cluster, point clients at ``srv.url``, and
stop it::

    with EmbeddedServer(manifests=load_manifests("cluster.yaml")) as srv:
        subprocess.run(["kubectl", "--kubeconfig", srv.write_kubeconfig(path), "get", "nodes"])
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hmac
import logging
import os
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubeberth import __version__
from kubeberth.api.errors import InputError
from kubeberth.apiserver import errors, limits
from kubeberth.apiserver.admission import KUBELET_VERSION
from kubeberth.apiserver.audit import RequestAudit, client_identity
from kubeberth.apiserver.clock import Clock, ManualClock, SystemClock
from kubeberth.apiserver.controllers import ControllerManager
from kubeberth.apiserver.credentials import ServingCert, write_private
from kubeberth.apiserver.faults import Faults
from kubeberth.apiserver.metrics import registry_for
from kubeberth.apiserver.operations import Api, patch_type
from kubeberth.apiserver.resources import (
    RESOURCES,
    Registry,
    ResourceType,
    openapi_v3_group_version,
    openapi_v3_root,
)
from kubeberth.apiserver.selectors import parse_field_selector, parse_label_selector
from kubeberth.apiserver.store import DEFAULT_HISTORY, Event, Obj, Store, parse_rv
from kubeberth.apiserver.tables import table
from kubeberth.config.manifests import Manifests

_log = logging.getLogger(__name__)
JSON = "application/json"
PROBES = frozenset({"/healthz", "/readyz", "/livez"})
PUBLIC_PATHS = PROBES | {"/version"}
DEFAULT_WATCH_TIMEOUT = 1800.0
# kube-apiserver's ReadHeaderTimeout: a connection must send a whole request head by then
# (and an idle keep-alive connection is closed after it).
DEFAULT_HEADER_TIMEOUT = 32.0
# Seconds a request body may take to arrive once its head is in.
BODY_TIMEOUT = 60.0
# How long a list or watch from a resourceVersion the server has not reached waits for it
# (upstream's cacher blocks 3 s, then answers 504 "Too large resource version").
FRESH_WAIT = 3.0
_T = TypeVar("_T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None
          ) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), status=status, content_type=JSON,
                        headers=headers)


def _error_response(err: errors.ApiError) -> web.Response:
    headers = {"Retry-After": str(err.retry_after)} if err.retry_after else None
    return _json(err.status(), err.code, headers)


class Cluster:
    """The store, the API verbs and the controllers of one embedded cluster."""

    def __init__(self, *, clock: Clock | None = None, token: str | None = None,
                 bookmark_interval: float = 60.0, history: int = DEFAULT_HISTORY,
                 audit: bool = False, metrics_public: bool = False,
                 apis: tuple[ResourceType, ...] = ()) -> None:
        self.clock: Clock = clock or SystemClock()
        # The resources served: the default set, plus what --runtime-config turned on.
        self.registry = Registry(RESOURCES + apis)
        self.store = Store(self.registry, self.clock, history=history)
        self.api = Api(self.store)
        self.controllers = ControllerManager(self.api, self.clock)
        self.metrics = registry_for(self.store)
        self.token = token
        self._bearer = f"Bearer {token}".encode() if token is not None else b""
        self.public = PUBLIC_PATHS | {"/metrics"} if metrics_public else PUBLIC_PATHS
        # Body decoding, each write's prepare step and response encoding run here, off the
        # event loop (two workers: the machine's share).
        self.decoder = ThreadPoolExecutor(2, thread_name_prefix="kubeberth-apiserver-decode")
        self.bookmark_interval = bookmark_interval
        self.address = "127.0.0.1:0"
        # Opt in: which verbs each client used (tests check RBAC rules against it).
        self.audit = RequestAudit() if audit else None
        # Fault injection: seconds every API request waits before it is served (tests set it
        # at any time to show the controllers keep their guarantees on a slow API server).
        self.latency = 0.0
        # Chaos tests only: faults asked for by KUBEBERTH_TEST_FAULTS (faults.py), else None.
        self.faults = Faults.from_env(os.environ)

    def load(self, manifests: Manifests) -> list[str]:
        """Create every object of ``manifests`` (namespaces they use included); return the
        kinds that are not served (their documents are skipped)."""
        return load_manifests_into(self.api, manifests)

    # The aiohttp application.

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware],
                              client_max_size=limits.MAX_BODY_BYTES)
        app.router.add_get("/version", self._version)
        for probe in ("/healthz", "/readyz", "/livez"):
            app.router.add_get(probe, self._ok)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/openapi/v3", self._openapi_root)
        app.router.add_get("/openapi/v3/{tail:.*}", self._openapi_gv)
        app.router.add_route("*", "/api", self._dispatch)
        app.router.add_route("*", "/apis", self._dispatch)
        app.router.add_route("*", "/api/{tail:.*}", self._dispatch)
        app.router.add_route("*", "/apis/{tail:.*}", self._dispatch)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    def authorized(self, authorization: str | None) -> bool:
        """The request carries the bearer token (compared in constant time)."""
        if self.token is None:
            return True
        given = (authorization or "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(given, self._bearer)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in self.public and \
                not self.authorized(request.headers.get("Authorization")):
            return _error_response(errors.unauthorized())
        if self.audit is not None:
            self.audit.record(client_identity(request.headers.get("Authorization"),
                                              request.headers.get("User-Agent")),
                              request.method, request.path, request.query)
        if self.latency > 0 and request.path not in self.public:
            await asyncio.sleep(self.latency)
        try:
            if self.faults is not None:
                return await self.faults.serve(request, handler)
            return await handler(request)
        except errors.ApiError as err:
            return _error_response(err)
        except web.HTTPRequestEntityTooLarge:
            return _error_response(limits.too_large())
        except web.HTTPException:
            raise
        except InputError as err:
            return _error_response(errors.bad_request(str(err)))
        except RecursionError:
            return _error_response(errors.bad_request(
                f"the request nests deeper than {limits.MAX_DEPTH} levels"))
        except Exception as err:
            _log.exception("internal error serving %s %s", request.method, request.path)
            return _error_response(errors.ApiError(500, "InternalError",
                                                   f"Internal error occurred: {err!r}"))

    async def _version(self, _request: web.Request) -> web.Response:
        return _json({"major": "1", "minor": "32",
                      "gitVersion": f"{KUBELET_VERSION}.{__version__}",
                      "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
                      "goVersion": "", "compiler": "kubeberth", "platform": "linux/amd64"})

    async def _ok(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _openapi_root(self, _request: web.Request) -> web.Response:
        return _json(openapi_v3_root(self.registry))

    async def _openapi_gv(self, request: web.Request) -> web.Response:
        parts = request.match_info["tail"].strip("/").split("/")
        group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
            (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("", ""))
        doc = openapi_v3_group_version(self.registry, group, version) if version else None
        if doc is None:
            raise _no_resource(request)
        return _json(doc)

    async def _not_found(self, request: web.Request) -> web.Response:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested "
                              f"resource ({request.path})")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "api":
            if len(parts) == 1:
                return _json(self.registry.api_versions(self.address))
            group, version, rest = "", parts[1], parts[2:]
            if version != "v1":
                raise _no_resource(request)
        else:
            if len(parts) == 1:
                return _json(self.registry.api_group_list())
            if len(parts) == 2:
                doc = self.registry.api_group(parts[1])
                if doc is None:
                    raise _no_resource(request)
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            if request.method != "GET":
                raise errors.method_not_allowed(f"{request.method} is not allowed here")
            listing = self.registry.resource_list(group, version)
            if listing is None:
                raise _no_resource(request)
            return _json(listing)
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.registry.by_path(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _no_resource(request)
        rt = self.registry.by_path(group, version, rest[0])
        if rt is None or (namespace and not rt.namespaced):
            raise _no_resource(request)
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            raise _no_resource(request)
        return await self._resource(request, rt, version, namespace, name, sub)

    async def _resource(self, request: web.Request, rt: ResourceType, version: str,
                        namespace: str, name: str, sub: str) -> web.StreamResponse:
        q = request.query
        method = request.method
        if method == "GET":
            if not name:
                if q.get("watch") in ("true", "1"):
                    return await self._watch(request, rt, version, namespace)
                return await self._list(request, rt, version, namespace)
            if sub == "scale":
                return _json(self.api.scale(rt, namespace, name))
            return await self._one(request, rt, version, self.api.get(rt, namespace, name))
        if method == "POST":
            body = await self._body(request)
            dry_run = _dry_run(request.query.getall("dryRun", []))
            if sub == "binding":
                _no_dry_run(dry_run, "binding")
                return _json(self.api.bind(namespace, name, body), 201)
            if sub == "eviction":
                options = (body.get("deleteOptions") if isinstance(body, dict) else None) or {}
                if not isinstance(options, dict):
                    raise errors.bad_request("an Eviction's deleteOptions must be an object")
                _check_delete_options(options)
                listed = options.get("dryRun") or []
                dry_run = _dry_run(listed if isinstance(listed, list) else [listed]) or dry_run
                return _json(self.api.evict(namespace, name, body, dry_run=dry_run), 201)
            if name:
                raise errors.method_not_allowed("POST is not allowed on a named object; use "
                                                "PUT or PATCH")
            prepared = await self._off_loop(functools.partial(
                self.api.prepare_create, rt, namespace, body, version))
            created = self.api.commit_create(rt, prepared, dry_run=dry_run)
            return await self._one(request, rt, version, created, 201)
        if method == "PUT" and name:
            body = await self._body(request)
            dry_run = _dry_run(request.query.getall("dryRun", []))
            if sub == "scale":
                _no_dry_run(dry_run, "scale")
                return _json(self.api.update_scale(rt, namespace, name, body))
            updated = await self.api.guaranteed_update(
                rt, namespace, name, lambda old: self.api.prepare_update(
                    rt, old, namespace, body, sub, version), self._off_loop, dry_run=dry_run)
            return await self._one(request, rt, version, updated)
        if method == "PATCH" and name:
            dry_run = _dry_run(request.query.getall("dryRun", []))
            patch_type(request.content_type)
            data = await self._decode(request, limits.decode_json, "the patch", empty=b"null")
            if sub == "scale":
                _no_dry_run(dry_run, "scale")
                return _json(self.api.patch_scale(rt, namespace, name, request.content_type,
                                                  data))
            content_type = request.content_type
            patched = await self.api.guaranteed_update(
                rt, namespace, name, lambda old: self.api.prepare_patch(
                    rt, old, namespace, content_type, data, sub, version), self._off_loop,
                dry_run=dry_run)
            return await self._one(request, rt, version, patched)
        if method == "DELETE":
            options = await self._delete_options(request)
            if not name:
                deleted = self.api.delete_collection(rt, namespace, q.get("labelSelector", ""),
                                                     q.get("fieldSelector", ""), options)
                return _json(_list_body(rt, version, deleted, self.store.rv))
            return await self._one(request, rt, version, self.api.delete(rt, namespace, name,
                                                                         options))
        raise errors.method_not_allowed(f"{method} is not supported on this path")

    async def _one(self, request: web.Request, rt: ResourceType, version: str, obj: Obj,
                   status: int = 200) -> web.Response:
        """One object as the client asked for it; the JSON is encoded on a worker thread
        (stored objects are never changed in place, so the loop may go on meanwhile)."""
        table_version = _table_version(request)
        if table_version and obj.get("kind") == rt.kind:
            return _json(table(rt, [obj], self.clock.now(), obj["metadata"].get(
                "resourceVersion", ""), request.query.get("includeObject", "Metadata"),
                table_version=table_version), status)
        body = await self._off_loop(functools.partial(msgspec.json.encode,
                                                      _as_version(obj, rt, version)))
        return web.Response(body=body, status=status, content_type=JSON)

    async def _off_loop(self, work: Callable[[], _T]) -> _T:
        """Run CPU-heavy request work (decoding, preparing a write, encoding a response) on
        the decoder threads, so the event loop keeps serving other clients meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.decoder, work)

    async def _list(self, request: web.Request, rt: ResourceType, version: str,
                    namespace: str) -> web.Response:
        q = request.query
        limit = _int_param(q, "limit")
        raw_rv = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        if match not in ("", "NotOlderThan", "Exact"):
            raise errors.bad_request(f'resourceVersionMatch: Unsupported value: "{match}": '
                                     'supported values: "Exact", "NotOlderThan"')
        if raw_rv not in ("", "0"):
            wanted = parse_rv(raw_rv)
            await self._fresh(wanted)
            if match == "Exact" and wanted < self.store.rv:
                # Only the newest state is kept: an exact list of an older one cannot be served.
                raise errors.gone("The resourceVersion for the provided list is too old.")
        result = self.api.list_objects(rt, namespace, label_selector=q.get("labelSelector", ""),
                               field_selector=q.get("fieldSelector", ""), limit=limit,
                               continue_token=q.get("continue", ""))
        table_version = _table_version(request)
        if table_version:
            return _json(table(rt, result.items, self.clock.now(), str(result.resource_version),
                               q.get("includeObject", "Metadata"),
                               continue_token=result.continue_token,
                               table_version=table_version))
        body = _list_body(rt, version, result.items, result.resource_version)
        if result.continue_token:
            body["metadata"]["continue"] = result.continue_token
            body["metadata"]["remainingItemCount"] = result.remaining
        return _json(body)

    async def _watch(self, request: web.Request, rt: ResourceType, version: str,
                     namespace: str) -> web.StreamResponse:
        q = request.query
        labels = parse_label_selector(q.get("labelSelector", ""))
        fields = parse_field_selector(q.get("fieldSelector", ""), rt.kind)
        timeout = float(_int_param(q, "timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial = q.get("sendInitialEvents") in ("true", "1")
        table_version = _table_version(request)
        raw_rv = q.get("resourceVersion", "")

        def matches(obj: Obj | None) -> bool:
            if obj is None:
                return False
            meta = obj["metadata"]
            if namespace and meta.get("namespace") != namespace:
                return False
            return labels(meta.get("labels") or {}) and fields(obj)

        response = web.StreamResponse(headers={"Content-Type": JSON,
                                               "Transfer-Encoding": "chunked"})
        since = None if raw_rv in ("", "0") or initial else parse_rv(raw_rv)
        if since is not None:
            await self._fresh(since)
        try:
            watcher, backlog = self.store.watch(rt, since)
        except errors.ApiError as err:
            if err.code != 410:
                raise
            await response.prepare(request)
            await response.write(msgspec.json.encode({"type": "ERROR",
                                                      "object": err.status()}) + b"\n")
            return response
        first = True

        async def send(kind: str, obj: Obj) -> None:
            nonlocal first
            if table_version and kind != "BOOKMARK":
                out: Obj = table(rt, [obj], self.clock.now(), obj["metadata"]["resourceVersion"],
                                 q.get("includeObject", "Metadata"), with_columns=first,
                                 table_version=table_version)
                first = False
            else:
                out = _as_version(obj, rt, version)
            await response.write(msgspec.json.encode({"type": kind, "object": out}) + b"\n")

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        try:
            await response.prepare(request)
            if since is None:
                for obj in self.store.items(rt, namespace):
                    if matches(obj):
                        await send("ADDED", obj)
                if initial and bookmarks:
                    await send("BOOKMARK", self._bookmark(rt, version, initial_end=True))
            for event in backlog:
                await self._emit(event, matches, send)
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark and watcher.queue.empty():
                    await send("BOOKMARK", self._bookmark(rt, version))
                    next_bookmark = now + self.bookmark_interval
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                try:
                    item = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    continue
                if item is None:
                    break
                await self._emit(item, matches, send)
        except ConnectionResetError:
            pass  # the client went away
        finally:
            self.store.unwatch(watcher)
        return response

    async def _fresh(self, wanted: int) -> None:
        """Wait (up to :data:`FRESH_WAIT`) until the store has reached resourceVersion
        ``wanted``; 504 "Too large resource version" as upstream's cacher if it does not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FRESH_WAIT
        while self.store.rv < wanted:
            if loop.time() >= deadline:
                raise errors.too_large_rv(wanted, self.store.rv)
            await asyncio.sleep(0.05)

    async def _read(self, request: web.Request) -> bytes:
        """The body, refused early by its declared length and bounded in time."""
        declared = request.content_length
        if declared is not None and declared > limits.MAX_BODY_BYTES:
            raise limits.too_large()
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                return await request.read()
        except TimeoutError:
            raise errors.ApiError(408, "Timeout", "the request body did not arrive within "
                                  f"{BODY_TIMEOUT:g}s") from None

    async def _decode(self, request: web.Request, decode: Callable[[bytes, str], Any],
                      what: str, empty: bytes | None = None) -> Any:
        """Read the body and decode it on the decoder threads (never on the loop)."""
        raw = await self._read(request)
        if not raw:
            if empty is None:
                raise errors.bad_request("the request has no body")
            raw = empty
        return await self._off_loop(functools.partial(decode, raw, what))

    async def _body(self, request: web.Request) -> Any:
        if request.content_type == PROTOBUF:
            raise errors.ApiError(415, "UnsupportedMediaType", "kubeberth's API server reads "
                                  "JSON and YAML bodies only, not protobuf; write the object as "
                                  "a manifest and use kubectl apply -f or kubectl create -f")
        if request.content_type in ("application/yaml", "application/x-yaml"):
            return await self._decode(request, limits.decode_yaml, "the body")
        return await self._decode(request, limits.decode_json, "the body")

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        options: dict[str, Any] = {}
        parsed = await self._decode(request, limits.decode_json, "the DeleteOptions",
                                    empty=b"{}")
        if isinstance(parsed, dict):
            options.update(parsed)
        q = request.query
        if "gracePeriodSeconds" in q:
            options["gracePeriodSeconds"] = _int_param(q, "gracePeriodSeconds")
        if "propagationPolicy" in q:
            options["propagationPolicy"] = q["propagationPolicy"]
        dry = options.get("dryRun") or q.getall("dryRun", [])
        options["dryRun"] = _dry_run(dry if isinstance(dry, list) else [dry])
        _check_delete_options(options)
        return options

    async def _emit(self, event: Event, matches: Callable[[Obj | None], bool],
                    send: Callable[[str, Obj], Awaitable[None]]) -> None:
        """Send ``event`` as a selector-filtered watch sees it (entering or leaving the
        selection turns a modification into ADDED or DELETED)."""
        now, before = matches(event.obj), matches(event.old)
        if event.type == "ADDED" and now:
            await send("ADDED", event.obj)
        elif event.type == "DELETED" and (now or before):
            await send("DELETED", event.obj)
        elif event.type == "MODIFIED":
            if now and before:
                await send("MODIFIED", event.obj)
            elif now:
                await send("ADDED", event.obj)
            elif before:
                await send("DELETED", event.obj)

    def _bookmark(self, rt: ResourceType, version: str, *, initial_end: bool = False) -> Obj:
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version(version), "metadata": meta}


def _no_resource(request: web.Request) -> errors.ApiError:
    return errors.ApiError(404, "NotFound", "the server could not find the requested resource "
                           f"({request.method} {request.path})")


def _int_param(q: Mapping[str, str], name: str) -> int:
    """A non-negative int64 query parameter written in ASCII digits, as Go's ParseInt reads
    it (no underscores or spaces); 0 when absent."""
    raw = q.get(name, "")
    if not raw:
        return 0
    digits = raw[1:] if raw.startswith("-") else raw
    significant = digits.lstrip("0") or "0"
    if not (digits.isascii() and digits.isdigit()) or len(significant) > 19 or \
            int(significant) > 2**63 - 1:
        raise errors.bad_request(f'{name}: Invalid value: "{raw[:64]}": strconv.ParseInt: '
                                 f'parsing "{raw[:64]}": invalid syntax or out of range')
    if raw.startswith("-") and significant != "0":
        raise errors.bad_request(f"{name}: must not be negative")
    return int(significant)


def _table_version(request: web.Request) -> str:
    """"v1" (or "v1beta1") when the client asked for a meta.k8s.io Table first."""
    for media in request.headers.get("Accept", "").split(","):
        params = dict(p.strip().partition("=")[::2] for p in media.split(";")[1:])
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and \
                params.get("v") in ("v1", "v1beta1"):
            return params["v"]
        if media.split(";")[0].strip() in (JSON, "*/*"):
            return ""
    return ""


PROTOBUF = "application/vnd.kubernetes.protobuf"


def _check_delete_options(options: dict[str, Any]) -> None:
    """DeleteOptions' fields have their Go types and allowed values (400 otherwise)."""
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise errors.bad_request("json: cannot unmarshal into Go struct field "
                                 "DeleteOptions.gracePeriodSeconds of type int64")
    pre = options.get("preconditions")
    if pre is not None and (not isinstance(pre, dict) or any(
            v is not None and not isinstance(v, str) for v in pre.values())):
        raise errors.bad_request("json: cannot unmarshal into Go struct field "
                                 "DeleteOptions.preconditions of type v1.Preconditions")
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}": '
                                 'supported values: "Background", "Foreground", "Orphan"')


def _dry_run(values: list[Any]) -> bool:
    """``dryRun=All`` (the only value upstream accepts) or nothing."""
    for value in values:
        if value != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{value}": supported '
                                     'values: "All"')
    return bool(values)


def _no_dry_run(dry_run: bool, what: str) -> None:
    if dry_run:
        raise errors.bad_request(f"dryRun is not supported on {what} by kubeberth's API "
                                 "server")


def _as_version(obj: Obj, rt: ResourceType, version: str) -> Obj:
    want = rt.api_version(version)
    if obj.get("apiVersion") == want or obj.get("kind") != rt.kind:
        return obj
    return {**obj, "apiVersion": want}


def _list_body(rt: ResourceType, version: str, items: list[Obj], rv: int) -> Obj:
    return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version(version),
            "metadata": {"resourceVersion": str(rv)},
            "items": [_as_version(o, rt, version) for o in items]}


def load_manifests_into(api: Api, manifests: Manifests) -> list[str]:
    """Create the objects of ``manifests``: namespaces, priority classes and nodes first, pods
    last; namespaces that objects use but do not define are created. Returns the kinds skipped
    because they are not served (configuration kinds such as DeschedulerPolicy)."""
    docs = [doc for doc in manifests.origins.values()] + list(manifests.other) \
        + list(manifests.workload_api)
    order = {"Namespace": 0, "PriorityClass": 1, "Node": 2, "Pod": 4}
    docs.sort(key=lambda d: order.get(d.kind, 3))
    skipped: list[str] = []
    for doc in docs:
        rt = api.registry.by_kind(doc.api_version, doc.kind)
        if rt is None:
            if doc.kind not in skipped:
                skipped.append(doc.kind)
            continue
        ns = ""
        if rt.namespaced:
            ns = str((doc.data.get("metadata") or {}).get("namespace") or "default")
            if api.store.get(api.namespaces, "", ns) is None:
                api.create(api.namespaces, "", {"metadata": {"name": ns}})
        try:
            api.create(rt, ns, doc.data, doc.api_version.rpartition("/")[2])
        except errors.ApiError as err:
            raise doc.error(err.message) from None
    return skipped


class EmbeddedServer:
    """An embedded cluster served over HTTP(S) on loopback, on its own loop thread.

    ``port=0`` picks a free port; ``clock=ManualClock()`` makes pod durations advance only
    through :meth:`advance`. Use as a context manager, or :meth:`start` / :meth:`stop`.
    """

    def __init__(self, *, manifests: Manifests | None = None, host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None, tls_cert: Path | None = None,
                 tls_key: Path | None = None, serving_cert: ServingCert | None = None,
                 clock: Clock | None = None, bookmark_interval: float = 60.0,
                 history: int = DEFAULT_HISTORY, audit: bool = False,
                 metrics_public: bool = False,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                 apis: tuple[ResourceType, ...] = ()) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise InputError(f"address {host!r} is not loopback", field="--address",
                             expected="127.0.0.1, localhost or ::1 (the server has no "
                             "authorization beyond a bearer token)")
        self.cluster = Cluster(clock=clock, token=token, bookmark_interval=bookmark_interval,
                               history=history, audit=audit, metrics_public=metrics_public,
                               apis=apis)
        self.skipped = self.cluster.load(manifests) if manifests is not None else []
        self.host = host
        self.port = port
        self.token = token
        self.header_timeout = header_timeout
        self._ssl: ssl.SSLContext | None = None
        self._ca_pem: bytes | None = None
        if serving_cert is not None:
            self._ssl = serving_cert.server_context()
            self._ca_pem = serving_cert.cert_pem
        elif tls_cert is not None or tls_key is not None:
            if tls_cert is None or tls_key is None:
                raise InputError("TLS needs both a certificate and its key",
                                 field="--tls-cert-file/--tls-private-key-file",
                                 expected="both options, PEM files")
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                self._ssl.load_cert_chain(str(tls_cert), str(tls_key))
                self._ca_pem = tls_cert.read_bytes()
            except (OSError, ssl.SSLError) as err:
                raise InputError(f"cannot load the TLS certificate or key: {err}",
                                 source=str(tls_cert), expected="a PEM certificate and its "
                                 "matching PEM private key") from None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def api(self) -> Api:
        return self.cluster.api

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> EmbeddedServer:
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready: Future[None] = Future()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as err:
                ready.set_exception(err)
                return
            ready.set_result(None)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="kubeberth-apiserver", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=30)
        except BaseException as err:
            self._thread.join(timeout=5)
            loop.close()
            self._loop = None
            if isinstance(err, OSError):
                raise InputError(f"cannot listen on {self.host}:{self.port}: {err.strerror}",
                                 field="--port", expected="a free port") from None
            raise
        return self

    async def _start(self) -> None:
        self._tasks = [asyncio.create_task(self.cluster.controllers.run()),
                       asyncio.create_task(self.cluster.controllers.run_timers())]
        if self.cluster.faults is not None:
            self._tasks.append(asyncio.create_task(
                self.cluster.faults.drop_watches(self.cluster.store)))
        # keepalive_timeout also runs from a connection's start (aiohttp >= 3.14): a client
        # that has not sent a whole request by then is disconnected (slowloris).
        self._runner = web.AppRunner(self.cluster.app(), access_log=None,
                                     handler_cancellation=True, shutdown_timeout=1.0,
                                     keepalive_timeout=self.header_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._ssl)
        try:
            await site.start()
        except BaseException:
            await self._stop()
            raise
        self.port = int(self._runner.addresses[0][1])
        self.cluster.address = f"{self.host}:{self.port}"

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        loop.close()
        self._loop = None
        self.cluster.decoder.shutdown(wait=False, cancel_futures=True)

    async def _stop(self) -> None:
        self.cluster.store.close_watches()
        for task in self._tasks:
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    # In-process access, on the server's loop.

    def call(self, fn: Callable[[], _T], timeout: float = 30) -> _T:
        """Run ``fn`` on the server's loop (where the store lives) and return its result."""
        if self._loop is None:
            return fn()

        async def run() -> _T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def settle(self, timeout: float = 30) -> None:
        """Wait until the in-cluster controllers have handled every change so far."""
        if self._loop is None:
            raise RuntimeError("the server is not running")
        asyncio.run_coroutine_threadsafe(self.cluster.controllers.settle(),
                                         self._loop).result(timeout)

    def advance(self, seconds: float) -> None:
        """Move a :class:`ManualClock` forward and let the fake kubelet act on it."""
        clock = self.cluster.clock
        if not isinstance(clock, ManualClock):
            raise RuntimeError("advance() needs the server to run on a ManualClock")
        self.call(lambda: clock.advance(seconds))
        self.settle()

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for this server (bearer token and TLS as configured)."""
        cluster: dict[str, Any] = {"server": self.url}
        if self._ca_pem is not None:
            # The serving certificate is its own CA (self-signed, valid for the loopback host).
            cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        return {"apiVersion": "v1", "kind": "Config", "current-context": "kubeberth",
                "clusters": [{"name": "kubeberth", "cluster": cluster}],
                "users": [{"name": "kubeberth", "user": user}],
                "contexts": [{"name": "kubeberth",
                              "context": {"cluster": "kubeberth", "user": "kubeberth",
                                          "namespace": "default"}}],
                "preferences": {}}

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write :meth:`kubeconfig` to ``path``, created 0600 and renamed into place."""
        return write_private(Path(path), yaml.safe_dump(self.kubeconfig(),
                                                        sort_keys=False).encode())

