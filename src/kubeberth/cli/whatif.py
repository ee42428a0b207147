"""``kubeberth whatif``: what adding a workload to a cluster (a snapshot) would do.

It answers four questions about the objects of ``--add``: is it admitted by Kueue and on which
flavor (Kueue's admission cycles at the snapshot's instant, through the driver ``admit`` uses),
where its pods go, whom it preempts, and when it starts. The last three come from two runs of
the simulator from the snapshot's instant, one without and one with the added objects, under
the same scheduler configuration and queues: running pods end after their expected run time
(``kubeberth.io/duration-seconds``, else what is left of their Job's activeDeadlineSeconds,
else ``--assume-runtime``, else never). The output puts the two runs side by side; its JSON is
a public contract (docs/whatif.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kubeberth.admission.checks import CheckRegistry
from kubeberth.admission.model import load_kueue
from kubeberth.api.errors import InputError
from kubeberth.api.times import format_time, parse_time
from kubeberth.cli.admit import admit, contract
from kubeberth.cli.common import (
    OutputFormat,
    err_console,
    registries,
    seconds,
    user_errors,
)
from kubeberth.cli.snapshot import CONFIG_DIR, KUEUE_CONFIG_FILE, SCHEDULER_CONFIG_FILE
from kubeberth.config.manifests import Manifests, load_manifests
from kubeberth.config.yamlsrc import Document
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.registry import Registry

if TYPE_CHECKING:  # the simulator is imported when a whatif runs, not at every CLI start
    from kubeberth.sim.engine import SimResult
    from kubeberth.sim.traces import Scenario, TracePod

# What --kueue may hold: the queue configuration, never workloads.
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass",
               "AdmissionCheck", "Topology", "Configuration")
# What --add must hold at least one of: something that makes pods.
WORKLOAD_KINDS = ("Pod", "Job", "Deployment", "ReplicaSet")


def _key(doc: Document) -> tuple[str, str, str]:
    meta = doc.data.get("metadata") or {}
    return (str(doc.kind), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def with_queues(cluster: Manifests, kueue: Manifests, source: str) -> Manifests:
    """``cluster`` with the Kueue objects of ``kueue`` replacing those of the same kind and name
    (and the new ones added)."""
    stray = [d for d in kueue.other if d.kind not in KUEUE_KINDS]
    if kueue.nodes or kueue.pods or kueue.pdbs or kueue.priority_classes or stray:
        doc = stray[0] if stray else None
        err = InputError("--kueue holds objects other than Kueue's queue configuration",
                         source=source, field="kind",
                         expected="only " + ", ".join(KUEUE_KINDS))
        raise doc.locate(err) if doc is not None else err
    replaced = {_key(d) for d in kueue.other}
    return dataclasses.replace(
        cluster, other=[d for d in cluster.other if _key(d) not in replaced] + kueue.other,
        namespaces=cluster.namespaces + [ns for ns in kueue.namespaces if ns.metadata.name
                                         not in {n.metadata.name for n in cluster.namespaces}])


def default_now(m: Manifests) -> float:
    """The snapshot's instant: its latest creation or start time (0 without any)."""
    stamps = [0.0]
    for pod in m.pods:
        for raw in (pod.metadata.creation_timestamp, pod.status.start_time):
            if raw:
                stamps.append(parse_time(raw, "metadata.creationTimestamp"))
    for doc in m.other:
        raw = (doc.data.get("metadata") or {}).get("creationTimestamp")
        if isinstance(raw, str):
            stamps.append(parse_time(raw, "metadata.creationTimestamp"))
    return max(stamps)


