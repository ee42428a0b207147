"""What every live controller command shares: one option block (the API connection, leader
election, the health/metrics server and its TLS, dry run) and how a controller is run.

The four controllers (scheduler, descheduler, spill controller, admission) differ only in their
control loop; how they connect, elect a leader, expose ``/healthz``, ``/readyz`` and
``/metrics`` and stop must be the same so that one Deployment template and one runbook fit all.
:func:`live_command` adds the block to a command, with upstream's flag names; durations are Go
durations (``15s``) or seconds. Bad flags and a bad kubeconfig are :class:`InputError` (exit 2
before anything is started).
"""

from __future__ import annotations

import functools
import inspect
import logging
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from kubeberth.api.durations import parse_duration
from kubeberth.api.errors import InputError

if TYPE_CHECKING:
    import ssl

    from lightkube import Client

    from kubeberth.live.controller import Controller
    from kubeberth.live.leader import LeaderElector, LeaseTiming

_err = Console(stderr=True)
T = TypeVar("T")

TlsCertFileOption = Annotated[Path | None, typer.Option(
    "--tls-cert-file", help="Serve HTTPS with this PEM certificate (with "
                            "--tls-private-key-file).")]
TlsPrivateKeyFileOption = Annotated[Path | None, typer.Option(
    "--tls-private-key-file", help="The PEM private key of --tls-cert-file.")]


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """The option block of a live controller command, durations in seconds."""

    kubeconfig: Path | None
    dry_run: bool
    metrics_address: str
    metrics_port: int
    leader_elect: bool
    lease_name: str
    lease_namespace: str
    lease: LeaseTiming
    tls: ssl.SSLContext | None  # the health/metrics server's; None: plain HTTP

    def connect(self) -> Client:
        """A lightkube client for ``--kubeconfig``, else in-cluster config, else
        ``$KUBECONFIG``."""
        return connect(self.kubeconfig)

    def elector(self, client: Client) -> LeaderElector | None:
        """The Lease-based elector, or None with ``--no-leader-elect``."""
        if not self.leader_elect:
            return None
        return elector(client, self.lease_name, self.lease_namespace, self.lease)


def _tls(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The TLS context of ``--tls-cert-file``/``--tls-private-key-file``, None for HTTP."""
    from kubeberth.live.metrics import server_tls

    if cert is None:
        if key is not None:
            raise InputError("--tls-private-key-file without --tls-cert-file",
                             field="--tls-cert-file",
                             expected="both flags, or neither to serve plain HTTP")
        return None
    return server_tls(cert, key)


def leader_timing(lease: float, renew: float | None = None, retry: float | None = None
                  ) -> LeaseTiming:
    """Lease duration, renew deadline and retry period in seconds; unset ones follow
    upstream's ratios (15s, 10s, 2s: renew at 2/3 of the lease, retry at 1/5 of the renew
    deadline), and they must nest as upstream requires (lease > renew deadline > retry)."""
    from kubeberth.live.leader import LeaseTiming

    if lease <= 0:
        raise InputError(f"the lease duration {lease:g}s is not positive",
                         field="--leader-elect-lease-duration",
                         expected="a duration above 0, such as 15s")
    renew = lease * 2 / 3 if renew is None else renew
    retry = renew / 5 if retry is None else retry
    if not lease > renew:
        raise InputError(f"the renew deadline ({renew:g}s) is not shorter than the lease "
                         f"duration ({lease:g}s)", field="--leader-elect-renew-deadline",
                         expected="a renew deadline below --leader-elect-lease-duration")
    if not renew > retry > 0:
        raise InputError(f"the retry period ({retry:g}s) is not between 0 and the renew "
                         f"deadline ({renew:g}s)", field="--leader-elect-retry-period",
                         expected="a retry period above 0 and below the renew deadline")
    return LeaseTiming(lease, renew, retry)


def _optional_duration(text: str | None, flag: str) -> float | None:
    return None if text is None else parse_duration(text, flag)


def _block(metrics_port: int, lease_name: str) -> list[inspect.Parameter]:
    """The shared options as command parameters, with this command's defaults."""
    def opt(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                 annotation=annotation)

    return [
        opt("kubeconfig", Annotated[Path | None, typer.Option(
            "--kubeconfig", help="kubeconfig of the cluster (default: in-cluster config, then "
                                 "$KUBECONFIG or ~/.kube/config).")], None),
        opt("dry_run", Annotated[bool, typer.Option(
            "--dry-run", help="Log decisions without writing them to the API.")], False),
        opt("metrics_port", Annotated[int, typer.Option(
            "--metrics-port", help="Port of /healthz, /readyz and /metrics (0: any free "
                                   "port).")], metrics_port),
        opt("metrics_address", Annotated[str, typer.Option(
            "--metrics-address", help="Address of /healthz, /readyz and /metrics.")],
            "127.0.0.1"),
        opt("tls_cert_file", TlsCertFileOption, None),
        opt("tls_private_key_file", TlsPrivateKeyFileOption, None),
        opt("leader_elect", Annotated[bool, typer.Option(
            "--leader-elect/--no-leader-elect", help="Act only while holding the leader "
                                                     "Lease.")], True),
        opt("lease_name", Annotated[str, typer.Option(
            "--leader-elect-resource-name", help="Name of the leader Lease.")], lease_name),
        opt("lease_namespace", Annotated[str, typer.Option(
            "--leader-elect-resource-namespace", help="Namespace of the leader Lease.")],
            "kube-system"),
        opt("lease_duration", Annotated[str, typer.Option(
            "--leader-elect-lease-duration", help="How long a standby waits for an unrenewed "
                                                  "Lease before taking over (a Go duration "
                                                  "or seconds).")], "15s"),
        opt("renew_deadline", Annotated[str | None, typer.Option(
            "--leader-elect-renew-deadline", help="How long the leader tries to renew before "
                                                  "it stops leading (default: 2/3 of the "
                                                  "lease duration).")], None),
        opt("retry_period", Annotated[str | None, typer.Option(
            "--leader-elect-retry-period", help="Time between attempts to acquire or renew "
                                                "(default: 1/5 of the renew deadline).")],
            None),
    ]


