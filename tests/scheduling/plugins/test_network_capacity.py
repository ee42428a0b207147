"""NetworkCapacity and the GPU-packing profile: hard network placement, no leaked slots, whole
nodes kept free for multi-GPU training."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.paths import ROOT

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import GPU_MODEL_LABEL
from kubeberth.api.objects import Container, Node, NodeStatus, ObjectMeta, Pod, PodSpec
from kubeberth.api.objects import ResourceRequirements as Req
from kubeberth.api.resources import GPU, GPU_MILLI
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile, SchedulerConfiguration
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import ClusterEvent, PermitPlugin
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins import network_capacity
from kubeberth.scheduling.plugins.network_capacity import DEFAULT_CONFIG_MAP, SLOTS_ANNOTATION
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info

FAST = {"kubeberth.io/network": "high-speed"}


def node(name: str, *, gpus: int = 8, labels: dict[str, str] | None = None) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels={GPU_MODEL_LABEL: "G2", **(labels or {})}),
                status=NodeStatus(allocatable={"cpu": "96", "memory": "384Gi", GPU: gpus,
                                               GPU_MILLI: 1000 * gpus, "pods": 110}))


def pod(name: str, gpus: int = 1, *, slots: int = 0, scheduler: str = "default-scheduler"
        ) -> PodInfo:
    requests: dict[str, int | str] = {"cpu": str(4 * gpus), "memory": f"{16 * gpus}Gi",
                                      GPU: gpus, GPU_MILLI: 1000 * gpus}
    annotations = {SLOTS_ANNOTATION: str(slots)} if slots else {}
    return make_pod_info(Pod(
        metadata=ObjectMeta(name=name, namespace="default", annotations=annotations),
        spec=PodSpec(scheduler_name=scheduler,
                     containers=[Container(resources=Req(requests=requests))])))


class WaitForever(PermitPlugin):
    """Holds every pod at Permit for 10 s (a gang that never completes)."""

    name = "WaitForever"

    def permit(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               node: int) -> tuple[Status, float]:
        return Status(Code.WAIT), 10.0


def scheduler(snap: ClusterState, *, permit: bool = False, binder: object = None,
              clock: list[float] | None = None) -> Scheduler:
    def only(*names: str) -> PluginSet:
        return PluginSet(enabled=[PluginRef(n) for n in names])

    plugins = {"queueSort": only("PrioritySort"),
               "preFilter": only("NodeResourcesFit", "GpuDevices", "NetworkCapacity"),
               "filter": only("NodeResourcesFit", "GpuDevices", "NetworkCapacity"),
               "score": only("BestFitScore"),
               "reserve": only("GpuDevices", "NetworkCapacity"),
               "permit": only("WaitForever") if permit else PluginSet(),
               "bind": only("DefaultBinder")}
    registry = in_tree_registry().merge(Registry({"WaitForever": lambda a, h: WaitForever()}))
    now = clock or [0.0]

    def ok(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    return Scheduler(SchedulerConfiguration(profiles=[Profile(plugins=plugins)]), registry, snap,
                     clock=lambda: now[0], seed=0, binder=binder or ok,  # type: ignore[arg-type]
                     evictor=lambda v, b: None)


def cluster(*nodes: Node, slots: dict[str, str] | None = None) -> ClusterState:
    """Nodes, and the default capacity ConfigMap with ``slots`` (node -> slots) if given."""
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)
    if slots is not None:
        snap.set_config_map(DEFAULT_CONFIG_MAP, slots)
    return snap


def free(snap: ClusterState, name: str) -> int:
    plugin = network_capacity.new(None, Handle(snap, clock=lambda: 0.0,
                                               rng=np.random.default_rng(0)))
    return int(plugin.free_slots(snap, np.array([snap.node_index[name]]))[0])


def test_network_pod_stays_pending_on_unlabelled_nodes() -> None:
    snap = cluster(node("plain-a"), node("plain-b"))
    sched = scheduler(snap)
    sched.add(pod("trainer", slots=1))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "unschedulable"
    assert "didn't have high-speed networking" in res.message
    sched.add(pod("plain-pod"))
    placed = sched.schedule_one()
    assert placed is not None and placed.outcome == "assumed"


def test_slots_are_never_oversubscribed() -> None:
    snap = cluster(node("fast", labels=FAST), node("plain"), slots={"fast": "1"})
    sched = scheduler(snap)
    outcomes = []
    for i in range(2):
        sched.add(pod(f"t{i}", slots=1))
        res = sched.schedule_one()
        assert res is not None
        if res.outcome == "assumed":
            assert sched.bind(res).ok
        outcomes.append((res.outcome, res.node))
    assert outcomes[0] == ("assumed", "fast")
    assert outcomes[1][0] == "unschedulable"
    assert free(snap, "fast") == 0


def test_permit_timeout_leaks_no_slot() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "2"})
    now = [0.0]
    sched = scheduler(snap, permit=True, clock=now)
    sched.add(pod("t", slots=2))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "waiting"
    assert free(snap, "fast") == 0
    now[0] = 11.0
    [done] = sched.resolve_waiting(now[0])
    assert done.outcome == "unschedulable"
    assert free(snap, "fast") == 2
    assert snap.gpus.free[0].tolist() == [1000] * 8


def test_bind_failure_leaks_no_slot() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "1"})

    def refuse(_p: PodInfo, _n: str) -> Status:
        return Status(Code.ERROR, ("conflict",))

    sched = scheduler(snap, binder=refuse)
    sched.add(pod("t", slots=1))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "assumed"
    assert not sched.bind(res).ok
    assert free(snap, "fast") == 1


def handle(snap: ClusterState) -> Handle:
    return Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(0))


def test_capacity_follows_config_map_updates() -> None:
    snap = cluster(node("fast", labels=FAST), node("other", labels=FAST), slots={"fast": "1"})
    assert free(snap, "fast") == 1
    assert free(snap, "other") == 0  # not named: no slots
    plugin = network_capacity.new(None, handle(snap))
    ids = np.array([0, 1])
    assert plugin.free_slots(snap, ids).tolist() == [1, 0]
    snap.set_config_map(DEFAULT_CONFIG_MAP, {"fast": "3", "other": "2"})
    assert plugin.free_slots(snap, ids).tolist() == [3, 2]  # the same plugin re-reads it
    snap.set_config_map(DEFAULT_CONFIG_MAP, None)
    assert plugin.free_slots(snap, ids).tolist() == [0, 0]


def test_unlisted_nodes_and_a_missing_config_map_have_their_own_reason() -> None:
    snap = cluster(node("fast", labels=FAST), node("full", labels=FAST), node("plain"),
                   slots={"full": "0"})
    sched = scheduler(snap)
    sched.add(pod("t", slots=1))
    res = sched.schedule_one(record=True)
    assert res is not None and res.outcome == "unschedulable"
    assert "1 node(s) had no network slots in ConfigMap kube-system/network-capacity" \
        in res.message
    assert "1 node(s) had no free network slot" in res.message
    assert "1 node(s) didn't have high-speed networking" in res.message


def test_an_update_frees_slots_and_wakes_the_pending_pod() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "0"})
    sched = scheduler(snap)
    sched.add(pod("t", slots=1))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "unschedulable"
    assert sched.schedule_one() is None
    snap.set_config_map(DEFAULT_CONFIG_MAP, {"fast": "1"})
    assert sched.queue.move_all_to_active_or_backoff(ClusterEvent("ConfigMap", "Update")) == 1


def test_config_map_in_another_place_via_args() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "0"})
    snap.set_config_map("net/slots", {"fast": "2"})
    plugin = network_capacity.new({"capacityConfigMap": "net/slots"}, handle(snap))
    assert plugin.free_slots(snap, np.array([0])).tolist() == [2]
    for bad in ("no-slash", "/name", "ns/", "a/b/c"):
        with pytest.raises(InputError, match="capacityConfigMap"):
            network_capacity.new({"capacityConfigMap": bad}, handle(snap))


def test_bad_values_are_input_errors_at_load_and_error_statuses_after() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "four"})
    with pytest.raises(InputError) as caught:
        network_capacity.new(None, handle(snap))
    text = str(caught.value)
    assert text.startswith("ConfigMap kube-system/network-capacity: field data.fast: 'four'")
    assert 'such as "4"' in text
    # A ConfigMap that turns bad later: pods needing a slot get an Error status, none placed
    # from a half-read table (the good key "other" is not used either).
    snap = cluster(node("fast", labels=FAST), node("other", labels=FAST), slots={"fast": "1"})
    sched = scheduler(snap)
    snap.set_config_map(DEFAULT_CONFIG_MAP, {"other": "8", "fast": "x"})
    sched.add(pod("t", slots=1))
    res = sched.schedule_one()
    assert res is not None and res.outcome == "error"
    assert "ConfigMap kube-system/network-capacity: field data.fast: 'x' is not" in res.message
    snap.set_config_map(DEFAULT_CONFIG_MAP, {"other": "8", "fast": "1"})
    sched.queue.move_all_to_active_or_backoff(ClusterEvent("ConfigMap", "Update"))
    sched.queue.flush_backoff_completed()
    sched.add(pod("u", slots=1))
    placed = sched.schedule_one()
    assert placed is not None and placed.outcome == "assumed"


def test_bad_args_and_pod_annotations() -> None:
    snap = cluster(node("fast", labels=FAST), slots={"fast": "1"})
    with pytest.raises(InputError, match="nodeLabel"):
        network_capacity.new({"nodeLabel": "no-equals"}, handle(snap))
    with pytest.raises(InputError, match="networkSlots"):
        network_capacity.new({"networkSlots": 3}, handle(snap))
    bad = Pod(metadata=ObjectMeta(name="b", annotations={SLOTS_ANNOTATION: "lots"}))
    with pytest.raises(InputError, match=SLOTS_ANNOTATION):
        network_capacity.slots_of(bad)
    sched = scheduler(snap)
    pi = pod("b")
    pi.pod.metadata.annotations[SLOTS_ANNOTATION] = "lots"
    sched.add(pi)
    res = sched.schedule_one()
    assert res is not None and res.outcome == "unschedulable"
    assert SLOTS_ANNOTATION in res.message


@settings(max_examples=40, deadline=None)
@given(caps=st.lists(st.integers(0, 3), min_size=1, max_size=4),
       needs=st.lists(st.integers(1, 2), min_size=1, max_size=10),
       refused=st.sets(st.integers(0, 9)), shrink=st.integers(0, 3))
def test_slots_held_never_exceed_capacity(caps: list[int], needs: list[int],
                                          refused: set[int], shrink: int) -> None:
    """Pods needing 1-2 slots arrive one by one, some binds fail, and the capacity of node 0
    shrinks half way: slots held by bound pods never exceed a node's capacity at bind time,
    and failed binds hold nothing."""
    names = [f"n{i}" for i in range(len(caps))]
    snap = cluster(*(node(n, gpus=8, labels=FAST) for n in names),
                   slots={n: str(c) for n, c in zip(names, caps, strict=True)})
    attempt = [0]

    def binder(_p: PodInfo, _n: str) -> Status:
        attempt[0] += 1
        return Status(Code.ERROR, ("refused",)) if attempt[0] - 1 in refused else SUCCESS

    sched = scheduler(snap, binder=binder)
    current = list(caps)
    for i, need in enumerate(needs):
        if i == len(needs) // 2:
            current[0] = min(current[0], shrink)
            snap.set_config_map(DEFAULT_CONFIG_MAP,
                                {n: str(c) for n, c in zip(names, current, strict=True)})
        sched.add(pod(f"p{i}", 0, slots=need))
        res = sched.schedule_one()
        assert res is not None
        if res.outcome == "assumed":
            assert res.node is not None
            before = free(snap, res.node)
            assert before >= 0
            if not sched.bind(res).ok:
                assert free(snap, res.node) == before + need
    for n in names:
        held = sum(network_capacity.slots_of(p.pod)
                   for p in snap.pods_on_node[snap.node_index[n]].values())
        # Pods bound before node 0 shrank may exceed its new capacity; none bound after.
        assert held <= max(caps[snap.node_index[n]], current[snap.node_index[n]])
        assert free(snap, n) == current[snap.node_index[n]] - held


def whole_free_nodes(profile: str) -> tuple[int, int]:
    """Mixed 1/4/8-GPU arrivals on 6 eight-GPU nodes with the example config's profile:
    (fully free 8-GPU nodes after the single-GPU wave, 8-GPU pods placed afterwards)."""
    config = load_scheduler_config(ROOT / "examples" / "gpu" / "packing-profile.yaml")
    snap = cluster(*(node(f"n{i}") for i in range(6)))
    sched = Scheduler(config, in_tree_registry(), snap, clock=lambda: 0.0, seed=3,
                      binder=lambda p, n: SUCCESS, evictor=lambda v, b: None)
    sizes = [1] * 12 + [4, 1, 1, 4]
    for i, size in enumerate(sizes):
        sched.add(pod(f"p{i}", size, scheduler=profile))
        res = sched.schedule_one()
        assert res is not None and res.outcome == "assumed"
        assert sched.bind(res).ok
    idle = int(np.count_nonzero((snap.gpus.free[:6] == 1000).all(axis=1)))
    placed = 0
    for i in range(6):
        sched.add(pod(f"big{i}", 8, scheduler=profile))
        res = sched.schedule_one()
        if res is not None and res.outcome == "assumed" and sched.bind(res).ok:
            placed += 1
    return idle, placed


def test_gpu_packing_profile_keeps_whole_nodes_for_training() -> None:
    packed_idle, packed_big = whole_free_nodes("gpu-packing")
    spread_idle, spread_big = whole_free_nodes("default-scheduler")
    assert packed_idle > spread_idle
    assert packed_big > spread_big
    assert packed_idle >= 3
