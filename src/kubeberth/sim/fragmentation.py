"""The fragmentation experiment of the FGD paper: how much GPU capacity each policy can allocate.

One run, as Weng et al. ran it (USENIX ATC'23, Figs. 7 and 9): the 1,213 GPU nodes of the openb
cluster; a trace's pods shuffled by the seed; random clones of trace pods (drawn with
replacement by the same generator) appended until the arrived GPU demand would pass
``tune`` × the cluster's GPU capacity (a ``tune`` below the trace's own demand drops random pods
instead); each pod scheduled once in that order by the scheduling framework with the policy's
profile, and never departing. At every whole percent of arrived GPU demand the run records
the allocated GPU share (the last pod's arrival, which stops just short of ``tune`` ×
capacity, counts as the tune's own percent), the fragmentation (free GPU capacity the target
workload cannot use, :mod:`kubeberth.state.fragmentation`) as a share of all GPUs and of idle
GPUs, and the pods that failed so far.

Ties between equally scored nodes go to the node of lowest *rank*, a permutation of the nodes
drawn by the run's generator after the arrival order, because that is what the artifact's
scheduler does: its vendored ``selectHost`` keeps the lexicographically smallest node name among
the best (not kube-scheduler's uniform draw), and it prefixes every node name with its index in a
seeded random permutation. The difference matters: a policy whose scores are coarse (FGD's are
whole points of a sigmoid, so hundreds of nodes tie) packs its ties onto the same few nodes
instead of spreading them, which decides the outcome on CPU-heavy traces (docs/gpu.md).

The target workload is the trace's own pod-type distribution: all of its types by default, or
the most popular ones making ``popularity`` % of the pods (the paper's artifact uses 95 %).

A grid of runs goes to a process pool (one run per task) or a Ray cluster; each finished run is
kept as its own CSV under ``runs/`` so an interrupted grid resumes, and all runs are merged into
one tidy CSV, sorted, so the same grid always gives the same bytes.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node
from kubeberth.api.quantity import to_milli
from kubeberth.api.resources import CPU, GPU
from kubeberth.scheduling.config.types import PluginRef, PluginSet, Profile, SchedulerConfiguration
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.scheduling.scheduler import Scheduler
from kubeberth.sim.traces import TracePod, read_openb_nodes, read_openb_pods
from kubeberth.state.cluster import ClusterState, PodInfo, make_pod_info
from kubeberth.state.fragmentation import (
    PodType,
    TargetWorkload,
    cluster_fragmentation,
    typical_pod_types,
)

POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
# Policy -> (score plugin, GpuDevices deviceSelection), as the paper's artifact configures them.
POLICY_PLUGINS = {
    "Random": ("RandomScore", "Random"),
    "DotProd": ("DotProductScore", "BestFit"),
    "GpuClustering": ("GpuClusteringScore", "BestFit"),
    "GpuPacking": ("GpuPackingScore", "BestFit"),
    "BestFit": ("BestFitScore", "BestFit"),
    "FGD": ("FGDScore", "BestFit"),
}
TRACES = (
    "default", "cpu0", "cpu037", "cpu050", "cpu072", "cpu100", "cpu200", "cpu235", "cpu250",
    "cpu300", "gpushare20", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "gpuspec05", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
    "multigpu40", "multigpu50",
)
GPU_NODES = "openb_node_list_gpu_node.csv.gz"
COLUMNS = ("policy", "trace", "seed", "tune", "popularity", "arrived_pct", "allocated_pct",
           "frag_pct", "frag_idle_pct", "failed_pods", "unallocated_gpus", "free_8gpu_nodes")
RESULTS_CSV = "fragmentation.csv"
# The target workload: every pod type of the trace by default (see docs/gpu.md for why).
ALL_TYPES = 100
RUNS_DIR = "runs"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run of the grid. ``trace`` is an openb trace name or a pod CSV path."""

    policy: str
    trace: str
    seed: int
    tune: float
    popularity: int = ALL_TYPES

    @property
    def trace_label(self) -> str:
        return self.trace if self.trace in TRACES else Path(self.trace).name.removesuffix(
            ".gz").removesuffix(".csv").removeprefix("openb_pod_list_")

    @property
    def file_name(self) -> str:
        suffix = "" if self.popularity == ALL_TYPES else f"__p{self.popularity}"
        return f"{self.trace_label}__{self.policy}__{self.seed}__{self.tune:g}{suffix}.csv"


