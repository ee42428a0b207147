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
from kubeberth.live.extender import ExtenderServer, ExtenderService, make_app
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
        cfg = load_scheduler_config(config)
        manifests = load_manifests(cluster) if cluster else None
    with user_errors(cfg):
        service = ExtenderService(cfg, scheduling_registry(plugin), manifests, profile=profile,
                                  seed=seed)
    try:
        ctx = server_tls(cert, key) if cert is not None else None
        server = ExtenderServer(make_app(service), host, port, ssl_context=ctx).start()
    except (OSError, InputError) as err:
        err_console.print(f"[bold red]error:[/] cannot serve on {host}:{port}: {err}",
                          highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    stop = stop_on_signals()
    console.print(f"serving profile {service.profile!r} as an extender at {server.url}",
                  highlight=False)
    console.print(f"extenders: [{{urlPrefix: {server.url}, filterVerb: filter, prioritizeVerb: "
                  "prioritize, preemptVerb: preempt, bindVerb: bind, weight: 1, "
                  "nodeCacheCapable: true}]", highlight=False, markup=False)
    stop.wait()
    server.stop()
