"""Docs are tests: every ``kubeberth`` command in a command block (```sh, ```console, ```bash) of
README.md and docs/*.md either runs here or is checked against the CLI.

Each command is resolved through the typer app (``typer.main.get_command``): every subcommand
must exist, every option named must exist on that (sub)command with the number of values it
takes, and the positional arguments must fit. Synopsis lines (``[--seed N]``, ``[-f more.yaml
...]``) are checked the same way with their brackets and ellipses dropped. A concrete command
whose subcommand is cheap and self-contained, whose files all exist, and that has no
placeholders runs in a temporary folder (``examples/`` linked in) and must exit 0. A new example in
any of those blocks is covered by this module without a new test.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.paths import DOCS, ROOT
from typer.testing import CliRunner

from kubeberth.cli.main import app

BLOCK = re.compile(r"^```(sh|console|bash)[ \t]*\n(.*?)^```", re.S | re.M)
SEPARATORS = {"&&", "||", "|", ";", "&"}
# Subcommands that finish in a few seconds on the examples and touch only files given to them.
RUNNABLE = {("explain",), ("admit",), ("deschedule",), ("manifests",), ("simulate",),
            ("spill", "sweep"), ("whatif",)}


@dataclass(frozen=True)
class DocCommand:
    """One ``kubeberth`` invocation found in a docs block: where, and its arguments."""

    where: str
    args: tuple[str, ...]
    synopsis: bool  # had [optional] parts or ... : checked, never run

    def __str__(self) -> str:
        return f"{self.where}: kubeberth {shlex.join(self.args)}"


def _logical_lines(block: str, console: bool) -> Iterator[tuple[int, str]]:
    """(offset of the first line, shell line) of a block: continuations joined; in a console
    block only the ``$`` lines (the rest is output)."""
    pending, first = "", 0
    for i, raw in enumerate(block.splitlines()):
        line = raw.rstrip()
        if not pending:
            first = i
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield first, pending + line
        pending = ""
    if pending:
        yield first, pending


def _expand(line: str) -> str:
    """Command substitutions (``$(...)``) of a kubeberth line expanded by bash, as the reader's
    shell would (``--seed`` lists built with ``seq``)."""
    if "$(" not in line:
        return line
    words = line.split("#", 1)[0]
    out = subprocess.run(["bash", "-c", f"set -f; printf '%s\\n' {words}"],
                         capture_output=True, text=True, check=True, timeout=30)
    return shlex.join(out.stdout.split())


def commands_in(text: str, where: str) -> list[DocCommand]:
    """Every ``kubeberth`` command of the command blocks in ``text``."""
    found: list[DocCommand] = []
    for match in BLOCK.finditer(text):
        start = text.count("\n", 0, match.start()) + 2  # the block's first line, 1-based
        for offset, line in _logical_lines(match.group(2), match.group(1) == "console"):
            if "kubeberth" not in line:
                continue
            if Path(line.split()[0]).name == "kubeberth":
                line = _expand(line)
            tokens = shlex.split(line, comments=True)
            segments: list[list[str]] = [[]]
            for tok in tokens:
                if tok in SEPARATORS:
                    segments.append([])
                else:
                    segments[-1].append(tok)
            for seg in segments:
                if not seg or Path(seg[0]).name != "kubeberth":
                    continue
                args = seg[1:]
                synopsis = any(t.startswith("[") or t.endswith("]") or "..." in t for t in args)
                args = [t.strip("[]").removesuffix("...").strip("[]") for t in args]
                args = [t for t in args if t]
                found.append(DocCommand(f"{where}:{start + offset}", tuple(args), synopsis))
    return found


def documented_commands() -> list[DocCommand]:
    files = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    return [c for f in files for c in commands_in(f.read_text(), f.relative_to(ROOT).as_posix())]


ROOT_COMMAND = typer.main.get_command(app)


def check_against_cli(args: tuple[str, ...]) -> tuple[str, ...]:
    """The subcommand path of ``args``; raises AssertionError naming what does not parse."""
    command: Any = ROOT_COMMAND  # typer's own click: groups are the commands with subcommands
    path: list[str] = []
    rest = list(args)
    while getattr(command, "commands", None) is not None:
        assert rest, f"'kubeberth {' '.join(path)}' needs a subcommand"
        name = rest.pop(0)
        sub = command.commands.get(name)
        assert sub is not None, (f"'kubeberth {' '.join(path)}' has no subcommand {name!r} "
                                 f"(it has {sorted(command.commands)})")
        command, path = sub, [*path, name]
    options = {opt: p for p in command.params if p.param_type_name == "option"
               for opt in (*p.opts, *p.secondary_opts)}
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    positional: list[str] = []
    where = f"'kubeberth {' '.join(path)}'"
    while rest:
        tok = rest.pop(0)
        if tok == "--":
            positional += rest
            break
        if not tok.startswith("-") or tok == "-":
            positional.append(tok)
            continue
        name, eq, value = tok.partition("=")
        if name not in options and not name.startswith("--") and len(name) > 2:
            name, value, eq = name[:2], name[2:], "="  # -ojson
        option = options.get(name)
        assert option is not None, (f"{where} has no option {name} "
                                    f"(it has {sorted(o for o in options if o.startswith('--'))})")
        takes = 0 if option.is_flag or option.count else option.nargs
        if eq:
            assert takes == 1, f"{where} {name} takes {takes} value(s), not '{name}={value}'"
            continue
        values = rest[:takes]
        assert len(values) == takes and not any(v.startswith("-") and len(v) > 1
                                                for v in values), \
            f"{where} {name} takes {takes} value(s), got {values}"
        del rest[:takes]
    fixed = sum(a.nargs for a in arguments if a.nargs > 0)
    unlimited = any(a.nargs < 0 for a in arguments)
    required = sum(a.nargs for a in arguments if a.required and a.nargs > 0)
    assert len(positional) >= required, f"{where} needs {required} argument(s), got {positional}"
    assert unlimited or len(positional) <= fixed, \
        f"{where} takes {fixed} argument(s), got {positional}"
    return tuple(path)


def runnable(cmd: DocCommand) -> bool:
    """Concrete, cheap, and every path it names that looks like an input exists."""
    if cmd.synopsis or not cmd.args:
        return False
    path = tuple(a for a in cmd.args[:2] if not a.startswith("-"))
    if path not in RUNNABLE and path[:1] not in RUNNABLE:
        return False
    if path == ("simulate",) and "--cluster" not in cmd.args:
        return False  # the bundled 1,523-node cluster: test_quickstart_simulate (slow)
    inputs = [a for a in cmd.args if a.startswith("examples/")]
    return all((ROOT / a).exists() for a in inputs)


COMMANDS = documented_commands()


def test_docs_have_commands() -> None:
    """The extraction itself works: the README quickstart and the synopses are found."""
    where = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "docs/simulate.md", "docs/extenders.md", "docs/live.md"} <= where
    assert any(c.args == ("simulate",) for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS, ids=str)
def test_documented_command_parses(cmd: DocCommand) -> None:
    check_against_cli(cmd.args)


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if runnable(c)], ids=str)
def test_documented_command_runs(cmd: DocCommand, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, list(cmd.args))
    assert result.exit_code == 0, f"{cmd}\n{result.output}"


SYNTHETIC = """\
Some prose.

