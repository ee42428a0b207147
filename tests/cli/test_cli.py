"""The command line: quickstart paths, explain output, bad input, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "nodenumber"

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {zone: b}}
spec:
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
"""

PODS = """\
apiVersion: v1
kind: Pod
metadata:
  name: small
  annotations: {kubeberth.io/arrival-seconds: "0", kubeberth.io/duration-seconds: "30"}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: large
  annotations: {kubeberth.io/arrival-seconds: "5", kubeberth.io/duration-seconds: "30"}
spec:
  containers: [{name: c, resources: {requests: {cpu: "4", memory: 1Gi}}}]
"""


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "pods.yaml").write_text(PODS)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_explain_json_contract(files: Path) -> None:
    code, out, _ = invoke("explain", "-f", str(files / "cluster.yaml"), "-f",
                          str(files / "pods.yaml"), "-o", "json")
    assert code == 0
    data = json.loads(out)
    small, large = data["pods"]
    assert small["pod"] == "default/small" and small["selectedNode"] == "n1"
    assert small["nodes"]["n2"]["filter"]["TaintToleration"] == {
        "code": "UnschedulableAndUnresolvable",
        "reasons": ["node(s) had untolerated taint(s)"]}
    # n1 is the lone feasible node: taken without PreScore/Score, as upstream does.
    assert small["nodes"]["n1"]["scored"] is False and small["nodes"]["n1"]["score"] == {}
    assert large["result"] == "Unschedulable" and large["selectedNode"] is None
    assert large["message"].startswith("0/2 nodes are available:")
    assert "Insufficient cpu" in large["message"]
    tolerant = files / "tolerant.yaml"
    tolerant.write_text(PODS.split("---")[0].replace("name: small", "name: tolerant").replace(
        "spec:\n", "spec:\n  tolerations: [{key: gpu, operator: Exists}]\n"))
    code, out, _ = invoke("explain", "-f", str(files / "cluster.yaml"), "-f", str(tolerant),
                          "-o", "json")
    assert code == 0
    (scored,) = json.loads(out)["pods"]
    assert all(n["scored"] for n in scored["nodes"].values())
    assert set(scored["nodes"]["n1"]["score"]) >= {"NodeResourcesFit", "TaintToleration"}
    entry = scored["nodes"]["n1"]["score"]["NodeResourcesFit"]
    assert set(entry) == {"raw", "normalized", "weighted"}


def test_explain_table(files: Path) -> None:
    code, out, _ = invoke("explain", "-f", str(files / "cluster.yaml"), "-f",
                          str(files / "pods.yaml"))
    assert code == 0
    assert "default/small" in out and "Scheduled" in out and "Insufficient cpu" in out


def test_simulate_writes_outputs_and_is_deterministic(files: Path, tmp_path: Path) -> None:
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        code, stdout, _ = invoke("simulate", "--cluster", str(files / "cluster.yaml"),
                                 "--workload", str(files / "pods.yaml"), "--seed", "3",
                                 "-o", str(out), "-q")
        assert code == 0, stdout
        outs.append(out)
    for name in ("summary.json", "timeseries.csv", "pods.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    summary = json.loads((outs[0] / "summary.json").read_text())
    assert summary["pods"]["total"] == 2
    assert summary["unscheduledPods"] == ["default/large"]


def test_simulate_reports_a_score_error_as_the_pods_pending_reason(files: Path,
                                                                   tmp_path: Path) -> None:
    """A configuration that disables every PreScore makes upstream's TaintToleration Score fail:
    the attempt is an error, the pod stays unscheduled with that error as its reason."""
    config = tmp_path / "sched.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                      "kind: KubeSchedulerConfiguration\n"
                      "profiles:\n- plugins: {preScore: {disabled: [{name: '*'}]}}\n")
    workload = tmp_path / "tolerant.yaml"
    workload.write_text(PODS.split("---")[0].replace(
        "spec:\n", "spec:\n  tolerations: [{key: gpu, operator: Exists}]\n"))
    out = tmp_path / "out"
    code, stdout, _ = invoke("simulate", "--cluster", str(files / "cluster.yaml"),
                             "--workload", str(workload), "--config", str(config),
                             "--out-dir", str(out), "-q")
    assert code == 0, stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unscheduledPods"] == ["default/small"]
    assert summary["attempts"]["error"] >= 1
    assert summary["pendingReasons"]["default/small"].startswith(
        'running Score plugins: plugin "TaintToleration" failed with: failed to read')


