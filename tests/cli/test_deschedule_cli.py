"""``kubeberth deschedule``: JSON and table output, inputs, the clock, bad input."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import app

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 1
profiles:
  - name: spill
    pluginConfig:
      - name: DefaultEvictor
        args: {minPodAge: 10m}
      - name: RemovePodsViolatingNodeTaints
        args: {includedTaints: [vk.node.com/low-gpu-usage]}
    plugins:
      deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: vk}
spec:
  taints:
    - {key: vk.node.com, value: "true", effect: NoSchedule}
    - {key: vk.node.com/low-gpu-usage, value: "true", effect: NoSchedule}
status: {allocatable: {cpu: "1000", memory: 4Ti, pods: "1000", nvidia.com/gpu: "1000"}}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-1}
status: {allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}}
"""


def vk_pod(name: str, started: str, created: str = "2024-06-01T10:00:00Z") -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: inference
  creationTimestamp: "{created}"
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: llm, controller: true}}]
spec:
  nodeName: vk
  tolerations: [{{key: vk.node.com, operator: Equal, value: "true", effect: NoSchedule}}]
  containers: [{{name: c, image: llm, resources: {{requests: {{nvidia.com/gpu: "1"}}}}}}]
status: {{phase: Running, startTime: "{started}"}}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    manifests = tmp_path / "cluster"
    manifests.mkdir()
    (manifests / "nodes.yaml").write_text(NODES)
    (manifests / "pods.yaml").write_text(
        vk_pod("llm-a", "2024-06-01T10:00:00Z") + vk_pod("llm-b", "2024-06-01T10:30:00Z")
        + vk_pod("llm-c", "2024-06-01T11:55:00Z", "2024-06-01T11:55:00Z"))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return manifests, policy


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["deschedule", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output_with_default_clock(files: tuple[Path, Path]) -> None:
    manifests, policy = files
    code, out, _ = invoke("-f", str(manifests), "--policy", str(policy), "-o", "json")
    assert code == 0
    data = json.loads(out)
    # now = 11:55 (the latest timestamp): llm-a goes, llm-b hits the per-node limit, which ends
    # the node (llm-c, too young anyway, is not tried).
    assert data["evictions"] == [{
        "pod": "inference/llm-a", "node": "vk", "plugin": "RemovePodsViolatingNodeTaints",
        "reason": "pod does not tolerate taint vk.node.com/low-gpu-usage=true:NoSchedule of "
                  "node vk"}]
    reasons = {s["pod"]: s["reason"] for s in data["skipped"]}
    assert list(reasons) == ["inference/llm-b"]
    assert "maxNoOfPodsToEvictPerNode (1)" in reasons["inference/llm-b"]


def test_now_flag_and_repeatable_files(files: tuple[Path, Path]) -> None:
    manifests, policy = files
    code, out, _ = invoke("-f", str(manifests / "nodes.yaml"), "-f", str(manifests / "pods.yaml"),
                          "--policy", str(policy), "-o", "json", "--now", "2024-06-01T10:05:00Z")
    assert code == 0
    data = json.loads(out)
    assert data["evictions"] == []
    assert {s["pod"] for s in data["skipped"]} == {"inference/llm-a", "inference/llm-b",
                                                   "inference/llm-c"}


def test_json_is_byte_identical_across_runs(files: tuple[Path, Path]) -> None:
    manifests, policy = files
    outs = {invoke("-f", str(manifests), "--policy", str(policy), "-o", "json")[1]
            for _ in range(3)}
    assert len(outs) == 1


def test_table_output(files: tuple[Path, Path]) -> None:
    manifests, policy = files
    code, out, _ = invoke("-f", str(manifests), "--policy", str(policy))
    assert code == 0
    assert "1 eviction(s), 1 skipped" in " ".join(out.split())
    assert "inference/llm-a" in out and "evictions" in out and "skipped" in out


def test_single_ready_node_skips_the_cycle(tmp_path: Path, files: tuple[Path, Path]) -> None:
    _, policy = files
    only_vk = tmp_path / "vk.yaml"
    only_vk.write_text(NODES.split("---")[0] + vk_pod("llm-a", "2024-06-01T10:00:00Z"))
    code, out, err = invoke("-f", str(only_vk), "--policy", str(policy), "-o", "json")
    assert code == 0
    assert json.loads(out) == {"evictions": [], "skipped": []}
    assert "descheduling cycle skipped" in err


@pytest.mark.parametrize(("policy_text", "needle"), [
    (POLICY.replace("includedTaints", "includedTaint"),
     "field profiles[0].pluginConfig[1].args.includedTaint: unknown field"),
    (POLICY.replace("RemovePodsViolatingNodeTaints]", "RemovePodsViolatingNodeTaint]"),
     "profiles[0].plugins.deschedule.enabled[0]"),
    (POLICY.replace("minPodAge: 10m", "minPodAge: soon"),
     "field profiles[0].pluginConfig[0].args.minPodAge"),
    (POLICY.replace("v1alpha2", "v1alpha1"), "field apiVersion"),
])
def test_bad_policy_exits_2_with_location(tmp_path: Path, files: tuple[Path, Path],
                                          policy_text: str, needle: str) -> None:
    manifests, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text(policy_text)
    code, out, err = invoke("-f", str(manifests), "--policy", str(bad))
    assert code == 2
    assert "Traceback" not in out + err
    assert f"{bad}:" in err and needle in err.replace("\n", "")


def test_bad_now_and_missing_files(files: tuple[Path, Path]) -> None:
    manifests, policy = files
    code, _, err = invoke("-f", str(manifests), "--policy", str(policy), "--now", "yesterday")
    assert code == 2 and "--now" in err and "RFC 3339" in err
    code, _, err = invoke("-f", str(manifests / "nope.yaml"), "--policy", str(policy))
    assert code == 2 and "no such file" in err


def test_bad_pod_timestamp_is_located(tmp_path: Path, files: tuple[Path, Path]) -> None:
    _, policy = files
    broken = tmp_path / "broken.yaml"
    broken.write_text(NODES + vk_pod("llm-a", "not-a-time"))
    code, _, err = invoke("-f", str(broken), "--policy", str(policy))
    assert code == 2
    assert f"{broken}:" in err and "status.startTime" in err


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deschedule-spill"


def test_bundled_spill_example() -> None:
    """The example in docs/descheduler.md: the VK node's pods come back unless too young or
    held by their PodDisruptionBudget, which also stops the GPU rebalancing afterwards."""
    code, out, _ = invoke("-f", str(EXAMPLE / "cluster.yaml"), "--policy",
                          str(EXAMPLE / "policy.yaml"), "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert [e["pod"] for e in data["evictions"]] == ["inference/embed-1", "inference/llm-3"]
    skipped = {s["pod"]: s["reason"] for s in data["skipped"]}
    assert list(skipped) == ["inference/llm-4", "inference/llm-5", "inference/llm-1",
                             "inference/llm-2"]
    assert "PodDisruptionBudget inference/llm" in skipped["inference/llm-4"]
    assert "minPodAge" in skipped["inference/llm-5"]
    assert all(s["plugin"] == "LowNodeUtilization" and "PodDisruptionBudget" in s["reason"]
               for s in data["skipped"][2:])


STRATEGY = EXAMPLE.parent / "descheduler-strategy"
STRATEGY_ARGS = ("-f", str(STRATEGY / "cluster.yaml"), "--policy", str(STRATEGY / "policy.yaml"),
                 "-o", "json")


def _strategy_pass(out: str) -> tuple[list[str], list[str]]:
    data = json.loads(out)
    assert {e["plugin"] for e in data["evictions"] + data["skipped"]} == {"NodePoolMaxAge"}
    return [e["pod"] for e in data["evictions"]], [s["pod"] for s in data["skipped"]]


@pytest.mark.parametrize("target", ["nodepoolmaxage:SPEC", "nodepoolmaxage"])
def test_out_of_tree_strategy_by_import_path(monkeypatch: pytest.MonkeyPatch,
                                             target: str) -> None:
    """examples/descheduler-strategy: the spot pool's research pods older than 12h go, the
    longest-running first, one per node; serving pods and the on-demand node stay."""
    monkeypatch.syspath_prepend(str(STRATEGY))
    code, out, err = invoke(*STRATEGY_ARGS, "--plugin", target)
    assert code == 0, err
    assert _strategy_pass(out) == (["research/train-3", "research/train-1"],
                                   ["research/train-2"])


def test_out_of_tree_strategy_through_its_entry_point(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution (a dist-info on sys.path, with the entry points the example's
    pyproject declares) registers the plugin without --plugin."""
    project = tomllib.loads((STRATEGY / "pyproject.toml").read_text())["project"]
    dist = tmp_path / "kubeberth_nodepoolmaxage-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    group = "kubeberth.descheduler_plugins"
    lines = [f"{name} = {value}" for name, value in project["entry-points"][group].items()]
    (dist / "entry_points.txt").write_text(f"[{group}]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(STRATEGY))
    code, _, err = invoke(*STRATEGY_ARGS)
    assert code == 2 and "unknown plugin 'NodePoolMaxAge'" in err
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = invoke(*STRATEGY_ARGS)
    assert code == 0, err
    assert _strategy_pass(out)[0] == ["research/train-3", "research/train-1"]


@pytest.mark.parametrize(("target", "needles"), [
    ("no_such_module:SPEC", ["field --plugin", "cannot import out-of-tree plugin module "
                             "'no_such_module'", "module path such as"]),
    (":SPEC", ["field --plugin", "cannot import out-of-tree plugin module ''"]),
    (".relative:SPEC", ["field --plugin", "cannot import out-of-tree plugin module '.relative'"]),
    ("nodepoolmaxage:NOPE", ["field --plugin", "no attribute 'NOPE'", "module:attr"]),
    ("nodepoolmaxage:parse_args", ["'nodepoolmaxage:parse_args' is not a descheduler plugin",
                                   "module:attr naming a kubeberth.descheduling.framework."
                                   "PluginSpec"]),
])
def test_bad_plugin_exits_2_naming_the_expected_form(monkeypatch: pytest.MonkeyPatch,
                                                     target: str, needles: list[str]) -> None:
    monkeypatch.syspath_prepend(str(STRATEGY))
    code, out, err = invoke(*STRATEGY_ARGS, "--plugin", target)
    assert (code, out) == (2, "")
    message = " ".join(err.split())
    assert message.startswith("error:")
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(("targets", "name"), [
    (["nodepoolmaxage:SPEC", "nodepoolmaxage"], "NodePoolMaxAge"),
    (["kubeberth.descheduling.plugins.pod_lifetime:SPEC"], "PodLifeTime"),
])
def test_duplicate_plugin_names_are_refused(monkeypatch: pytest.MonkeyPatch,
                                            targets: list[str], name: str) -> None:
    monkeypatch.syspath_prepend(str(STRATEGY))
    code, _, err = invoke(*STRATEGY_ARGS, *(x for t in targets for x in ("--plugin", t)))
    assert code == 2
    assert f"a descheduler plugin named {name!r} is already registered" in " ".join(err.split())
