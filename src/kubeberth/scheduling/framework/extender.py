"""HTTP scheduler extenders: kube-scheduler's ``HTTPExtender`` and the calls it makes.

KubeSchedulerConfiguration ``extenders`` name web services that take part in every scheduling
cycle of every profile: after the in-tree filters (``filterVerb``), after the Score plugins
(``prioritizeVerb``), inside DefaultPreemption (``preemptVerb``) and instead of the Bind plugins
(``bindVerb``). The wire format is the extender v1 API (``k8s.io/kube-scheduler/extender/v1``),
whose Go types carry no JSON tags: requests use Go's field names (``Pod``, ``NodeNames``, ...)
and responses are read case-insensitively, as Go's decoder reads them.

The scheduler owns when to call; this module owns how: encoding, one pooled httpx client per
extender (connection reuse, ``httpTimeout``, ``enableHTTPS``/``tlsConfig``) and turning every
transport, status or decoding problem into :class:`ExtenderError`, which the caller treats as
upstream does (ignorable extenders are skipped, the others fail the cycle). Nothing here runs
when no extender is configured.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.api.quantity import enc_hook
from kubeberth.scheduling.config.types import Extender, ExtenderTLS
from kubeberth.scheduling.framework.interface import MAX_NODE_SCORE
from kubeberth.scheduling.framework.runtime import FilterOutcome
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

MAX_EXTENDER_PRIORITY = 10
# The plugin name upstream records for nodes an extender filtered out (framework.ExtenderName).
EXTENDER_NAME = "Extender"
# Factor that maps an extender score (0..10) onto the scheduler's 0..100 range.
SCORE_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY


class ExtenderError(Exception):
    """An extender call failed: transport, HTTP status, undecodable or inconsistent answer."""


def pod_uid(pod: Pod) -> str:
    """The identity a MetaPod carries: ``metadata.uid``, or ``namespace/name`` for pods that
    have none (hand-written manifests); both ends of kubeberth use the same rule."""
    return pod.metadata.uid or f"{pod.metadata.namespace or 'default'}/{pod.metadata.name}"


def lookup(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched case-insensitively, as Go's encoding/json matches field names."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for key, value in obj.items():
        if key.lower() == low:
            return value
    return None


def is_interested(managed: frozenset[str], pod: Pod) -> bool:
    """Upstream ``IsInterested``: an extender without managedResources sees every pod, one
    with them only pods whose containers or init containers request or limit one."""
    if not managed:
        return True
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        if managed.intersection(c.resources.requests) or managed.intersection(c.resources.limits):
            return True
    return False


@dataclass(slots=True)
class FilterAnswer:
    """What one extender's filter call said about the nodes it was given."""

    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]


@dataclass(slots=True)
class ExtenderVerdicts:
    """Every extender's answers in one cycle, for explain: node name -> verdict."""

    # extender name -> node -> (code, reasons); only nodes the extender was asked about.
    filters: dict[str, dict[str, tuple[Code, tuple[str, ...]]]] = field(default_factory=dict)
    # extender name -> node -> (extender score, score added to the node's total).
    scores: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # extender name -> error of a call whose failure was ignored.
    ignored_errors: dict[str, str] = field(default_factory=dict)


