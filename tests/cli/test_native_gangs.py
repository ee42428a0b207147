"""``explain`` and ``simulate`` on examples/native-gangs: a rack-constrained PodGroup lands in
the fuller rack, a group short of minCount binds nothing, the same through both commands."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import yaml
from rich.console import Console
from tests.paths import ROOT
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.report.explain_table import render_explain

EXAMPLE = ROOT / "examples" / "native-gangs"
ARGS = ["-c", str(EXAMPLE / "scheduler-config.yaml")]
RACK_B = "topology.kubernetes.io/rack=rack-b"


def test_explain_json_and_table() -> None:
    files = ["-f", str(EXAMPLE / "cluster.yaml"), "-f", str(EXAMPLE / "workload.yaml")]
    res = CliRunner().invoke(app, ["explain", *files, *ARGS, "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (group,) = out["podGroups"]
    assert group["chosenPlacement"] == RACK_B
    placed = {p["pod"]: p["selectedNode"] for p in out["pods"]}
    assert {placed[f"default/worker-{i}"] for i in range(3)} <= {"b1", "b2"}
    assert placed["default/short-0"] is None
    # The table of the same JSON, on a console wide enough not to cut the placement names.
    wide = Console(width=250, file=io.StringIO())
    render_explain(wide, out)
    table = wide.file.getvalue()  # type: ignore[attr-defined]
    assert "pod group default/training-workers-0 (Gang, minCount 3" in table
    assert f"{RACK_B} ✓" in table


def test_simulate_schedules_groups_the_same_way(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(EXAMPLE / "workload.yaml"), *ARGS,
                                   "-o", str(tmp_path), "-q"])
    assert res.exit_code == 0, res.output
    with (tmp_path / "pods.csv").open() as f:
        rows = {r["pod"]: r for r in csv.DictReader(f)}
    assert {rows[f"default/worker-{i}"]["node"] for i in range(3)} <= {"b1", "b2"}
    assert rows["default/short-0"]["bound"] == ""


def test_bad_podgroup_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\n"
                   "metadata: {name: g}\nspec:\n  schedulingPolicy: {gang: {minCount: 0}}\n")
    res = CliRunner().invoke(app, ["explain", "-f", str(bad)])
    assert res.exit_code == 2
    assert "bad.yaml:5" in res.output and "spec.schedulingPolicy.gang.minCount" in res.output
    assert "Traceback" not in res.output


def test_higher_priority_group_preempts_a_whole_all_mode_group_and_binds() -> None:
    """examples/native-gangs/preemption.yaml: the training gang preempts the whole batch gang
    (disruptionMode All), is nominated, and binds in its next cycle; the table says so too."""
    res = CliRunner().invoke(app, ["explain", "-f", str(EXAMPLE / "preemption.yaml"),
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    failed, bound = out["podGroups"]
    assert (failed["podGroup"], failed["priority"], failed["result"]) == \
        ("default/train", 1000, "Unschedulable")
    pre = failed["preemption"]
    assert (pre["plugin"], pre["result"]) == ("DefaultPreemption", "Success")
    assert pre["victims"] == [f"default/batch-{i}" for i in range(4)]
    assert (bound["podGroup"], bound["result"]) == ("default/train", "Scheduled")
    placed = {p["pod"]: (p["result"], p["selectedNode"]) for p in out["pods"]}
    assert {placed[k] for k in pre["nominatedNodes"]} == \
        {("Scheduled", node) for node in pre["nominatedNodes"].values()}
    assert len(set(pre["nominatedNodes"].values())) == 2
    wide = Console(width=250, file=io.StringIO())
    render_explain(wide, out)
    table = wide.file.getvalue()  # type: ignore[attr-defined]
    assert "preemption (DefaultPreemption): Success" in table
    assert "victims: default/batch-0, default/batch-1, default/batch-2, default/batch-3" in table


def test_simulate_evicts_and_recreates_the_preempted_group(tmp_path: Path) -> None:
    """The same preemption in simulate: the batch pods are deleted and re-created (they have
    no owner, so as themselves), counted as preempted; the training pods bind."""
    docs = list(yaml.safe_load_all((EXAMPLE / "preemption.yaml").read_text()))
    cluster, workload = tmp_path / "cluster.yaml", tmp_path / "workload.yaml"
    cluster.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] == "Node"]))
    workload.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "Node"]))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(workload),
                                   "--out-dir", str(out), "-q"])
    assert res.exit_code == 0, res.output
    with (out / "pods.csv").open() as f:
        rows = {r["pod"]: r for r in csv.DictReader(f)}
    assert [rows[f"default/batch-{i}"]["preempted"] for i in range(4)] == ["1"] * 4
    assert {rows[f"default/train-{i}"]["node"] for i in range(2)} == {"n1", "n2"}
    assert json.loads((out / "summary.json").read_text())["pods"]["preemptions"] == 4


V1ALPHA2_GROUP = """apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: g}
spec:
  podGroupTemplateRef: {workload: {workloadName: w, podGroupTemplateName: t}}
  schedulingPolicy: {gang: {minCount: 1}}