@pytest.mark.parametrize(("content", "needle"), [
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1\n", "line"),
    ("apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: x}\n", "v1beta1"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
     "  - resources: {requests: {cpu: -1}}\n", "cpu"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
     "  - resources: {requests: {memory: lots}}\n", "memory"),
])
def test_bad_manifests_exit_2_without_traceback(tmp_path: Path, content: str,
                                                needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    code, out, err = invoke("explain", "-f", str(bad), "-o", "json")
    assert code == 2
    assert "Traceback" not in out + err
    assert "bad.yaml" in err and needle in err


@pytest.mark.parametrize(("config", "needle"), [
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
     "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled:\n"
     "      - name: NoSuchPlugin\n", "NoSuchPlugin"),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
     "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n"
     "  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Wrong\n",
     "scoringStrategy"),
])
def test_bad_scheduler_config_names_file_and_line(files: Path, tmp_path: Path, config: str,
                                                  needle: str) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text(config)
    code, out, err = invoke("explain", "-f", str(files / "cluster.yaml"), "--config", str(cfg))
    assert code == 2
    assert "Traceback" not in out + err
    assert "sched.yaml:" in err and needle in err


def test_plugins_lists_in_tree_plugins() -> None:
    code, out, _ = invoke("plugins")
    assert code == 0
    for name in ("NodeResourcesFit", "DefaultPreemption", "PodTopologySpread", "PrioritySort",
                 "LowNodeUtilization", "DefaultEvictor"):
        assert name in out


def test_plugins_lists_every_family_with_out_of_tree_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    examples = EXAMPLE.parent
    for folder in ("nodenumber", "descheduler-strategy", "admission-check"):
        monkeypatch.syspath_prepend(str(examples / folder))
    code, out, err = invoke("plugins", "-o", "json", "--plugin", "nodenumber:NodeNumber",
                            "--plugin", "nodepoolmaxage:SPEC", "--plugin", "gpu_budget:GPUBudget")
    assert code == 0, err
    data = json.loads(out)
    sched = {p["name"]: p["extensionPoints"] for p in data["scheduling"]}
    assert "score" in sched["NodeNumber"] and "filter" in sched["NodeResourcesFit"]
    desched = {p["name"]: p["extensionPoints"] for p in data["descheduling"]}
    assert desched["NodePoolMaxAge"] == ["deschedule"]
    assert [p["name"] for p in data["admissionChecks"]] == [_check_name(examples)]


def test_out_of_tree_example_plugin_by_import_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    code, out, err = invoke("explain", "-f", str(EXAMPLE / "cluster.yaml"), "--config",
                            str(EXAMPLE / "scheduler-config.yaml"), "--plugin",
                            "nodenumber:NodeNumber", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    placed = {p["pod"]: p["selectedNode"] for p in data["pods"]}
    assert placed == {"default/pod2": "node2", "default/pod3": "node3"}
    node2 = data["pods"][0]["nodes"]["node2"]["score"]["NodeNumber"]
    assert node2 == {"raw": 10, "normalized": 10, "weighted": 100}


def test_console_script_runs_as_a_process(files: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "explain", "-f",
                           str(files / "cluster.yaml"), "-o", "json"],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["pods"] == []
    assert "NodePorts" in data["unmodelledPlugins"]  # named by the default profile


@pytest.mark.parametrize(("rows", "needle"), [
    ("name,cpu_milli,memory_mib,num_gpu\nopenb-pod-0,1000,1024,0\n", "gpu_milli"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0,lots,1024,0,0\n", "cpu_milli"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0,1000,-5,0,0\n", "memory_mib"),
])
def test_broken_trace_rows_exit_2_naming_line_and_column(tmp_path: Path, rows: str,
                                                         needle: str) -> None:
    trace = tmp_path / "pods.csv"
    trace.write_text(rows)
    code, out, err = invoke("simulate", "--workload", str(trace), "-o", str(tmp_path / "o"),
                            "-q")
    assert code == 2
    assert "Traceback" not in out + err
    assert "pods.csv" in err and needle in err
    assert not (tmp_path / "o").exists()  # nothing half-written


def _check_name(examples: Path) -> str:
    import gpu_budget  # type: ignore[import-not-found]

    assert (examples / "admission-check" / "gpu_budget.py").exists()
    name: str = gpu_budget.GPUBudget.NAME
    return name
