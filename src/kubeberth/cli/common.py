"""What every ``kubeberth`` command shares: how bad input is printed, the output formats and
the scheduling plugin registry.

Every command turns bad input into one paragraph on stderr (file, line or field, what was
expected) and exit code 2, never a traceback; the layers below raise InputError and
:func:`user_errors` is the only place that prints it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

import typer
from rich.console import Console

from kubeberth.api.errors import InputError
from kubeberth.scheduling.config.types import SchedulerConfiguration
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.registry import in_tree_registry

err_console = Console(stderr=True)


class OutputFormat(StrEnum):
    json = "json"
    table = "table"


@contextmanager
def user_errors(config: SchedulerConfiguration | None = None) -> Iterator[None]:
    """Print an InputError (located in ``config`` when it names no file) and exit 2."""
    try:
        yield
    except InputError as err:
        if err.source is None and config is not None and config.source:
            err = err.at(source=config.source,
                         line=config.locate(err.field) if err.field else None)
        err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def scheduling_registry(plugins: list[str] | None) -> Registry:
    """The in-tree plugins, those installed as entry points, and ``--plugin module:attr``."""
    return in_tree_registry().with_out_of_tree(plugins)