class HTTPExtender:
    """One configured extender and its pooled HTTP client."""

    def __init__(self, config: Extender) -> None:
        self.config = config
        self.name = config.url_prefix
        self.ignorable = config.ignorable
        self.weight = config.weight
        self.managed = frozenset(config.managed_resources)
        self._base = config.url_prefix.rstrip("/") + "/"
        self._extensions: dict[str, Any] = {}
        tls = config.tls
        if tls is not None and tls.server_name:
            self._extensions["sni_hostname"] = tls.server_name
        self._client = httpx.Client(
            timeout=httpx.Timeout(config.http_timeout_seconds),
            verify=_ssl_context(tls, config.enable_https),
        )

    def close(self) -> None:
        self._client.close()

    @property
    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    @property
    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def interested(self, pod: Pod) -> bool:
        return is_interested(self.managed, pod)

    # ---- verbs -----------------------------------------------------------------------------
    def filter(self, pod: Pod, snap: ClusterState, nodes: Sequence[int]) -> FilterAnswer:
        """Upstream ``Filter``: the nodes that pass, and the failed ones with their messages."""
        names = [snap.node_names[n] for n in nodes]
        result = self._send(self.config.filter_verb, self._args(pod, snap, nodes, names))
        if not isinstance(result, dict):
            raise ExtenderError(f"extender {self.name!r} answered filter with "
                                f"{type(result).__name__}, not an ExtenderFilterResult")
        error = lookup(result, "Error")
        if error:
            raise ExtenderError(str(error))
        known = set(names)
        passed: list[str] = []
        node_names = lookup(result, "NodeNames")
        node_list = lookup(result, "Nodes")
        if self.config.node_cache_capable and node_names is not None:
            passed = _strings(node_names, self.name, "NodeNames")
        elif node_list is not None:
            items = lookup(node_list, "items") if isinstance(node_list, dict) else None
            for item in items or []:
                meta = lookup(item, "metadata") if isinstance(item, dict) else None
                name = lookup(meta, "name") if isinstance(meta, dict) else None
                if not isinstance(name, str):
                    raise ExtenderError(f"extender {self.name!r} returned a node without "
                                        "metadata.name")
                passed.append(name)
        for name in passed:
            if name not in known:
                raise ExtenderError(f'extender "{self.name}" claims a filtered node "{name}" '
                                    "which is not found in the input node list")
        return FilterAnswer(passed, _failed_map(lookup(result, "FailedNodes"), self.name),
                            _failed_map(lookup(result, "FailedAndUnresolvableNodes"), self.name))

    def prioritize(self, pod: Pod, snap: ClusterState,
                   nodes: Sequence[int]) -> list[tuple[str, int]]:
        """Upstream ``Prioritize``: (host, score) pairs as the extender returned them."""
        names = [snap.node_names[n] for n in nodes]
        result = self._send(self.config.prioritize_verb, self._args(pod, snap, nodes, names))
        if not isinstance(result, list):
            raise ExtenderError(f"extender {self.name!r} answered prioritize with "
                                f"{type(result).__name__}, not a HostPriorityList")
        out: list[tuple[str, int]] = []
        for item in result:
            host = lookup(item, "Host") if isinstance(item, dict) else None
            score = lookup(item, "Score") if isinstance(item, dict) else None
            if not isinstance(host, str) or not isinstance(score, int) \
                    or isinstance(score, bool):
                raise ExtenderError(f"extender {self.name!r} returned a HostPriority without "
                                    "a string Host and an integer Score")
            out.append((host, score))
        return out

    def process_preemption(self, pod: Pod, snap: ClusterState,
                           victims: Mapping[str, tuple[list[PodInfo], int]]
                           ) -> dict[str, tuple[list[PodInfo], int]]:
        """Upstream ``ProcessPreemption``: node -> (victims, PDB violations) the extender
        accepts, its MetaPods resolved against the pods on each node."""
        args: dict[str, Any] = {"Pod": pod, "NodeNameToVictims": None,
                                "NodeNameToMetaVictims": None}
        if self.config.node_cache_capable:
            args["NodeNameToMetaVictims"] = {
                node: {"Pods": [{"UID": pod_uid(v.pod)} for v in pods], "NumPDBViolations": n}
                for node, (pods, n) in victims.items()}
        else:
            args["NodeNameToVictims"] = {
                node: {"Pods": [v.pod for v in pods], "NumPDBViolations": n}
                for node, (pods, n) in victims.items()}
        result = self._send(self.config.preempt_verb, args)
        meta = lookup(result, "NodeNameToMetaVictims") if isinstance(result, dict) else None
        if meta is not None and not isinstance(meta, dict):
            raise ExtenderError(f"extender {self.name!r} answered preempt without a "
                                "NodeNameToMetaVictims mapping")
        out: dict[str, tuple[list[PodInfo], int]] = {}
        for node, mv in (meta or {}).items():
            idx = snap.node_index.get(node)
            if idx is None or not snap.present[idx]:
                raise ExtenderError(f'nodeinfo not found for node name "{node}"')
            by_uid = {pod_uid(pi.pod): pi for pi in snap.pods_on_node[idx].values()}
            pods: list[PodInfo] = []
            raw_pods = lookup(mv, "Pods") if isinstance(mv, dict) else None
            for mp in raw_pods or []:
                uid = lookup(mp, "UID") if isinstance(mp, dict) else None
                found = by_uid.get(uid) if isinstance(uid, str) else None
                if found is None:
                    raise ExtenderError(
                        f"extender: {self.name} claims to preempt pod (UID: {uid}) on node: "
                        f"{node}, but the pod is not found on that node")
                pods.append(found)
            n = lookup(mv, "NumPDBViolations") if isinstance(mv, dict) else 0
            out[node] = (pods, n if isinstance(n, int) else 0)
        return out

    def bind(self, pod: Pod, node: str) -> None:
        """Upstream ``Bind``: the extender binds the pod; an Error in the answer is a failure."""
        result = self._send(self.config.bind_verb, {
            "PodName": pod.metadata.name, "PodNamespace": pod.metadata.namespace or "default",
            "PodUID": pod.metadata.uid, "Node": node})
        error = lookup(result, "Error") if isinstance(result, dict) else None
        if error:
            raise ExtenderError(str(error))

    # ---- wire ------------------------------------------------------------------------------
    def _args(self, pod: Pod, snap: ClusterState, nodes: Sequence[int],
              names: list[str]) -> dict[str, Any]:
        """ExtenderArgs: node names for a nodeCacheCapable extender, else full Node objects."""
        if self.config.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": names}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [snap.nodes[n] for n in nodes]},
                "NodeNames": None}

    def _send(self, verb: str, args: Any) -> Any:
        url = self._base + verb
        try:
            resp = self._client.post(url, content=msgspec.json.encode(args, enc_hook=enc_hook),
                                     headers={"Content-Type": "application/json"},
                                     extensions=self._extensions)
        except httpx.HTTPError as err:
            raise ExtenderError(f"failed {verb} with extender at URL {url}: "
                                f"{type(err).__name__}: {err}") from None
        if resp.status_code != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, "
                                f"code {resp.status_code}")
        try:
            return msgspec.json.decode(resp.content)
        except msgspec.DecodeError as err:
            raise ExtenderError(f"extender at URL {url} answered {verb} with invalid "
                                f"JSON: {err}") from None


