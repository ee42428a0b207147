"""``kubeberth serve``: the embedded Kubernetes-compatible API server as a command.

It loads manifests into the embedded cluster, listens on loopback and tells the user the kubectl
command to look at it; it runs until interrupted (Ctrl-C or SIGTERM). Kept apart from
``cli/main.py`` so the live commands that follow (``up``, the controllers) can share it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kubeberth.api.errors import InputError
from kubeberth.cli.live_common import TlsCertFileOption, TlsPrivateKeyFileOption

_err = Console(stderr=True)
_out = Console(highlight=False, soft_wrap=True)


def kubectl_hint(url: str, kubeconfig: Path | None, token: str | None, tls: bool) -> str:
    """The kubectl command line that reaches the server."""
    if kubeconfig is not None:
        return f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))} get nodes"
    parts = ["kubectl", "--server", url]
    if token:
        parts += ["--token", token]
    if tls:
        parts.append("--insecure-skip-tls-verify")
    return " ".join(shlex.quote(p) for p in parts) + " get nodes"


def serve(
    filename: Annotated[list[Path] | None, typer.Option(
        "--filename", "-f", help="Manifests to load (files, directories or - for stdin; "
                                 "repeatable). Namespaces they use are created.")] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0 picks a free "
                                                     "one).")] = 6443,
    address: Annotated[str, typer.Option("--address", help="Loopback address to listen "
                                                           "on.")] = "127.0.0.1",
    kubeconfig_out: Annotated[Path | None, typer.Option(
        "--kubeconfig-out", help="Write a kubeconfig for the server here.")] = None,
    token: Annotated[str | None, typer.Option(
        "--token", help="Require this bearer token on every API request.")] = None,
    tls_cert_file: TlsCertFileOption = None,
    tls_private_key_file: TlsPrivateKeyFileOption = None,
) -> None:
    """Serve an embedded Kubernetes API (kubectl works against it) with a fake kubelet."""
    from kubeberth.apiserver import EmbeddedServer
    from kubeberth.config.manifests import load_manifests
    from kubeberth.live.controller import stop_on_signals

    try:
        manifests = load_manifests(filename) if filename else None
        server = EmbeddedServer(manifests=manifests, host=address, port=port, token=token,
                                tls_cert=tls_cert_file, tls_key=tls_private_key_file)
        server.start()
    except InputError as err:
        _err.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    stop = stop_on_signals()
    try:
        if kubeconfig_out is not None:
            server.write_kubeconfig(kubeconfig_out)
        count = server.call(lambda: sum(len(server.cluster.store.table(rt))
                                        for rt in server.cluster.registry.resources))
        _out.print(f"kubeberth API server listening on {server.url} ({count} objects)")
        if server.skipped:
            _out.print(f"not served, skipped: {', '.join(server.skipped)}")
        _out.print(kubectl_hint(server.url, kubeconfig_out, token,
                                tls_cert_file is not None))
        _out.file.flush()
        stop.wait()
    finally:
        server.stop()
