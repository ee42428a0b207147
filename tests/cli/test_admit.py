"""``kubeberth admit``: the JSON contract, the table, --cycles, --now and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubeberth.admission.model import load_kueue
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kueue" / "admission.yaml"
STATES = {"Admitted", "QuotaReserved", "Pending", "Inadmissible", "Preempted"}
REASONS = {"InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing",
           "InCohortFairSharing"}


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["admit", *args])


def test_json_contract_shape() -> None:
    result = _invoke("-f", str(EXAMPLE), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"workloads", "preempted"}
    for w in data["workloads"]:
        assert set(w) == {"name", "clusterQueue", "state", "reason", "flavors"}
        assert w["state"] in STATES
        assert "/" in w["name"]
        for per_resource in w["flavors"].values():
            assert all(isinstance(f, str) for f in per_resource.values())
    for p in data["preempted"]:
        assert set(p) == {"workload", "by", "reason"} and p["reason"] in REASONS
    assert [w["name"] for w in data["workloads"]] == sorted(w["name"] for w in
                                                             data["workloads"])


def test_example_outcome() -> None:
    data = json.loads(_invoke("-f", str(EXAMPLE), "-o", "json").stdout)
    rows = {w["name"]: w for w in data["workloads"]}
    assert rows["team-a/job-a-train"]["state"] == "Admitted"
    assert rows["team-a/job-a-train"]["flavors"] == {"main": {"cpu": "a100",
                                                              "nvidia.com/gpu": "a100"}}
    assert rows["team-b/b-train"]["state"] == "Preempted"
    assert data["preempted"] == [{"workload": "team-b/b-train", "by": "team-a/job-a-train",
                                  "reason": "InCohortReclamation"}]
    assert rows["team-b/pod-b-notebook"]["state"] == "Pending"


def test_cycles_one_stops_after_issuing_preemption() -> None:
    data = json.loads(_invoke("-f", str(EXAMPLE), "-o", "json", "--cycles", "1").stdout)
    rows = {w["name"]: w for w in data["workloads"]}
    assert rows["team-a/job-a-train"] == {
        "name": "team-a/job-a-train", "clusterQueue": "team-a", "state": "Pending",
        "reason": "WaitingForPreemptedWorkloads", "flavors": {}}
    # The victim still holds its quota until its eviction is observed.
    assert rows["team-b/b-train"]["state"] == "Preempted"
    assert rows["team-b/b-train"]["flavors"] == {"main": {"cpu": "a100",
                                                          "nvidia.com/gpu": "a100"}}


def test_output_is_deterministic() -> None:
    first = _invoke("-f", str(EXAMPLE), "-o", "json").stdout
    assert first == _invoke("-f", str(EXAMPLE), "-o", "json").stdout


def test_table_output() -> None:
    result = _invoke("-f", str(EXAMPLE))
    assert result.exit_code == 0
    assert "Kueue admission after" in result.stdout
    assert "Preemptions" in result.stdout
    assert "InCohortReclamation" in result.stdout


def test_now_option(tmp_path: Path) -> None:
    result = _invoke("-f", str(EXAMPLE), "-o", "json", "--now", "2030-01-01T00:00:00Z")
    assert result.exit_code == 0
    bad = _invoke("-f", str(EXAMPLE), "--now", "yesterday")
    assert bad.exit_code == 2
    assert "--now" in bad.output and "'yesterday' is not an RFC 3339 timestamp" in bad.output


def test_bad_input_exits_2_with_location(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n"
                    "metadata: {name: cq}\nspec:\n  queueingStrategy: LIFO\n")
    result = _invoke("-f", str(path))
    assert result.exit_code == 2
    assert "bad.yaml:5: field spec.queueingStrategy: unknown value 'LIFO'" in result.output
    assert "Traceback" not in result.output


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = _invoke("-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


def test_incomplete_pod_group_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "group.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: driver\n  labels:\n"
                    "    kueue.x-k8s.io/queue-name: q\n    kueue.x-k8s.io/pod-group-name: spark\n"
                    "  annotations:\n    kueue.x-k8s.io/pod-group-total-count: '3'\n"
                    "spec: {containers: [{name: c}]}\n")
    data = json.loads(_invoke("-f", str(path), "-o", "json").stdout)
    assert data["workloads"] == [{"name": "default/spark", "clusterQueue": "",
                                  "state": "Pending", "reason": "WaitingForPods",
                                  "flavors": {}}]
    table = CliRunner().invoke(app, ["admit", "-f", str(path)], env={"COLUMNS": "250"}).stdout
    assert "waiting for 2 more pod(s) of group spark (total count 3)" in table


NATIVE_EXAMPLE = ROOT / "examples" / "kueue-native-podgroup" / "kueue.yaml"


def test_native_pod_group_example_is_one_workload_per_gang() -> None:
    """KEP-13150's proposal: a gang with minCount pods is one Workload, a gang short of its
    minCount is waiting for pods, a basic group's pod is a plain pod."""
    data = json.loads(_invoke("-f", str(NATIVE_EXAMPLE), "-o", "json").stdout)
    assert [(w["name"], w["state"], w["reason"]) for w in data["workloads"]] == [
        ("team-a/pod-loose-0", "Admitted", "Admitted"),
        ("team-a/short", "Pending", "WaitingForPods"),
        ("team-a/train", "Admitted", "Admitted")]
    objs = load_kueue(load_manifests([str(NATIVE_EXAMPLE)]))
    train = next(w for w in objs.workloads if w.name == "train")
    assert [ps.count for ps in train.podsets] == [4]
    assert sorted(train.pods) == [f"team-a/train-{i}" for i in range(4)]
    table = CliRunner().invoke(app, ["admit", "-f", str(NATIVE_EXAMPLE)],
                               env={"COLUMNS": "250"}).stdout
    assert "waiting for 1 more pod(s) of PodGroup short (gang minCount 3)" in table


