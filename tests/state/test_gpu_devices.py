"""Device accounting in the cluster state: exact through bind, completion, moves and Unreserve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import GPU_INDEX_ANNOTATION, GPU_MODEL_LABEL, GPU_SPEC_ANNOTATION
from kubeberth.api.objects import Container, Node, NodeStatus, ObjectMeta, Pod, PodSpec
from kubeberth.api.objects import ResourceRequirements as Req
from kubeberth.api.resources import GPU, GPU_MILLI
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info
from kubeberth.state.gpu import best_fit_devices, random_devices, worst_fit_devices


def gpu_node(name: str, gpus: int, model: str = "T4", cpu: str = "64") -> Node:
    return Node(metadata=ObjectMeta(name=name, labels={GPU_MODEL_LABEL: model} if model else {}),
                status=NodeStatus(allocatable={"cpu": cpu, "memory": "256Gi", GPU: gpus}))


def gpu_pod(name: str, *, milli: int = 0, whole: int = 0, spec: str = "",
            index: str | None = None) -> PodInfo:
    requests: dict[str, int | str] = {"cpu": "1"}
    if whole:
        requests[GPU] = whole
    if milli:
        requests[GPU_MILLI] = milli
    annotations = {GPU_SPEC_ANNOTATION: spec} if spec else {}
    if index is not None:
        annotations[GPU_INDEX_ANNOTATION] = index
    pod = Pod(metadata=ObjectMeta(name=name, namespace="default", annotations=annotations),
              spec=PodSpec(containers=[Container(resources=Req(requests=requests))]))
    return make_pod_info(pod)


def expected_free(snap: ClusterState) -> np.ndarray:
    """Free milli-GPU recomputed from scratch from the pods' holdings."""
    free = np.zeros_like(snap.gpus.free)
    for i in snap.node_ids():
        free[i, : snap.gpus.count[i]] = 1000
    for p in snap.iter_pods():
        for d in p.gpu_devices:
            free[p.node, d] -= p.gpu.milli
    return free


def test_demand_parsing() -> None:
    share = gpu_pod("s", milli=300, spec="V100M16| T4")
    assert (share.gpu.count, share.gpu.milli, share.gpu.spec) == (1, 300, ("T4", "V100M16"))
    assert share.gpu.is_share
    whole = gpu_pod("w", whole=4, milli=4000)
    assert (whole.gpu.count, whole.gpu.milli, whole.gpu.is_share) == (4, 1000, False)
    assert gpu_pod("one", milli=1000).gpu.count == 1
    assert gpu_pod("cpu").gpu.count == 0


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"whole": 2, "milli": 500}, GPU_MILLI),
    ({"milli": 1500}, GPU_MILLI),
    ({"milli": 300, "index": "0-1"}, GPU_INDEX_ANNOTATION),
    ({"milli": 300, "index": "x"}, GPU_INDEX_ANNOTATION),
])
def test_bad_demand_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        gpu_pod("bad", **kwargs)  # type: ignore[arg-type]
    assert field in str(err.value)


def test_node_devices_and_model() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 4, "A10"))
    snap.add_node(gpu_node("cpu", 0, ""))
    assert snap.gpus.count[:2].tolist() == [4, 0]
    assert snap.gpus.free[0].tolist() == [1000] * 4
    assert snap.gpus.models[snap.gpus.model[0]] == "A10" and snap.gpus.model[1] == -1


def test_share_then_whole_then_completion() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 2))
    s1, s2, w = gpu_pod("s1", milli=600), gpu_pod("s2", milli=300), gpu_pod("w", whole=1)
    snap.add_pod(s1, 0)
    snap.add_pod(s2, 0)
    # Best fit: s2 joins s1's device, leaving the other whole.
    assert s1.gpu_devices == s2.gpu_devices == (0,)
    snap.add_pod(w, 0)
    assert w.gpu_devices == (1,)
    assert snap.gpus.free[0, :2].tolist() == [100, 0]
    assert snap.gpus.kinds[0, :2].tolist() == [2, 1]
    snap.remove_pod(s1)
    snap.remove_pod(w)
    assert snap.gpus.free[0, :2].tolist() == [700, 1000]
    assert s1.gpu_devices == () and snap.gpus.kinds[0, :2].tolist() == [1, 0]


def test_manifest_devices_are_kept_when_they_fit() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 4))
    pi = gpu_pod("p", whole=2, index="3-1")
    snap.add_pod(pi, 0)
    assert pi.gpu_devices == (1, 3)
    assert snap.gpus.free[0, :4].tolist() == [1000, 0, 1000, 0]


def test_pod_no_device_can_hold_is_unplaced_not_overallocated() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 1))
    snap.add_pod(gpu_pod("x", milli=700), 0)
    late = gpu_pod("y", milli=700)
    snap.add_pod(late, 0)
    assert late.gpu_devices == () and snap.gpu_unplaced == 1
    assert snap.gpus.free[0, 0] == 300
    snap.remove_pod(late)
    assert snap.gpu_unplaced == 0


