"""The worked DRF example (examples/volcano-drf) through the documented command: 33 tasks each,
dominant shares 66 %, the cluster 99 % used; and a bad Volcano configuration exits 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.paths import EXAMPLES
from typer.testing import CliRunner

from kubeberth.cli.main import app

DRF = EXAMPLES / "volcano-drf"
COMMAND = ["explain", "-f", str(DRF / "cluster.yaml"), "-f", str(DRF / "jobs.yaml"),
           "--volcano-config", str(DRF / "volcano-scheduler.conf")]


def test_the_worked_drf_example_reproduces() -> None:
    res = CliRunner().invoke(app, [*COMMAND, "-o", "json"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    groups = data["volcano"]["podGroups"]
    by_tenant = {name.split("/")[1][:8]: g for name, g in groups.items()}
    assert by_tenant["tenant-a"]["tasks"] == 33
    assert by_tenant["tenant-b"]["tasks"] == 33
    assert by_tenant["tenant-a"]["allocated"] == {"cpu": 66, "nvidia.com/gpu": 33}
    assert by_tenant["tenant-b"]["allocated"] == {"cpu": 33, "nvidia.com/gpu": 66}
    assert by_tenant["tenant-a"]["dominantShare"] == 0.66
    assert by_tenant["tenant-b"]["dominantShare"] == 0.66
    util = data["volcano"]["cluster"]["utilisation"]
    assert util["cpu"] == 0.99 and util["nvidia.com/gpu"] == 0.99
    scheduled = [p for p in data["pods"] if p["result"] == "Scheduled"]
    assert len(scheduled) == 66


def test_the_table_shows_the_shares() -> None:
    res = CliRunner().invoke(app, COMMAND)
    assert res.exit_code == 0, res.stderr
    assert "66%" in res.stdout and "cpu 99%" in res.stdout


def test_the_readme_shows_the_command() -> None:
    readme = (DRF / "README.md").read_text()
    assert "kubeberth explain -f examples/volcano-drf/" in readme
    assert "--volcano-config examples/volcano-drf/volcano-scheduler.conf" in readme


def test_an_unknown_plugin_exits_2_naming_it(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: drff\n')
    res = CliRunner().invoke(app, ["explain", "-f", str(DRF / "cluster.yaml"),
                                   "--volcano-config", str(conf)])
    assert res.exit_code == 2
    assert "unknown plugin 'drff'" in res.stderr
    assert "volcano-scheduler.conf" in res.stderr


def test_simulate_refuses_volcano_jobs_rather_than_dropping_them(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(DRF / "cluster.yaml"),
                                   "-w", str(DRF / "jobs.yaml"), "--out-dir",
                                   str(tmp_path / "out"), "-q"])
    assert res.exit_code == 2
    assert "Volcano Jobs are not simulated yet" in res.stderr
    assert "jobs.yaml" in res.stderr


def _explain_job(tmp_path: Path, cpus: str) -> dict[str, object]:
    from tests.config.test_volcano_objects import JOB

    tmp_path.mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "node.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        f"status: {{allocatable: {{cpu: '{cpus}', memory: 8Gi, pods: '110'}}}}\n")
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path), "-o", "json"])
    assert res.exit_code == 0, res.stderr
    data: dict[str, object] = json.loads(res.stdout)
    return data


def test_volcanos_example_job_is_scheduled_as_a_gang(tmp_path: Path) -> None:
    """Volcano's example/job.yaml shape (minAvailable 3 of 6 one-CPU tasks) under the default
    volcano-scheduler.conf: 8 CPUs place all six; 2 CPUs place none."""
    data = _explain_job(tmp_path / "big", "8")
    assert sum(p["result"] == "Scheduled" for p in data["pods"]) == 6  # type: ignore[attr-defined]
    data = _explain_job(tmp_path / "small", "2")
    assert sum(p["result"] == "Scheduled" for p in data["pods"]) == 0  # type: ignore[attr-defined]


def test_explain_without_volcano_pods_has_no_volcano_section() -> None:
    res = CliRunner().invoke(app, ["explain", "-f", str(DRF / "cluster.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.stderr
    assert "volcano" not in json.loads(res.stdout)
