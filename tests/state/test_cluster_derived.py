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


def test_units_match_the_state_and_are_read_only() -> None:
    s = ClusterState()
    for k in range(5):
        s.add_node(node(f"n{k}", {"cpu": "4", "memory": "4001"}))
    s.add_pod(pod("a", {"cpu": "1500m", "memory": "2999"}), 3)
    nodes = np.array([3, 1], dtype=np.int64)
    cpu, mem = s.col("cpu"), s.col("memory")
    assert s.units("allocatable", (cpu, mem), nodes).tolist() == [[4000, 4000], [4001, 4001]]
    assert s.units("requested", (cpu, mem), nodes).tolist() == [[1500, 0], [2999, 0]]
    assert s.units("non_zero", (cpu,), nodes).tolist() == [[1500, 0]]
    assert s.units("requested", (mem, cpu), nodes).tolist() == [[2999, 0], [1500, 0]]
    assert not s.units("requested", (cpu, mem), nodes).flags.writeable
    every = s.units("requested", (cpu,), s.node_ids())
    assert every.tolist() == [[0, 0, 0, 1500, 0]]
    assert not every.flags.writeable


def test_units_memo_never_outlives_a_state_change() -> None:
    s = ClusterState()
    for k in range(4):
        s.add_node(node(f"n{k}", {"cpu": "4", "memory": "4Gi"}))
    cpu = s.col("cpu")
    nodes = np.array([0, 2], dtype=np.int64)
    nodes.flags.writeable = False
    first = s.units("requested", (cpu,), nodes)
    assert s.units("requested", (cpu,), nodes) is first  # same cycle, same state: shared
    a = pod("a", {"cpu": "1"})
    s.add_pod(a, 2)
    assert s.units("requested", (cpu,), nodes).tolist() == [[0, 1000]]
    s.remove_pod(a)
    assert s.units("requested", (cpu,), nodes).tolist() == [[0, 0]]
    s.update_node(node("n0", {"cpu": "2", "memory": "4Gi"}))
    assert s.units("allocatable", (cpu,), nodes).tolist() == [[2000, 4000]]
    s.add_pod(pod("b", {"example.com/foo": 2}), 0)  # a new column
    foo = s.col("example.com/foo")
    assert s.units("requested", (foo,), nodes).tolist() == [[2, 0]]
    # Equal contents in another array are gathered again, not taken from the memo.
    again = nodes.copy()
    again.flags.writeable = False
    assert s.units("requested", (cpu,), again) is not s.units("requested", (cpu,), nodes)


def test_units_are_not_memoised_for_writeable_nodes() -> None:
    s = ClusterState()
    for k in range(3):
        s.add_node(node(f"n{k}", {"cpu": str(k + 1)}))
    cpu = s.col("cpu")
    nodes = np.array([0, 1], dtype=np.int64)
    assert s.units("allocatable", (cpu,), nodes).tolist() == [[1000, 2000]]
    nodes[1] = 2  # changed in place: the next call must see it
    assert s.units("allocatable", (cpu,), nodes).tolist() == [[1000, 3000]]
