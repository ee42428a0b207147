"""``kubeberth extender``: serve a kubeberth profile as a kube-scheduler HTTP extender.

The command loads the configuration and the optional cluster manifests, prints the URL and the
``extenders`` stanza a kube-scheduler configuration needs, and serves until SIGINT or SIGTERM.
The policy side and the exact state it judges against are in :mod:`kubeberth.live.extender`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kubeberth.api.errors import InputError
from kubeberth.cli.common import err_console, scheduling_registry, user_errors
from kubeberth.cli.live_common import (
    TlsCertFileOption,
    TlsPrivateKeyFileOption,
    renamed,
)
from kubeberth.config.manifests import load_manifests
from kubeberth.live.controller import stop_on_signals
from kubeberth.live.extender import (
    ExtenderServer,
    ExtenderService,
    exposure_warning,
    make_app,
)
from kubeberth.live.metrics import server_tls
from kubeberth.scheduling.config.loader import load_scheduler_config

console = Console()


def extender_command(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="KubeSchedulerConfiguration whose profile to serve "
                               "(default: upstream's default profile).")] = None,
    profile: Annotated[str | None, typer.Option(
        "--profile", help="schedulerName of the profile to serve (default: the first).")] = None,
    cluster: Annotated[list[Path] | None, typer.Option(
        "--cluster", help="Manifests with the nodes and bound pods the extender starts from "
                          "(files, directories; repeatable).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0: any free port).")] = 8888,
    tls_cert_file: TlsCertFileOption = None,
    tls_private_key_file: TlsPrivateKeyFileOption = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", hidden=True)] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", hidden=True)] = None,
    token: Annotated[str | None, typer.Option(
        "--token", help="Require this bearer token on the verbs (a command line is visible "
                        "to other users: prefer --token-file).")] = None,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="Require the bearer token in this file (its first line) on the "
                             "verbs.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice.")] = 0,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Out-of-tree plugin to register, as module:attr (repeatable).")] = None,
) -> None:
    """Serve a profile's Filter, Score and preemption as extender filter/prioritize/preempt/bind
    verbs (extender v1 JSON), so an unmodified kube-scheduler can use kubeberth policies."""
    cert = renamed(tls_cert_file, tls_cert, new_flag="--tls-cert-file", old_flag="--tls-cert")
    key = renamed(tls_private_key_file, tls_key, new_flag="--tls-private-key-file",
                  old_flag="--tls-key")
    with user_errors():
        bearer = _token(token, token_file)
        cfg = load_scheduler_config(config)
        manifests = load_manifests(cluster) if cluster else None
    with user_errors(cfg):
        service = ExtenderService(cfg, scheduling_registry(plugin), manifests, profile=profile,
                                  seed=seed)
    try:
        ctx = server_tls(cert, key) if cert is not None else None
        server = ExtenderServer(make_app(service, token=bearer), host, port,
                                ssl_context=ctx).start()
    except (OSError, InputError) as err:
        err_console.print(f"[bold red]error:[/] cannot serve on {host}:{port}: {err}",
                          highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    warning = exposure_warning(host, tls=ctx is not None, token=bearer is not None)
    if warning is not None:
        err_console.print(f"[bold red]{warning}[/]", highlight=False, soft_wrap=True)
    stop = stop_on_signals()
    console.print(f"serving profile {service.profile!r} as an extender at {server.url}",
                  highlight=False)
    console.print(f"extenders: [{{urlPrefix: {server.url}, filterVerb: filter, prioritizeVerb: "
                  "prioritize, preemptVerb: preempt, bindVerb: bind, weight: 1, "
                  "nodeCacheCapable: true}]", highlight=False, markup=False)
    stop.wait()
    server.stop()


def _token(token: str | None, token_file: Path | None) -> str | None:
    """The bearer token of ``--token`` or ``--token-file`` (not both)."""
    if token is not None and token_file is not None:
        raise InputError("--token and --token-file both given", field="--token-file",
                         expected="one of them")
    if token_file is None:
        return token or None
    try:
        text = token_file.read_text().strip().splitlines()
    except OSError as err:
        raise InputError(f"cannot read the token file: {err.strerror}",
                         source=str(token_file), field="--token-file",
                         expected="a readable file holding the token") from None
    if not text or not text[0].strip():
        raise InputError("the token file is empty", source=str(token_file),
                         field="--token-file", expected="the token on its first line")
    return text[0].strip()
