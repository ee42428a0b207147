"""``kubeberth experiment``: policy comparisons, one command each.

``fragmentation`` is the FGD paper's: the grid (traces × policies × seeds) runs on a local
process pool, one run per task, or on a Ray cluster with ``--ray-address`` (extra
``kubeberth[ray]``); runs already in the output folder are reused, so an interrupted grid
resumes. Results: ``fragmentation.csv`` (tidy, one row per run and whole percent of arrived GPU
demand) and ``fragmentation.html``. Contract: docs/gpu.md. ``gangs`` compares native gangs,
Coscheduling and no gang on an openb trace's multi-GPU jobs (``gangs.csv``, one row a mode and
seed; docs/gangs.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kubeberth.api.errors import InputError
from kubeberth.cli.common import OldOutOpt, OutputOpt, out_dir_option

app = typer.Typer(no_args_is_help=True, help="Experiments that compare scheduling policies.")
RESULTS_DIR = Path("results")


def _ray_executor(address: str) -> Any:
    """Runs on the Ray cluster at ``address`` (``local`` starts one in this process)."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray-address needs Ray, which is not installed", field="--ray-address",
                         expected="pip install 'kubeberth[ray]', or leave --ray-address out to "
                         "use the local process pool") from None
    from kubeberth.sim.fragmentation import RunSpec, run_one

    def execute(todo: list[RunSpec],
                done: Callable[[RunSpec, list[dict[str, Any]]], None]) -> None:
        ray.init(address=None if address == "local" else address, ignore_reinit_error=True,
                 include_dashboard=False, log_to_driver=False)
        remote = ray.remote(run_one)
        refs = {remote.remote(spec): spec for spec in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                done(refs[ref], ray.get(ref))

    return execute


@app.command()
def fragmentation(
    trace: Annotated[list[str] | None, typer.Option(
        "--trace", help="openb trace name (default, cpu050, gpushare40, gpuspec33, multigpu20, "
                        "...) or an openb pod CSV; repeat for several.")] = None,
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", help="Random, DotProd, GpuClustering, GpuPacking, BestFit or FGD; repeat for "
                         "several (default: all six).")] = None,
    seed: Annotated[list[int] | None, typer.Option(
        "--seed", help="Seed of a run (shuffle, clones and node ranks); repeat "
                        "(default: 42).")] = None,
    tune: Annotated[float, typer.Option(
        help="Arrived GPU demand at the end, as a multiple of the cluster's GPUs.")] = 1.3,
    popularity: Annotated[int, typer.Option(
        help="Target workload of FGD and of the fragmentation metric: the trace's most popular "
             "pod types making this % of its pods (100: all types; the paper's artifact: 95).")
    ] = 100,
    out_dir: Annotated[Path | None, out_dir_option(RESULTS_DIR)] = None,
    output: OutputOpt = None,
    old_out: OldOutOpt = None,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", help="Worker processes (default: the CPU count).")] = 0,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="Run the grid on this Ray cluster ('local' starts one).")] = None,
) -> None:
    """Run the fragmentation experiment grid and write a tidy CSV and an HTML report."""
    from kubeberth.cli.common import (
        OutputFormat,
        err_console,
        output_and_folder,
        print_data,
        user_errors,
    )
    from kubeberth.cli.main import console
    from kubeberth.report.fragmentation_html import REPORT_FILE, render
    from kubeberth.sim.fragmentation import (
        POLICIES,
        RunSpec,
        check_policy,
        check_trace,
        local_pool,
        read_results,
        run_grid,
    )

    fmt, out = output_and_folder(output, out_dir, old_out, RESULTS_DIR)
    with user_errors():
        traces = [check_trace(t) for t in (trace or ["default"])]
        policies = [check_policy(p) for p in (policy or list(POLICIES))]
        seeds = seed or [42]
        if not 0 < tune <= 10:
            raise InputError(f"--tune {tune} is out of range", field="--tune",
                             expected="a multiple of the cluster's GPU capacity in (0, 10]")
        if not 0 < popularity <= 100:
            raise InputError(f"--popularity {popularity} is out of range", field="--popularity",
                             expected="a percentage from 1 to 100")
        specs = [RunSpec(p, t, s, tune, popularity) for t in traces for p in policies
                 for s in seeds]
        if ray_address:
            execute = _ray_executor(ray_address)
        else:
            execute = local_pool(jobs if jobs > 0 else (os.cpu_count() or 1))

        def progress(spec: RunSpec, reused: bool) -> None:
            what = "reused" if reused else "done"
            err_console.print(f"{what}: {spec.trace_label} {spec.policy} seed {spec.seed}",
                              highlight=False)

        csv_path = run_grid(specs, out, execute, progress)
        rows = read_results(csv_path)
        html_path = render(rows, out / REPORT_FILE)
    if fmt != OutputFormat.table:
        print_data(rows, fmt)
        return
    console.print(f"wrote {csv_path} and {html_path}")


