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
from kubeberth.cli.live_common import LiveOptions, build, live_command, run_controller
from kubeberth.spill.config import load_spill_config


@live_command(metrics_port=10262, lease_name="kubeberth-spill-controller")
def spill_controller_command(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="SpillConfig (kubeberth.io/v1alpha1; default: the defaults "
                               "of docs/spill.md).")] = None,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Prometheus base URL to run the production query against "
                             "(default: controller.signal of the config; with source "
                             "'cluster', the signal is computed from the API).")] = None,
    *, live: LiveOptions,
) -> None:
    """Add or remove vk.node.com/low-gpu-usage on the virtual-kubelet node from the averaged
    free-GPU signal, with the simulator's policy."""
    from kubeberth.live.spill import LiveSpillController

    def make() -> LiveSpillController:
        cfg = load_spill_config(config)
        if prometheus is not None and not prometheus.startswith(("http://", "https://")):
            raise InputError(f"{prometheus!r} is not an http(s) URL", field="--prometheus",
                             expected="the Prometheus base URL, such as http://prometheus:9090")
        client = live.connect()
        return LiveSpillController(cfg, client, prometheus=prometheus, dry_run=live.dry_run,
                                   elector=live.elector(client))

    controller = build(make)
    c = controller.cfg.controller
    run_controller(controller, live, banner=f"node {controller.node_name}, signal from "
                                            f"{controller.source}, threshold {c.threshold:g}, "
                                            f"stabilization {c.stabilization_seconds:g}s")
