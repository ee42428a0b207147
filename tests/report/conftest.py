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


EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="session")
def kueue_spill_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The end-to-end spill example (four Kueue queues, VK node, descheduler return)."""
    from .helpers import invoke
    spill = EXAMPLES / "spill"
    out = tmp_path_factory.mktemp("runs") / "kueue-spill"
    code, stdout, stderr = invoke(
        "simulate", "--cluster", str(spill / "cluster.yaml"), "-w", str(spill / "kueue.yaml"),
        "-w", str(spill / "workload-return.yaml"), "--spill-config", str(spill / "spill.yaml"),
        "--deschedule-policy", str(spill / "descheduler.yaml"), "-o", str(out), "-q")
    assert code == 0, stdout + stderr
    return out
