"""``kubeberth spill``: the production PromQL for the spill controller, optionally evaluated
against a live Prometheus, and the ``simulate`` options that add the spill node.

The query text is the contract between the simulated controller and the live one, so it is
printed from the same SpillConfig the simulator reads; ``--prometheus`` runs it once and prints
the free-GPU value, or the fault the controller would report (exit code 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from kubeberth.api.durations import parse_duration
from kubeberth.api.errors import InputError
from kubeberth.cli.common import OutputFormat, print_data, seconds, user_errors
from kubeberth.descheduling.policy import DeschedulerPolicy
from kubeberth.spill.config import SpillConfig, load_spill_config, validate

spill_app = typer.Typer(add_completion=False, no_args_is_help=True,
                        help="Spill capacity: the virtual-kubelet node's taint controller.")

SpillConfigOpt = Annotated[Path | None, typer.Option(
    "--spill-config", help="SpillConfig (kubeberth.io/v1alpha1): the virtual-kubelet node and "
                           "its taint controller.")]


def spill_config(path: Path | None, enable: bool, threshold: float | None,
                 window: float | None, stabilization: float | None,
                 interval: float | None) -> SpillConfig | None:
    """The SpillConfig for ``simulate``: the file's (or the defaults) with flag overrides;
    None when neither the file nor any spill flag was given."""
    overrides = {"threshold": threshold, "window_seconds": window,
                 "stabilization_seconds": stabilization, "interval_seconds": interval}
    given = {k: v for k, v in overrides.items() if v is not None}
    if path is None and not enable and not given:
        return None
    cfg = load_spill_config(path)
    if given:
        controller = msgspec.structs.replace(cfg.controller, **given)
        cfg = msgspec.structs.replace(cfg, controller=controller)
        try:
            validate(cfg)
        except InputError as err:
            flag = _FLAGS.get(err.field or "")
            if flag is None:
                raise
            raise InputError(err.message, field=flag, expected=err.expected) from None
    return cfg


# SpillConfig fields the simulate flags override, for errors that name the flag.
_FLAGS = {"controller.threshold": "--spill-threshold",
          "controller.windowSeconds": "--spill-window",
          "controller.stabilizationSeconds": "--spill-stabilization",
          "controller.intervalSeconds": "--spill-interval"}


@spill_app.command("query")
def query(
    config: SpillConfigOpt = None,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Evaluate the query once against this Prometheus base URL.")] = None,
) -> None:
    """Print the free-GPU PromQL query; with --prometheus, also its current value as JSON."""
    from kubeberth.live.prometheus import PrometheusSignal
    from kubeberth.spill.promql import configured_query

    with user_errors():
        cfg = load_spill_config(config)
        if prometheus is not None and not prometheus.startswith(("http://", "https://")):
            raise InputError(f"{prometheus!r} is not an http(s) URL", field="--prometheus",
                             expected="a Prometheus base URL such as http://prometheus:9090")
    text = configured_query(cfg)
    if prometheus is None:
        sys.stdout.write(text + "\n")
        return
    value, fault = PrometheusSignal(prometheus, text,
                                    cfg.controller.signal.timeout_seconds).query_once()
    sys.stdout.write(json.dumps({"query": text, "value": value, "fault": fault}, indent=2)
                     + "\n")
    if fault:
        raise typer.Exit(1)


def _durations(raw: str, option: str) -> list[float]:
    """Comma-separated Go durations (``0,5m,15m``; bare numbers are seconds)."""
    values = [parse_duration(v, option) for v in raw.split(",") if v.strip()]
    if not values:
        raise InputError("no values", field=option, expected="at least one duration")
    return values


def _floats(raw: str, option: str) -> list[float]:
    try:
        values = [float(v) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{raw!r} is not a list of numbers", field=option,
                         expected="comma-separated numbers such as 0,300,900") from None
    if not values:
        raise InputError("no values", field=option, expected="at least one number")
    return values


# Short table headers for the sweep_row keys, in order (the JSON keeps the long names).
_SWEEP_HEADERS = ("thr", "win", "stab", "flips", "taint_s", "spill", "gpu_h", "cost", "wait",
                  "p95", "unsch", "evict")


_SWEEP_CAPTION = ("thr threshold, win window s, stab stabilization s, taint_s seconds tainted, "
                  "spill pods spilled, wait/p95 pod wait s (mean/p95), unsch never scheduled")


def _policy_grid(path: Path | None, ages: str | None, per_node: str | None
                 ) -> list[tuple[dict[str, float | int | None], DeschedulerPolicy | None]]:
    """The DeschedulerPolicy variants to run (one None entry without a policy)."""
    from kubeberth.descheduling.policy import load_descheduler_policy
    from kubeberth.descheduling.registry import build_descheduler
    from kubeberth.sim.descheduling import policy_variant

    if path is None:
        if ages or per_node:
            raise InputError("--min-pod-ages and --evictions-per-node need a policy",
                             field="--deschedule-policy", expected="a DeschedulerPolicy file")
        return [({}, None)]
    policy = load_descheduler_policy(path)
    age_values: list[float | None] = list(_durations(ages, "--min-pod-ages")) if ages else [None]
    limit_values: list[int | None] = [None]
    if per_node:
        limit_values = []
        for v in _floats(per_node, "--evictions-per-node"):
            if v < 1 or v != int(v):
                raise InputError(f"{v:g} evictions per node", field="--evictions-per-node",
                                 expected="whole numbers of at least 1")
            limit_values.append(int(v))
    out: list[tuple[dict[str, float | int | None], DeschedulerPolicy | None]] = []
    for age in age_values:
        for limit in limit_values:
            variant = policy_variant(policy, min_pod_age=age, max_per_node=limit)
            build_descheduler(variant)  # validate before any run starts
            out.append(({"minPodAgeSeconds": age, "maxEvictionsPerNode": limit}, variant))
    return out


@spill_app.command("sweep")
def sweep(
    cluster: Annotated[list[Path], typer.Option("--cluster", help="Nodes (as simulate).")],
    workload: Annotated[list[Path], typer.Option("--workload", "-w",
                                                 help="Pods and owners (as simulate).")],
    config: SpillConfigOpt = None,
    thresholds: Annotated[str | None, typer.Option(
        "--thresholds", help="Thresholds to compare (default: the config's).")] = None,
    windows: Annotated[str | None, typer.Option(
        "--windows", help="Averaging windows to compare (durations, e.g. 2m,5m).")] = None,
    stabilizations: Annotated[str, typer.Option(
        "--stabilizations", help="Stabilization durations to compare.")] = "0,5m,15m",
    until: Annotated[str | None, typer.Option(
        metavar="DURATION", help="Stop each run at this simulated time.")] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
    deschedule_policy: Annotated[Path | None, typer.Option(
        "--deschedule-policy", help="DeschedulerPolicy bringing spilled pods back (as "
                                    "simulate); enables the two knobs below.")] = None,
    min_pod_ages: Annotated[str | None, typer.Option(
        "--min-pod-ages", help="DefaultEvictor minPodAge values to compare (durations).")] = None,
    evictions_per_node: Annotated[str | None, typer.Option(
        "--evictions-per-node", help="maxNoOfPodsToEvictPerNode values to compare.")] = None,
    descheduling_interval: Annotated[str, typer.Option(
        metavar="DURATION", help="Simulated time between descheduling passes.")] = "5m",
) -> None:
    """Run the same workload with each combination of knobs and compare thrash (taint flips)
    with responsiveness (pod waits), spill GPU-hours, cost and evictions. With a
    DeschedulerPolicy, its minPodAge and per-node eviction limit are knobs too."""
    from rich.table import Table

    from kubeberth.cli.main import console
    from kubeberth.live.prometheus import spill_signal
    from kubeberth.scheduling.config.loader import load_scheduler_config
    from kubeberth.scheduling.registry import in_tree_registry
    from kubeberth.sim.descheduling import SimDescheduler
    from kubeberth.sim.engine import Simulation
    from kubeberth.sim.spill import SpillHost, sweep_grid, sweep_row
    from kubeberth.sim.traces import load_workload

    with user_errors():
        stop = seconds(until, "--until")
        interval = parse_duration(descheduling_interval, "--descheduling-interval")
        cfg = load_spill_config(config)
        c = cfg.controller
        grid = sweep_grid(
            cfg,
            _floats(thresholds, "--thresholds") if thresholds else [c.threshold],
            _durations(windows, "--windows") if windows else [c.window_seconds],
            _durations(stabilizations, "--stabilizations"))
        policies = _policy_grid(deschedule_policy, min_pod_ages, evictions_per_node)
        sched = load_scheduler_config(None)
        rows = []
        for variant in grid:
            for knobs, policy in policies:
                wl = load_workload(cluster, workload)  # fresh objects: a run writes into its pods
                desched = SimDescheduler(policy) if policy is not None else None
                sim = Simulation(wl, sched, in_tree_registry(), until=stop, descheduler=desched,
                                 deschedule_interval=interval)
                if desched is not None:
                    desched.attach(sim)
                host = SpillHost(variant, spill_signal(variant))
                host.attach(sim)
                row = sweep_row(variant, sim.run(), host)
                if policy is not None:
                    row.update(knobs)
                rows.append(row)
    if output != OutputFormat.table:
        print_data({"runs": rows}, output)
        return
    table = Table(title="spill knobs: thrash vs responsiveness", caption=_SWEEP_CAPTION,
                  box=None, padding=(0, 1), pad_edge=False)
    headers = _SWEEP_HEADERS + (("age", "per_node") if deschedule_policy else ())
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()))
    console.print(table)
