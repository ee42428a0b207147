"""GpuDevices and the GPU score plugins: device fit, gpu_spec, each policy's scores and devices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import GPU_MODEL_LABEL, GPU_SPEC_ANNOTATION
from kubeberth.api.objects import Container, Node, NodeStatus, ObjectMeta, Pod, PodSpec
from kubeberth.api.objects import ResourceRequirements as Req
from kubeberth.api.resources import GPU, GPU_MILLI
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile, SchedulerConfiguration
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins import (
    best_fit_score,
    dot_product_score,
    fgd_score,
    gpu_clustering_score,
    gpu_devices,
    gpu_packing_score,
    random_score,
)
from kubeberth.scheduling.plugins.gpu_common import DEVICE_CHOICE_KEY, DeviceChoice
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info
from kubeberth.state.fragmentation import PodType

from .plugin_builders import handle, run_filter, run_score


def gpu_node(name: str, gpus: int, model: str = "T4", cpu: int = 64) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels={GPU_MODEL_LABEL: model} if model else {}),
                status=NodeStatus(allocatable={"cpu": str(cpu), "memory": "256Gi", GPU: gpus,
                                               GPU_MILLI: 1000 * gpus}))


def gpu_pod(name: str, *, milli: int = 0, whole: int = 0, spec: str = "",
            cpu: int = 1) -> PodInfo:
    requests: dict[str, int | str] = {"cpu": str(cpu)}
    if whole:
        requests[GPU] = whole
        requests[GPU_MILLI] = 1000 * whole
    elif milli:
        requests[GPU_MILLI] = milli
    pod = Pod(metadata=ObjectMeta(name=name, namespace="default",
                                  annotations={GPU_SPEC_ANNOTATION: spec} if spec else {}),
              spec=PodSpec(containers=[Container(resources=Req(requests=requests))]))
    return make_pod_info(pod)


def cluster(*nodes: Node) -> ClusterState:
    snap = ClusterState()
    for n in nodes:
        snap.add_node(n)
    return snap


def use(snap: ClusterState, node: str, free: list[int]) -> None:
    """Occupy devices so that ``node`` has exactly ``free`` milli-GPU left per device."""
    idx = snap.node_index[node]
    for d, f in enumerate(free):
        if f < 1000:
            pi = gpu_pod(f"fill-{node}-{d}", milli=1000 - f) if f > 0 else \
                gpu_pod(f"fill-{node}-{d}", whole=1)
            snap.add_pod(pi, idx)
            snap.place_gpu_devices(pi, (d,))


# ---- GpuDevices --------------------------------------------------------------------------------
def test_filter_device_fit_model_and_no_gpu() -> None:
    snap = cluster(gpu_node("t4", 2), gpu_node("v100", 2, "V100M16"), gpu_node("cpu", 0, ""))
    use(snap, "t4", [400, 1000])
    plugin = gpu_devices.new(None, handle(snap))
    got = run_filter(plugin, gpu_pod("s", milli=500), snap)
    assert got["t4"].ok and got["v100"].ok
    assert got["cpu"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["cpu"].reasons == (gpu_devices.REASON_NO_GPU,)
    two = run_filter(plugin, gpu_pod("w", whole=2), snap)
    assert two["t4"].code == Code.UNSCHEDULABLE
    assert two["t4"].reasons == (gpu_devices.REASON_DEVICES,)
    spec = run_filter(plugin, gpu_pod("spec", milli=100, spec="V100M16|V100M32"), snap)
    assert spec["t4"].reasons == (gpu_devices.REASON_MODEL,) and spec["v100"].ok
    unknown = run_filter(plugin, gpu_pod("x", milli=100, spec="H100"), snap)
    assert not any(s.ok for s in unknown.values())
    assert run_filter(plugin, gpu_pod("cpu-only"), snap)["cpu"].ok


def test_args_are_validated() -> None:
    with pytest.raises(InputError, match="deviceSelection"):
        gpu_devices.new({"deviceSelection": "Nope"}, handle())
    with pytest.raises(InputError, match="targetWorkload"):
        fgd_score.new({"targetWorkload": [{"gpuMilli": 500, "gpuCount": 2}]}, handle())
    with pytest.raises(InputError, match="popularityThreshold"):
        fgd_score.new({"popularityThreshold": 0}, handle())
    with pytest.raises(InputError):
        best_fit_score.new({"x": 1}, handle())


@pytest.mark.parametrize(("selection", "expected"), [("BestFit", (1,)), ("WorstFit", (0,))])
def test_reserve_uses_the_selection(selection: str, expected: tuple[int, ...]) -> None:
    snap = cluster(gpu_node("a", 3))
    use(snap, "a", [1000, 500, 900])
    plugin = gpu_devices.new({"deviceSelection": selection}, handle(snap))
    pi = gpu_pod("p", milli=300)
    snap.add_pod(pi, 0)
    assert plugin.reserve(CycleState(), pi, snap, 0).ok
    assert pi.gpu_devices == expected


def test_reserve_prefers_a_recorded_choice() -> None:
    snap = cluster(gpu_node("a", 3))
    plugin = gpu_devices.new(None, handle(snap))
    state = CycleState()
    state.write(DEVICE_CHOICE_KEY, DeviceChoice(np.array([0]), np.array([2])))
    pi = gpu_pod("p", milli=300)
    snap.add_pod(pi, 0)
    assert plugin.reserve(state, pi, snap, 0).ok
    assert pi.gpu_devices == (2,)
    assert snap.gpus.free[0, :3].tolist() == [1000, 1000, 700]


def _scheduler(snap: ClusterState, score: str, binder: object = None,
               args: dict[str, object] | None = None) -> Scheduler:
    def only(*names: str) -> PluginSet:
        return PluginSet(enabled=[PluginRef(n) for n in names])

    plugins = {"queueSort": only("PrioritySort"),
               "preFilter": only("NodeResourcesFit", "GpuDevices"),
               "filter": only("NodeResourcesFit", "GpuDevices"), "score": only(score),
               "reserve": only("GpuDevices"), "bind": only("DefaultBinder")}
    config = SchedulerConfiguration(profiles=[Profile(
        plugins=plugins, plugin_config={score: dict(args or {})} if args else {})])

    def ok(_p: PodInfo, _n: str) -> Status:
        return SUCCESS

    return Scheduler(config, in_tree_registry(), snap, clock=lambda: 0.0, seed=1,
                     binder=binder or ok, evictor=lambda v, b: None)  # type: ignore[arg-type]


def test_bind_failure_gives_every_device_back() -> None:
    snap = cluster(gpu_node("a", 2), gpu_node("b", 2))

    def refuse(_p: PodInfo, _n: str) -> Status:
        return Status(Code.ERROR, ("api server said no",))

    sched = _scheduler(snap, "BestFitScore", refuse)
    for i, pi in enumerate([gpu_pod("s", milli=300), gpu_pod("w", whole=2)]):
        sched.add(pi)
        res = sched.schedule_one()
        assert res is not None and res.outcome == "assumed", i
        assert not sched.bind(res).ok
        assert pi.gpu_devices == () and pi.node == -1
    assert snap.gpus.free[:2, :2].tolist() == [[1000, 1000], [1000, 1000]]


def test_scheduler_applies_fgd_device_choice() -> None:
    """FGD puts a 500m pod on the half-used device, keeping the whole GPU for 1-GPU pods."""
    snap = cluster(gpu_node("a", 2, cpu=32))
    use(snap, "a", [1000, 500])
    target = {"targetWorkload": [{"cpuMilli": 1000, "gpuMilli": 1000, "gpuCount": 1,
                                  "weight": 3}, {"cpuMilli": 1000, "gpuMilli": 500}]}
    sched = _scheduler(snap, "FGDScore", args=target)
    pi = gpu_pod("p", milli=500)
    sched.add(pi)
    res = sched.schedule_one()
    assert res is not None and res.outcome == "assumed"
    assert pi.gpu_devices == (1,)


# ---- score plugins -----------------------------------------------------------------------------
def test_random_scores_one_node() -> None:
    snap = cluster(*(gpu_node(f"n{i}", 1) for i in range(5)))
    plugin = random_score.new(None, handle(snap))
    scores = run_score(plugin, gpu_pod("p", milli=100), snap)
    assert scores is not None and sorted(scores.values()) == [0, 0, 0, 0, 100]


def test_dot_product() -> None:
    snap = cluster(gpu_node("big", 8, cpu=128), gpu_node("small", 2, cpu=16),
                   gpu_node("tiny", 1, cpu=1))
    pod = gpu_pod("p", whole=1, cpu=8)
    scores = run_score(dot_product_score.new(None, handle(snap)), pod, snap)
    # 1 - (128000·8000/128000² + 8000·1000/8000²)/2 = 1 - (0.0625 + 0.125)/2
    assert scores == {"big": math.floor(100 * (1 - (0.0625 + 0.125) / 2)),
                      "small": math.floor(100 * (1 - (16000 * 8000 / 128000**2
                                                      + 2000 * 1000 / 8000**2) / 2)),
                      "tiny": 0}


def test_best_fit_prefers_the_fullest_node() -> None:
    snap = cluster(gpu_node("big", 8, cpu=96), gpu_node("small", 2, cpu=16))
    scores = run_score(best_fit_score.new(None, handle(snap)), gpu_pod("p", milli=500), snap)
    assert scores == {"big": 0, "small": 100}


def test_gpu_clustering_bands() -> None:
    snap = cluster(*(gpu_node(n, 8) for n in ("same", "mixed", "idle", "other")))
    snap.add_pod(gpu_pod("a", milli=500), snap.node_index["same"])
    snap.add_pod(gpu_pod("b", milli=500), snap.node_index["mixed"])
    snap.add_pod(gpu_pod("c", whole=1), snap.node_index["mixed"])
    snap.add_pod(gpu_pod("d", whole=2), snap.node_index["other"])
    scores = run_score(gpu_clustering_score.new(None, handle(snap)), gpu_pod("p", milli=200),
                       snap)
    assert scores == {"same": 75 + 25 * 500 // 8000, "mixed": 50 + 25 * 1500 // 8000,
                      "idle": 25, "other": 0 + 25 * 2000 // 8000}
    assert set(run_score(gpu_clustering_score.new(None, handle(snap)), gpu_pod("cpu"),
                         snap).values()) == {0}


def test_gpu_packing_bands() -> None:
    snap = cluster(gpu_node("shared", 4), gpu_node("used", 4), gpu_node("idle", 4))
    use(snap, "shared", [300, 1000, 1000, 1000])
    use(snap, "used", [0, 1000, 1000, 1000])
    plugin = gpu_packing_score.new(None, handle(snap))
    share = run_score(plugin, gpu_pod("p", milli=200), snap)
    assert share == {"shared": 100 - (300 * 100 // 1000) // 10, "used": 49, "idle": 33 - 4}
    whole = run_score(plugin, gpu_pod("w", whole=2), snap)
    assert whole == {"shared": 48, "used": 48, "idle": 29}


def naive_frag(free: list[int], cpu_left: int, model: str,
               weights: dict[PodType, int]) -> float:
    """The artifact's NodeGpuShareFragAmountScore, transcribed literally."""
    total = sum(free)
    s = 0.0
    w_all = sum(weights.values())
    for t, w in weights.items():
        p = w / w_all
        if t.gpu_count == 0:
            s += p * total
            continue
        access = not t.spec or model in t.spec
        fits = sum(1 for f in free if f >= t.gpu_milli) >= t.gpu_count
        if access and fits and cpu_left >= t.cpu_milli:
            s += p * sum(f for f in free if f < t.gpu_milli)
        else:
            s += p * total
    return s


