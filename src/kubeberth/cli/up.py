"""``kubeberth up``: the embedded API server, a demo cluster and all four live controllers in
one command. Like ``serve`` it is secure by default: the kubeconfig it writes (mode 0600)
carries a generated token and the server's self-signed certificate.

Trying the live controllers otherwise takes five terminals (``serve``, ``scheduler``,
``admission``, ``descheduler``, ``spill-controller``) and five configuration files. ``up``
starts them together in one process with the demo bundle that ships in the package
(``kubeberth/live/demo``): each controller runs on its own thread, with its own health and
metrics server, and reaches the API over HTTP through lightkube exactly as the separate
commands do. It runs until SIGINT or SIGTERM, then stops everything (exit 0).
"""

from __future__ import annotations

import shlex
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from kubeberth.api.errors import InputError
from kubeberth.cli.live_common import (
    TlsCertFileOption,
    TlsPrivateKeyFileOption,
    connect,
    elector,
    fail,
    leader_timing,
    setup_logging,
)
from kubeberth.cli.serve import (
    DEFAULT_CERT_DIR,
    CertDirOption,
    MetricsPublicOption,
    NoAuthOption,
    RuntimeConfigOption,
    TokenOption,
    access,
)

if TYPE_CHECKING:
    from kubeberth.apiserver import EmbeddedServer
    from kubeberth.live.controller import Controller

_out = Console(highlight=False, soft_wrap=True)

# What the demo bundle holds, in load order (nodes, then the Kueue objects and priorities).
CLUSTER_FILES = ("nodes.yaml", "vk-node.yaml", "kueue.yaml")
DEFAULT_KUBECONFIG = Path("~/.kube/kubeberth-up.yaml")
LEASE_SECONDS = 15.0


def demo_dir() -> Path:
    """The demo bundle's directory inside the installed package."""
    return Path(str(files("kubeberth.live").joinpath("demo")))


def _controllers(kubeconfig: Path, demo: Path) -> list[Controller[Any]]:
    """The four controllers with the demo configuration, each with its own API client."""
    from kubeberth.descheduling.policy import load_descheduler_policy
    from kubeberth.live.admission import LiveAdmission
    from kubeberth.live.descheduler import LiveDescheduler
    from kubeberth.live.scheduler import LiveScheduler
    from kubeberth.live.spill import LiveSpillController
    from kubeberth.scheduling.config.loader import load_scheduler_config
    from kubeberth.scheduling.registry import in_tree_registry
    from kubeberth.spill.config import load_spill_config

    registry = in_tree_registry().with_out_of_tree(None)
    timing = leader_timing(LEASE_SECONDS)
    sched_client, admit_client = connect(kubeconfig), connect(kubeconfig)
    desched_client, spill_client = connect(kubeconfig), connect(kubeconfig)
    return [
        LiveScheduler(load_scheduler_config(demo / "scheduler-config.yaml"), registry,
                      sched_client, elector=elector(sched_client, "kubeberth-scheduler",
                                                    "kube-system", timing)),
        LiveAdmission(admit_client, elector=elector(admit_client, "kubeberth-admission",
                                                    "kube-system", timing)),
        LiveDescheduler(load_descheduler_policy(demo / "descheduler.yaml"), desched_client,
                        interval=5.0, elector=elector(desched_client, "kubeberth-descheduler",
                                                      "kube-system", timing)),
        LiveSpillController(load_spill_config(demo / "spill.yaml"), spill_client,
                            elector=elector(spill_client, "kubeberth-spill-controller",
                                            "kube-system", timing)),
    ]


def _stop_all(running: list[Controller[Any]], server: EmbeddedServer) -> None:
    for ctl in running:
        ctl.stop.set()
    for ctl in running:
        ctl.shutdown(timeout=10)
    server.stop()