def check_policy(name: str) -> str:
    if name not in POLICY_PLUGINS:
        raise InputError(f"unknown policy {name!r}", field="--policy",
                         expected="one of " + ", ".join(POLICIES))
    return name


def check_trace(name: str) -> str:
    if name in TRACES:
        return name
    if name.endswith((".csv", ".csv.gz")) and Path(name).is_file():
        return name
    raise InputError(f"unknown trace {name!r}", field="--trace",
                     expected="an openb trace name (" + ", ".join(TRACES) + ") or the path of an "
                     "openb pod CSV")


def _bundled(filename: str) -> io.StringIO:
    data = resources.files("kubeberth.sim").joinpath("data").joinpath(filename).read_bytes()
    stream = io.StringIO(gzip.decompress(data).decode("utf-8"))
    stream.name = "bundled:" + filename.removesuffix(".gz")
    return stream


def gpu_nodes() -> list[Node]:
    """The openb cluster's 1,213 GPU nodes, the experiments' cluster."""
    return read_openb_nodes(_bundled(GPU_NODES))


def load_trace(trace: str) -> list[TracePod]:
    if trace in TRACES:
        return read_openb_pods(_bundled(f"openb_pod_list_{trace}.csv.gz"))
    return read_openb_pods(trace)


def policy_config(policy: str, target: dict[PodType, int]) -> SchedulerConfiguration:
    """A one-profile configuration: NodeResourcesFit and GpuDevices filter, the policy's score
    plugin scores, GpuDevices reserves devices, DefaultBinder binds; every node is scored."""
    score, selection = POLICY_PLUGINS[policy]

    def only(*names: str) -> PluginSet:
        return PluginSet(enabled=[PluginRef(n) for n in names])

    plugins = {
        "queueSort": only("PrioritySort"),
        "preFilter": only("NodeResourcesFit", "GpuDevices"),
        "filter": only("NodeResourcesFit", "GpuDevices"),
        "preScore": only(score) if score == "RandomScore" else PluginSet(),
        "score": only(score),
        "reserve": only("GpuDevices"),
        "bind": only("DefaultBinder"),
    }
    config: dict[str, dict[str, Any]] = {"GpuDevices": {"deviceSelection": selection}}
    if score == "FGDScore":
        config[score] = {"popularityThreshold": 100, "targetWorkload": [
            {"cpuMilli": t.cpu_milli, "gpuMilli": t.gpu_milli, "gpuCount": t.gpu_count,
             "gpuSpec": "|".join(t.spec), "weight": w} for t, w in target.items()]}
    return SchedulerConfiguration(profiles=[Profile(plugins=plugins, plugin_config=config,
                                                    percentage_of_nodes_to_score=100)],
                                  percentage_of_nodes_to_score=100)


def inflate(pods: Sequence[PodInfo], capacity_milli: int, tune: float,
            rng: np.random.Generator) -> list[PodInfo]:
    """The arrival order of one run: ``pods`` shuffled, then clones sampled with replacement
    (named ``<name>-tuned-<i>``) while the arrived GPU demand stays within ``tune`` ×
    ``capacity_milli``; when the trace alone exceeds it, random pods are dropped instead."""
    demand = [pi.gpu.total_milli for pi in pods]
    order = rng.permutation(len(pods))
    stream = [pods[i] for i in order]
    stream_demand = [demand[i] for i in order]
    target = tune * capacity_milli
    total = sum(stream_demand)
    while total > target and stream:
        j = int(rng.integers(len(stream)))
        total -= stream_demand.pop(j)
        stream.pop(j)
    i = 0
    while pods:
        k = int(rng.integers(len(pods)))
        if total + demand[k] > target:
            break
        src = pods[k]
        meta = msgspec.structs.replace(src.pod.metadata, name=f"{src.name}-tuned-{i}")
        pod = msgspec.structs.replace(src.pod, metadata=meta)
        stream.append(dataclasses.replace(src, pod=pod, key=pod.key))
        total += demand[k]
        i += 1
    return [dataclasses.replace(pi, seq=seq) for seq, pi in enumerate(stream)]


