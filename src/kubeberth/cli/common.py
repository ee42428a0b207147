"""What every ``kubeberth`` command shares: how bad input is printed, kubectl's output formats
(``-o``), folders (``--out-dir``), Go durations, deprecated spellings and the plugin registries.

Every command turns bad input into one paragraph on stderr (file, line or field, what was
expected) and exit code 2, never a traceback; the layers below raise InputError and
:func:`user_errors` is the only place that prints it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from kubeberth.admission.checks import CheckRegistry
from kubeberth.admission.checks import in_tree as in_tree_checks
from kubeberth.api.durations import parse_duration
from kubeberth.api.errors import InputError
from kubeberth.config.manifests import Manifests, not_modelled_note
from kubeberth.config.plugins import load_out_of_tree
from kubeberth.descheduling.registry import DeschedulerRegistry
from kubeberth.descheduling.registry import in_tree_registry as in_tree_descheduler
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.registry import in_tree_registry

err_console = Console(stderr=True)


class OutputFormat(StrEnum):
    """``-o``, as kubectl reads it: a format, never a place."""

    json = "json"
    yaml = "yaml"
    table = "table"


def print_data(data: Any, output: OutputFormat) -> None:
    """A command's JSON contract on stdout, as JSON or as the same data in YAML."""
    if output == OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def deprecated(old: str, new: str) -> None:
    """Old spellings keep working for one release, with this warning on stderr."""
    err_console.print(f"[yellow]warning:[/] {old} is deprecated and will be removed in the next "
                      f"release; use {new}", highlight=False, soft_wrap=True)


# The options :func:`output_and_folder` reads, as every command that writes a folder spells them.
OutputOpt = Annotated[str | None, typer.Option(
    "--output", "-o", metavar="json|yaml|table",
    help="Print the results as JSON or YAML instead of the human-readable summary.")]
OldOutOpt = Annotated[Path | None, typer.Option("--out", hidden=True)]


def out_dir_option(default: Path) -> Any:
    """``--out-dir``, its help naming the command's default folder."""
    return typer.Option("--out-dir", help=f"Output folder (default: {default}).")


def output_and_folder(output: str | None, out_dir: Path | None, old_out: Path | None,
                      default_dir: Path) -> tuple[OutputFormat, Path]:
    """The format ``-o`` names and the folder ``--out-dir`` names. Before ``-o`` meant a
    format everywhere, ``-o DIR`` and ``--out DIR`` named the folder: both still do, warned."""
    folder = out_dir
    if old_out is not None:
        deprecated("--out DIR", "--out-dir DIR")
        folder = folder or old_out
    fmt = OutputFormat.table
    if output is not None:
        if output in OutputFormat.__members__:
            fmt = OutputFormat(output)
        else:
            deprecated(f"-o {output} (a folder)", f"--out-dir {output}; -o is the output "
                       f"format ({'|'.join(OutputFormat.__members__)})")
            folder = folder or Path(output)
    return fmt, folder or default_dir


def seconds(value: str | None, flag: str) -> float | None:
    """A duration flag's value: Go's form (``90s``, ``5m``, ``1h30m``) or a number of
    seconds; None stays None."""
    return None if value is None else parse_duration(value, flag)


@contextmanager
def user_errors(config: SchedulerConfiguration | None = None) -> Iterator[None]:
    """Print an InputError (located in ``config`` when it names no file) and exit 2."""
    try:
        yield
    except InputError as err:
        if err.source is None and config is not None and config.source:
            err = err.at(source=config.source,
                         line=config.locate(err.field) if err.field else None)
        # User input is never markup: a value such as "[/x]" must print, not raise.
        err_console.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False,
                          soft_wrap=True)
        raise typer.Exit(2) from None


def scheduling_registry(plugins: list[str] | None) -> Registry:
    """The in-tree plugins, those installed as entry points, and ``--plugin module:attr``."""
    return in_tree_registry().with_out_of_tree(plugins)


@dataclass(frozen=True, slots=True)
class Registries:
    """Every family's plugins for a command that runs several families."""

    scheduling: Registry
    descheduling: DeschedulerRegistry
    admission_checks: CheckRegistry


def registries(plugins: list[str] | None) -> Registries:
    """The in-tree plugins and entry points of each family, and each ``--plugin`` in the family
    whose kind of plugin it is."""
    sched, desched, checks = load_out_of_tree(plugins, in_tree_registry(), in_tree_descheduler(),
                                              in_tree_checks())
    assert isinstance(sched, Registry) and isinstance(desched, DeschedulerRegistry)
    assert isinstance(checks, CheckRegistry)
    return Registries(sched, desched, checks)


def read_not_modelled(manifests: Manifests) -> list[dict[str, object]]:
    """Name once on stderr what the inputs held that no decision uses; the entries are the JSON
    outputs' ``readNotModelled`` field (left out when empty)."""
    entries = manifests.not_modelled()
    note = not_modelled_note(entries)
    if note is not None:
        err_console.print(note, highlight=False, soft_wrap=True)
    return entries


# Policy kinds a command's -f bundle must not hold, and where each is read instead.
_POLICIES = {
    "DeschedulerPolicy": "kubeberth deschedule --policy or kubeberth simulate "
                         "--deschedule-policy",
    "KubeSchedulerConfiguration": "the --config option of explain, simulate or scheduler",
    "Configuration": "the -f of admit or simulate, or kubeberth admission --config",
}


def refuse_policies(manifests: Manifests, command: str, reads: tuple[str, ...] = ()) -> None:
    """A policy in a bundle that this command does not read would be ignored; it is an error
    naming where that policy is read."""
    for doc in manifests.of_kind(*(k for k in _POLICIES if k not in reads)):
        raise doc.error(f"kubeberth {command} does not read a {doc.kind} from its manifests",
                        field="kind", expected=f"the {doc.kind} given to {_POLICIES[doc.kind]}")