def _hints(kubeconfig: Path, demo: Path) -> list[str]:
    kc = f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))}"
    workload = shlex.quote(str(demo / "workload.yaml"))
    return [
        f"{kc} get nodes",
        "",
        "Try the spill scenario (docs/live.md, `kubeberth up`):",
        f"  {kc} apply -f {workload}",
        f"  {kc} get workloads -A; {kc} get pods -A -o wide",
        "  # once the 16 GPUs are full and the VK node has no vk.node.com/low-gpu-usage taint:",
        f"  {kc} scale deployment infer -n serving --replicas 3",
        f"  {kc} get pods -A -o wide -w   # two replicas spill to virtual-kubelet, and come "
        "back after the ETL Job ends",
    ]


def up_command(
    port: Annotated[int, typer.Option("--port", help="API server port on 127.0.0.1 (0 picks "
                                                     "a free one).")] = 6443,
    kubeconfig_out: Annotated[Path | None, typer.Option(
        "--kubeconfig-out", help="Write the kubeconfig here (default: "
                                 "~/.kube/kubeberth-up.yaml).")] = None,
    tls_cert_file: TlsCertFileOption = None,
    tls_private_key_file: TlsPrivateKeyFileOption = None,
    token: TokenOption = None,
    no_auth: NoAuthOption = False,
    metrics_public: MetricsPublicOption = False,
    cert_dir: CertDirOption = DEFAULT_CERT_DIR,
    runtime_config: RuntimeConfigOption = "",
) -> None:
    """Start the embedded API server with a demo GPU cluster and all four controllers
    (scheduler, admission, descheduler, spill-controller); print how to look at it."""
    from kubeberth.apiserver import EmbeddedServer
    from kubeberth.apiserver.resources import runtime_config as parse_runtime_config
    from kubeberth.config.manifests import load_manifests
    from kubeberth.live.controller import stop_on_signals

    demo = demo_dir()
    kubeconfig = (kubeconfig_out or DEFAULT_KUBECONFIG).expanduser()
    try:
        apis = parse_runtime_config(runtime_config)
        how = access(no_auth, token, tls_cert_file, cert_dir=cert_dir)
        manifests = load_manifests([demo / f for f in CLUSTER_FILES])
        server = EmbeddedServer(manifests=manifests, port=port, token=how.token,
                                tls_cert=tls_cert_file, tls_key=tls_private_key_file,
                                serving_cert=how.serving_cert, metrics_public=metrics_public,
                                apis=apis)
        server.start()
    except InputError as err:
        raise fail(err) from None
    running: list[Controller[Any]] = []
    stop = stop_on_signals()
    failed: list[str] = []
    try:
        try:
            server.write_kubeconfig(kubeconfig)
        except OSError as err:
            raise fail(InputError(f"cannot write {kubeconfig}: {err.strerror}",
                                  field="--kubeconfig-out",
                                  expected="a writable file path")) from None
        try:
            built = _controllers(kubeconfig, demo)
        except InputError as err:
            raise fail(err) from None
        setup_logging()
        _out.print(f"kubeberth up: API server on {server.url} with the demo cluster "
                   f"({demo}); kubeconfig {kubeconfig}")
        for ctl in built:
            health = ctl.serve("127.0.0.1", 0)
            ctl.start()
            running.append(ctl)
            _out.print(f"  {ctl.name:<17} metrics on {health.url}/metrics")
        if how.token is None:
            _out.print("warning: --no-auth: no token is required; every local user and "
                       "process can change this cluster")
        for line in _hints(kubeconfig, demo):
            _out.print(line)
        _out.file.flush()
        while not stop.wait(0.5):
            failed = [c.name for c in running if c.thread is None or not c.thread.is_alive()]
            if failed:
                break
    finally:
        _stop_all(running, server)
    for ctl in running:
        if ctl.error is not None:
            _out.print(f"kubeberth up: {ctl.name} failed: {ctl.error!r}")
    if failed:
        _out.print(f"kubeberth up: stopped because {', '.join(failed)} ended")
        raise typer.Exit(1)
    _out.print("kubeberth up: stopped")
