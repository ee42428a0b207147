"""``kubeberth report``: HTML reports from run folders already on disk.

``simulate`` writes ``report.html`` next to its JSON and CSV; these commands work from the
files alone: ``render`` re-creates one run's page (after an upgrade, or for a folder copied
from elsewhere) and ``compare`` puts several runs (one per policy, typically) side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from kubeberth.cli.common import deprecated, user_errors

report_app = typer.Typer(no_args_is_help=True, add_completion=False,
                         help="HTML reports from simulate output folders.")


# Before -o meant an output format on every command, it named these commands' HTML file.
OldOutputOpt = Annotated[Path | None, typer.Option("--output", "-o", hidden=True)]


def _out_file_option(default: str) -> Any:
    """``--out-file``, its help naming the command's default file."""
    return typer.Option("--out-file", help=f"HTML file to write (default: {default}).")


def _out_file(out_file: Path | None, old_output: Path | None) -> Path | None:
    if old_output is not None:
        deprecated("-o/--output FILE", "--out-file FILE")
        return out_file or old_output
    return out_file


@report_app.command("render")
def render(
    run: Annotated[Path, typer.Argument(
        help="A folder written by `kubeberth simulate --out-dir`.")],
    out_file: Annotated[Path | None, _out_file_option("RUN/report.html")] = None,
    old_output: OldOutputOpt = None,
) -> None:
    """Re-create a run's HTML report from its summary.json, timeseries.csv and pods.csv."""
    from kubeberth.report.sections import write_run_report

    with user_errors():
        path = write_run_report(run, _out_file(out_file, old_output))
    Console().print(f"wrote {escape(str(path))}", highlight=False, soft_wrap=True)


@report_app.command("compare")
def compare(
    runs: Annotated[list[Path], typer.Argument(
        help="Two or more folders written by `kubeberth simulate --out-dir`, one per policy.")],
    out_file: Annotated[Path | None, _out_file_option("compare.html")] = None,
    old_output: OldOutputOpt = None,
) -> None:
    """Overlay several runs' time series and put their summaries side by side."""
    from kubeberth.report.compare import write_compare_report

    with user_errors():
        path = write_compare_report(runs, _out_file(out_file, old_output)
                                    or Path("compare.html"))
    Console().print(f"wrote {escape(str(path))}", highlight=False, soft_wrap=True)
