"""An opt-in record of which API verbs each client used, in the terms RBAC authorizes.

Least-privilege RBAC is only as good as the list of verbs it was written from. The embedded
server can keep, per client (its bearer token, else its User-Agent), every distinct
``(verb, apiGroup, resource, subresource)`` it was asked for, with the HTTP request translated
into an RBAC verb the way the real API server's ``RequestInfoFactory`` does (GET of a collection
is ``list``, with ``watch=true`` it is ``watch``; DELETE of a collection is ``deletecollection``;
``/namespaces/{ns}/{resource}`` scopes a namespaced resource). Tests then compare what a
controller really did with what ``kubeberth manifests`` grants it. Non-resource paths
(discovery, ``/version``, ``/healthz``) are not recorded: RBAC grants them to every
authenticated user through ``system:discovery``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

# Paths under /namespaces/{name}/ that are the namespace's own subresources, as upstream's
# namespaceSubresources.
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
SPECIAL_VERBS = frozenset({"proxy", "redirect", "watch"})


@dataclass(slots=True, frozen=True, order=True)
class Access:
    """One authorization attribute set, as RBAC sees a request."""

    verb: str
    api_group: str
    resource: str
    subresource: str = ""

    @property
    def rbac_resource(self) -> str:
        """``resource`` or ``resource/subresource``, as an RBAC rule names it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(slots=True, frozen=True)
class RequestInfo:
    """What the API server's request-info parser extracts from a resource request."""

    access: Access
    namespace: str
    name: str


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo | None:
    """Parse a request as k8s.io/apiserver's ``RequestInfoFactory.NewRequestInfo``; ``None``
    for a non-resource request (discovery documents, ``/version``, probes, metrics)."""
    parts = [p for p in path.strip("/").split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        if len(parts) < 2:
            return None
        group, rest = "", parts[2:]
    else:
        if len(parts) < 3:
            return None
        group, rest = parts[1], parts[3:]
    if not rest:
        return None  # the group version's resource list: discovery
    verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
            "PATCH": "patch", "DELETE": "delete"}.get(method.upper(), "")
    # The deprecated /watch/ and /proxy/ prefixes set the verb themselves.
    if rest[0] in SPECIAL_VERBS:
        if len(rest) < 2:
            return None
        verb, rest = rest[0], rest[1:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    if verb == "list" and _truthy(query.get("watch")):
        verb = "watch"
    return RequestInfo(Access(verb, group, resource, subresource), namespace, name)


def client_identity(authorization: str | None, user_agent: str | None) -> str:
    """Whom a request is recorded for: its bearer token, else its User-Agent."""
    if authorization and authorization.startswith("Bearer "):
        return authorization[len("Bearer "):]
    return user_agent or ""


class RequestAudit:
    """Distinct accesses per client identity; safe to read from another thread."""

    def __init__(self) -> None:
        self._seen: dict[str, set[Access]] = {}
        self._lock = threading.Lock()

    def record(self, identity: str, method: str, path: str, query: Mapping[str, str]) -> None:
        info = request_info(method, path, query)
        if info is None:
            return
        with self._lock:
            self._seen.setdefault(identity, set()).add(info.access)

    def accesses(self, identity: str) -> set[Access]:
        """Every distinct access ``identity`` made so far."""
        with self._lock:
            return set(self._seen.get(identity, ()))

    def identities(self) -> list[str]:
        with self._lock:
            return sorted(self._seen)
