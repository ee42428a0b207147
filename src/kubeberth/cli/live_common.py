"""Plumbing every live controller command shares: the API connection, leader election, the
health/metrics server and a clean stop on SIGINT/SIGTERM.

The four controllers (scheduler, descheduler, spill controller, admission) differ only in their
control loop; how they connect, elect a leader, expose ``/healthz``, ``/readyz`` and
``/metrics`` and stop must be the same so that one Deployment template and one runbook fit all.
Bad flags and a bad kubeconfig are :class:`InputError` (exit 2 before anything is started).
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Protocol

import typer
import yaml
from rich.console import Console

from kubeberth.api.errors import InputError

if TYPE_CHECKING:
    from lightkube import Client

    from kubeberth.live.leader import LeaderElector

_err = Console(stderr=True)

KubeconfigOption = Annotated[Path | None, typer.Option(
    "--kubeconfig", help="kubeconfig of the cluster (default: in-cluster config, then "
                         "$KUBECONFIG or ~/.kube/config).")]
DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="Log decisions without writing them to the API.")]
MetricsPortOption = Annotated[int, typer.Option(
    "--metrics-port", help="Port of /healthz, /readyz and /metrics (0: any free port).")]
MetricsAddressOption = Annotated[str, typer.Option(
    "--metrics-address", help="Address of /healthz, /readyz and /metrics.")]
LeaderElectOption = Annotated[bool, typer.Option(
    "--leader-elect/--no-leader-elect", help="Act only while holding the leader Lease.")]
LeaseNameOption = Annotated[str, typer.Option(
    "--leader-elect-resource-name", help="Name of the leader Lease.")]
LeaseNamespaceOption = Annotated[str, typer.Option(
    "--leader-elect-resource-namespace", help="Namespace of the leader Lease.")]
LeaseDurationOption = Annotated[float, typer.Option(
    "--leader-elect-lease-duration", help="Seconds a standby waits for an unrenewed Lease "
                                          "before taking over.")]


class LiveController(Protocol):
    """What :func:`run_controller` needs from a control loop."""

    stop: threading.Event
    lost_leadership: bool

    def run(self) -> None: ...

    def healthy(self) -> bool: ...

    def ready(self) -> bool: ...


def fail(err: InputError) -> typer.Exit:
    """Print a bad-input error the CLI way; the caller raises the returned Exit."""
    _err.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def connect(kubeconfig: Path | None) -> Client:
    """A lightkube client for ``--kubeconfig``, else in-cluster config, else ``$KUBECONFIG``."""
    from lightkube import Client, KubeConfig
    from lightkube.core.exceptions import ConfigError

    try:
        kube = (KubeConfig.from_file(str(kubeconfig)) if kubeconfig is not None
                else KubeConfig.from_env())
        return Client(config=kube)
    except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError,
            yaml.YAMLError) as err:
        # A malformed kubeconfig surfaces from lightkube as whatever lookup failed.
        raise InputError(f"cannot read the kubeconfig: {err}", field="--kubeconfig",
                         expected="a kubeconfig file, or in-cluster credentials") from None


def elector(client: Client, enabled: bool, name: str, namespace: str,
            duration: float) -> LeaderElector | None:
    """The Lease-based elector with upstream's ratios (renew at 2/3, retry at 2/15), or None
    when ``--no-leader-elect``."""
    from kubeberth.live.leader import LeaderElector

    if duration <= 0:
        raise InputError(f"--leader-elect-lease-duration {duration} is not positive",
                         field="--leader-elect-lease-duration",
                         expected="a number of seconds above 0")
    if not enabled:
        return None
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    return LeaderElector(client, name, namespace, identity, lease_duration=duration,
                         renew_deadline=duration * 2 / 3, retry_period=duration / 7.5)


def setup_logging() -> None:
    """Decisions at INFO on stdout; the HTTP client's one line per API request would drown
    them, so it logs warnings only."""
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_controller(name: str, controller: LiveController, metrics: Callable[[], bytes], *,
                   address: str, port: int, banner: str, dry_run: bool) -> None:
    """Serve health and metrics, run the control loop on a thread until SIGINT/SIGTERM or lost
    leadership (exit 1), then stop everything; the banner says when nothing is written."""
    from kubeberth.live.metrics import HealthServer

    setup_logging()
    try:
        health = HealthServer(address, port, healthy=controller.healthy,
                              ready=controller.ready, metrics=metrics).start()
    except OSError as err:
        _err.print(f"[bold red]error:[/] cannot listen on {address}:{port}: {err}",
                   highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        controller.stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if dry_run:
        banner += " (dry run: nothing is written)"
    print(f"kubeberth {name}: {banner}; metrics on http://{address}:{health.port}/metrics",
          flush=True)
    worker = threading.Thread(target=controller.run, name=name, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(timeout=0.5)
    finally:
        controller.stop.set()
        worker.join(timeout=5)
        health.stop()
    if controller.lost_leadership:
        print(f"kubeberth {name} stopped: leader election lost", flush=True)
        raise typer.Exit(1)
    print(f"kubeberth {name} stopped", flush=True)