def test_move_devices() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 2))
    pi = gpu_pod("p", milli=400)
    snap.add_pod(pi, 0)
    snap.place_gpu_devices(pi, (1,))
    assert snap.gpus.free[0, :2].tolist() == [1000, 600]
    with pytest.raises(RuntimeError):
        snap.place_gpu_devices(pi, (5,))
    assert pi.gpu_devices == (1,) and snap.gpus.free[0, 1] == 600


def test_deferred_devices_are_chosen_once() -> None:
    """The scheduler's assume leaves the devices open; a policy's choice, else the state's
    best fit, is the only one made, and forgetting a pod still open frees nothing twice."""
    snap = ClusterState()
    snap.add_node(gpu_node("a", 2))
    chosen = gpu_pod("chosen", milli=400)
    snap.add_pod(chosen, 0, defer_devices=True)
    assert chosen.gpu_pending and chosen.gpu_devices == ()
    assert snap.gpus.free[0, :2].tolist() == [1000, 1000]
    with pytest.raises(RuntimeError):
        snap.place_gpu_devices(chosen, (7,))
    assert chosen.gpu_pending
    snap.place_gpu_devices(chosen, (1,))
    assert not chosen.gpu_pending and snap.gpus.free[0, :2].tolist() == [1000, 600]
    fallback = gpu_pod("fallback", milli=500)
    snap.add_pod(fallback, 0, defer_devices=True)
    snap.place_gpu_devices(fallback)
    assert fallback.gpu_devices == (1,)  # best fit: the device with the least room left
    dropped = gpu_pod("dropped", milli=300)
    snap.add_pod(dropped, 0, defer_devices=True)
    snap.remove_pod(dropped)
    assert snap.gpus.free[0, :2].tolist() == [1000, 100] and snap.gpu_unplaced == 0


def test_node_update_and_removal_recompute_devices() -> None:
    snap = ClusterState()
    snap.add_node(gpu_node("a", 2))
    pi = gpu_pod("p", milli=400)
    snap.add_pod(pi, 0)
    snap.update_node(gpu_node("a", 4))
    assert snap.gpus.free[0, :4].tolist() == [600, 1000, 1000, 1000]
    snap.remove_node("a")
    assert snap.gpus.free[0].sum() == 0 and pi.node == -1


def test_device_choices() -> None:
    free = np.array([1000, 300, 700, 300], dtype=np.int64)
    share = gpu_pod("s", milli=250).gpu
    assert best_fit_devices(free, share) == (1,)
    assert worst_fit_devices(free, share) == (0,)
    assert best_fit_devices(free, gpu_pod("w", whole=1).gpu) == (0,)
    assert best_fit_devices(free, gpu_pod("w2", whole=2).gpu) == ()
    rng = np.random.default_rng(0)
    picks = {random_devices(free, share, rng) for _ in range(50)}
    assert picks == {(0,), (1,), (2,), (3,)}
    assert random_devices(free, gpu_pod("big", milli=800).gpu, rng) == (0,)


shapes = st.one_of(st.integers(1, 999).map(lambda m: ("milli", m)),
                   st.sampled_from([1, 2, 4, 8]).map(lambda n: ("whole", n)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(shapes, st.integers(0, 2), st.booleans()), min_size=1, max_size=40))
def test_never_overallocates_and_frees_exactly(
        ops: list[tuple[tuple[str, int], int, bool]]) -> None:
    """Random binds and removals: no device ever goes below 0 or above 1000, the free matrix
    always equals a recomputation from the pods' holdings, and removing everything gives every
    device back."""
    snap = ClusterState()
    for name, n in (("a", 8), ("b", 2), ("c", 4)):
        snap.add_node(gpu_node(name, n))
    live: list[PodInfo] = []
    for i, ((kind, amount), node, remove) in enumerate(ops):
        pi = gpu_pod(f"p{i}", milli=amount) if kind == "milli" else gpu_pod(f"p{i}", whole=amount)
        free = snap.gpus.free[node, : snap.gpus.count[node]]
        if best_fit_devices(free, pi.gpu):
            snap.add_pod(pi, node)
            live.append(pi)
        if remove and live:
            snap.remove_pod(live.pop(len(live) // 2))
        assert (snap.gpus.free >= 0).all() and (snap.gpus.free <= 1000).all()
        assert (snap.gpus.free == expected_free(snap)).all()
        assert snap.gpu_unplaced == 0
    for pi in live:
        snap.remove_pod(pi)
    assert (snap.gpus.free == expected_free(snap)).all()
    assert snap.gpus.free[:3].sum() == 14 * 1000 and snap.gpus.kinds.sum() == 0


def test_a_virtual_node_pool_is_not_modelled_as_devices() -> None:
    """A virtual kubelet advertising 100,000 GPUs would make the device matrix 100,000 wide
    for every node; its GPUs stay a pool and its pods hold no devices."""
    snap = ClusterState()
    snap.add_node(gpu_node("real", 8))
    vk = snap.add_node(gpu_node("vk", 100_000))
    assert snap.gpus.width == 8 and int(snap.gpus.count[vk]) == 0
    pod = gpu_pod("p", whole=4)
    snap.add_pod(pod, vk)
    assert pod.gpu_devices == () and snap.gpu_unplaced == 0
    snap.remove_pod(pod)
    assert snap.gpu_unplaced == 0
    snap.remove_node("vk")
    assert vk not in snap.gpu_pooled