def test_fgd_matches_the_artifact_formula() -> None:
    rng = np.random.default_rng(7)
    nodes = [gpu_node(f"n{i}", int(rng.choice([1, 2, 4, 8])), str(rng.choice(["T4", "G2"])),
                      cpu=int(rng.choice([8, 32, 96]))) for i in range(12)]
    snap = cluster(*nodes)
    for i in range(12):
        for d in range(int(snap.gpus.count[i])):
            milli = int(rng.choice([0, 0, 200, 500, 800, 1000]))
            if milli:
                pi = gpu_pod(f"f{i}-{d}", milli=milli, cpu=int(rng.choice([1, 4])))
                snap.add_pod(pi, i)
                snap.place_gpu_devices(pi, (d,))
    weights = {PodType(4000, 500, 1, ()): 5, PodType(8000, 1000, 1, ()): 4,
               PodType(2000, 200, 1, ("T4",)): 2, PodType(16000, 1000, 2, ()): 1,
               PodType(2000, 0, 0, ()): 3}
    args = {"targetWorkload": [{"cpuMilli": t.cpu_milli, "gpuMilli": t.gpu_milli,
                                "gpuCount": t.gpu_count, "gpuSpec": "|".join(t.spec),
                                "weight": w} for t, w in weights.items()],
            "popularityThreshold": 100}
    plugin = fgd_score.new(args, handle(snap))
    for pod in (gpu_pod("s", milli=500, cpu=4), gpu_pod("w", whole=1, cpu=8),
                gpu_pod("c", cpu=2)):
        state = CycleState()
        nodes_ids = snap.node_ids()
        got = plugin.score(state, pod, snap, nodes_ids)
        for i in range(12):
            count = int(snap.gpus.count[i])
            free = snap.gpus.free[i, :count].tolist()
            left = int(snap.allocatable[i, snap.col("cpu")] - snap.requested[i, snap.col("cpu")])
            cpu = pod.requests["cpu"]
            model = snap.gpus.models[int(snap.gpus.model[i])]
            before = naive_frag(free, left, model, weights)
            options = []
            if pod.gpu.is_share:
                for d in range(count):
                    if free[d] >= pod.gpu.milli:
                        after = list(free)
                        after[d] -= pod.gpu.milli
                        options.append((d, naive_frag(after, left - cpu, model, weights)))
            else:
                after = list(free)
                idle = [d for d in range(count) if free[d] == 1000][: pod.gpu.count]
                if len(idle) < pod.gpu.count:
                    continue
                for d in idle:
                    after[d] = 0
                options.append((-1, naive_frag(after, left - cpu, model, weights)))
            if not options:
                continue
            want = [(int(100 / (1 + math.exp(-(before - a) / 1000))), -d) for d, a in options]
            best = max(want)
            assert got[i] == best[0], (pod.name, i)
            if pod.gpu.is_share:
                choice = state.get(DEVICE_CHOICE_KEY)
                assert isinstance(choice, DeviceChoice)
                assert choice.on(i) == -best[1]


def test_fgd_learns_the_workload_when_not_given() -> None:
    snap = cluster(gpu_node("a", 2), gpu_node("b", 2))
    use(snap, "a", [500, 1000])
    plugin = fgd_score.new(None, handle(snap))
    scores = run_score(plugin, gpu_pod("p", milli=500), snap)
    # Only 500m pods seen: every free device of a ([500, 1000]) and b ([1000, 1000]) can take
    # one, before and after, so neither placement fragments anything: Δ = 0, a tie at 50.
    assert scores == {"a": 50, "b": 50}
    run_score(plugin, gpu_pod("w", whole=1), snap)  # a whole-GPU pod is seen too
    scores = run_score(plugin, gpu_pod("p2", milli=500), snap)
    # Learned workload {500m: 2, 1 GPU: 1}, W = 3. a: W·F = 1·500 (its 500m device is a
    # fragment for the whole-GPU type) → 0 after taking that device, Δ = 500. b: 0 → 500 (it
    # splits a whole GPU), Δ = −500. ⌊100·sigmoid(±500 / 3000)⌋: a 54 wins over b 45.
    assert scores == {"a": 54, "b": 45}
