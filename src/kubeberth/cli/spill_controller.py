"""``kubeberth spill-controller``: the live spill taint controller as a command.

It loads the SpillConfig (bad input: exit 2 with file, line and field), connects to the API
named by ``--kubeconfig``, serves ``/healthz``, ``/readyz`` and ``/metrics`` and ticks the taint
controller every ``controller.intervalSeconds`` until SIGINT or SIGTERM. The signal is the
production PromQL against ``--prometheus`` (or the config's ``signal.url``), else computed from
the API's nodes and pods. The controller is :mod:`kubeberth.live.spill`.
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
from kubeberth.spill.config import load_spill_config


def spill_controller_command(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="SpillConfig (kubeberth.io/v1alpha1; default: the defaults "
                               "of docs/spill.md).")] = None,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Prometheus base URL to run the production query against "
                             "(default: controller.signal of the config; with source "
                             "'cluster', the signal is computed from the API).")] = None,
    kubeconfig: KubeconfigOption = None,
    dry_run: DryRunOption = False,
    metrics_port: MetricsPortOption = 10262,
    metrics_address: MetricsAddressOption = "127.0.0.1",
    leader_elect: LeaderElectOption = True,
    lease_name: LeaseNameOption = "kubeberth-spill-controller",
    lease_namespace: LeaseNamespaceOption = "kube-system",
    lease_duration: LeaseDurationOption = 15.0,
) -> None:
    """Add or remove vk.node.com/low-gpu-usage on the virtual-kubelet node from the averaged
    free-GPU signal, with the simulator's policy."""
    from kubeberth.live.spill import LiveSpillController

    try:
        cfg = load_spill_config(config)
        if prometheus is not None and not prometheus.startswith(("http://", "https://")):
            raise InputError(f"{prometheus!r} is not an http(s) URL", field="--prometheus",
                             expected="the Prometheus base URL, such as http://prometheus:9090")
        client = connect(kubeconfig)
        leader = elector(client, leader_elect, lease_name, lease_namespace, lease_duration)
        controller = LiveSpillController(cfg, client, prometheus=prometheus, dry_run=dry_run,
                                         elector=leader)
    except InputError as err:
        raise fail(err) from None
    c = cfg.controller
    run_controller("spill-controller", controller, controller.metrics.exposition,
                   address=metrics_address, port=metrics_port,
                   banner=f"node {cfg.virtual_node.name}, signal from {controller.source}, "
                          f"threshold {c.threshold:g}, stabilization "
                          f"{c.stabilization_seconds:g}s", dry_run=dry_run)