def _strings(value: Any, name: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExtenderError(f"extender {name!r} returned {what} that is not a list of names")
    return list(value)


def _failed_map(value: Any, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ExtenderError(f"extender {name!r} returned a FailedNodesMap that is not a "
                            "mapping of node name to message")
    return dict(value)


def _ssl_context(tls: ExtenderTLS | None, enable_https: bool) -> ssl.SSLContext | bool:
    """upstream makeTransport: tlsConfig as given; enableHTTPS without a CA skips verification."""
    if tls is None and not enable_https:
        return True
    tls = tls or ExtenderTLS()
    has_ca = bool(tls.ca_file or tls.ca_data)
    ctx = ssl.create_default_context()
    if has_ca:
        ctx = ssl.create_default_context(cafile=tls.ca_file or None,
                                         cadata=tls.ca_data.decode() if tls.ca_data else None)
    if tls.insecure or (enable_https and not has_ca):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_file or tls.cert_data:
        _load_client_cert(ctx, tls)
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, tls: ExtenderTLS) -> None:
    """A client certificate from files or PEM bytes (ssl only loads files)."""
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file or None)
        return
    paths: list[str] = []
    try:
        for data in (tls.cert_data, tls.key_data):
            fd, path = tempfile.mkstemp(suffix=".pem")
            paths.append(path)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        ctx.load_cert_chain(paths[0], paths[1] if tls.key_data else None)
    finally:
        for path in paths:
            os.unlink(path)


def build_extenders(configs: Iterable[Extender]) -> list[HTTPExtender]:
    """Clients for the configured extenders; unreadable TLS material is bad input."""
    out: list[HTTPExtender] = []
    for i, config in enumerate(configs):
        try:
            out.append(HTTPExtender(config))
        except (OSError, ssl.SSLError, ValueError) as err:
            raise InputError(f"extender {config.url_prefix!r}: cannot set up TLS: {err}",
                             field=f"extenders[{i}].tlsConfig",
                             expected="readable PEM certificate, key and CA files or data"
                             ) from None
    return out


