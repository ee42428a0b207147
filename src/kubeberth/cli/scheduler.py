"""``kubeberth scheduler``: the live scheduler controller as a command.

It loads the KubeSchedulerConfiguration (bad input: exit 2 with file, line and field), connects
to the API named by ``--kubeconfig`` (default: in-cluster config, then ``$KUBECONFIG`` or
``~/.kube/config``), serves ``/healthz``, ``/readyz`` and ``/metrics``, logs every decision
and runs until SIGINT or SIGTERM. The controller is :mod:`kubeberth.live.scheduler`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kubeberth.api.errors import InputError
from kubeberth.cli.common import scheduling_registry
from kubeberth.cli.live_common import LiveOptions, fail, live_command, run_controller
from kubeberth.scheduling.config.loader import load_scheduler_config


@live_command(metrics_port=10259, lease_name="kubeberth-scheduler")
def scheduler_command(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="KubeSchedulerConfiguration (default: upstream's default "
                               "profile).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice.")] = 0,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Out-of-tree plugin to register, as module:attr (repeatable).")] = None,
    bind_workers: Annotated[int, typer.Option(
        "--bind-workers", help="Threads that send bindings while the control loop schedules "
                               "the next pod (0: bind on the control loop).")] = 16,
    *, live: LiveOptions,
) -> None:
    """Schedule the pods whose schedulerName matches a profile, binding them through the API
    with the same plugins as `simulate` and `explain`."""
    from kubeberth.live.scheduler import LiveScheduler

    try:
        if bind_workers < 0:
            raise InputError(f"--bind-workers {bind_workers} is negative",
                             field="--bind-workers",
                             expected="0 (bind on the control loop) or more threads")
        cfg = load_scheduler_config(config)
        client = live.connect()
        try:
            controller = LiveScheduler(cfg, scheduling_registry(plugin), client, seed=seed,
                                       dry_run=live.dry_run, elector=live.elector(client),
                                       bind_workers=bind_workers)
        except InputError as err:
            if err.source is None and cfg.source:
                err = err.at(source=cfg.source,
                             line=cfg.locate(err.field) if err.field else None)
            raise err from None
    except InputError as err:
        raise fail(err) from None
    run_controller(controller, live, banner=f"profiles {', '.join(controller.sched.frameworks)}")
