"""``kubeberth deschedule``: one descheduling pass over manifests, printed, never applied.

The JSON output is a public contract (docs/descheduler.md): ``{"evictions": [...],
"skipped": [...]}``, each entry ``{"pod": "ns/name", "node", "plugin", "reason"}``, evictions in
the order the descheduler would issue them. "Now" is ``--now`` (an RFC 3339 time, or ``now`` for
the wall clock); by default it is the latest timestamp in the manifests, so the same files always
give the same answer.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kubeberth.api.errors import InputError
from kubeberth.api.times import format_time, parse_time
from kubeberth.cli.common import (
    OutputFormat,
    err_console,
    print_data,
    read_not_modelled,
    refuse_policies,
    user_errors,
)
from kubeberth.config.manifests import check_priority_class_names, load_manifests
from kubeberth.descheduling.framework import Eviction, PassResult, Snapshot, default_now
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.descheduling.registry import build_descheduler, descheduler_registry

# ``--plugin`` of every command that runs a DeschedulerPolicy (deschedule, descheduler).
DeschedulerPluginOption = Annotated[list[str] | None, typer.Option(
    "--plugin", help="Out-of-tree descheduler plugin to register, as module:attr naming its "
                     "PluginSpec, or a module holding SPEC (repeatable); installed "
                     "kubeberth.descheduler_plugins entry points are registered too.")]


def deschedule(
    filename: Annotated[list[Path], typer.Option(
        "--filename", "-f", help="Manifests: nodes, pods (bound with spec.nodeName), "
                                 "PodDisruptionBudgets, workloads; files, directories or - "
                                 "(repeatable).")],
    policy: Annotated[Path, typer.Option(
        "--policy", help="DeschedulerPolicy (descheduler/v1alpha2).")],
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
    now: Annotated[str | None, typer.Option(
        "--now", help="The pass's clock: an RFC 3339 time such as 2024-05-01T12:00:00Z, or "
                      "'now' for the wall clock (default: the latest timestamp in the "
                      "manifests).")] = None,
    plugin: DeschedulerPluginOption = None,
    seed: Annotated[int, typer.Option(
        "--seed", help="Seed of the names given to objects with generateName.")] = 0,
) -> None:
    """Print one descheduling pass's evictions (pod, node, plugin, reason) without applying them."""
    with user_errors():
        pol = load_descheduler_policy(policy)
        descheduler = build_descheduler(pol, descheduler_registry(plugin))
        manifests = load_manifests(filename, seed=seed)
        refuse_policies(manifests, "deschedule")
        check_priority_class_names(manifests)
        if now is None:
            clock = default_now(manifests)
        elif now == "now":
            clock = time.time()
        else:
            try:
                clock = parse_time(now, "--now")
            except InputError as err:
                raise InputError(err.message, field="--now", expected=err.expected) from None
        result = descheduler.run_pass(Snapshot.from_manifests(manifests, clock))
    if result.cycle_skipped:
        err_console.print(f"descheduling cycle skipped: {result.cycle_skipped}", highlight=False)
    not_modelled = read_not_modelled(manifests)
    data: dict[str, Any] = {**result.to_json(),
                            **({"readNotModelled": not_modelled} if not_modelled else {})}
    if output == OutputFormat.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif output == OutputFormat.yaml:
        print_data(data, output)
    else:
        render(Console(), result, clock)


def render(console: Console, result: PassResult, clock: float) -> None:
    console.print(f"descheduling pass at {format_time(clock)} over {result.nodes} node(s): "
                  f"{len(result.evictions)} eviction(s), {len(result.skipped)} skipped")
    for title, rows in (("evictions", result.evictions), ("skipped", result.skipped)):
        if rows:
            console.print(_table(title, rows))


def _table(title: str, rows: list[Eviction]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("#", "pod", "node", "plugin", "reason"):
        table.add_column(col, overflow="fold")
    for i, d in enumerate(rows, 1):
        table.add_row(str(i), d.pod, d.node, d.plugin, d.reason)
    return table