# ---- the cycle's calls, in upstream's order and with its error handling ----------------------
def filter_with_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo, snap: ClusterState,
                          feasible: IntArray, out: FilterOutcome,
                          verdicts: ExtenderVerdicts) -> IntArray:
    """Upstream ``findNodesThatPassExtenders``: each interested extender with a filterVerb
    narrows the feasible nodes in turn; the nodes it fails get its message as their reason
    (FailedAndUnresolvableNodes wins over FailedNodes) under the plugin name ``Extender``.
    Raises :class:`ExtenderError` for a failing non-ignorable extender."""
    pos_of: dict[int, int] | None = None
    for ext in extenders:
        if len(feasible) == 0:
            break
        if not ext.config.filter_verb or not ext.interested(pod.pod):
            continue
        asked = feasible.tolist()
        try:
            ans = ext.filter(pod.pod, snap, asked)
        except ExtenderError as err:
            if ext.ignorable:
                verdicts.ignored_errors[ext.name] = str(err)
                continue
            raise
        passed = set(ans.passed)
        seen = verdicts.filters.setdefault(ext.name, {})
        for slot in asked:
            name = snap.node_names[slot]
            if name in passed:
                seen[name] = (Code.SUCCESS, ())
            elif name in ans.unresolvable:
                seen[name] = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ans.unresolvable[name],))
            elif name in ans.failed:
                seen[name] = (Code.UNSCHEDULABLE, (ans.failed[name],))
            else:
                # Dropped without a message: upstream keeps no status for it, which reads as
                # UnschedulableAndUnresolvable (the absent-node status) with no reason.
                seen[name] = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ())
        if EXTENDER_NAME not in out.plugin_names:
            out.plugin_names = [*out.plugin_names, EXTENDER_NAME]
        k = out.plugin_names.index(EXTENDER_NAME)
        if pos_of is None:
            pos_of = {int(n): i for i, n in enumerate(out.nodes.tolist())}
        for slot in asked:
            name = snap.node_names[slot]
            if name not in passed and name not in ans.failed and name not in ans.unresolvable:
                _mark(out, pos_of[slot], k, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, None)
        for name, msg in ans.unresolvable.items():
            pos = pos_of.get(snap.node_index.get(name, -1))
            if pos is not None:
                _mark(out, pos, k, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
        for name, msg in ans.failed.items():
            pos = pos_of.get(snap.node_index.get(name, -1))
            if pos is not None and name not in ans.unresolvable:
                _mark(out, pos, k, Code.UNSCHEDULABLE, msg)
        feasible = np.array([snap.node_index[n] for n in ans.passed], dtype=np.int64)
    return feasible


def _mark(out: FilterOutcome, pos: int, k: int, code: Code, msg: str | None) -> None:
    """Add an extender's verdict to a node's filter outcome: reasons accumulate; the
    unresolvable code replaces any other, the plain one only fills a passing node's."""
    reasons = out.reasons_at(pos) if out.codes[pos] != 0 else ()
    if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE or out.codes[pos] == 0:
        out.codes[pos] = int(code)
        out.passed = None
    if out.first_plugin[pos] < 0:
        out.first_plugin[pos] = k
    out.overrides[pos] = reasons if msg is None else (*reasons, msg)


def score_with_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo, snap: ClusterState,
                         nodes: IntArray, totals: IntArray, verdicts: ExtenderVerdicts) -> None:
    """Upstream ``prioritizeNodes``' extender part: each interested extender's score for a
    node, times its weight, times MaxNodeScore/MaxExtenderPriority, is added to the node's
    total. Prioritize errors only mean no score from that extender, ignorable or not."""
    pos_of: dict[str, int] | None = None
    for ext in extenders:
        if not ext.config.prioritize_verb or not ext.interested(pod.pod):
            continue
        try:
            pairs = ext.prioritize(pod.pod, snap, nodes.tolist())
        except ExtenderError as err:
            verdicts.ignored_errors[ext.name] = str(err)
            continue
        if pos_of is None:
            pos_of = {snap.node_names[int(n)]: i for i, n in enumerate(nodes.tolist())}
        seen = verdicts.scores.setdefault(ext.name, {})
        for host, score in pairs:
            final = score * ext.weight * SCORE_SCALE
            pos = pos_of.get(host)
            if pos is None:
                continue
            totals[pos] += final
            raw, added = seen.get(host, (0, 0))
            seen[host] = (raw + score, added + final)


def preempt_with_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo, snap: ClusterState,
                           victims: dict[str, tuple[list[PodInfo], int]]
                           ) -> dict[str, tuple[list[PodInfo], int]]:
    """Upstream ``callExtenders`` in preemption: each interested extender with a preemptVerb
    keeps, drops or changes the candidates (node -> victims, PDB violations) in turn. Raises
    :class:`ExtenderError` when a non-ignorable extender fails or names a node without
    victims (an ignorable one just loses that node)."""
    for ext in extenders:
        if not ext.supports_preemption or not ext.interested(pod.pod):
            continue
        try:
            result = ext.process_preemption(pod.pod, snap, victims)
        except ExtenderError:
            if ext.ignorable:
                continue
            raise
        for node, (pods, _n) in list(result.items()):
            if not pods:
                if ext.ignorable:
                    del result[node]
                    continue
                raise ExtenderError(f'expected at least one victim pod on node "{node}"')
        victims = result
        if not victims:
            break
    return victims


def bind_with_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo, node: str,
                        verdicts: ExtenderVerdicts) -> tuple[str, Status] | None:
    """Upstream ``extendersBinding``: the first interested binder extender binds the pod
    (an ignorable one that fails passes the turn on). None: no extender bound it, the Bind
    plugins do."""
    for ext in extenders:
        if not ext.is_binder or not ext.interested(pod.pod):
            continue
        try:
            ext.bind(pod.pod, node)
        except ExtenderError as err:
            if ext.ignorable:
                verdicts.ignored_errors[ext.name] = str(err)
                continue
            return ext.name, Status(Code.ERROR, (str(err),), EXTENDER_NAME)
        return ext.name, SUCCESS
    return None