class FirstOfTies(np.random.Generator):
    """The scheduler's tie-break draw, always answered with the first of the tied candidates.

    The scheduler draws ``integers(len(best))`` to pick among equally scored nodes, which it
    lists in node-slot order; with every node scored, that order never rotates. Given nodes added
    in rank order (:func:`ranked_nodes`), the first tied candidate is the one of lowest rank, the
    artifact's choice. Plugins keep the handle's own seeded generator."""

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        return 0


def ranked_nodes(nodes: Sequence[Node], rng: np.random.Generator) -> list[Node]:
    """``nodes`` sorted by name, then reordered by a random rank (the artifact names node ``i``
    of the sorted list ``<perm[i]:04d>-<name>``; the smallest name is rank 0)."""
    by_name = sorted(nodes, key=lambda n: n.metadata.name)
    rank = rng.permutation(len(by_name))
    return [by_name[int(i)] for i in np.argsort(rank, kind="stable")]


def experiment_scheduler(policy: str, target: dict[PodType, int], snap: ClusterState,
                         seed: int) -> Scheduler:
    """The policy's scheduler over ``snap`` (whose nodes were added in rank order), binding and
    evicting straight into ``snap``, with the artifact's tie-break."""

    def bind(_pod: PodInfo, _node: str) -> Status:
        return SUCCESS

    def evict(victim: PodInfo, _by: PodInfo) -> None:
        snap.remove_pod(victim)

    sched = Scheduler(policy_config(policy, target), in_tree_registry(), snap,
                      clock=lambda: 0.0, seed=seed, binder=bind, evictor=evict)
    sched.rng = FirstOfTies(np.random.PCG64(seed))
    return sched


def target_workload_counts(pods: Iterable[PodInfo]) -> dict[PodType, int]:
    """The trace's pod types and their counts."""
    counts: dict[PodType, int] = {}
    for pi in pods:
        t = PodType.of(pi.non_zero.get(CPU, 0), pi.gpu)
        counts[t] = counts.get(t, 0) + 1
    return counts


def _shape(pod: PodInfo) -> tuple[object, ...]:
    """What decides whether a pod fits somewhere in this profile: requests and GPU models."""
    return (*sorted(pod.requests.items()), pod.gpu.spec)