@app.command()
def gangs(
    trace: Annotated[str, typer.Option(
        "--trace", help="openb trace name (multigpu20/30/40/50 stress multi-GPU jobs) or an "
                        "openb pod CSV.")] = "multigpu50",
    mode: Annotated[list[str] | None, typer.Option(
        "--mode", help="native, coscheduling or none; repeat for several (default: all "
                       "three).")] = None,
    seed: Annotated[list[int] | None, typer.Option(
        "--seed", help="Seed of a run (node sample, pod order, run times of added pods); "
                       "repeat (default: 42).")] = None,
    load: Annotated[float, typer.Option(
        help="Offered GPU demand as a multiple of the sampled nodes' GPUs (above 1 "
             "queues).")] = 1.2,
    nodes: Annotated[int, typer.Option(help="GPU nodes sampled from the openb cluster.")] = 64,
    pods: Annotated[int, typer.Option(
        help="Trace rows replayed (each multi-GPU row becomes a job of 1-GPU pods).")] = 2000,
    out_dir: Annotated[Path | None, out_dir_option(RESULTS_DIR)] = None,
    output: OutputOpt = None,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", help="Worker processes (default: the CPU count).")] = 0,
) -> None:
    """Compare native gangs, Coscheduling and no gang on an openb trace's multi-GPU jobs."""
    from kubeberth.cli.common import OutputFormat, output_and_folder, print_data, user_errors
    from kubeberth.cli.main import console
    from kubeberth.sim.fragmentation import check_trace
    from kubeberth.sim.gangs import MODES, GangRun, check_mode, run_all, write_csv

    fmt, out = output_and_folder(output, out_dir, None, RESULTS_DIR)
    with user_errors():
        checked = check_trace(trace)
        modes = [check_mode(m) for m in (mode or list(MODES))]
        if not 0 < load <= 10:
            raise InputError(f"--load {load} is out of range", field="--load",
                             expected="a multiple of the sampled GPUs in (0, 10]")
        for flag, value in (("--nodes", nodes), ("--pods", pods)):
            if value < 1:
                raise InputError(f"{flag} {value}", field=flag, expected="a positive integer")
        runs = [GangRun(m, checked, s, load, nodes, pods) for s in (seed or [42]) for m in modes]
        with console.status(f"running {len(runs)} gang runs"):
            rows = run_all(runs, jobs if jobs > 0 else (os.cpu_count() or 1))
        path = write_csv(rows, out)
    if fmt != OutputFormat.table:
        print_data(rows, fmt)
        return
    table = Table(title=f"gang experiment: {trace}, load {load:g}, {nodes} nodes, {pods} rows")
    shown = (("mode", "mode"), ("seed", "seed"), ("jobs", "jobs"), ("jobs_complete", "done"),
             ("job_wait_p50", "wait p50 s"), ("job_wait_p90", "p90"), ("job_wait_p99", "p99"),
             ("gpu_alloc_mean_pct", "GPU %"), ("stranded_gpu_hours", "stranded GPU-h"),
             ("unscheduled_pods", "never bound"))
    for column, title in shown:
        table.add_column(title, justify="left" if column == "mode" else "right")
    for r in rows:
        table.add_row(*(_short(r[c]) for c, _ in shown))
    console.print(table)
    console.print(f"wrote {path}")


def _short(value: object) -> str:
    """A table cell: numbers to one decimal (the CSV keeps them whole)."""
    if isinstance(value, str) and "." in value:
        try:
            return f"{float(value):.1f}"
        except ValueError:
            return value
    return str(value)
