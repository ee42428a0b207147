"""The cluster state's derived matrices (free amount, upstream units) and the gathered score
columns: they must equal a recomputation from the source matrices after any sequence of state
changes, or decisions would be made on stale numbers."""

import msgspec
import numpy as np

from kubeberth.api.objects import Node, Pod
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info


def node(name: str, alloc: dict[str, object]) -> Node:
    return msgspec.convert({"metadata": {"name": name}, "status": {"allocatable": alloc}}, Node)


def pod(name: str, requests: dict[str, object]) -> PodInfo:
    return make_pod_info(msgspec.convert({"metadata": {"name": name}, "spec": {
        "containers": [{"resources": {"requests": requests}}]}}, Pod))


def assert_derived(s: ClusterState) -> None:
    n = s.num_nodes
    scale = np.array([1 if r == "cpu" else 1000 for r in s.resources.names], dtype=np.int64)
    width = s.allocatable.shape[1]
    assert width == len(s.resources)
    np.testing.assert_array_equal(s.free[:n], s.allocatable[:n] - s.requested[:n])
    np.testing.assert_array_equal(s.allocatable_units[:n], s.allocatable[:n] // scale)
    np.testing.assert_array_equal(s.requested_units[:n], s.requested[:n] // scale)
    np.testing.assert_array_equal(s.non_zero_units[:n], s.non_zero_requested[:n] // scale)


def test_derived_matrices_follow_every_change() -> None:
    rng = np.random.default_rng(7)
    s = ClusterState()
    for k in range(70):  # past the initial row capacity
        s.add_node(node(f"n{k}", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}))
    assert_derived(s)
    placed: list[PodInfo] = []
    for k in range(300):
        roll = rng.random()
        if roll < 0.6 or not placed:
            req: dict[str, object] = {"cpu": f"{rng.integers(1, 900)}m",
                                      "memory": f"{rng.integers(1, 5000)}Ki"}
            if rng.random() < 0.2:
                req["example.com/new-" + str(rng.integers(3))] = 1  # grows the columns
            pi = pod(f"p{k}", req)
            s.add_pod(pi, int(rng.integers(70)))
            placed.append(pi)
        elif roll < 0.9:
            s.remove_pod(placed.pop(int(rng.integers(len(placed)))))
        else:
            s.update_node(node(f"n{rng.integers(70)}", {"cpu": str(rng.integers(1, 16)),
                                                       "memory": "1001", "pods": "50"}))
        assert_derived(s)


