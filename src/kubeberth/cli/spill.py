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

from kubeberth.api.errors import InputError
from kubeberth.cli.common import user_errors
from kubeberth.config.spill import SpillConfig, load_spill_config, validate

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
    from kubeberth.plugins.spill.prometheus import PrometheusSignal
    from kubeberth.plugins.spill.promql import free_gpu_query

    with user_errors():
        cfg = load_spill_config(config)
        if prometheus is not None and not prometheus.startswith(("http://", "https://")):
            raise InputError(f"{prometheus!r} is not an http(s) URL", field="--prometheus",
                             expected="a Prometheus base URL such as http://prometheus:9090")
    text = cfg.controller.signal.query or free_gpu_query([cfg.virtual_node.name],
                                                         cfg.controller.exclude_pods)
    if prometheus is None:
        sys.stdout.write(text + "\n")
        return
    value, fault = PrometheusSignal(prometheus, text,
                                    cfg.controller.signal.timeout_seconds).query_once()
    sys.stdout.write(json.dumps({"query": text, "value": value, "fault": fault}, indent=2)
                     + "\n")
    if fault:
        raise typer.Exit(1)


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


@spill_app.command("sweep")
def sweep(
    cluster: Annotated[list[Path], typer.Option("--cluster", help="Nodes (as simulate).")],
    workload: Annotated[list[Path], typer.Option("--workload", "-w",
                                                 help="Pods and owners (as simulate).")],
    config: SpillConfigOpt = None,
    thresholds: Annotated[str | None, typer.Option(
        "--thresholds", help="Thresholds to compare (default: the config's).")] = None,
    windows: Annotated[str | None, typer.Option(
        "--windows", help="Averaging windows (s) to compare.")] = None,
    stabilizations: Annotated[str, typer.Option(
        "--stabilizations", help="Stabilization durations (s) to compare.")] = "0,300,900",
    until: Annotated[float | None, typer.Option(help="Stop each run at this time (s).")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table",
) -> None:
    """Run the same workload with each combination of knobs and compare thrash (taint flips)
    with responsiveness (pod waits), spill GPU-hours and cost."""
    from rich.table import Table

    from kubeberth.cli.main import console
    from kubeberth.config.scheduler import load_scheduler_config
    from kubeberth.plugins.scheduling import in_tree_registry
    from kubeberth.sim.engine import Simulation
    from kubeberth.sim.spill import SpillHost, sweep_grid, sweep_row
    from kubeberth.sim.traces import load_workload

    with user_errors():
        if output not in ("table", "json"):
            raise InputError(f"unknown output {output!r}", field="--output",
                             expected="table or json")
        cfg = load_spill_config(config)
        c = cfg.controller
        grid = sweep_grid(
            cfg,
            _floats(thresholds, "--thresholds") if thresholds else [c.threshold],
            _floats(windows, "--windows") if windows else [c.window_seconds],
            _floats(stabilizations, "--stabilizations"))
        sched = load_scheduler_config(None)
        rows = []
        for variant in grid:
            wl = load_workload(cluster, workload)  # fresh objects: a run writes into its pods
            sim = Simulation(wl, sched, in_tree_registry(), until=until)
            host = SpillHost(variant)
            host.attach(sim)
            rows.append(sweep_row(variant, sim.run(), host))
    if output == "json":
        sys.stdout.write(json.dumps({"runs": rows}, indent=2) + "\n")
        return
    table = Table(title="spill knobs: thrash vs responsiveness", caption=_SWEEP_CAPTION,
                  box=None, padding=(0, 1), pad_edge=False)
    for header in _SWEEP_HEADERS:
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()))
    console.print(table)
