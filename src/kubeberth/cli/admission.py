"""``kubeberth admission``: the live Kueue admission controller as a command.

It reads an optional Kueue Configuration (``--config``; bad input: exit 2 with file, line and
field), connects to the API named by ``--kubeconfig``, serves ``/healthz``, ``/readyz`` and
``/metrics`` with Kueue's metric names, logs every decision and runs until SIGINT or SIGTERM.
The controller is :mod:`kubeberth.live.admission`; the policy is the one ``kubeberth admit``
runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kubeberth.admission.checks import in_tree
from kubeberth.admission.model import KueueConfiguration, load_kueue
from kubeberth.api.errors import InputError
from kubeberth.cli.live_common import LiveOptions, build, live_command, run_controller
from kubeberth.config.manifests import load_manifests


def load_configuration(path: Path | None) -> KueueConfiguration:
    """The Kueue Configuration in ``path`` (config.kueue.x-k8s.io), or Kueue's defaults."""
    if path is None:
        return KueueConfiguration()
    manifests = load_manifests([path])
    configs = manifests.of_kind("Configuration")
    if not configs or len(manifests.other) != len(configs) or manifests.pods or \
            manifests.nodes:
        raise InputError(f"{path} must hold one Kueue Configuration", field="--config",
                         expected="a config.kueue.x-k8s.io/v1beta1 or v1beta2 Configuration "
                                  "document")
    return load_kueue(manifests).config


@live_command(metrics_port=8080, lease_name="kubeberth-admission")
def admission_command(
    config: Annotated[Path | None, typer.Option(
        "--config", help="Kueue Configuration (config.kueue.x-k8s.io): fairSharing, "
                         "waitForPodsReady, featureGates (default: Kueue's defaults).")] = None,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Load an out-of-tree admission check plugin, module:attr "
                         "(repeatable).")] = None,
    *, live: LiveOptions,
) -> None:
    """Admit Kueue Workloads (and queue-labelled Jobs and pods) as Kueue does, with the same
    policy as `kubeberth admit`: write status.admission and the admission checks' states,
    start Jobs and ungate pods once Admitted, preempt."""
    from kubeberth.live.admission import LiveAdmission

    def make() -> LiveAdmission:
        cfg = load_configuration(config)
        checks = in_tree().with_out_of_tree(plugin)  # every plugin loaded before connecting
        client = live.connect()
        return LiveAdmission(client, config=cfg, dry_run=live.dry_run,
                             elector=live.elector(client), checks=checks)

    controller = build(make)
    run_controller(controller, live, banner=f"Kueue {controller.version}")
