"""The gang experiment: multi-GPU jobs of an openb trace as groups of 1-GPU pods, scheduled as
Kubernetes' native gangs, as scheduler-plugins' Coscheduling gangs, or as independent pods.

One run per mode on the simulator's virtual clock (docs/gangs.md, "The gang experiment", says
why each choice was made):

- **Cluster.** ``nodes`` GPU nodes of the openb cluster, drawn by the seed (a sample keeps the
  queue short enough to replay many runs; the node mix is the trace's).
- **Pods.** The trace's rows (a ``multigpu*`` variant stresses multi-GPU jobs), shuffled by the
  seed, the first ``pods`` of them. Each keeps the run time of the default-trace pod of its name;
  the rows a variant adds (they have no times) take that of a default-trace pod with the same
  GPU count, drawn by the seed. They arrive one every ``interval`` seconds, the interval that
  makes the offered GPU demand (GPUs × run time per second) ``load`` × the sample's GPUs, so a
  load above 1 queues.
- **Jobs.** A row asking for n ≥ 2 whole GPUs becomes n pods of one GPU each, its CPU and memory
  split evenly (the remainder on the first). In ``native`` mode they join a
  ``scheduling.k8s.io/v1beta1`` PodGroup with ``gang.minCount: n``; in ``coscheduling`` mode a
  ``scheduling.x-k8s.io`` PodGroup with ``minMember: n`` under scheduler-plugins' Coscheduling
  profile; in ``none`` mode they are scheduled one by one.
- **Measures.** A job's wait runs from its arrival to the first binding of its last pod.
  Stranded GPU-hours are GPUs bound to pods of a job whose other pods are not all bound yet (a
  job that never completes strands its bound pods until they end or the run does).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import yaml

from kubeberth.api.errors import InputError
from kubeberth.api.objects import ObjectMeta, Pod, PodSchedulingGroup
from kubeberth.api.quantity import Milli
from kubeberth.api.resources import CPU, GPU, GPU_MILLI, MEMORY
from kubeberth.api.scheduling_crds import POD_GROUP_LABEL
from kubeberth.config.manifests import Manifests
from kubeberth.config.yamlsrc import Document, Source
from kubeberth.scheduling.config.loader import parse_scheduler_config
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import SimResult, Simulation
from kubeberth.sim.fragmentation import gpu_nodes, load_trace
from kubeberth.sim.metrics import SERIES_COLUMNS, Metrics, percentiles
from kubeberth.sim.traces import Scenario, TracePod, bundled_pods

MODES = ("native", "coscheduling", "none")
CSV_FILE = "gangs.csv"
COLUMNS = ("mode", "trace", "seed", "load", "nodes", "gpus", "pods", "jobs", "jobs_complete",
           "job_wait_p50", "job_wait_p90", "job_wait_p99", "job_wait_max", "pod_wait_p99",
           "gpu_alloc_mean_pct", "gpu_alloc_peak_pct", "stranded_gpu_hours",
           "jobs_partial_at_end", "unscheduled_pods")
# scheduler-plugins' Coscheduling profile, as its README configures it (examples/gangs/).
COSCHEDULING = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
    preFilter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
    reserve: {enabled: [{name: Coscheduling}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 60, podGroupBackoffSeconds: 0}
"""
DEFAULT_PROFILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
"""


@dataclass(frozen=True, slots=True)
class GangRun:
    """One run of the experiment."""

    mode: str
    trace: str
    seed: int
    load: float
    nodes: int
    pods: int


def check_mode(name: str) -> str:
    if name not in MODES:
        raise InputError(f"unknown mode {name!r}", field="--mode",
                         expected="one of " + ", ".join(MODES))
    return name


def timed_trace(run: GangRun, rng: np.random.Generator, gpus: int) -> list[TracePod]:
    """The run's rows with their run times and arrivals (module docstring)."""
    rows = load_trace(run.trace)
    order = rng.permutation(len(rows))[:run.pods]
    default = bundled_pods()
    times = {tp.pod.metadata.name: tp.duration for tp in default}
    by_gpus: dict[int, list[float | None]] = {}
    for tp in default:
        by_gpus.setdefault(_whole_gpus(tp.pod), []).append(tp.duration)
    picked: list[tuple[Pod, float | None]] = []
    for i in order:
        pod = rows[int(i)].pod
        if pod.metadata.name in times:
            duration = times[pod.metadata.name]
        else:
            pool = by_gpus.get(_whole_gpus(pod)) or [d for ds in by_gpus.values() for d in ds]
            duration = pool[int(rng.integers(len(pool)))]
        picked.append((pod, duration))
    interval = _interval([(_gpu_milli(pod) / 1000, d) for pod, d in picked], run.load * gpus)
    return [TracePod(pod, round(i * interval, 3), d) for i, (pod, d) in enumerate(picked)]


