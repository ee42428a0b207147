"""A run folder read back from disk: the only input a report has.

Reports are built from what ``kubeberth simulate`` wrote (``summary.json``, ``timeseries.csv``,
``pods.csv``), never from the simulator's memory, so ``kubeberth report render`` re-creates the
same page from the files alone and ``report compare`` can put runs made on other days or machines
side by side. Later features that write more files next to these (a per-queue CSV, a spill
timeline) read them through :meth:`Run.table` without a change here.

A folder that is missing, not a run, or damaged is bad input: :class:`InputError` names the
file, line and column or field, and what was expected.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.report.output import PODS_COLUMNS, PODS_FILE, SERIES_FILE, SUMMARY_FILE
from kubeberth.sim.metrics import SERIES_COLUMNS

EXPECTED_FOLDER = "a folder written by `kubeberth simulate -o FOLDER`"

NUMBER = (int, float)
JSON_NAMES: dict[type, str] = {dict: "object", list: "array", str: "string", int: "integer",
                               float: "number", bool: "boolean"}
# summary.json fields the built-in sections read, with the JSON types they must have.
SUMMARY_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("run", dict),
    ("pods", dict),
    ("pods.total", int),
    ("pods.scheduled", int),
    ("pods.unscheduled", int),
    ("pods.preemptions", int),
    ("attempts", dict),
    ("waitSeconds", dict),
    ("allocationPct", dict),
    ("simulatedSeconds", NUMBER),
    ("pendingReasons", dict),
)


@dataclass(slots=True)
class Columns:
    """A CSV file as named columns of strings; :meth:`num` converts one to float64 (empty
    cells become NaN) and names the line of any cell that is not a number."""

    source: Path
    names: tuple[str, ...]
    cells: dict[str, list[str]]
    _nums: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cells[self.names[0]]) if self.names else 0

    def __contains__(self, name: object) -> bool:
        return name in self.cells

    def text(self, name: str) -> list[str]:
        return self.cells[name]

    def num(self, name: str) -> np.ndarray:
        cached = self._nums.get(name)
        if cached is not None:
            return cached
        values = self.cells[name]
        try:
            arr = np.array([v if v else "nan" for v in values], dtype=np.float64)
        except ValueError:
            for i, v in enumerate(values):
                try:
                    float(v or "nan")
                except ValueError:
                    raise InputError(
                        f"{v!r} is not a number", source=str(self.source), line=i + 2,
                        field=name, expected="a decimal number or an empty cell") from None
            raise
        self._nums[name] = arr
        return arr


def read_columns(path: Path, required: Sequence[str] = ()) -> Columns:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except FileNotFoundError:
        raise InputError(f"{path.name} is missing", source=str(path.parent),
                         expected=EXPECTED_FOLDER) from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"cannot read: {err}", source=str(path),
                         expected="a UTF-8 CSV file with a header row") from None
    if not rows:
        raise InputError("empty file", source=str(path), expected="a CSV header row")
    header = tuple(rows[0])
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=str(path), line=1,
                         expected=f"a header with {', '.join(required)}")
    cells: dict[str, list[str]] = {name: [] for name in header}
    width = len(header)
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise InputError(f"{len(row)} cells in a row of a {width}-column file",
                             source=str(path), line=i, expected=f"{width} cells")
        for name, value in zip(header, row, strict=True):
            cells[name].append(value)
    return Columns(path, header, cells)


def _lookup(data: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path; a numeric part indexes a list (``spill.flips.0.time``)."""
    value: Any = data
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _check(value: object, kind: type | tuple[type, ...], path: Path, dotted: str) -> None:
    if isinstance(value, kind) and not isinstance(value, bool):
        return
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = " or ".join(JSON_NAMES[k] for k in kinds)
    found = "missing" if value is None else f"a JSON {JSON_NAMES.get(type(value), 'value')}"
    raise InputError(f"is {found}", source=str(path), field=dotted, expected=f"a JSON {names}")


def read_summary(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path.name} is missing", source=str(path.parent),
                         expected=EXPECTED_FOLDER) from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", source=str(path),
                         expected="a UTF-8 JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON: {err.msg}", source=str(path), line=err.lineno,
                         expected="the summary.json written by `kubeberth simulate`") from None
    if not isinstance(data, dict):
        raise InputError("not a JSON object", source=str(path),
                         expected="the summary.json written by `kubeberth simulate`")
    for dotted, kind in SUMMARY_FIELDS:
        try:
            value = _lookup(data, dotted)
        except (KeyError, TypeError):
            value = None
        _check(value, kind, path, dotted)
    for key, value in data["attempts"].items():
        _check(value, int, path, f"attempts.{key}")
    for key, value in data["waitSeconds"].items():
        _check(value, NUMBER, path, f"waitSeconds.{key}")
    for key, value in data["allocationPct"].items():
        _check(value, dict, path, f"allocationPct.{key}")
        for sub in ("mean", "peak"):
            _check(value.get(sub), NUMBER, path, f"allocationPct.{key}.{sub}")
    for key, value in data["pendingReasons"].items():
        _check(value, str, path, f"pendingReasons.{key}")
    return data


@dataclass(slots=True)
class Run:
    """One simulate output folder. ``label`` names it in comparisons (the path as given)."""

    folder: Path
    summary: dict[str, Any]
    series: Columns
    pods: Columns
    _tables: dict[str, Columns | None] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return str(self.folder)

    def get(self, dotted: str, kind: type | tuple[type, ...]) -> Any:
        """A ``summary.json`` value (``"spill.flips"``) checked to be of the JSON ``kind``;
        InputError naming the field when it is missing or of another type."""
        try:
            value = _lookup(self.summary, dotted)
        except (KeyError, TypeError, IndexError, ValueError):
            value = None
        _check(value, kind, self.folder / SUMMARY_FILE, dotted)
        return value

    def table(self, name: str, required: Sequence[str] = ()) -> Columns | None:
        """Another CSV in the folder, or None when this run did not write it."""
        if name not in self._tables:
            path = self.folder / name
            self._tables[name] = read_columns(path, required) if path.is_file() else None
        return self._tables[name]


def load_run(folder: Path) -> Run:
    if not folder.exists():
        raise InputError("no such folder", source=str(folder), expected=EXPECTED_FOLDER)
    if not folder.is_dir():
        raise InputError("not a folder", source=str(folder), expected=EXPECTED_FOLDER)
    summary = read_summary(folder / SUMMARY_FILE)
    series = read_columns(folder / SERIES_FILE, SERIES_COLUMNS)
    pods = read_columns(folder / PODS_FILE, PODS_COLUMNS)
    for name in SERIES_COLUMNS:
        series.num(name)
    for name in ("arrival", "bound", "wait_seconds", "preempted"):
        pods.num(name)
    return Run(folder, summary, series, pods)


def write_html(path: Path, text: str) -> Path:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror}", source=str(path),
                         expected="a writable file path in an existing folder") from None
    return path
