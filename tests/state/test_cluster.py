import msgspec
import numpy as np
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod, PriorityClass
from kubeberth.state.cluster import ClusterState, make_pod_info


def node(name: str, alloc: dict[str, object], **meta: object) -> Node:
    return msgspec.convert({"metadata": {"name": name, **meta},
                            "status": {"allocatable": alloc}}, Node)


def pod(name: str, requests: dict[str, object], **spec: object) -> Pod:
    return msgspec.convert({"metadata": {"name": name}, "spec": {
        "containers": [{"resources": {"requests": requests}}], **spec}}, Pod)


def test_add_node_and_pod_updates_matrices() -> None:
    s = ClusterState()
    i = s.add_node(node("n1", {"cpu": "4", "memory": "8Gi", "pods": "10",
                               "nvidia.com/gpu": "2"}))
    gpu = s.col("nvidia.com/gpu")
    assert s.allocatable[i, s.col("cpu")] == 4000
    assert s.allocatable[i, gpu] == 2000
    assert s.max_pods[i] == 10
    pi = make_pod_info(pod("p", {"cpu": "1", "nvidia.com/gpu": 1}))
    s.add_pod(pi, i)
    assert s.requested[i, s.col("cpu")] == 1000
    assert s.requested[i, gpu] == 1000
    assert s.non_zero_requested[i, s.col("memory")] == 200 * 2**20 * 1000
    assert s.pod_count[i] == 1
    s.remove_pod(pi)
    assert not s.requested[i].any() and s.pod_count[i] == 0 and pi.node == -1


def test_new_resource_column_grows_all_matrices() -> None:
    s = ClusterState()
    i = s.add_node(node("n1", {"cpu": "1"}))
    pi = make_pod_info(pod("p", {"example.com/foo": 3}))
    s.add_pod(pi, i)
    c = s.col("example.com/foo")
    assert s.requested.shape[1] == s.allocatable.shape[1] == len(s.resources)
    assert s.requested[i, c] == 3000 and s.allocatable[i, c] == 0


def test_many_nodes_grow_rows() -> None:
    s = ClusterState()
    for k in range(200):
        s.add_node(node(f"n{k}", {"cpu": "1"}))
    assert s.num_nodes == 200 and len(s.node_ids()) == 200
    assert s.allocatable[199, s.col("cpu")] == 1000


def test_remove_node_returns_orphans_and_masks() -> None:
    s = ClusterState()
    i = s.add_node(node("n1", {"cpu": "2"}))
    s.add_node(node("n2", {"cpu": "2"}))
    pi = make_pod_info(pod("p", {"cpu": "1"}))
    s.add_pod(pi, i)
    orphans = s.remove_node("n1")
    assert orphans == [pi] and pi.node == -1
    assert s.node_ids().tolist() == [1]


def test_duplicate_node_is_input_error() -> None:
    s = ClusterState()
    s.add_node(node("n1", {"cpu": "1"}))
    with pytest.raises(InputError):
        s.add_node(node("n1", {"cpu": "1"}))


def test_label_values_and_hostname_default() -> None:
    s = ClusterState()
    s.add_node(node("a", {}, labels={"zone": "z1"}))
    s.add_node(node("b", {}))
    assert s.label_values("zone").tolist() == ["z1", None]
    assert s.label_values("kubernetes.io/hostname").tolist() == ["a", "b"]


def test_taint_groups_share_ids() -> None:
    s = ClusterState()
    t = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    for name, taints in (("a", t), ("b", []), ("c", t)):
        s.add_node(msgspec.convert({"metadata": {"name": name}, "spec": {"taints": taints}},
                                   Node))
    ids, sets = s.taint_groups()
    assert ids[0] == ids[2] != ids[1]
    assert len(sets) == 2


def test_priority_resolution() -> None:
    classes = {"high": msgspec.convert({"metadata": {"name": "high"}, "value": 1000},
                                       PriorityClass)}
    assert make_pod_info(pod("a", {}, priorityClassName="high"), classes).priority == 1000
    assert make_pod_info(pod("b", {}, priority=5), classes).priority == 5
    assert make_pod_info(pod("c", {}), classes).priority == 0
    with pytest.raises(InputError):
        make_pod_info(pod("d", {}, priorityClassName="missing"), classes)


def test_global_default_priority() -> None:
    classes = {"d": msgspec.convert({"metadata": {"name": "d"}, "value": 7,
                                     "globalDefault": True}, PriorityClass)}
    assert make_pod_info(pod("a", {}), classes).priority == 7


def test_vectors_follow_column_growth() -> None:
    s = ClusterState()
    s.add_node(node("n", {"cpu": "1"}))
    pi = make_pod_info(pod("p", {"cpu": "1"}))
    req, _ = s.pod_vectors(pi)
    s.col("example.com/new")
    req2, _ = s.pod_vectors(pi)
    assert len(req2) == len(req) + 1
    assert np.array_equal(req2[: len(req)], req)
