"""``kubeberth extender``: one kubeberth profile served as a kube-scheduler HTTP extender.

An unmodified kube-scheduler (or kubeberth's own framework) lists this service under
``extenders`` and posts extender v1 JSON to it: ``filter`` runs the profile's PreFilter and
Filter plugins over the nodes in ExtenderArgs, ``prioritize`` its PreScore and Score plugins with
the totals mapped onto 0..MaxExtenderPriority (10), ``preempt`` its victim selection on each
candidate node, and ``bind`` records the binding.

The extender judges against its own ClusterState, and exactly this state:
- the ``--cluster`` manifests at start (nodes, bound pods, PriorityClasses, Namespaces, PDBs,
  PodGroups; pending pods in them are ignored);
- Node objects sent in ExtenderArgs (nodeCacheCapable: false) replace the cached node of that
  name (or add it); ``NodeNames`` (nodeCacheCapable: true) must name cached nodes;
- a pod posted to ``bind`` is added to its node; the pod must have been seen by ``filter``,
  ``prioritize`` or ``preempt`` first (ExtenderBindingArgs carry only its identity);
- victims that ``preempt`` chose on node X are removed once the preemptor comes back nominated
  to X (``status.nominatedNodeName``), which is when the scheduler has deleted them.
The extender watches no API server, so bindings and deletions it is not told about this way are
invisible to it. Its state is the pure-policy input; the answers are decisions only.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import socket
import ssl
import threading
from typing import Any

import msgspec
import numpy as np
from aiohttp import web

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.config.manifests import Manifests
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.extender import MAX_EXTENDER_PRIORITY, lookup, pod_uid
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins.default_preemption import dry_run_candidates
from kubeberth.sim.explain import build_state
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo, make_pod_info

VERBS = ("filter", "prioritize", "preempt", "bind")
PREFILTER_REJECTED = "node is filtered out by the prefilter result"
NOT_CACHED = "node is not in the extender's cluster"
# Pods seen but not bound, and preemption offers, kept for the most recent this many pods.
REMEMBERED = 10_000


class BadRequest(Exception):
    """The request body is not the extender v1 JSON the verb expects."""


def normalize(totals: IntArray) -> list[int]:
    """Profile totals onto 0..MaxExtenderPriority, min-max: the best node(s) get 10, the worst
    0, floor in between, all 0 when every node scored the same. Monotone, so adding them to
    the scheduler's own totals never reorders nodes the profile ordered."""
    if totals.size == 0:
        return []
    lo, hi = int(totals.min()), int(totals.max())
    if hi == lo:
        return [0] * int(totals.size)
    return [(int(t) - lo) * MAX_EXTENDER_PRIORITY // (hi - lo) for t in totals.tolist()]


class ExtenderService:
    """The extender's policy side: state, one profile's framework, and the four verbs as
    JSON-in, JSON-out calls (the HTTP server is a thin shell around them)."""

    def __init__(self, config: SchedulerConfiguration, registry: Registry,
                 cluster: Manifests | None = None, *, profile: str | None = None,
                 seed: int = 0) -> None:
        chosen = config.profiles[0]
        if profile is not None:
            names = [p.scheduler_name for p in config.profiles]
            if profile not in names:
                raise InputError(f"no profile named {profile!r}", field="--profile",
                                 expected="one of " + ", ".join(names))
            chosen = config.profiles[names.index(profile)]
        self.snap = build_state(cluster)[0] if cluster is not None else ClusterState()
        handle = Handle(self.snap, clock=lambda: 0.0, rng=np.random.default_rng(seed),
                        parallelism=config.parallelism)
        # The served profile never calls extenders itself (it would call itself).
        self.fw = Framework(chosen, registry, handle)
        handle.frameworks = {chosen.scheduler_name: self.fw}
        self.profile = chosen.scheduler_name
        self._seen: dict[str, PodInfo] = {}
        self._offers: dict[str, dict[str, list[str]]] = {}

    # ---- verbs -----------------------------------------------------------------------------
    def handle(self, verb: str, body: Any) -> Any:
        if not isinstance(body, dict):
            raise BadRequest(f"{verb} expects a JSON object")
        if verb == "filter":
            return self.filter(body)
        if verb == "prioritize":
            return self.prioritize(body)
        if verb == "preempt":
            return self.preempt(body)
        return self.bind(body)

    def filter(self, args: dict[str, Any]) -> dict[str, Any]:
        pi = self._pod(args)
        slots, missing, by_names = self._nodes(args)
        passed: list[int] = []
        failed: dict[str, str] = {}
        unresolvable = dict.fromkeys(missing, NOT_CACHED)
        state = CycleState()
        allowed, st = self.fw.run_pre_filter(state, pi, self.snap)
        if st.code == Code.ERROR:
            return {"Error": st.message()}
        if not st.ok:
            target = unresolvable if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
            for slot in slots:
                target[self.snap.node_names[slot]] = st.message()
            slots = []
        elif allowed is not None:
            for slot in slots:
                if self.snap.node_names[slot] not in allowed:
                    unresolvable[self.snap.node_names[slot]] = PREFILTER_REJECTED
            slots = [s for s in slots if self.snap.node_names[s] in allowed]
        if slots:
            out = self.fw.run_filters(state, pi, self.snap, np.array(slots, dtype=np.int64))
            for pos, slot in enumerate(slots):
                code = int(out.codes[pos])
                name = self.snap.node_names[slot]
                if code == 0:
                    passed.append(slot)
                elif code == Code.ERROR:
                    return {"Error": f"{out.plugin_at(pos)}: {', '.join(out.reasons_at(pos))}"}
                else:
                    target = unresolvable if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE \
                        else failed
                    target[name] = ", ".join(out.reasons_at(pos))
        result: dict[str, Any] = {"Nodes": None, "NodeNames": None, "FailedNodes": failed,
                                  "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
        if by_names:
            result["NodeNames"] = [self.snap.node_names[s] for s in passed]
        else:
            result["Nodes"] = {"metadata": {}, "items": [self.snap.nodes[s] for s in passed]}
        return result

    def prioritize(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        pi = self._pod(args)
        slots, _missing, _ = self._nodes(args)
        nodes = np.array(slots, dtype=np.int64)
        state = CycleState()
        _allowed, st = self.fw.run_pre_filter(state, pi, self.snap)
        if st.code == Code.ERROR:
            raise BadRequest(st.message())
        st = self.fw.run_pre_score(state, pi, self.snap, nodes)
        if not st.ok:
            raise BadRequest(st.message())
        scores = self.fw.run_score(state, pi, self.snap, nodes)
        if not scores.status.ok:
            raise BadRequest(scores.status.message())
        totals = scores.totals
        return [{"Host": self.snap.node_names[s], "Score": score}
                for s, score in zip(slots, normalize(totals), strict=True)]

    def preempt(self, args: dict[str, Any]) -> dict[str, Any]:
        pi = self._pod(args)
        proposed = lookup(args, "NodeNameToMetaVictims")
        if proposed is None:
            proposed = lookup(args, "NodeNameToVictims")
        if not isinstance(proposed, dict):
            raise BadRequest("preempt expects NodeNameToVictims or NodeNameToMetaVictims")
        state = CycleState()
        _allowed, st = self.fw.run_pre_filter(state, pi, self.snap)
        result: dict[str, Any] = {}
        offers: dict[str, list[str]] = {}
        if st.ok:
            for name in sorted(proposed):
                slot = self.snap.node_index.get(name)
                if slot is None or not self.snap.present[slot]:
                    continue
                found, _statuses = dry_run_candidates(self.fw, state, pi, self.snap, [slot], 0, 1)
                if not found:
                    continue
                best = found[0]
                result[name] = {"Pods": [{"UID": pod_uid(v.pod)} for v in best.victims],
                                "NumPDBViolations": best.num_pdb_violations}
                offers[name] = [v.key for v in best.victims]
        _remember(self._offers, pod_uid(pi.pod), offers)
        return {"NodeNameToMetaVictims": result}

    def bind(self, args: dict[str, Any]) -> dict[str, Any]:
        name, ns = lookup(args, "PodName"), lookup(args, "PodNamespace") or "default"
        uid, node = lookup(args, "PodUID") or "", lookup(args, "Node")
        if not isinstance(name, str) or not isinstance(node, str):
            raise BadRequest("bind expects PodName and Node strings")
        pi = self._seen.get(uid or f"{ns}/{name}") or self._seen.get(f"{ns}/{name}")
        if pi is None:
            return {"Error": f"pod {ns}/{name} is unknown to the extender: bind only pods it "
                             "filtered, prioritized or preempted for"}
        slot = self.snap.node_index.get(node)
        if slot is None or not self.snap.present[slot]:
            return {"Error": f"node {node!r} is not in the extender's cluster"}
        self._evict_offered(pi)
        if pi.node >= 0:
            self.snap.remove_pod(pi)
        pi.pod.spec.node_name = node
        self.snap.add_pod(pi, slot)
        self._seen.pop(pod_uid(pi.pod), None)
        self._seen.pop(pi.key, None)
        return {"Error": ""}

    # ---- request decoding ------------------------------------------------------------------
    def _pod(self, args: dict[str, Any]) -> PodInfo:
        raw = lookup(args, "Pod")
        try:
            pod = msgspec.convert(raw, Pod)
        except msgspec.ValidationError as err:
            raise BadRequest(f"Pod: {err}") from None
        pi = make_pod_info(pod, self.snap.priority_classes)
        self._evict_offered(pi)
        _remember(self._seen, pod_uid(pod), pi)
        _remember(self._seen, pi.key, pi)
        return pi

    def _nodes(self, args: dict[str, Any]) -> tuple[list[int], list[str], bool]:
        """Node slots to judge, names that are not cached, and whether names were sent."""
        names = lookup(args, "NodeNames")
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise BadRequest("NodeNames must be a list of node names")
            slots: list[int] = []
            missing: list[str] = []
            for name in names:
                slot = self.snap.node_index.get(name)
                if slot is None or not self.snap.present[slot]:
                    missing.append(name)
                else:
                    slots.append(slot)
            return slots, missing, True
        node_list = lookup(args, "Nodes")
        items = lookup(node_list, "items") if isinstance(node_list, dict) else None
        if not isinstance(items, list):
            raise BadRequest("ExtenderArgs carry neither NodeNames nor Nodes.items")
        try:
            nodes = [msgspec.convert(item, Node) for item in items]
        except msgspec.ValidationError as err:
            raise BadRequest(f"Nodes.items: {err}") from None
        return [self._cache_node(n) for n in nodes], [], False

    def _cache_node(self, node: Node) -> int:
        slot = self.snap.node_index.get(node.metadata.name)
        if slot is not None and self.snap.present[slot] and self.snap.nodes[slot] == node:
            return slot
        return self.snap.update_node(node)

    def _evict_offered(self, pi: PodInfo) -> None:
        """The preemptor is back nominated to a node we offered victims on: they are gone."""
        nominated = pi.pod.status.nominated_node_name
        offers = self._offers.get(pod_uid(pi.pod))
        if not nominated or not offers or nominated not in offers:
            return
        del self._offers[pod_uid(pi.pod)]
        for key in offers[nominated]:
            victim = self.snap.pods.get(key)
            if victim is not None:
                self.snap.remove_pod(victim)


def _remember(memory: dict[str, Any], key: str, value: Any) -> None:
    """Insert as the newest entry and forget the oldest beyond :data:`REMEMBERED` (two per
    pod at most), so a long-running extender does not grow without bound."""
    memory.pop(key, None)
    memory[key] = value
    while len(memory) > 2 * REMEMBERED:
        del memory[next(iter(memory))]


# ---- HTTP ------------------------------------------------------------------------------------
def make_app(service: ExtenderService, *, token: str | None = None) -> web.Application:
    """POST ``<any prefix>/<verb>`` for the four verbs; GET /healthz. With ``token`` the
    verbs answer 401 unless the request carries it as its bearer token (compared in constant
    time); /healthz stays open for probes."""
    bearer = f"Bearer {token}".encode() if token is not None else b""

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def dispatch(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if token is not None and not hmac.compare_digest(given, bearer):
            return web.Response(status=401, text="Unauthorized: this extender needs its "
                                "bearer token", headers={"WWW-Authenticate": "Bearer"})
        verb = request.path.rstrip("/").rsplit("/", 1)[-1]
        if verb not in VERBS:
            return web.Response(status=404, text=f"unknown verb {verb!r}; serving "
                                + ", ".join(VERBS))
        try:
            body = msgspec.json.decode(await request.read())
            answer = service.handle(verb, body)
        except (msgspec.DecodeError, BadRequest) as err:
            return web.Response(status=400, text=str(err))
        except RecursionError:
            return web.Response(status=400, text="the request body nests too deep")
        except InputError as err:
            return web.Response(status=422, text=str(err))
        return web.Response(body=msgspec.json.encode(answer), content_type="application/json")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/{path:.*}", dispatch)
    return app


def exposure_warning(host: str, *, tls: bool, token: bool) -> str | None:
    """What is unsafe about serving on ``host`` without TLS or a token (None: loopback, or
    both set). A non-loopback extender without them lets anyone on the network read pods and
    steer bindings."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback or (tls and token):
        return None
    missing = [what for what, present in (("TLS (--tls-cert-file/--tls-private-key-file)",
                                           tls), ("a bearer token (--token-file)", token))
               if not present]
    return (f"WARNING: serving the extender on {host}, reachable beyond this machine, "
            f"without {' or '.join(missing)}: anyone who can reach the port can read the pods "
            "and nodes sent to it and choose where pods bind")


class ExtenderServer:
    """An aiohttp app (:func:`make_app`) on ``host:port`` in a background thread (port 0: any
    free port)."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def _start(self) -> None:
        sock = socket.create_server((self.host, self.port))
        self.port = int(sock.getsockname()[1])
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=self.ssl_context).start()

    def start(self) -> ExtenderServer:
        self._loop.run_until_complete(self._start())
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        runner = self._runner

        async def shutdown() -> None:
            if runner is not None:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._thread = None

    def __enter__(self) -> ExtenderServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
