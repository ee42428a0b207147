"""``kubeberth descheduler``: the live descheduler controller as a command.

It loads and validates the DeschedulerPolicy before connecting (a half-read or invalid policy
is never acted on: exit 2 with file, line and field), connects to the API named by
``--kubeconfig``, serves ``/healthz``, ``/readyz`` and ``/metrics`` and runs a descheduling pass
every ``--descheduling-interval`` until SIGINT or SIGTERM (or once, with ``--once``). The
controller is :mod:`kubeberth.live.descheduler`; ``kubeberth deschedule`` prints the same
pass over manifest files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kubeberth.api.durations import parse_duration
from kubeberth.cli.live_common import LiveOptions, build, live_command, run_controller
from kubeberth.descheduling.policy import DeschedulerPolicy, load_descheduler_policy
from kubeberth.descheduling.registry import build_descheduler, descheduler_registry


@live_command(metrics_port=10258, lease_name="kubeberth-descheduler")
def descheduler_command(
    policy: Annotated[Path, typer.Option(
        "--policy", help="DeschedulerPolicy (descheduler/v1alpha2).")],
    interval: Annotated[str, typer.Option(
        "--descheduling-interval", help="Time between passes, a Go duration such as 5m "
                                        "(0: one pass, then exit, as upstream).")] = "5m",
    once: Annotated[bool, typer.Option("--once", help="Run one pass, then exit.")] = False,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Out-of-tree descheduler plugin, as module:attr (repeatable).")] = None,
    *, live: LiveOptions,
) -> None:
    """Evict pods as the DeschedulerPolicy says, every interval, through the eviction API
    (the same passes `kubeberth deschedule` prints)."""
    from kubeberth.live.descheduler import LiveDescheduler

    seconds = build(lambda: parse_duration(interval, "--descheduling-interval"))

    def make() -> tuple[DeschedulerPolicy, LiveDescheduler]:
        pol = load_descheduler_policy(policy)
        registry = descheduler_registry(plugin)
        build_descheduler(pol, registry)  # every plugin and arg checked before connecting
        client = live.connect()
        return pol, LiveDescheduler(pol, client, interval=seconds, once=once,
                                    dry_run=live.dry_run, registry=registry,
                                    elector=live.elector(client))

    pol, controller = build(make)
    every = "one pass" if once or seconds == 0 else f"a pass every {interval}"
    run_controller(controller, live, banner=f"{len(pol.profiles)} profile(s), {every}")
