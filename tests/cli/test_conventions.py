"""kubectl's conventions on every offline command: ``-o`` is a format, folders are
``--out-dir``, durations are Go durations, one ``--plugin`` serves every family, and the old
spellings keep working with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.paths import EXAMPLES
from typer.testing import CliRunner

from kubeberth.cli.main import app

GANGS = EXAMPLES / "gangs"
SIM = ("simulate", "--cluster", str(GANGS / "cluster.yaml"), "-w", str(GANGS / "workload.yaml"),
       "--config", str(GANGS / "scheduler-config.yaml"), "-q")
SPILL = EXAMPLES / "spill"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_simulate_prints_its_summary_as_json_and_yaml(tmp_path: Path) -> None:
    code, out, err = invoke(*SIM, "--out-dir", str(tmp_path / "a"), "-o", "json")
    assert code == 0, err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert json.loads(out) == summary
    code, out, err = invoke(*SIM, "--out-dir", str(tmp_path / "b"), "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out) == json.loads((tmp_path / "b" / "summary.json").read_text())
    assert "deprecated" not in err


@pytest.mark.parametrize("flags", [("-o", "{dir}"), ("--out", "{dir}")])
def test_old_folder_spellings_still_work_and_warn(tmp_path: Path, flags: tuple[str, str]) -> None:
    folder = tmp_path / "old"
    code, out, err = invoke(*SIM, flags[0], flags[1].format(dir=folder))
    assert code == 0, err
    assert (folder / "summary.json").exists() and (folder / "report.html").exists()
    assert "deprecated" in err and "--out-dir" in " ".join(err.split())
    assert "wrote" in out  # the table output, as before


def test_go_durations_and_seconds_mean_the_same(tmp_path: Path) -> None:
    common = ("simulate", "--cluster", str(SPILL / "cluster.yaml"), "-w",
              str(SPILL / "workload.yaml"), "--deschedule-policy", str(SPILL / "descheduler.yaml"),
              "-q", "-o", "json")
    code, out, err = invoke(*common, "--out-dir", str(tmp_path / "go"),
                            "--descheduling-interval", "2m", "--until", "1h30m")
    assert code == 0, err
    go = json.loads(out)
    code, out, err = invoke(*common, "--out-dir", str(tmp_path / "s"),
                            "--descheduling-interval", "120", "--until", "5400")
    assert code == 0, err
    plain = json.loads(out)
    assert go["run"]["descheduler"]["intervalSeconds"] == 120.0
    assert go["run"]["descheduler"] == plain["run"]["descheduler"]
    assert go["pods"] == plain["pods"]


@pytest.mark.parametrize(("flag", "value"), [("--until", "5x"), ("--bind-latency", "-1s"),
                                              ("--descheduling-interval", "soon")])
def test_bad_duration_names_the_flag(tmp_path: Path, flag: str, value: str) -> None:
    code, _, err = invoke(*SIM, "--out-dir", str(tmp_path), flag, value)
    assert code == 2 and "Traceback" not in err
    message = " ".join(err.split())
    assert flag in message and "duration" in message


SPOT = """\
apiVersion: v1
kind: Node
metadata: {name: spot-1, labels: {node-pool: spot}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: spot-2, labels: {node-pool: spot}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
"""
TRAIN = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: research}
spec:
  replicas: 2
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""
RECYCLE = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: spot-recycling
    pluginConfig:
      - {name: DefaultEvictor, args: {minPodAge: 1m}}
      - {name: NodePoolMaxAge, args: {nodeSelector: node-pool=spot, maxPodAge: 1h}}
    plugins:
      deschedule: {enabled: [NodePoolMaxAge]}
"""


def test_one_plugin_flag_loads_a_scheduling_and_a_descheduler_plugin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES / "nodenumber"))
    monkeypatch.syspath_prepend(str(EXAMPLES / "descheduler-strategy"))
    for name, text in (("spot.yaml", SPOT), ("train.yaml", TRAIN), ("policy.yaml", RECYCLE)):
        (tmp_path / name).write_text(text)
    args = ("simulate", "--cluster", str(tmp_path / "spot.yaml"), "-w",
            str(tmp_path / "train.yaml"), "--config",
            str(EXAMPLES / "nodenumber" / "scheduler-config.yaml"),
            "--deschedule-policy", str(tmp_path / "policy.yaml"),
            "--descheduling-interval", "30m", "--until", "3h", "-o", "json", "-q")
    code, _, err = invoke(*args, "--out-dir", str(tmp_path / "a"))
    assert code == 2 and "NodePoolMaxAge" in err  # unknown without --plugin
    code, out, err = invoke(*args, "--out-dir", str(tmp_path / "b"),
                            "--plugin", "nodenumber:NodeNumber",
                            "--plugin", "nodepoolmaxage:SPEC")
    assert code == 0, err
    assert json.loads(out)["run"]["descheduler"]["requestedByPlugin"]["NodePoolMaxAge"] > 0


def test_a_plugin_of_no_family_names_every_expected_form(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES / "descheduler-strategy"))
    code, _, err = invoke(*SIM, "--out-dir", str(tmp_path), "--plugin",
                          "nodepoolmaxage:parse_args")
    assert code == 2
    message = " ".join(err.split())
    assert "is not a scheduling plugin or descheduler plugin or admission check plugin" in message
    assert "new(args, handle)" in message and "PluginSpec" in message and "evaluate" in message


def test_report_out_file_and_its_old_spelling(tmp_path: Path) -> None:
    code, _, err = invoke(*SIM, "--out-dir", str(tmp_path / "run"))
    assert code == 0, err
    code, _, err = invoke("report", "render", str(tmp_path / "run"), "--out-file",
                            str(tmp_path / "new.html"))
    assert code == 0 and (tmp_path / "new.html").exists() and "deprecated" not in err
    code, _, err = invoke("report", "render", str(tmp_path / "run"), "-o",
                            str(tmp_path / "old.html"))
    assert code == 0 and (tmp_path / "old.html").exists()
    assert "deprecated" in err and "--out-file" in err


def test_explain_prints_yaml(tmp_path: Path) -> None:
    args = ("explain", "-f", str(GANGS / "cluster.yaml"), "-f", str(GANGS / "workload.yaml"))
    code, out, err = invoke(*args, "-o", "json")
    assert code == 0, err
    code, again, err = invoke(*args, "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(again) == json.loads(out)


def test_until_runs_periodic_passes_to_the_end_of_the_span(tmp_path: Path) -> None:
    """The workload settles early; --until keeps the descheduler's passes going to 2h."""
    code, out, err = invoke("simulate", "--cluster", str(SPILL / "cluster.yaml"), "-w",
                            str(SPILL / "workload.yaml"), "--deschedule-policy",
                            str(SPILL / "descheduler.yaml"), "--descheduling-interval", "10m",
                            "--until", "2h", "-o", "json", "-q", "--out-dir", str(tmp_path))
    assert code == 0, err
    data = json.loads(out)
    assert data["simulatedSeconds"] == 7200.0
    assert data["run"]["descheduler"]["passes"] == 12
