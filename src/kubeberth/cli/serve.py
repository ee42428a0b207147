"""``kubeberth serve``: the embedded Kubernetes-compatible API server as a command.

It loads manifests into the embedded cluster, listens on loopback and tells the user the kubectl
command to look at it; it runs until interrupted (Ctrl-C or SIGTERM). It is secure by default:
a generated bearer token and a self-signed certificate, both handed over in a 0600 kubeconfig
(never on the command line or in the output); ``--no-auth`` is the explicit opt-out. Kept apart from
``cli/main.py`` so the live commands that follow (``up``, the controllers) can share it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kubeberth.api.errors import InputError
from kubeberth.cli.live_common import TlsCertFileOption, TlsPrivateKeyFileOption

if TYPE_CHECKING:
    from kubeberth.apiserver.credentials import ServingCert

_err = Console(stderr=True)
_out = Console(highlight=False, soft_wrap=True)


DEFAULT_KUBECONFIG = Path("~/.kube/kubeberth-serve.yaml")
# Generated credentials live here unless --cert-dir says otherwise (kube-apiserver's
# --cert-dir defaults to /var/run/kubernetes; a user's own cache suits a loopback server).
DEFAULT_CERT_DIR = Path("~/.cache/kubeberth/serve")

NoAuthOption = Annotated[bool, typer.Option(
    "--no-auth", help="Serve plain HTTP with no token: any local user and process can then "
                      "change the cluster. Without it a token is generated (or --token used), "
                      "TLS is served, and both go into the kubeconfig.")]
MetricsPublicOption = Annotated[bool, typer.Option(
    "--metrics-public", help="Serve /metrics without the token (it names every pod and its "
                             "labels).")]
TokenOption = Annotated[str | None, typer.Option(
    "--token", help="Require this bearer token instead of a generated one (other users can "
                    "read a command line: prefer the generated token in the kubeconfig).")]
RuntimeConfigOption = Annotated[str, typer.Option(
    "--runtime-config", help="APIs to turn on, as kube-apiserver's flag: "
                             "scheduling.k8s.io/v1beta1=true serves Kubernetes 1.37's native "
                             "Workload and PodGroup (off by default, as upstream).")]


@dataclass(frozen=True, slots=True)
class Access:
    """How the server is reached: its token and certificate (None: plain HTTP without)."""

    token: str | None
    serving_cert: ServingCert | None


CertDirOption = Annotated[Path, typer.Option(
    "--cert-dir", help="Where the generated self-signed certificate and token are kept and "
                       "reused at the next start, so clients reconnect after a restart "
                       "(ignored with --tls-cert-file; the token with --token).")]


def access(no_auth: bool, token: str | None, tls_cert_file: Path | None,
           address: str = "127.0.0.1", cert_dir: Path = DEFAULT_CERT_DIR) -> Access:
    """The token and serving certificate ``serve`` and ``up`` start with: secure by default
    (a generated token, and a self-signed certificate unless one is given, since kubectl sends
    a token only over HTTPS), both kept in ``cert_dir`` across restarts; ``--no-auth`` is the
    explicit opt-out."""
    from kubeberth.apiserver.credentials import generate_token, reuse_or_generate

    if no_auth:
        if token is not None:
            raise InputError("--token and --no-auth contradict each other", field="--token",
                             expected="one of them: --no-auth serves without any token")
        return Access(None, None)
    if tls_cert_file is not None:
        return Access(token or generate_token(), None)
    try:
        cert, token = reuse_or_generate(cert_dir, address, token)
    except OSError as err:
        raise InputError(f"cannot keep credentials in {cert_dir}: {err.strerror}",
                         field="--cert-dir", expected="a directory this user can write") from None
    return Access(token, cert)


def kubectl_hint(url: str, kubeconfig: Path | None, tls: bool) -> str:
    """The kubectl command line that reaches the server (it never carries the token)."""
    if kubeconfig is not None:
        return f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))} get nodes"
    parts = ["kubectl", "--server", url]
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
        "--kubeconfig-out", help="Write a kubeconfig (server, CA, token; mode 0600) here "
                                 "(default: ~/.kube/kubeberth-serve.yaml; none with "
                                 "--no-auth unless given).")] = None,
    token: TokenOption = None,
    no_auth: NoAuthOption = False,
    metrics_public: MetricsPublicOption = False,
    tls_cert_file: TlsCertFileOption = None,
    tls_private_key_file: TlsPrivateKeyFileOption = None,
    cert_dir: CertDirOption = DEFAULT_CERT_DIR,
    runtime_config: RuntimeConfigOption = "",
) -> None:
    """Serve an embedded Kubernetes API (kubectl works against it) with a fake kubelet."""
    from kubeberth.apiserver import EmbeddedServer
    from kubeberth.apiserver.resources import runtime_config as parse_runtime_config
    from kubeberth.config.manifests import load_manifests
    from kubeberth.live.controller import stop_on_signals

    try:
        apis = parse_runtime_config(runtime_config)
        how = access(no_auth, token, tls_cert_file, address, cert_dir)
        manifests = load_manifests(filename) if filename else None
        server = EmbeddedServer(manifests=manifests, host=address, port=port, token=how.token,
                                tls_cert=tls_cert_file, tls_key=tls_private_key_file,
                                serving_cert=how.serving_cert, metrics_public=metrics_public,
                                apis=apis)
        server.start()
    except InputError as err:
        _err.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if kubeconfig_out is None and how.token is not None:
        kubeconfig_out = DEFAULT_KUBECONFIG.expanduser()
    stop = stop_on_signals()
    try:
        if kubeconfig_out is not None:
            try:
                server.write_kubeconfig(kubeconfig_out)
            except OSError as err:
                _err.print(f"[bold red]error:[/] cannot write {kubeconfig_out}: "
                           f"{err.strerror} (--kubeconfig-out: a writable file path)",
                           highlight=False, soft_wrap=True)
                raise typer.Exit(2) from None
        count = server.call(lambda: sum(len(server.cluster.store.table(rt))
                                        for rt in server.cluster.registry.resources))
        _out.print(f"kubeberth API server listening on {server.url} ({count} objects)")
        if how.token is None:
            _out.print("warning: --no-auth: no token is required; every local user and "
                       "process can change this cluster")
        elif kubeconfig_out is not None:
            _out.print(f"the token and the server's certificate are in {kubeconfig_out} "
                       "(mode 0600)")
        if server.skipped:
            _out.print(f"not served, skipped: {', '.join(server.skipped)}")
        _out.print(kubectl_hint(server.url, kubeconfig_out, server.url.startswith("https")))
        _out.file.flush()
        stop.wait()
    finally:
        server.stop()