```sh
kubeberth simulate --cluster c.yaml --no-such-flag 3
```

```console
$ kubeberth spill sweep --thresholds 2,4 [--until D] \\
    --cluster c.yaml
output line mentioning kubeberth --bogus (not a command)
```

```yaml
kubeberth: --not-a-command
```
"""


def test_checker_catches_a_bogus_flag() -> None:
    """A docs example edited to a flag the CLI does not have fails the check."""
    cmds = commands_in(SYNTHETIC, "synthetic.md")
    assert [(c.where, c.args, c.synopsis) for c in cmds] == [
        ("synthetic.md:4", ("simulate", "--cluster", "c.yaml", "--no-such-flag", "3"), False),
        ("synthetic.md:8", ("spill", "sweep", "--thresholds", "2,4", "--until", "D",
                            "--cluster", "c.yaml"), True),
    ]
    with pytest.raises(AssertionError, match="has no option --no-such-flag"):
        check_against_cli(cmds[0].args)
    assert check_against_cli(cmds[1].args) == ("spill", "sweep")


@pytest.mark.parametrize(("args", "message"), [
    (("simulat",), "has no subcommand 'simulat'"),
    (("spill",), "needs a subcommand"),
    (("simulate", "--seed"), "--seed takes 1 value"),
    (("simulate", "--quiet=yes"), "takes 0 value"),
    (("simulate", "extra.yaml"), "takes 0 argument"),
    (("report", "render"), "needs 1 argument"),
    (("explain", "-f", "--seed", "3"), "-f takes 1 value"),
])
def test_checker_catches_what_does_not_parse(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_against_cli(args)


@pytest.mark.slow
def test_quickstart_simulate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's quickstart, ``kubeberth simulate`` with no arguments, on the bundled trace."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["simulate"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {"summary.json", "timeseries.csv", "pods.csv",
                                               "report.html"}
    summary = json.loads((out / "summary.json").read_text())
    run, pods = summary["run"], summary["pods"]
    # The bundled openb cluster and default trace: 1,523 nodes, 8,152 pods, every one decided.
    assert (run["nodes"], run["workload"], run["seed"]) == (1523, "openb-default", 0)
    assert pods["total"] == 8152
    assert pods["scheduled"] + pods["unscheduled"] + pods["ignored"] == pods["total"]
    assert summary["decisions"] >= pods["total"] and summary["simulatedSeconds"] > 0
    for resource in ("cpu", "gpu", "memory"):
        share = summary["allocationPct"][resource]
        assert 0 < share["mean"] <= share["peak"] <= 100
    assert len((out / "pods.csv").read_text().splitlines()) == pods["total"] + 1
