"""Nothing is dropped without a word: a policy given to a command that does not read it is an
error naming where it is read; an old policy version is refused for its version; ``version``
names the upstream releases kubeberth follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import UPSTREAM, app

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n" \
       "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
DESCHEDULER_POLICY = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n"
SCHEDULER_CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\n" \
                   "kind: KubeSchedulerConfiguration\n"
KUEUE_CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(("command", "policy", "where"), [
    (["explain"], DESCHEDULER_POLICY, "kubeberth deschedule --policy"),
    (["explain"], SCHEDULER_CONFIG, "--config"),
    (["explain"], KUEUE_CONFIG, "admit"),
    (["admit"], DESCHEDULER_POLICY, "kubeberth deschedule --policy"),
    (["admit"], SCHEDULER_CONFIG, "--config"),
    (["deschedule", "--policy", "POLICY"], DESCHEDULER_POLICY, "kubeberth deschedule --policy"),
    (["deschedule", "--policy", "POLICY"], KUEUE_CONFIG, "admit"),
])
def test_a_policy_in_the_wrong_command_is_an_error(tmp_path: Path, command: list[str],
                                                   policy: str, where: str) -> None:
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n")
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(NODE + "---\n" + policy)
    args = [a.replace("POLICY", str(tmp_path / "policy.yaml")) for a in command]
    code, _, err = run(*args, "-f", str(bundle))
    assert code == 2
    kind = policy.split("kind: ")[1].split("\n")[0]
    assert f"does not read a {kind} from its manifests" in err
    assert f"{bundle}:7" in err and where in err and "Traceback" not in err


def test_simulate_refuses_a_descheduler_policy_among_its_manifests(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE + "---\n" + DESCHEDULER_POLICY)
    code, _, err = run("simulate", "--cluster", str(cluster), "-q", "--out-dir",
                       str(tmp_path / "out"))
    assert code == 2 and "--deschedule-policy" in err


def test_a_v1alpha1_descheduler_policy_is_refused_for_its_version(tmp_path: Path) -> None:
    """The old format's ``strategies`` is not reported as a misspelt field."""
    policy = tmp_path / "old.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n"
                      "  RemoveDuplicates:\n    enabled: true\n")
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODE)
    code, _, err = run("deschedule", "-f", str(nodes), "--policy", str(policy))
    assert code == 2
    assert "does not read DeschedulerPolicy version 'descheduler/v1alpha1'" in err
    assert "descheduler/v1alpha2" in err and "strategies" in err
    assert "unknown field" not in err


def test_version_names_the_upstream_releases() -> None:
    code, out, _ = run("version")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == json.loads(run("version", "-o", "json")[1])["kubeberth"]
    for project, release in (("kube-scheduler", "v1.37.2"), ("Kueue", "v0.19.2"),
                             ("descheduler", "v0.36.0")):
        assert any(line.startswith(f"follows {project} {release} ") for line in lines)
    assert {u["project"] for u in UPSTREAM} >= {"scheduler-plugins", "Volcano"}
    data = json.loads(run("version", "-o", "json")[1])
    assert data["follows"] == [dict(u) for u in UPSTREAM]
    assert "docs/versions.md" in out


@pytest.mark.parametrize("command", [["explain"], ["deschedule", "--policy", "POLICY"]])
def test_a_priority_class_that_does_not_exist(tmp_path: Path, command: list[str]) -> None:
    """The API server's Priority admission words, at the pod's line; system classes exist."""
    (tmp_path / "policy.yaml").write_text(DESCHEDULER_POLICY)
    bundle = tmp_path / "bundle.yaml"
    pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {0}}}\n" \
          "spec: {{priorityClassName: {1}, containers: [{{name: c, image: i}}]}}\n"
    bundle.write_text(NODE + pod.format("ok", "system-node-critical") + pod.format("p", "nope"))
    args = [a.replace("POLICY", str(tmp_path / "policy.yaml")) for a in command]
    code, _, err = run(*args, "-f", str(bundle))
    assert code == 2
    assert f"{bundle}:14: field spec.priorityClassName: no PriorityClass with name nope " \
           "was found" in err