def _native(tmp_path: Path, group: str, pods: list[tuple[str, str]]) -> Path:
    """A gang PodGroup ``g`` (minCount 2, unless ``group`` is given) and queue-labelled pods
    (name, extra label lines) that join ``g``."""
    docs = [group or "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
            "metadata: {name: g}\nspec:\n  schedulingPolicy: {gang: {minCount: 2}}\n"]
    for name, extra in pods:
        docs.append(f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n"
                    f"    kueue.x-k8s.io/queue-name: q\n{extra}spec:\n"
                    "  schedulingGroup: {podGroupName: g}\n  containers: [{name: c}]\n")
    path = tmp_path / "native.yaml"
    path.write_text("---\n".join(docs))
    return path


def test_native_pod_group_with_more_pods_than_min_count_counts_every_pod(
        tmp_path: Path) -> None:
    path = _native(tmp_path, "", [("a", ""), ("b", ""), ("c", "")])
    [wl] = load_kueue(load_manifests([str(path)])).workloads
    assert (wl.name, [ps.count for ps in wl.podsets]) == ("g", [3])


def test_native_pod_group_that_does_not_exist_waits(tmp_path: Path) -> None:
    path = _native(tmp_path, "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
                   [("a", "")])
    data = json.loads(_invoke("-f", str(path), "-o", "json").stdout)
    assert [(w["name"], w["reason"]) for w in data["workloads"]] == [
        ("default/g", "WaitingForPods")]


def test_label_and_scheduling_group_naming_different_groups_exit_2(tmp_path: Path) -> None:
    path = _native(tmp_path, "", [("a", "    kueue.x-k8s.io/pod-group-name: other\n")])
    result = _invoke("-f", str(path))
    assert result.exit_code == 2
    assert "native.yaml:15: field spec.schedulingGroup.podGroupName: the pod-group-name " \
           "label says other but spec.schedulingGroup names PodGroup g" in result.output
    assert "Traceback" not in result.output


def test_label_and_scheduling_group_naming_the_same_group_is_a_label_group(
        tmp_path: Path) -> None:
    path = _native(tmp_path, "", [("a", "    kueue.x-k8s.io/pod-group-name: g\n")])
    result = _invoke("-f", str(path))
    assert result.exit_code == 2
    assert "the pod group has no total count" in result.output


