"""``kubeberth manifests`` as a command: YAML on stdout, bad input exits 2 without a
traceback."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_prints_every_controller_by_default() -> None:
    res = CliRunner().invoke(app, ["manifests"])
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.stdout))
    deployments = [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"]
    assert deployments == ["kubeberth-scheduler", "kubeberth-descheduler",
                           "kubeberth-spill-controller", "kubeberth-admission"]
    assert {d["metadata"].get("namespace") for d in docs} == {"kubeberth-system", None}


def test_options_select_controllers_namespace_image_and_files() -> None:
    policy = EXAMPLES / "spill" / "descheduler.yaml"
    res = CliRunner().invoke(app, ["manifests", "--controller", "descheduler", "--controller",
                                   "scheduler", "-n", "gpu", "--image", "reg.example/kb:1",
                                   "--policy", str(policy)])
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.stdout))
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == ["kubeberth-descheduler",
                                                            "kubeberth-scheduler"]
    for d in deployments:
        assert d["metadata"]["namespace"] == "gpu"
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "reg.example/kb:1"
    cm = next(d for d in docs if d["metadata"]["name"] == "kubeberth-descheduler-config")
    assert cm["data"]["policy.yaml"] == policy.read_text()


def test_bad_input_exits_2_naming_the_problem(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["manifests", "--controller", "kueue"])
    assert res.exit_code == 2
    assert "unknown controller 'kueue'" in res.output and "Traceback" not in res.output
    bad = tmp_path / "spill.yaml"
    bad.write_text("apiVersion: kubeberth.io/v1alpha1\nkind: SpillConfig\nbogus: 1\n")
    res = runner.invoke(app, ["manifests", "--spill-config", str(bad)])
    assert res.exit_code == 2
    assert "spill.yaml" in res.output and "bogus" in res.output
    res = runner.invoke(app, ["manifests", "--controller", "admission", "--config",
                              str(EXAMPLES / "gangs" / "scheduler-config.yaml")])
    assert res.exit_code == 2 and "--config" in res.output