def live_command(*, metrics_port: int, lease_name: str
                 ) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the shared option block; the command receives it parsed, as its
    ``live: LiveOptions`` parameter (a bad value exits 2 before the command runs)."""
    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = inspect.signature(command, eval_str=True)
        params = [p for p in own.parameters.values() if p.name != "live"]
        block = _block(metrics_port, lease_name)
        names = [p.name for p in block]

        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            values = {name: kwargs.pop(name) for name in names}
            timing = build(lambda: leader_timing(
                parse_duration(values["lease_duration"],
                               "--leader-elect-lease-duration"),
                _optional_duration(values["renew_deadline"],
                                   "--leader-elect-renew-deadline"),
                _optional_duration(values["retry_period"],
                                   "--leader-elect-retry-period")))
            tls = build(lambda: _tls(values["tls_cert_file"], values["tls_private_key_file"]))
            command(live=LiveOptions(
                kubeconfig=values["kubeconfig"], dry_run=values["dry_run"],
                metrics_address=values["metrics_address"], metrics_port=values["metrics_port"],
                leader_elect=values["leader_elect"],
                lease_name=values["lease_name"],
                lease_namespace=values["lease_namespace"],
                lease=timing,
                tls=tls), **kwargs)

        run.__signature__ = own.replace(parameters=[*params, *block])  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in [*params, *block]}
        return run

    return decorate


def renamed(new: T | None, old: T | None, *, new_flag: str, old_flag: str) -> T | None:
    """The value of a flag given under its new spelling or its old one (a hidden alias kept
    for one release, which warns on stderr)."""
    if old is None:
        return new
    _err.print(f"warning: {old_flag} is deprecated and goes in the next release; use "
               f"{new_flag}", highlight=False, soft_wrap=True)
    if new is not None:
        raise fail(InputError(f"both {new_flag} and its old spelling {old_flag} are given",
                              field=new_flag, expected=f"only {new_flag}"))
    return old


def fail(err: InputError) -> typer.Exit:
    """Print a bad-input error the CLI way; the caller raises the returned Exit."""
    _err.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
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


def elector(client: Client, name: str, namespace: str, timing: LeaseTiming) -> LeaderElector:
    """A Lease-based elector with a unique identity."""
    from kubeberth.live.leader import LeaderElector

    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    return LeaderElector(client, name, namespace, identity, timing=timing)


def setup_logging() -> None:
    """Decisions at INFO on stdout; the HTTP client's one line per API request would drown
    them, so it logs warnings only."""
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def build(make: Callable[[], T]) -> T:
    """``make()``, its bad input printed and exit 2 (nothing has started yet)."""
    try:
        return make()
    except InputError as err:
        raise fail(err) from None


def run_controller(controller: Controller[Any], live: LiveOptions, *, banner: str) -> None:
    """Serve health and metrics, run the control loop until SIGINT/SIGTERM, a lost Lease or a
    failure (exit 1), then stop everything; the banner says when nothing is written."""
    setup_logging()
    name = controller.name
    try:
        health = controller.serve(live.metrics_address, live.metrics_port, tls=live.tls)
    except OSError as err:
        _err.print(f"[bold red]error:[/] cannot listen on {live.metrics_address}:"
                   f"{live.metrics_port}: {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if live.dry_run:
        banner += " (dry run: nothing is written)"
    print(f"kubeberth {name}: {banner}; metrics on {health.url}/metrics", flush=True)
    controller.run_until_signalled()
    if controller.lost_leadership:
        print(f"kubeberth {name} stopped: leader election lost", flush=True)
        raise typer.Exit(1)
    if controller.error is not None:
        print(f"kubeberth {name} stopped: the controller failed: {controller.error!r}",
              flush=True)
        raise typer.Exit(1)
    print(f"kubeberth {name} stopped", flush=True)