def test_invalid_native_pod_group_exits_2(tmp_path: Path) -> None:
    path = _native(tmp_path, "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
                   "metadata: {name: g}\nspec:\n  schedulingPolicy: {gang: {minCount: 0}}\n",
                   [("a", "")])
    result = _invoke("-f", str(path))
    assert result.exit_code == 2
    assert "native.yaml:5: field spec.schedulingPolicy.gang.minCount: gang minCount is 0" \
        in result.output


def test_cycles_must_be_positive() -> None:
    assert _invoke("-f", str(EXAMPLE), "--cycles", "0").exit_code == 2


def _split_example(tmp_path: Path) -> Path:
    """The example manifest split into one file per document, in a directory."""
    import yaml

    folder = tmp_path / "manifests"
    folder.mkdir()
    for i, doc in enumerate(yaml.safe_load_all(EXAMPLE.read_text())):
        (folder / f"{i:02d}.yaml").write_text(yaml.safe_dump(doc))
    return folder


def test_directory_and_multiple_files_give_the_same_result(tmp_path: Path) -> None:
    whole = json.loads(_invoke("-f", str(EXAMPLE), "-o", "json").stdout)
    folder = _split_example(tmp_path)
    by_dir = json.loads(_invoke("-f", str(folder), "-o", "json").stdout)
    files = sorted(folder.iterdir())
    args = [a for f in files for a in ("-f", str(f))]
    by_files = json.loads(_invoke(*args, "-o", "json").stdout)
    assert whole == by_dir == by_files


def test_stdin(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["admit", "-f", "-", "-o", "json"],
                                input=EXAMPLE.read_text())
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads(_invoke("-f", str(EXAMPLE), "-o",
                                                           "json").stdout)


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(app, ["admit", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--filename", "--output", "--cycles", "--now"):
        assert option in result.stdout


CHECK_EXAMPLE = ROOT / "examples" / "admission-check"


def test_out_of_tree_admission_check_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/admission-check through the CLI: the GPUBudget plugin by import path decides
    team-a's check; team-b's ProvisioningRequest check is read and not modelled."""
    monkeypatch.syspath_prepend(str(CHECK_EXAMPLE))
    result = CliRunner().invoke(app, ["admit", "-f", str(CHECK_EXAMPLE / "manifests.yaml"),
                                      "--plugin", "gpu_budget:GPUBudget", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {w["name"]: w for w in data["workloads"]}
    assert (rows["default/a-small"]["state"], rows["default/a-small"]["admissionChecks"]) == (
        "Admitted", [{"name": "gpu-budget", "state": "Ready", "message": "2 GPUs approved",
                      "retryCount": 1}])
    assert (rows["default/a-large"]["state"], rows["default/a-large"]["reason"]) == (
        "Inadmissible", "DeactivatedDueToAdmissionCheck")
    assert rows["default/b-train"]["state"] == "QuotaReserved"
    assert data["unmodelledAdmissionChecks"] == [
        {"name": "provisioning", "controllerName": "kueue.x-k8s.io/provisioning-request"}]
    assert "AdmissionCheck provisioning (controllerName kueue.x-k8s.io/provisioning-request) " \
           "is read and not modelled" in result.stderr


def test_admission_check_example_without_its_plugin() -> None:
    """Without --plugin nothing models example.com/gpu-budget: never Ready, and said so."""
    result = CliRunner().invoke(app, ["admit", "-f", str(CHECK_EXAMPLE / "manifests.yaml"),
                                      "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {w["state"] for w in data["workloads"]} == {"Inadmissible", "QuotaReserved"}
    assert [c["name"] for c in data["unmodelledAdmissionChecks"]] == ["gpu-budget",
                                                                       "provisioning"]


def test_bad_plugin_exits_2() -> None:
    result = _invoke("-f", str(EXAMPLE), "--plugin", "no_such_module:X")
    assert result.exit_code == 2
    assert "cannot import out-of-tree plugin module" in result.output
