"""``kubeberth simulate`` over the spill example (examples/spill), for the CLI tests of spill
and of the Descheduler's return path."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "spill"


def simulate(tmp_path: Path, *extra: str, workload: str = "workload.yaml"
             ) -> tuple[int, str, Path]:
    """Run the example's cluster and ``workload`` into ``tmp_path/out``: exit code, output, out."""
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(EXAMPLE / workload), "-o", str(out), "-q", *extra])
    return res.exit_code, res.output, out