def _interval(demand: list[tuple[float, float | None]], target: float) -> float:
    """The arrival interval at which the pods' GPU demand over the run's span (n × interval;
    a pod's run time counts up to that span, one that never ends counts all of it) averages
    ``target`` GPUs; the average falls as the interval grows, so bisection finds it."""
    n = len(demand)
    if not n or target <= 0:
        return 1.0

    def average(interval: float) -> float:
        span = n * interval
        return sum(g * min(d if d is not None else span, span) for g, d in demand) / span

    low, high = 1e-6, 1.0
    while average(high) > target:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if average(mid) > target else (low, mid)
    return high


def _gpu_milli(pod: Pod) -> int:
    """A pod's GPU demand in thousandths of a GPU (a shared GPU's share, or whole GPUs)."""
    whole = _whole_gpus(pod)
    if whole:
        return whole * 1000
    return int(pod.spec.containers[0].resources.requests.get(GPU_MILLI, 0)) // 1000


def _whole_gpus(pod: Pod) -> int:
    return int(pod.spec.containers[0].resources.limits.get(GPU, 0)) // 1000


def _member(pod: Pod, i: int, n: int) -> Pod:
    """Pod ``i`` of ``n`` a job is split into: one GPU, an even share of CPU and memory."""
    req = pod.spec.containers[0].resources.requests
    share: dict[str, Milli] = {}
    for res in (CPU, MEMORY):
        total = int(req.get(res, 0))
        share[res] = Milli(total // n + (total % n if i == 0 else 0))
    share[GPU] = Milli(1000)
    container = msgspec.structs.replace(pod.spec.containers[0], resources=msgspec.structs.replace(
        pod.spec.containers[0].resources, requests=share, limits={GPU: Milli(1000)}))
    meta = ObjectMeta(name=f"{pod.metadata.name}-{i}", namespace=pod.metadata.namespace,
                      annotations=dict(pod.metadata.annotations))
    return msgspec.structs.replace(pod, metadata=meta,
                                   spec=msgspec.structs.replace(pod.spec, containers=[container]))


def _group_doc(data: dict[str, Any]) -> Document:
    return Document(data=data, source=Source(f"PodGroup {data['metadata']['name']}", "",
                                             is_json=True), index=0, line=None)


def scenario(run: GangRun) -> tuple[Scenario, dict[str, list[str]]]:
    """The run's cluster and pods, and each job's pods (``namespace/name``) by job name."""
    rng = np.random.default_rng(run.seed)
    every = gpu_nodes()
    chosen = sorted(rng.choice(len(every), size=min(run.nodes, len(every)), replace=False))
    nodes = [every[int(i)] for i in chosen]
    gpus = sum(int(n.status.allocatable.get(GPU, 0)) // 1000 for n in nodes)
    pods: list[TracePod] = []
    jobs: dict[str, list[str]] = {}
    extras = Manifests()
    for tp in timed_trace(run, rng, gpus):
        n = _whole_gpus(tp.pod)
        if n < 2:
            pods.append(tp)
            continue
        name, ns = tp.pod.metadata.name, tp.pod.metadata.namespace
        members = [_member(tp.pod, i, n) for i in range(n)]
        if run.mode == "native":
            members = [msgspec.structs.replace(m, spec=msgspec.structs.replace(
                m.spec, scheduling_group=PodSchedulingGroup(pod_group_name=name)))
                for m in members]
            extras.workload_api.append(_group_doc({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"schedulingPolicy": {"gang": {"minCount": n}}}}))
        elif run.mode == "coscheduling":
            for m in members:
                m.metadata.labels[POD_GROUP_LABEL] = name
            extras.other.append(_group_doc({
                "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns,
                             "creationTimestamp": "1970-01-01T00:00:00Z"},
                "spec": {"minMember": n}}))
        jobs[name] = [m.key for m in members]
        pods += [TracePod(m, tp.arrival, tp.duration) for m in members]
    label = f"openb-{run.trace}-gangs-{run.mode}"
    return Scenario(nodes=nodes, pods=pods, name=label,
                    source=f"openb {run.trace}, {len(nodes)} GPU nodes, load {run.load:g} "
                           "(run times of openb default)", extras=extras), jobs