def _job_deadlines(m: Manifests, now: float) -> dict[tuple[str, str], float]:
    """(namespace, Job) -> run time left before activeDeadlineSeconds stops its pods."""
    out: dict[tuple[str, str], float] = {}
    for doc in m.of_kind("Job"):
        meta = doc.data.get("metadata") or {}
        deadline = (doc.data.get("spec") or {}).get("activeDeadlineSeconds")
        if not isinstance(deadline, int) or isinstance(deadline, bool):
            continue
        started = (doc.data.get("status") or {}).get("startTime")
        elapsed = now - parse_time(started, "status.startTime") if started else 0.0
        out[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = \
            max(0.0, deadline - elapsed)
    return out


def with_runtimes(scenario: Scenario, deadlines: dict[tuple[str, str], float],
                  assume: float | None) -> Scenario:
    """Each pod without a duration annotation: what is left of its Job's activeDeadlineSeconds,
    else ``assume`` (None: it runs until the run ends)."""
    def runtime(tp: TracePod) -> TracePod:
        if tp.duration is not None:
            return tp
        for ref in tp.pod.metadata.owner_references:
            if ref.kind == "Job" and (tp.pod.metadata.namespace, ref.name) in deadlines:
                return tp._replace(duration=deadlines[(tp.pod.metadata.namespace, ref.name)])
        return tp._replace(duration=assume)

    return dataclasses.replace(scenario, pods=[runtime(tp) for tp in scenario.pods])


def _simulate(scenario: Scenario, cfg: SchedulerConfiguration, registry: Registry,
              checks: CheckRegistry, seed: int) -> SimResult:
    from kubeberth.sim.engine import Simulation

    return Simulation(scenario, cfg, registry, seed=seed, admission_checks=checks).run()


def _pod_outcome(result: SimResult, key: str, now: float) -> dict[str, Any] | None:
    rec = result.metrics.pods.get(key)
    if rec is None:
        return None
    return {"node": rec.node or None, "startSeconds": rec.bound,
            "startTime": None if rec.bound is None else format_time(now + rec.bound),
            "endSeconds": rec.finished, "preempted": rec.preempted}


def _admission(m: Manifests, now: float, checks: CheckRegistry) -> dict[str, dict[str, Any]]:
    """Kueue's verdict on every workload at ``now`` (``admit``'s rows by name), and its
    preemptions under the key ``""``."""
    data = contract(admit(load_kueue(m), now, None, checks))
    rows: dict[str, dict[str, Any]] = {w.pop("name"): w for w in data["workloads"]}
    rows[""] = {"preempted": data["preempted"]}
    return rows


def _merged(cluster: Manifests, added: Manifests) -> Manifests:
    return Manifests(nodes=cluster.nodes, pods=cluster.pods + added.pods,
                     priority_classes=cluster.priority_classes + added.priority_classes,
                     namespaces=cluster.namespaces + added.namespaces,
                     pdbs=cluster.pdbs + added.pdbs, other=cluster.other + added.other,
                     workload_api=cluster.workload_api + added.workload_api)


def whatif(cluster: Manifests, added: Manifests, cfg: SchedulerConfiguration,
           registry: Registry, checks: CheckRegistry, *, now: float, assume: float | None,
           seed: int, names: tuple[str, str]) -> dict[str, Any]:
    """The JSON document ``kubeberth whatif -o json`` prints (docs/whatif.md)."""
    from kubeberth.sim.traces import scenario_from_manifests

    deadlines = _job_deadlines(_merged(cluster, added), now)
    before_run = with_runtimes(scenario_from_manifests(
        cluster, Manifests(), cluster_name=names[0], workload_name="nothing"), deadlines, assume)
    after_run = with_runtimes(scenario_from_manifests(
        cluster, added, cluster_name=names[0], workload_name=names[1]), deadlines, assume)
    before = _simulate(before_run, cfg, registry, checks, seed)
    after = _simulate(after_run, cfg, registry, checks, seed)
    existing = {tp.pod.key for tp in before_run.pods}
    added_pods = sorted(k for k in after.metrics.pods if k not in existing and
                        k not in before.metrics.pods)
    pods: list[dict[str, Any]] = []
    for key in sorted(set(before.metrics.pods) | set(after.metrics.pods)):
        b, a = _pod_outcome(before, key, now), _pod_outcome(after, key, now)
        if b != a:
            pods.append({"pod": key, "added": key in added_pods, "before": b, "after": a})
    preempted_pods = [{"pod": row["pod"], "node": row["before"]["node"]}
                      for row in pods if row["before"] is not None and row["after"] is not None
                      and row["after"]["preempted"] > row["before"]["preempted"]]
    kueue = bool(cluster.of_kind("ClusterQueue"))
    workloads: list[dict[str, Any]] = []
    added_wl: list[dict[str, Any]] = []
    preempted_wl: list[dict[str, Any]] = []
    if kueue:
        adm_before = _admission(cluster, now, checks)
        adm_after = _admission(_merged(cluster, added), now, checks)
        seen = {(p["workload"], p["by"]) for p in adm_before.pop("")["preempted"]}
        preempted_wl = [p for p in adm_after.pop("")["preempted"]
                        if (p["workload"], p["by"]) not in seen]
        for name in sorted(set(adm_before) | set(adm_after)):
            b, a = adm_before.get(name), adm_after.get(name)
            if b is None and a is not None:
                added_wl.append({"name": name, **a})
            if b != a:
                workloads.append({"name": name, "before": b, "after": a})
    starts = [after.metrics.pods[k].bound for k in added_pods]
    start = None if not starts or any(s is None for s in starts) \
        else max(s for s in starts if s is not None)
    return {
        "now": format_time(now),
        "added": {
            "admitted": None if not kueue or not added_wl
            else all(w["state"] == "Admitted" for w in added_wl),
            "workloads": added_wl,
            "pods": [{"pod": k, **(_pod_outcome(after, k, now) or {})} for k in added_pods],
            "startSeconds": start,
            "startTime": None if start is None else format_time(now + start),
        },
        "preempts": {"pods": preempted_pods, "workloads": preempted_wl},
        "pods": pods,
        "workloads": workloads,
    }


def _snapshot_config(paths: list[Path], name: str) -> Path | None:
    """A configuration ``kubeberth snapshot`` kept in a folder given to -f."""
    for p in paths:
        candidate = p / CONFIG_DIR / name
        if p.is_dir() and candidate.is_file():
            return candidate
    return None


def whatif_command(
    filename: Annotated[list[Path], typer.Option(
        "--filename", "-f", help="The cluster: a `kubeberth snapshot` folder or any manifests "
                                 "(repeatable).")],
    add: Annotated[list[Path], typer.Option(
        "--add", help="The workload to add: Jobs, Pods, Deployments (queue-labelled for "
                      "Kueue) in manifests (repeatable).")],
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="KubeSchedulerConfiguration to decide with (default: the "
                               "snapshot's config/scheduler-config.yaml, else upstream's "
                               "default profile). The snapshot's "
                               "config/kueue-configuration.yaml is read too.")] = None,
    kueue: Annotated[list[Path] | None, typer.Option(
        "--kueue", help="Kueue queue configuration replacing the cluster's objects of the "
                        "same kind and name (repeatable).")] = None,
    assume_runtime: Annotated[str | None, typer.Option(
        "--assume-runtime", metavar="DURATION",
        help="Run time of a pod with neither a kubeberth.io/duration-seconds annotation nor a "
             "Job activeDeadlineSeconds (default: it runs until the end).")] = None,
    now: Annotated[str | None, typer.Option(
        "--now", help="The snapshot's instant, RFC 3339 (default: its latest timestamp).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice.")] = 0,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Out-of-tree plugin to register, as module:attr (repeatable).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Will this workload be admitted, and on which flavor; where do its pods go, whom do they
    preempt, and when do they start? Before and after, side by side."""
    from kubeberth.cli.common import print_data

    cfg: SchedulerConfiguration | None = None
    with user_errors():
        cfg = load_scheduler_config(config or _snapshot_config(filename, SCHEDULER_CONFIG_FILE))
        assume = seconds(assume_runtime, "--assume-runtime")
        kueue_config = _snapshot_config(filename, KUEUE_CONFIG_FILE)
        cluster = load_manifests([*filename, *([kueue_config] if kueue_config else [])])
        for path in kueue or []:
            cluster = with_queues(cluster, load_manifests([path]), str(path))
        added = load_manifests(add)
        if added.nodes:
            raise InputError("--add holds a Node", field="kind",
                             source=", ".join(str(a) for a in add),
                             expected="the workload to add: " + ", ".join(WORKLOAD_KINDS))
        if not added.pods and not added.of_kind(*WORKLOAD_KINDS):
            raise InputError("--add holds no workload", field="kind",
                             source=", ".join(str(a) for a in add),
                             expected="at least one of " + ", ".join(WORKLOAD_KINDS))
        instant = parse_time(now, "--now") if now is not None else default_now(cluster)
    with user_errors(cfg):
        regs = registries(plugin)
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                      TimeElapsedColumn(), console=err_console, disable=quiet,
                      transient=True) as progress:
            progress.add_task("simulating before and after", total=None)
            data = whatif(cluster, added, cfg, regs.scheduling, regs.admission_checks,
                          now=instant, assume=assume, seed=seed,
                          names=(" ".join(str(f) for f in filename),
                                 " ".join(str(a) for a in add)))
    if output != OutputFormat.table:
        print_data(data, output)
        return
    render(Console(), data)


def _when(outcome: dict[str, Any] | None) -> str:
    if outcome is None:
        return "-"
    if outcome["startSeconds"] is None:
        return "never"
    return f"{outcome['startSeconds']:g}s"


def render(console: Console, data: dict[str, Any]) -> None:
    """The whatif answer as kubectl-style tables."""
    added = data["added"]
    verdict = {None: "no Kueue queue", True: "yes", False: "no"}[added["admitted"]]
    start = "never (some pods find no place)" if added["startSeconds"] is None \
        else f"+{added['startSeconds']:g}s ({added['startTime']})"
    console.print(f"at {data['now']}: admitted: {verdict}; starts: {start}", highlight=False)
    for w in added["workloads"]:
        flavors = "; ".join(f"{ps}: " + ", ".join(f"{r}={f}" for r, f in fl.items())
                            for ps, fl in w["flavors"].items())
        console.print(f"  {w['name']}: {w['state']} ({w['reason']}) in {w['clusterQueue'] or '-'}"
                      + (f" on {flavors}" if flavors else ""), highlight=False)
    for p in data["preempts"]["workloads"]:
        console.print(f"  preempts workload {p['workload']} ({p['reason']})", highlight=False)
    for p in data["preempts"]["pods"]:
        console.print(f"  preempts pod {p['pod']} on {p['node']}", highlight=False)
    table = Table(title="pods, before and after")
    for col in ("pod", "node before", "start before", "node after", "start after"):
        table.add_column(col, no_wrap=True)
    for row in data["pods"]:
        b, a = row["before"], row["after"]
        table.add_row(row["pod"] + (" (added)" if row["added"] else ""),
                      (b or {}).get("node") or "-", _when(b), (a or {}).get("node") or "-",
                      _when(a))
    console.print(table)
