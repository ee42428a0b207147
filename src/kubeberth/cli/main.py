"""The ``kubeberth`` command: simulate, explain, deschedule, plugins.

Every command turns bad input into one paragraph on stderr (file, line or field, what was
expected) and exit code 2, never a traceback (``cli/common.py``: ``user_errors``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kubeberth import __version__
from kubeberth.api.durations import parse_duration
from kubeberth.api.errors import InputError
from kubeberth.cli.admission import admission_command
from kubeberth.cli.admit import admit_command, unmodelled_notes
from kubeberth.cli.common import (
    OldOutOpt,
    OutputFormat,
    OutputOpt,
    err_console,
    out_dir_option,
    output_and_folder,
    print_data,
    read_not_modelled,
    refuse_policies,
    registries,
    scheduling_registry,
    seconds,
    user_errors,
)
from kubeberth.cli.deschedule import deschedule
from kubeberth.cli.descheduler_live import descheduler_command
from kubeberth.cli.extender import extender_command
from kubeberth.cli.manifests import manifests_command
from kubeberth.cli.report import report_app
from kubeberth.cli.scheduler import scheduler_command
from kubeberth.cli.serve import serve
from kubeberth.cli.snapshot import snapshot_command
from kubeberth.cli.spill import SpillConfigOpt, spill_app, spill_config
from kubeberth.cli.spill_controller import spill_controller_command
from kubeberth.cli.up import up_command
from kubeberth.cli.whatif import whatif_command
from kubeberth.config.manifests import check_priority_class_names, load_manifests
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import SchedulerConfiguration

app = typer.Typer(add_completion=False, no_args_is_help=False,
                  help="Decide where GPU work runs on Kubernetes: simulate and explain "
                       "kube-scheduler policies on real cluster traces.")
console = Console()

PluginOpt = Annotated[list[str] | None, typer.Option(
    "--plugin", help="Out-of-tree plugin to register, as module:attr (repeatable).")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for every random choice.")]
RUN_DIR = Path("out")


@app.command()
def simulate(
    cluster: Annotated[list[Path] | None, typer.Option(
        "--cluster", help="Nodes: an openb node CSV or Node manifests (default: the bundled "
                          "1,523-node Alibaba openb cluster).")] = None,
    workload: Annotated[list[Path] | None, typer.Option(
        "--workload", "-w", help="Pods: an openb pod CSV or Pod manifests with "
                                 "kubeberth.io/arrival-seconds and duration-seconds annotations "
                                 "(default: the bundled 8,152-pod openb default trace).")] = None,
    config: ConfigOpt = None,
    seed: SeedOpt = 0,
    out_dir: Annotated[Path | None, out_dir_option(RUN_DIR)] = None,
    output: OutputOpt = None,
    old_out: OldOutOpt = None,
    bind_latency: Annotated[str | None, typer.Option(
        metavar="DURATION", help="Time between a scheduling decision and the binding "
                                 "(default 0s).")] = None,
    sample_interval: Annotated[str | None, typer.Option(
        metavar="DURATION",
        help="Time between time-series samples (default: 1/2000 of the trace).")] = None,
    plugin: PluginOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    spill_cfg: SpillConfigOpt = None,
    spill: Annotated[bool, typer.Option(
        "--spill", help="Add the virtual-kubelet spill node and its taint controller "
                        "(defaults, or --spill-config).")] = False,
    spill_threshold: Annotated[float | None, typer.Option(help="Free-GPU threshold.")] = None,
    spill_window: Annotated[str | None, typer.Option(
        metavar="DURATION", help="Moving-average window.")] = None,
    spill_stabilization: Annotated[str | None, typer.Option(
        metavar="DURATION",
        help="How long the average must stay above/below before a flip.")] = None,
    spill_interval: Annotated[str | None, typer.Option(
        metavar="DURATION", help="Time between controller ticks.")] = None,
    until: Annotated[str | None, typer.Option(
        metavar="DURATION", help="Stop the run at this simulated time.")] = None,
    deschedule_policy: Annotated[Path | None, typer.Option(
        "--deschedule-policy", help="DeschedulerPolicy (descheduler/v1alpha2) to run every "
                                    "--descheduling-interval.")] = None,
    descheduling_interval: Annotated[str, typer.Option(
        metavar="DURATION",
        help="Simulated time between descheduling passes.")] = "5m",
) -> None:
    """Replay a cluster and workload trace through the scheduler; write out/ (JSON, CSV, HTML)."""
    from kubeberth.report.output import queue_table, summary_table, write_outputs, written_files
    from kubeberth.report.sections import write_run_report
    from kubeberth.sim.engine import Simulation
    from kubeberth.sim.traces import load_workload

    cfg: SchedulerConfiguration | None = None
    fmt, out = output_and_folder(output, out_dir, old_out, RUN_DIR)
    with user_errors():
        cfg = load_scheduler_config(config)
        latency = seconds(bind_latency, "--bind-latency") or 0.0
        every = seconds(sample_interval, "--sample-interval")
        stop = seconds(until, "--until")
        interval = parse_duration(descheduling_interval, "--descheduling-interval")
    with user_errors(cfg):
        regs = registries(plugin)
        wl = load_workload(cluster, workload, seed=seed)
        refuse_policies(wl.extras, "simulate", reads=("Configuration",))
        spill_setup = spill_config(spill_cfg, spill, spill_threshold,
                                   seconds(spill_window, "--spill-window"),
                                   seconds(spill_stabilization, "--spill-stabilization"),
                                   seconds(spill_interval, "--spill-interval"))
        desched = None
        if deschedule_policy is not None:
            from kubeberth.descheduling.policy import load_descheduler_policy
            from kubeberth.sim.descheduling import SimDescheduler

            if interval <= 0:
                raise InputError(f"--descheduling-interval {descheduling_interval}",
                                 field="--descheduling-interval",
                                 expected="a positive duration such as 5m")
            desched = SimDescheduler(load_descheduler_policy(deschedule_policy),
                                     regs.descheduling)
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} pods"), TimeElapsedColumn(),
                      console=err_console, disable=quiet, transient=True) as progress:
            task = progress.add_task("replaying", total=len(wl.pods))

            def tick(done: int, total: int) -> None:
                progress.update(task, completed=done)

            sim = Simulation(wl, cfg, regs.scheduling, seed=seed, bind_latency=latency,
                             sample_interval=every, progress=tick, until=stop,
                             descheduler=desched, deschedule_interval=interval,
                             admission_checks=regs.admission_checks)
            if desched is not None:
                desched.attach(sim)
            if spill_setup is not None:
                from kubeberth.live.prometheus import spill_signal
                from kubeberth.sim.spill import SpillHost

                SpillHost(spill_setup, spill_signal(spill_setup)).attach(sim)
            result = sim.run()
    if sim.kueue is not None:
        for note in unmodelled_notes(sim.kueue.state.checks):
            err_console.print(note, highlight=False, soft_wrap=True)
    meta: dict[str, Any] = {
        "workload": wl.name, "nodes": len(wl.nodes), "seed": seed,
        "config": str(config) if config else "default",
        "kubeberth": __version__,
    }
    if not_modelled := read_not_modelled(wl.extras):
        meta["readNotModelled"] = not_modelled
    if desched is not None:
        log = desched.log
        meta["descheduler"] = {
            "policy": str(deschedule_policy), "intervalSeconds": interval,
            "passes": log.passes, "skippedCycles": log.skipped_cycles,
            "requested": log.requested, "refusedByPolicy": log.refused_by_policy,
            "requestedByPlugin": dict(sorted(log.by_plugin.items())),
        }
    data = write_outputs(result, out, meta)
    with user_errors():
        report = write_run_report(out)
    if fmt != OutputFormat.table:
        print_data(data, fmt)
        return
    console.print(summary_table(data))
    if (queues := queue_table(data)) is not None:
        console.print(queues)
    console.print(f"wrote {out}/{written_files(data)}, {report.name}")


@app.command()
def explain(
    filename: Annotated[list[Path], typer.Option(
        "--filename", "-f", help="Manifests: nodes, bound pods (spec.nodeName) and pending "
                                 "pods; files, directories or - for stdin (repeatable).")],
    config: ConfigOpt = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
    seed: SeedOpt = 0,
    plugin: PluginOpt = None,
    volcano_config: Annotated[Path | None, typer.Option(
        "--volcano-config", help="volcano-scheduler.conf (or a ConfigMap holding it) for pods "
                                 "whose schedulerName is volcano (default: Volcano's).")] = None,
) -> None:
    """Attempt each pending pod in queue order and show every Filter verdict and Score; pods
    of schedulerName volcano go through Volcano sessions (docs/volcano.md)."""
    from kubeberth.scheduling.volcano.conf import load_volcano_conf
    from kubeberth.sim.explain import explain as run_explain

    cfg: SchedulerConfiguration | None = None
    with user_errors():
        cfg = load_scheduler_config(config)
        vconf = load_volcano_conf(volcano_config)
        manifests = load_manifests(filename, seed=seed)
        refuse_policies(manifests, "explain")
        check_priority_class_names(manifests)
    with user_errors(cfg):
        registry = scheduling_registry(plugin)
        data = run_explain(manifests, cfg, registry, seed=seed, volcano_conf=vconf)
    if not_modelled := read_not_modelled(manifests):
        data["readNotModelled"] = not_modelled
    if output != OutputFormat.table:
        print_data(data, output)
    else:
        from kubeberth.report.explain_table import render_explain

        render_explain(console, data)


@app.command("plugins")
def list_plugins(
    plugin: PluginOpt = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
) -> None:
    """List every family's registered plugins (scheduling, descheduling, admission checks):
    in-tree, installed entry points and --plugin, with the extension points each implements."""
    from kubeberth.report.explain_table import plugin_listing, plugin_table

    with user_errors():
        regs = registries(plugin)
        listing = plugin_listing(regs.scheduling, regs.descheduling, regs.admission_checks)
    if output != OutputFormat.table:
        print_data(listing, output)
    else:
        console.print(plugin_table(listing))


app.command("deschedule")(deschedule)
app.command("admit")(admit_command)
app.add_typer(spill_app, name="spill")
app.command("extender")(extender_command)
app.add_typer(report_app, name="report")
def _register_experiments() -> None:
    from kubeberth.cli.experiment import app as experiment_app

    app.add_typer(experiment_app, name="experiment")


_register_experiments()


# The upstream releases whose behaviour kubeberth follows (docs/versions.md lists the
# deviations per release); "release" empty where kubeberth follows an API, not a pinned release.
UPSTREAM = (
    {"project": "kube-scheduler", "release": "v1.37.2",
     "apis": ["kubescheduler.config.k8s.io/v1", "scheduling.k8s.io/v1beta1",
              "scheduling.k8s.io/v1alpha2"]},
    {"project": "Kueue", "release": "v0.19.2",
     "apis": ["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1",
              "config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1"]},
    {"project": "descheduler", "release": "v0.36.0", "apis": ["descheduler/v1alpha2"]},
    {"project": "scheduler-plugins", "release": "",
     "apis": ["scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1"]},
    {"project": "Volcano", "release": "",
     "apis": ["batch.volcano.sh/v1alpha1", "scheduling.volcano.sh/v1beta1"]},
)


@app.command()
def version(
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
) -> None:
    """Print the kubeberth version and the upstream releases whose behaviour it follows."""
    if output != OutputFormat.table:
        print_data({"kubeberth": __version__, "follows": list(UPSTREAM)}, output)
        return
    console.print(__version__)
    for up in UPSTREAM:
        release = up["release"] or "no pinned release"
        console.print(f"follows {up['project']} {release} ({', '.join(up['apis'])})",
                      highlight=False, soft_wrap=True)
    console.print("deviations per release: docs/versions.md", highlight=False, soft_wrap=True)


app.command("serve")(serve)
app.command("scheduler")(scheduler_command)
app.command("manifests")(manifests_command)
app.command("admission")(admission_command)
app.command("descheduler")(descheduler_command)
app.command("spill-controller")(spill_controller_command)
app.command("up")(up_command)
app.command("snapshot")(snapshot_command)
app.command("whatif")(whatif_command)


def main() -> None:
    app()
