"""The opt-in request audit: HTTP requests translated into RBAC verbs as the real API server's
request-info parser does, recorded per client."""

from __future__ import annotations

import httpx
import pytest

from kubeberth.apiserver import EmbeddedServer
from kubeberth.apiserver.audit import Access, RequestAudit, client_identity, request_info


@pytest.mark.parametrize(("method", "path", "query", "want", "ns", "name"), [
    ("GET", "/api/v1/pods", {}, Access("list", "", "pods"), "", ""),
    ("GET", "/api/v1/pods", {"watch": "true"}, Access("watch", "", "pods"), "", ""),
    ("GET", "/api/v1/pods", {"watch": "1"}, Access("watch", "", "pods"), "", ""),
    ("GET", "/api/v1/pods", {"watch": "false"}, Access("list", "", "pods"), "", ""),
    ("GET", "/api/v1/namespaces/a/pods/p", {}, Access("get", "", "pods"), "a", "p"),
    ("POST", "/api/v1/namespaces/a/pods/p/binding", {},
     Access("create", "", "pods", "binding"), "a", "p"),
    ("POST", "/api/v1/namespaces/a/pods/p/eviction", {},
     Access("create", "", "pods", "eviction"), "a", "p"),
    ("PATCH", "/api/v1/namespaces/a/pods/p/status", {},
     Access("patch", "", "pods", "status"), "a", "p"),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", {},
     Access("update", "coordination.k8s.io", "leases"), "kube-system", "l"),
    ("DELETE", "/api/v1/namespaces/a/pods/p", {}, Access("delete", "", "pods"), "a", "p"),
    ("DELETE", "/api/v1/namespaces/a/pods", {},
     Access("deletecollection", "", "pods"), "a", ""),
    # The namespaces resource itself, and its own subresources.
    ("GET", "/api/v1/namespaces", {}, Access("list", "", "namespaces"), "", ""),
    ("GET", "/api/v1/namespaces/a", {}, Access("get", "", "namespaces"), "a", "a"),
    ("PUT", "/api/v1/namespaces/a/finalize", {},
     Access("update", "", "namespaces", "finalize"), "a", "a"),
    # The deprecated /watch/ prefix.
    ("GET", "/api/v1/watch/namespaces/a/pods", {}, Access("watch", "", "pods"), "a", ""),
    ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses", {"watch": "true"},
     Access("watch", "scheduling.k8s.io", "priorityclasses"), "", ""),
])
def test_request_info_matches_the_api_servers_parser(method: str, path: str,
                                                     query: dict[str, str], want: Access,
                                                     ns: str, name: str) -> None:
    info = request_info(method, path, query)
    assert info is not None
    assert info.access == want
    assert (info.namespace, info.name) == (ns, name)


@pytest.mark.parametrize("path", ["/api", "/apis", "/api/v1", "/apis/apps/v1", "/version",
                                  "/healthz", "/openapi/v3"])
def test_discovery_and_probes_are_not_resource_requests(path: str) -> None:
    assert request_info("GET", path, {}) is None


def test_rbac_resource_names_a_subresource_as_rules_do() -> None:
    assert Access("create", "", "pods", "binding").rbac_resource == "pods/binding"
    assert Access("get", "", "pods").rbac_resource == "pods"


def test_identity_is_the_bearer_token_else_the_user_agent() -> None:
    assert client_identity("Bearer abc", "kubectl/1.32") == "abc"
    assert client_identity(None, "kubectl/1.32") == "kubectl/1.32"
    assert client_identity("Basic xyz", None) == ""


def test_the_server_records_accesses_per_client_only_when_asked() -> None:
    with EmbeddedServer(audit=True) as srv:
        base = srv.url
        httpx.get(f"{base}/api/v1/nodes", headers={"Authorization": "Bearer one"})
        httpx.get(f"{base}/api/v1/namespaces/default/pods/none",
                  headers={"Authorization": "Bearer one"})  # a 404 is still a request
        httpx.get(f"{base}/api", headers={"Authorization": "Bearer one"})
        httpx.post(f"{base}/api/v1/namespaces/default/events", json={},
                   headers={"User-Agent": "probe/1"})
        audit = srv.cluster.audit
        assert audit is not None
        assert audit.accesses("one") == {Access("list", "", "nodes"),
                                         Access("get", "", "pods")}
        assert audit.accesses("probe/1") == {Access("create", "", "events")}
        assert audit.identities() == ["one", "probe/1"]
    with EmbeddedServer() as srv:
        httpx.get(f"{srv.url}/api/v1/nodes")
        assert srv.cluster.audit is None


def test_audit_is_readable_from_other_threads() -> None:
    audit = RequestAudit()
    audit.record("x", "GET", "/api/v1/nodes", {})
    got = audit.accesses("x")
    got.clear()  # a copy: the record is untouched
    assert audit.accesses("x") == {Access("list", "", "nodes")}
