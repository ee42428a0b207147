"""Run folders shared by the report tests (simulated once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import CLUSTER, WORKLOAD, simulate


@pytest.fixture(scope="session")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    (d / "cluster.yaml").write_text(CLUSTER)
    (d / "workload.yaml").write_text(WORKLOAD)
    return d


@pytest.fixture(scope="session")
def run_dir(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate(inputs, tmp_path_factory.mktemp("runs") / "run")


@pytest.fixture(scope="session")
def other_run_dir(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same workload with a bind latency and another seed: a second 'policy'."""
    return simulate(inputs, tmp_path_factory.mktemp("runs") / "slow-bind", "--seed", "7",
                    "--bind-latency", "2")
