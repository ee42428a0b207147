"""Documented flags of the offline commands, each checked by what it changes in the output (a
flag that did nothing fails here): ``simulate --sample-interval`` and ``--until``, ``spill sweep
--until``, ``experiment fragmentation --trace`` and ``--ray-address``."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
from pathlib import Path

from tests.paths import EXAMPLES
from typer.testing import CliRunner

from kubeberth.cli.main import app

CLUSTER = str(EXAMPLES / "spill" / "cluster.yaml")
WORKLOAD = str(EXAMPLES / "spill" / "workload.yaml")
SPILL = str(EXAMPLES / "spill" / "spill.yaml")


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def _simulate(out: Path, *extra: str) -> tuple[dict[str, object], list[float]]:
    _invoke("simulate", "-q", "--cluster", CLUSTER, "-w", WORKLOAD, "--out-dir", str(out),
            *extra)
    summary = json.loads((out / "summary.json").read_text())
    with (out / "timeseries.csv").open() as f:
        times = [float(row["time"]) for row in csv.DictReader(f)]
    return summary, times


def test_simulate_sample_interval_and_until(tmp_path: Path) -> None:
    full, full_times = _simulate(tmp_path / "full")
    assert full["simulatedSeconds"] == 4800.0 and full_times[1] - full_times[0] == 2.0
    cut, times = _simulate(tmp_path / "cut", "--sample-interval", "7s", "--until", "10m")
    # --sample-interval: one row every 7 s, plus the closing row at the end of the run.
    assert times[:3] == [0.0, 7.0, 14.0]
    assert all(b - a == 7.0 for a, b in itertools.pairwise(times[:-1]))
    # --until: the run stops at 600 s, with the pods that had not arrived yet left out.
    assert cut["simulatedSeconds"] == 600.0 and times[-1] == 600.0
    assert cut["pods"] == {"ignored": 0, "preemptions": 0, "scheduled": 13, "total": 17,
                           "unscheduled": 4}
    assert full["pods"]["total"] == 20  # type: ignore[index]


def test_spill_sweep_until(tmp_path: Path) -> None:
    base = ("spill", "sweep", "--cluster", CLUSTER, "-w", WORKLOAD, "--spill-config", SPILL,
            "--thresholds", "2", "--windows", "1m", "--stabilizations", "0", "-o", "json")
    full = json.loads(_invoke(*base))["runs"][0]
    cut = json.loads(_invoke(*base, "--until", "10m"))["runs"][0]
    assert (full["secondsTainted"], full["podsSpilled"], full["neverScheduled"]) == (1830.0, 4, 0)
    # Cut at 600 s: tainted from the start to the cut, nothing spilled yet, four still waiting.
    assert (cut["secondsTainted"], cut["podsSpilled"], cut["neverScheduled"]) == (600.0, 0, 4)


def _grid(out: Path, *extra: str) -> list[dict[str, str]]:
    _invoke("experiment", "fragmentation", "--policy", "BestFit", "--seed", "5", "--tune", "0.02",
            "-j", "1", "--out-dir", str(out), *extra)
    with (out / "fragmentation.csv").open() as f:
        return list(csv.DictReader(f))


def test_experiment_trace_selects_the_trace(tmp_path: Path) -> None:
    default = _grid(tmp_path / "default")
    other = _grid(tmp_path / "gpushare40", "--trace", "gpushare40")
    assert {r["trace"] for r in default} == {"default"}
    assert {r["trace"] for r in other} == {"gpushare40"}


def test_experiment_ray_address_reaches_ray(tmp_path: Path) -> None:
    """Ray is the optional extra kubeberth[ray], not in the dev extras. Without it the flag must
    still be acted on: the run refuses (exit 2, naming the flag) instead of quietly using the
    local pool. With Ray installed, ``--ray-address local`` runs the grid on a Ray instance
    and gives the local pool's bytes."""
    args = ["experiment", "fragmentation", "--policy", "BestFit", "--seed", "5", "--tune", "0.02",
            "--out-dir", str(tmp_path / "ray"), "--ray-address", "local"]
    res = CliRunner().invoke(app, args)
    if importlib.util.find_spec("ray") is None:
        assert res.exit_code == 2, res.output
        assert "--ray-address needs Ray, which is not installed" in res.stderr
        assert "pip install 'kubeberth[ray]'" in " ".join(res.stderr.split())
        assert not (tmp_path / "ray" / "fragmentation.csv").exists()
        return
    assert res.exit_code == 0, res.output
    local = _grid(tmp_path / "local")
    with (tmp_path / "ray" / "fragmentation.csv").open() as f:
        assert list(csv.DictReader(f)) == local
