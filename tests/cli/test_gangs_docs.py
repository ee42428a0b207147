"""The YAML in docs/gangs.md is what users paste: every scheduler configuration there loads
and runs, and every complete object there passes validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.config.scheduling_crds import load_scheduling_crds

DOC = Path(__file__).resolve().parents[2] / "docs" / "gangs.md"
BLOCKS = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
CONFIGS = [b for b in BLOCKS if "KubeSchedulerConfiguration" in b]
OBJECTS = [b for b in BLOCKS if "KubeSchedulerConfiguration" not in b and "..." not in b]

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "10"}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def test_the_doc_has_the_blocks() -> None:
    assert len(CONFIGS) == 3 and len(OBJECTS) >= 2


@pytest.mark.parametrize("block", CONFIGS)
def test_pasted_configurations_run(block: str, tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text(block)
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump_all([NODE, POD]))
    res = CliRunner().invoke(app, ["explain", "-f", str(m), "--config", str(cfg), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert '"result": "Scheduled"' in res.stdout


@pytest.mark.parametrize("block", OBJECTS)
def test_pasted_objects_validate(block: str, tmp_path: Path) -> None:
    f = tmp_path / "objects.yaml"
    f.write_text(block)
    crds = load_scheduling_crds(load_manifests([f]))
    assert crds.pod_groups or crds.elastic_quotas or crds.queues


def test_the_plugins_are_listed() -> None:
    res = CliRunner().invoke(app, ["plugins"])
    assert res.exit_code == 0
    for name in ("Coscheduling", "CapacityScheduling", "VolcanoDRF", "VolcanoProportion"):
        assert name in res.stdout
