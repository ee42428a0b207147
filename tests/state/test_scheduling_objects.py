"""The scheduling-objects store: PodGroups by key and existing pods indexed by pod group."""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import Pod
from kubeberth.api.scheduling_crds import PodGroup
from kubeberth.config.scheduling_crds import CreatedPodGroup, SchedulingCrds
from kubeberth.state.cluster import ClusterState, make_pod_info
from kubeberth.state.objects import SchedulingObjects, pod_group_key


def pod(name: str, group: str = "", ns: str = "default") -> Pod:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return msgspec.convert({"metadata": {"name": name, "namespace": ns, "labels": labels},
                            "spec": {"containers": []}}, Pod)


def test_members_follow_creation_and_deletion() -> None:
    store = SchedulingObjects()
    a, b, c = (make_pod_info(pod(n, g)) for n, g in (("a", "g"), ("b", "g"), ("c", "")))
    v0 = store.version
    for pi in (a, b, c):
        store.pod_created(pi)
    assert store.version == v0 + 3
    assert list(store.members("default/g")) == ["default/a", "default/b"]
    assert store.members("default/none") == {}
    store.pod_deleted("default/a")
    store.pod_deleted("default/missing")
    assert list(store.members("default/g")) == ["default/b"]
    assert set(store.pods) == {"default/b", "default/c"}


def test_group_key_is_namespaced() -> None:
    assert pod_group_key(make_pod_info(pod("a", "g", ns="team"))) == "team/g"
    assert pod_group_key(make_pod_info(pod("a"))) == ""


def test_load_keeps_creation_time_and_order() -> None:
    pg = msgspec.convert({"metadata": {"name": "g", "namespace": "x"}}, PodGroup)
    store = ClusterState().objects
    store.load(SchedulingCrds(pod_groups=[CreatedPodGroup(pg, 3.0, 7)]))
    assert store.pod_groups["x/g"] is pg and store.pod_group_created["x/g"] == (3.0, 7)
