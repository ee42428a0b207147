"""``kubeberth descheduler``: the live descheduler controller as a command.

It loads and validates the DeschedulerPolicy before connecting (a half-read or invalid policy
is never acted on: exit 2 with file, line and field), connects to the API named by
``--kubeconfig``, serves ``/healthz``, ``/readyz`` and ``/metrics`` and runs a descheduling pass
every ``--descheduling-interval`` until SIGINT or SIGTERM (or once, with ``--once``). The
controller is :mod:`kubeberth.live.descheduler`; ``kubeberth deschedule`` prints the same
pass over manifest files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kubeberth.api.errors import InputError
from kubeberth.cli.live_common import (
    DryRunOption,
    KubeconfigOption,
    LeaderElectOption,
    LeaseDurationOption,
    LeaseNameOption,
    LeaseNamespaceOption,
    MetricsAddressOption,
    MetricsPortOption,
    connect,
    elector,
    fail,
    run_controller,
)
from kubeberth.descheduling.args import duration
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.descheduling.registry import build_descheduler


def descheduler_command(
    policy: Annotated[Path, typer.Option(
        "--policy", help="DeschedulerPolicy (descheduler/v1alpha2).")],
    kubeconfig: KubeconfigOption = None,
    dry_run: DryRunOption = False,
    interval: Annotated[str, typer.Option(
        "--descheduling-interval", help="Time between passes, a Go duration such as 5m "
                                        "(0: one pass, then exit, as upstream).")] = "5m",
    once: Annotated[bool, typer.Option("--once", help="Run one pass, then exit.")] = False,
    metrics_port: MetricsPortOption = 10258,
    metrics_address: MetricsAddressOption = "127.0.0.1",
    leader_elect: LeaderElectOption = True,
    lease_name: LeaseNameOption = "kubeberth-descheduler",
    lease_namespace: LeaseNamespaceOption = "kube-system",
    lease_duration: LeaseDurationOption = 15.0,
) -> None:
    """Evict pods as the DeschedulerPolicy says, every interval, through the eviction API
    (the same passes `kubeberth deschedule` prints)."""
    from kubeberth.live.descheduler import LiveDescheduler

    try:
        seconds = duration({"--descheduling-interval": interval}, "--descheduling-interval")
        if seconds is None or seconds < 0:
            raise InputError(f"{interval!r} is negative", field="--descheduling-interval",
                             expected="a duration of 0 or more, such as 5m")
        pol = load_descheduler_policy(policy)
        build_descheduler(pol)  # every plugin and arg checked before connecting
        client = connect(kubeconfig)
        leader = elector(client, leader_elect, lease_name, lease_namespace, lease_duration)
        controller = LiveDescheduler(pol, client, interval=seconds, once=once,
                                     dry_run=dry_run, elector=leader)
    except InputError as err:
        raise fail(err) from None
    every = "one pass" if once or seconds == 0 else f"a pass every {interval}"
    run_controller("descheduler", controller, controller.metrics.exposition,
                   address=metrics_address, port=metrics_port,
                   banner=f"{len(pol.profiles)} profile(s), {every}", dry_run=dry_run)