def run_one(spec: RunSpec) -> list[dict[str, Any]]:
    """One run; rows of :data:`COLUMNS`, one per whole percent of arrived GPU demand."""
    pods = [make_pod_info(tp.pod) for tp in load_trace(spec.trace)]
    nodes = gpu_nodes()
    counts = target_workload_counts(pods)
    typical = typical_pod_types(counts, spec.popularity)
    target = TargetWorkload(typical)
    capacity = sum(to_milli(GPU, n.status.allocatable.get(GPU, 0)) for n in nodes)
    rng = np.random.default_rng(spec.seed)
    stream = inflate(pods, capacity, spec.tune, rng)
    snap = ClusterState()
    for node in ranked_nodes(nodes, rng):
        snap.add_node(node)
    all_nodes = snap.node_ids()
    sched = experiment_scheduler(spec.policy, typical, snap, spec.seed)
    cpu_col = snap.col(CPU)
    gpus = snap.gpus
    eight = gpus.count[all_nodes] == 8
    rows: list[dict[str, Any]] = []
    arrived = failed = 0
    next_pct = 1
    last_pct = round(spec.tune * 100)

    def due() -> bool:
        return arrived * 100 >= next_pct * capacity

    # Shapes that fit nowhere: nothing departs, so they never fit again, and sparing them the
    # scheduling cycle (whose cost is writing the FitError) changes no state or random draw.
    hopeless: set[tuple[object, ...]] = set()
    stream_end: list[PodInfo | None] = [*stream, None]
    for pi in stream_end:
        if pi is not None:
            arrived += pi.gpu.total_milli
            shape = _shape(pi)
            if shape in hopeless:
                failed += 1
            else:
                sched.add(pi)
                res = sched.schedule_one()
                if res is None or res.outcome != "assumed" or not sched.bind(res).ok:
                    failed += 1
                    hopeless.add(shape)
        # After the last pod, its arrival (just short of tune × capacity, clones stop below it)
        # counts as the tune's percent.
        while due() or (pi is None and next_pct <= last_pct):
            left = snap.allocatable[all_nodes, cpu_col] - snap.requested[all_nodes, cpu_col]
            frag = cluster_fragmentation(target, snap.gpus, all_nodes, left)
            allocated = capacity - frag.idle_milli
            rows.append({
                "policy": spec.policy, "trace": spec.trace_label, "seed": spec.seed,
                "tune": f"{spec.tune:g}", "popularity": spec.popularity,
                "arrived_pct": next_pct,
                "allocated_pct": f"{100 * allocated / capacity:.4f}",
                "frag_pct": f"{frag.pct_of_total:.4f}",
                "frag_idle_pct": f"{frag.pct_of_idle:.4f}", "failed_pods": failed,
                "unallocated_gpus": f"{frag.idle_milli / 1000:.3f}",
                "free_8gpu_nodes": int(np.count_nonzero(eight & (gpus.free[all_nodes] == 1000)
                                                        .all(axis=1))),
            })
            next_pct += 1
    return rows


# ---- the grid ----------------------------------------------------------------------------------
def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def read_results(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _sort_key(row: dict[str, Any]) -> tuple[str, int, str, int, float, int, int]:
    policy = str(row["policy"])
    rank = POLICIES.index(policy) if policy in POLICIES else len(POLICIES)
    return (str(row["trace"]), rank, policy, int(row["seed"]), float(row["tune"]),
            int(row["popularity"] or ALL_TYPES), int(row["arrived_pct"]))


Executor = Callable[[list[RunSpec], Callable[[RunSpec, list[dict[str, Any]]], None]], None]


def local_pool(jobs: int) -> Executor:
    """Runs on a local process pool of ``jobs`` workers (in-process when 1)."""

    def execute(todo: list[RunSpec],
                done: Callable[[RunSpec, list[dict[str, Any]]], None]) -> None:
        if jobs <= 1 or len(todo) <= 1:
            for spec in todo:
                done(spec, run_one(spec))
            return
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_one, spec): spec for spec in todo}
            # Each run is written as soon as it finishes, so an interrupted grid keeps it.
            for future in as_completed(futures):
                done(futures[future], future.result())

    return execute


def run_grid(specs: Sequence[RunSpec], out: Path, execute: Executor,
             progress: Callable[[RunSpec, bool], None] | None = None) -> Path:
    """Run what ``out/runs/`` does not hold yet, then merge everything into ``out/`` CSV."""
    runs = out / RUNS_DIR
    runs.mkdir(parents=True, exist_ok=True)
    todo = [s for s in specs if not (runs / s.file_name).is_file()]
    if progress is not None:
        for s in specs:
            if s not in todo:
                progress(s, True)

    def done(spec: RunSpec, rows: list[dict[str, Any]]) -> None:
        _write_csv(runs / spec.file_name, rows)
        if progress is not None:
            progress(spec, False)

    execute(todo, done)
    merged: list[dict[str, Any]] = []
    for s in dict.fromkeys(specs):
        merged.extend(read_results(runs / s.file_name))
    merged.sort(key=_sort_key)
    path = out / RESULTS_CSV
    _write_csv(path, merged)
    return path