def _config(text: str) -> SchedulerConfiguration:
    return parse_scheduler_config(Document(data=yaml.safe_load(text),
                                           source=Source("gang experiment profile", text),
                                           index=0, line=None))


def run_one(run: GangRun) -> dict[str, Any]:
    """One mode's row of :data:`COLUMNS`."""
    scen, jobs = scenario(run)
    config = _config(COSCHEDULING if run.mode == "coscheduling" else DEFAULT_PROFILE)
    result = Simulation(scen, config, in_tree_registry(), seed=run.seed).run()
    gpus = sum(int(n.status.allocatable.get(GPU, 0)) // 1000 for n in scen.nodes)
    span = max((tp.arrival for tp in scen.pods), default=0.0)
    return row(run, result, jobs, len(scen.nodes), gpus, span)


def row(run: GangRun, result: SimResult, jobs: dict[str, list[str]], nodes: int,
        gpus: int, span: float) -> dict[str, Any]:
    """The run's measures; GPU allocation is averaged over the arrival span (after the last
    arrival the cluster only drains, for as long as the longest run time)."""
    m = result.metrics
    end = result.end_time
    waits: list[float] = []
    stranded = 0.0
    partial = 0
    for keys in jobs.values():
        recs = [m.pods[k] for k in keys]
        bound = [r.bound for r in recs]
        complete = None if any(b is None for b in bound) else max(
            b for b in bound if b is not None)
        if complete is not None:
            waits.append(complete - recs[0].arrival)
        for r in recs:
            if r.bound is None:
                continue
            held_until = min(complete if complete is not None else end,
                             r.finished if r.finished is not None else end)
            stranded += max(0.0, held_until - r.bound)
        running = sum(1 for r in recs if r.bound is not None and r.finished is None)
        if 0 < running < len(recs):
            partial += 1
    job_waits = percentiles(waits)
    pod_waits = m.wait_percentiles()
    return {
        "mode": run.mode, "trace": run.trace, "seed": run.seed, "load": f"{run.load:g}",
        "nodes": nodes, "gpus": gpus, "pods": len(m.pods), "jobs": len(jobs),
        "jobs_complete": len(waits),
        **{f"job_wait_{q}": _num(job_waits.get(q)) for q in ("p50", "p90", "p99", "max")},
        "pod_wait_p99": _num(pod_waits.get("p99")),
        "gpu_alloc_mean_pct": f"{_mean_until(m, 'gpu_alloc_pct', span):.4f}",
        "gpu_alloc_peak_pct": f"{m.peak('gpu_alloc_pct'):.4f}",
        "stranded_gpu_hours": f"{stranded / 3600:.4f}",
        "jobs_partial_at_end": partial, "unscheduled_pods": len(result.unscheduled),
    }


def _mean_until(m: Metrics, column: str, until: float) -> float:
    i = SERIES_COLUMNS.index(column)
    values = [r[i] for r in m.rows if r[0] <= until]
    return sum(values) / len(values) if values else 0.0


def _num(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.3f}"


def write_csv(rows: list[dict[str, Any]], out: Path) -> Path:
    """``gangs.csv`` in ``out``: one row a run, in the order given (byte-stable)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / CSV_FILE
    buf = io.StringIO()
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buf.getvalue())
    return path


def run_all(runs: Sequence[GangRun], jobs: int) -> list[dict[str, Any]]:
    """Every run, on a process pool of ``jobs`` workers (in-process when 1), in input order."""
    if jobs <= 1 or len(runs) <= 1:
        return [run_one(r) for r in runs]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run_one, runs))


__all__ = ["COLUMNS", "CSV_FILE", "MODES", "GangRun", "check_mode", "row", "run_all",
           "run_one", "scenario", "timed_trace", "write_csv"]
