"""``kubeberth manifests``: the YAML that runs the live controllers on a real cluster.

Printed to stdout so it can be piped (``kubeberth manifests | kubectl apply -f -``), reviewed or
kept in Git; the documents come from :mod:`kubeberth.live.deploy`. Configuration files given
here are loaded as the controllers will load them, so a bad one fails now (exit 2, file and
line), not in a crash-looping pod.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kubeberth.cli.common import user_errors


def manifests_command(
    controller: Annotated[list[str] | None, typer.Option(
        "--controller", help="Controller to deploy (repeatable): scheduler, descheduler, "
                             "spill-controller, admission (default: all four).")] = None,
    namespace: Annotated[str, typer.Option(
        "--namespace", "-n", help="Namespace of the controllers, their ConfigMaps and "
                                  "Leases.")] = "kubeberth-system",
    image: Annotated[str | None, typer.Option(
        "--image", help="Container image with kubeberth installed (default: "
                        "kubeberth:<version>).")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="KubeSchedulerConfiguration for the scheduler (default: one "
                               "profile, schedulerName kubeberth-scheduler).")] = None,
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="DeschedulerPolicy for the descheduler (default: bring spilled "
                         "pods back from a low-usage virtual-kubelet node).")] = None,
    spill_config: Annotated[Path | None, typer.Option(
        "--spill-config", help="SpillConfig for the spill controller (default: every field "
                               "at its default).")] = None,
) -> None:
    """Print Namespace, ServiceAccounts, least-privilege RBAC, ConfigMaps and Deployments for
    the live controllers, as multi-document YAML for kubectl apply -f -."""
    from kubeberth.live.deploy import DEFAULT_IMAGE, manifests, render

    files = {name: path for name, path in (("scheduler", config), ("descheduler", policy),
                                           ("spill-controller", spill_config))
             if path is not None}
    with user_errors():
        docs = manifests(controller, namespace=namespace, image=image or DEFAULT_IMAGE,
                         configs=files)
    sys.stdout.write(render(docs))
