"""lightkube, the client the live controllers use, against the embedded server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.core_v1 import (
    Container,
    NodeSpec,
    ObjectReference,
    PodSpec,
    ResourceRequirements,
    Taint,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.policy_v1 import PodDisruptionBudgetSpec
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

from kubeberth.apiserver import EmbeddedServer

PodGroup = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup",
                                      "podgroups")


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client(config=KubeConfig.from_file(str(kubeconfig)), field_manager="kubeberth-test")
    yield c
    c._client._client.close()


def _pod(name: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="default", labels=labels or {},
                                   annotations={"kubeberth.io/duration-seconds": "100"}),
               spec=PodSpec(containers=[Container(
                   name="main", image="img",
                   resources=ResourceRequirements(requests={"nvidia.com/gpu": "1"}))]))


def _bind(client: Client, name: str, node: str) -> None:
    # The binding subresource answers a Status (as upstream's BindingREST does); lightkube
    # decodes the reply as a Binding and fails after the binding succeeded.
    with contextlib.suppress(msgspec.ValidationError):
        client.create(Pod.Binding(metadata=ObjectMeta(name=name, namespace="default"),
                                  target=ObjectReference(kind="Node", name=node)),
                      name=name, namespace="default")


def test_list_get_and_typed_fields(client: Client) -> None:
    nodes = list(client.list(Node))
    assert [n.metadata.name for n in nodes] == ["cpu-a", "gpu-a", "gpu-b"]
    gpu = client.get(Node, "gpu-a")
    assert gpu.status.allocatable["nvidia.com/gpu"] == "4"
    assert [n.metadata.name for n in client.list(Node, labels={"pool": "gpu"})] == [
        "gpu-a", "gpu-b"]


def test_create_bind_and_run(client: Client, server: EmbeddedServer) -> None:
    client.create(_pod("lk"))
    _bind(client, "lk", "gpu-b")
    server.settle()
    pod = client.get(Pod, "lk", namespace="default")
    assert pod.spec.nodeName == "gpu-b"
    assert pod.status.phase == "Running"
    with pytest.raises(ApiError) as err:
        _bind(client, "lk", "gpu-a")
    assert err.value.status.code == 409
    server.advance(100)
    assert client.get(Pod, "lk", namespace="default").status.phase == "Succeeded"


def test_replace_conflict_is_api_error_409(client: Client) -> None:
    pod = client.create(_pod("c"))
    fresh = client.get(Pod, "c", namespace="default")
    fresh.metadata.labels = {"a": "b"}
    client.replace(fresh)
    pod.metadata.labels = {"stale": "yes"}
    with pytest.raises(ApiError) as err:
        client.replace(pod)
    assert err.value.status.code == 409
    assert err.value.status.reason == "Conflict"


def test_patch_node_taints_three_ways(client: Client) -> None:
    taint = {"key": "spill", "value": "true", "effect": "NoSchedule"}
    client.patch(Node, "gpu-a", {"spec": {"taints": [taint]}})  # strategic by default
    assert client.get(Node, "gpu-a").spec.taints == [Taint(**taint)]
    client.patch(Node, "gpu-a", [{"op": "remove", "path": "/spec/taints/0"}],
                 patch_type=PatchType.JSON)
    assert client.get(Node, "gpu-a").spec.taints == []
    client.patch(Node, "gpu-a", Node(spec=NodeSpec(unschedulable=True)),
                 patch_type=PatchType.MERGE)
    assert client.get(Node, "gpu-a").spec.unschedulable is True


def test_eviction_respects_pdb(client: Client, server: EmbeddedServer) -> None:
    client.create(PodDisruptionBudget(
        metadata=ObjectMeta(name="one", namespace="default"),
        spec=PodDisruptionBudgetSpec(minAvailable=1,
                                     selector=LabelSelector(matchLabels={"app": "t"}))))
    for name, node in (("e1", "gpu-a"), ("e2", "gpu-b")):
        client.create(_pod(name, {"app": "t"}))
        _bind(client, name, node)
    server.settle()
    assert client.get(PodDisruptionBudget, "one", namespace="default").status \
        .disruptionsAllowed == 1
    eviction = Pod.Eviction(metadata=ObjectMeta(name="e1", namespace="default"))
    client.create(eviction, name="e1", namespace="default")
    server.settle()
    with pytest.raises(ApiError) as err:
        client.create(Pod.Eviction(metadata=ObjectMeta(name="e2", namespace="default")),
                      name="e2", namespace="default")
    assert err.value.status.code == 429
    assert err.value.status.reason == "TooManyRequests"
    assert [p.metadata.name for p in client.list(Pod, namespace="default")] == ["e2"]


def test_watch_resumes_and_raises_410(client: Client, server: EmbeddedServer) -> None:
    listing = client.list(Pod, namespace="default")
    list(listing)
    rv = listing.resourceVersion
    client.create(_pod("w1"))
    client.create(_pod("w2"))
    seen = []
    for kind, obj in client.watch(Pod, namespace="default", resource_version=rv,
                                  server_timeout=5):
        seen.append((kind, obj.metadata.name))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "w1"), ("ADDED", "w2")]
    client.create(_pod("w3"))
    server.call(server.api.store.compact)
    with pytest.raises(ApiError) as err:
        next(iter(client.watch(Pod, namespace="default", resource_version=rv,
                               server_timeout=5)))
    assert err.value.status.code == 410


def test_lease_optimistic_concurrency(client: Client) -> None:
    lease = client.create(Lease(metadata=ObjectMeta(name="kubeberth-scheduler",
                                                    namespace="kube-system"),
                                spec=LeaseSpec(holderIdentity="a", leaseDurationSeconds=15)))
    lease.spec.holderIdentity = "b"
    client.replace(lease)
    lease.spec.holderIdentity = "c"
    with pytest.raises(ApiError) as err:
        client.replace(lease)
    assert err.value.status.code == 409
    held = client.get(Lease, "kubeberth-scheduler", namespace="kube-system")
    assert held.spec.holderIdentity == "b"


def test_generic_crd_round_trip(client: Client) -> None:
    client.create(PodGroup(metadata=ObjectMeta(name="g", namespace="default"),
                           spec={"minMember": 4, "unknownField": {"kept": True}}))
    got = client.get(PodGroup, "g", namespace="default")
    assert got.spec == {"minMember": 4, "unknownField": {"kept": True}}
    client.patch(PodGroup.Status, "g", {"status": {"phase": "Running"}},
                 namespace="default", patch_type=PatchType.MERGE)
    assert client.get(PodGroup, "g", namespace="default").status == {"phase": "Running"}


def test_a_new_replicaset_decodes_with_lightkube_types(client: Client,
                                                        server: EmbeddedServer) -> None:
    """A ReplicaSet's status.replicas is encoded even at 0 (Go: no omitempty); lightkube's
    typed ReplicaSet requires it, so a watch event for a just-created ReplicaSet (before its
    controller wrote a status) must carry it, or the typed watch fails to decode."""
    from lightkube.resources.apps_v1 import ReplicaSet

    body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    api = server.api
    created = server.call(lambda: api.create(api.registry.of_kind("apps", "ReplicaSet"),
                                             "default", body))
    assert created["status"] == {"replicas": 0}
    (rs,) = client.list(ReplicaSet, namespace="default")
    assert rs.status is not None and rs.status.replicas == 0