"""


def _explain(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "groups.yaml"
    path.write_text(text)
    res = CliRunner().invoke(app, ["explain", "-f", str(path), "-o", "json"])
    return res.exit_code, res.output


def test_v1alpha2_is_still_read_as_1_36_wrote_it(tmp_path: Path) -> None:
    code, out = _explain(tmp_path, V1ALPHA2_GROUP)
    assert code == 0, out


def test_each_version_refuses_the_other_versions_reference(tmp_path: Path) -> None:
    beta = V1ALPHA2_GROUP.replace("v1alpha2", "v1beta1")
    code, out = _explain(tmp_path, beta)
    assert code == 2 and "spec.podGroupTemplateRef" in out and "spec.workloadRef" in out
    alpha = V1ALPHA2_GROUP.replace(
        "podGroupTemplateRef: {workload: {workloadName: w, podGroupTemplateName: t}}",
        "workloadRef: {workloadName: w, templateName: t}")
    code, out = _explain(tmp_path, alpha)
    assert code == 2 and "spec.workloadRef" in out and "spec.podGroupTemplateRef" in out
    code, out = _explain(tmp_path, V1ALPHA2_GROUP + "  preemptionPolicy: Never\n")
    assert code == 2 and "spec.preemptionPolicy" in out and "scheduling.k8s.io/v1beta1" in out


def test_gated_fields_not_modelled_are_refused_by_name(tmp_path: Path) -> None:
    base = ("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec:\n  schedulingPolicy: {gang: {minCount: 1}}\n")
    for extra, field in (("  parentCompositePodGroupName: root\n",
                          "spec.parentCompositePodGroupName"),
                         ("  resourceClaims: [{name: c, resourceClaimName: shared}]\n",
                          "spec.resourceClaims"),
                         ("  preemptionPolicy: Never\n", "spec.preemptionPolicy")):
        code, out = _explain(tmp_path, base + extra)
        assert code == 2, (extra, out)
        assert field in out and "not modelled yet" in out and "Traceback" not in out
    code, out = _explain(tmp_path, base + "  preemptionPolicy: PreemptLowerPriority\n")
    assert code == 0, out
    workload = ("apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n"
                "spec:\n  compositePodGroupTemplates: [{name: root}]\n")
    code, out = _explain(tmp_path, workload)
    assert code == 2 and "spec.compositePodGroupTemplates" in out


def test_simulate_reports_group_metrics(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"),
                                   "-w", str(EXAMPLE / "workload.yaml"), *ARGS,
                                   "--out-dir", str(tmp_path), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    groups = summary["podGroups"]
    assert (groups["total"], groups["allBound"], groups["partialPlacements"]) == (2, 1, 0)
    # The chosen rack-b placement's total: NodeResourcesFit's placement score (67) plus
    # PodGroupPodsCount's normalized 100 (explain shows the same parts).
    assert groups["placementScore"]["max"] == 167.0
    with (tmp_path / "groups.csv").open() as f:
        rows = {r["group"]: r for r in csv.DictReader(f)}
    trained = rows["default/training-workers-0"]
    assert (trained["pods"], trained["bound"], trained["placement"]) == ("3", "3", RACK_B)
    short = rows["default/short"]
    assert (short["bound"], short["all_bound"], short["cycles"]) == ("0", "", "0")
