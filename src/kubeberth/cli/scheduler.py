"""``kubeberth scheduler``: the live scheduler controller as a command.

It loads the KubeSchedulerConfiguration (bad input: exit 2 with file, line and field), connects
to the API named by ``--kubeconfig`` (default: in-cluster config, then ``$KUBECONFIG`` or
``~/.kube/config``), serves ``/healthz``, ``/readyz`` and ``/metrics``, logs every decision
and runs until SIGINT or SIGTERM. The controller is :mod:`kubeberth.live.scheduler`.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
import yaml
from rich.console import Console

from kubeberth.api.errors import InputError
from kubeberth.config.scheduler import load_scheduler_config
from kubeberth.framework.registry import Registry
from kubeberth.plugins.scheduling import in_tree_registry

_err = Console(stderr=True)


def _registry(plugins: list[str] | None) -> Registry:
    reg = in_tree_registry()
    reg.load_entry_points()
    for spec in plugins or []:
        reg.load_import_path(spec)
    return reg


def scheduler_command(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="KubeSchedulerConfiguration (default: upstream's default "
                               "profile).")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubeconfig of the cluster (default: in-cluster config, then "
                             "$KUBECONFIG or ~/.kube/config).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Log decisions (bindings, preemptions) without writing them.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice.")] = 0,
    metrics_port: Annotated[int, typer.Option(
        "--metrics-port", help="Port of /healthz, /readyz and /metrics (0: any free "
                               "port).")] = 10259,
    metrics_address: Annotated[str, typer.Option(
        "--metrics-address", help="Address of /healthz, /readyz and /metrics.")] = "127.0.0.1",
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Out-of-tree plugin to register, as module:attr (repeatable).")] = None,
    leader_elect: Annotated[bool, typer.Option(
        "--leader-elect/--no-leader-elect", help="Schedule only while holding the leader "
                                                 "Lease.")] = True,
    lease_name: Annotated[str, typer.Option(
        "--leader-elect-resource-name", help="Name of the leader Lease.")] = "kubeberth-scheduler",
    lease_namespace: Annotated[str, typer.Option(
        "--leader-elect-resource-namespace",
        help="Namespace of the leader Lease.")] = "kube-system",
    lease_duration: Annotated[float, typer.Option(
        "--leader-elect-lease-duration", help="Seconds a standby waits for an unrenewed Lease "
                                              "before taking over.")] = 15.0,
) -> None:
    """Schedule the pods whose schedulerName matches a profile, binding them through the API
    with the same plugins as `simulate` and `explain`."""
    from lightkube import Client, KubeConfig
    from lightkube.core.exceptions import ConfigError

    from kubeberth.live.leader import LeaderElector
    from kubeberth.live.metrics import HealthServer
    from kubeberth.live.scheduler import LiveScheduler

    try:
        cfg = load_scheduler_config(config)
        try:
            kube = (KubeConfig.from_file(str(kubeconfig)) if kubeconfig is not None
                    else KubeConfig.from_env())
            client = Client(config=kube)
        except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError,
                yaml.YAMLError) as err:
            # A malformed kubeconfig surfaces from lightkube as whatever lookup failed.
            raise InputError(f"cannot read the kubeconfig: {err}",
                             field="--kubeconfig",
                             expected="a kubeconfig file, or in-cluster credentials") from None
        if lease_duration <= 0:
            raise InputError(f"--leader-elect-lease-duration {lease_duration} is not positive",
                             field="--leader-elect-lease-duration",
                             expected="a number of seconds above 0")
        elector = None
        if leader_elect:
            identity = f"{socket.gethostname()}_{uuid.uuid4()}"
            elector = LeaderElector(client, lease_name, lease_namespace, identity,
                                    lease_duration=lease_duration,
                                    renew_deadline=lease_duration * 2 / 3,
                                    retry_period=lease_duration / 7.5)
        try:
            controller = LiveScheduler(cfg, _registry(plugin), client, seed=seed,
                                       dry_run=dry_run, elector=elector)
        except InputError as err:
            if err.source is None and cfg.source:
                err = err.at(source=cfg.source,
                             line=cfg.locate(err.field) if err.field else None)
            raise err from None
    except InputError as err:
        _err.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        health = HealthServer(metrics_address, metrics_port, healthy=controller.healthy,
                              ready=controller.ready,
                              metrics=controller.metrics.exposition).start()
    except OSError as err:
        _err.print(f"[bold red]error:[/] cannot listen on {metrics_address}:{metrics_port}: "
                   f"{err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        controller.stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    mode = " (dry run: nothing is written)" if dry_run else ""
    print(f"kubeberth scheduler{mode}: profiles "
          f"{', '.join(controller.sched.frameworks)}; metrics on "
          f"http://{metrics_address}:{health.port}/metrics", flush=True)
    worker = threading.Thread(target=controller.run, name="scheduler", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(timeout=0.5)
    finally:
        controller.stop.set()
        worker.join(timeout=5)
        health.stop()
    if controller.lost_leadership:
        print("kubeberth scheduler stopped: leader election lost", flush=True)
        raise typer.Exit(1)
    print("kubeberth scheduler stopped", flush=True)
