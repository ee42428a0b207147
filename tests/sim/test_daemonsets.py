"""DaemonSets in explain and simulate: one pod per eligible node (upstream's node selector,
node affinity and taint rules with the daemon default tolerations), placed through a
``metadata.name`` node affinity; new and changed nodes in a simulation."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.api.objects import Node, NodeSpec, ObjectMeta, Taint
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.config.workloads import load_owners
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import load_workload


def node(name: str, labels: str = "{}", taints: str = "[]") -> str:
    return f"""\
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
spec: {{taints: {taints}}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
"""


DAEMON_SET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {gpu: "yes"}
      tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists,
                     effect: NoSchedule, tolerationSeconds: 5}]
      containers:
      - name: c
        resources: {requests: {cpu: 100m}}
"""
GPU = '{gpu: "yes"}'


def explain(tmp_path: Path, *docs: str) -> dict[str, str | None]:
    (tmp_path / "b.yaml").write_text("---\n".join(docs))
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "b.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.stderr
    return {p["pod"]: p["selectedNode"] for p in json.loads(res.stdout)["pods"]}


def test_explain_one_pod_per_eligible_node_placed_on_it(tmp_path: Path) -> None:
    placed = explain(tmp_path, DAEMON_SET, node("a", GPU), node("b"),
                     node("c", GPU, "[{key: dedicated, effect: NoSchedule}]"),
                     node("d", GPU, "[{key: node.kubernetes.io/not-ready, effect: NoExecute}]"),
                     node("e", GPU))
    # b: no gpu label; c: an untolerated NoSchedule taint; d: not-ready is tolerated by default.
    assert sorted(placed.values()) == ["a", "d", "e"]
    assert all(k.startswith("default/agent-") for k in placed)


def test_explain_skips_nodes_that_have_their_daemon_pod(tmp_path: Path) -> None:
    existing = """\
apiVersion: v1
kind: Pod
metadata: {name: agent-old, labels: {app: agent}}
spec:
  nodeName: a
  containers: [{name: c, resources: {requests: {cpu: 100m}}}]
"""
    placed = explain(tmp_path, DAEMON_SET, node("a", GPU), node("e", GPU), existing)
    assert list(placed.values()) == ["e"]


def test_daemon_pod_tolerations_and_node_affinity(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(DAEMON_SET)
    (ds,) = load_owners(load_manifests(tmp_path / "d.yaml"))
    pod = ds.daemon_pod("a")
    tolerations = [(t.key.rsplit("/", 1)[1], t.effect, t.toleration_seconds)
                   for t in pod.spec.tolerations]
    # The template's unschedulable toleration (with tolerationSeconds) is replaced in place.
    assert tolerations == [("unschedulable", "NoSchedule", None), ("not-ready", "NoExecute", None),
                           ("unreachable", "NoExecute", None),
                           ("disk-pressure", "NoSchedule", None),
                           ("memory-pressure", "NoSchedule", None),
                           ("pid-pressure", "NoSchedule", None)]
    assert pod.spec.affinity is not None and pod.spec.affinity.node_affinity is not None
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    (term,) = required.node_selector_terms
    assert [(r.key, r.operator, r.values) for r in term.match_fields] == [
        ("metadata.name", "In", ["a"])]
    assert ds.daemon_node_of(pod) == "a" and pod.spec.node_selector == {"gpu": "yes"}
    assert [(r.kind, r.name) for r in pod.metadata.owner_references] == [("DaemonSet", "agent")]
    # A running pod stays through an untolerated NoSchedule taint, not a NoExecute one.
    tainted = Node(metadata=ObjectMeta(name="a", labels={"gpu": "yes"}),
                   spec=NodeSpec(taints=[Taint(key="x", effect="NoSchedule")]))
    assert ds.daemon_should_run(tainted) == (False, True)
    tainted.spec.taints[0].effect = "NoExecute"
    assert ds.daemon_should_run(tainted) == (False, False)


def test_simulate_new_nodes_get_their_pod_and_tainted_ones_lose_it(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(node("a", GPU))
    (tmp_path / "work.yaml").write_text(DAEMON_SET)
    wl = load_workload([tmp_path / "cluster.yaml"], [tmp_path / "work.yaml"])
    sim = Simulation(wl, load_scheduler_config(None), in_tree_registry(), sample_interval=10.0)
    (tmp_path / "late.yaml").write_text(node("late", GPU))
    (late,) = load_manifests(tmp_path / "late.yaml").nodes
    sim.call_at(100.0, lambda: sim.add_node(late), counts=True)
    noexec = Node(metadata=ObjectMeta(name="a", labels={"gpu": "yes"}),
                  spec=NodeSpec(taints=[Taint(key="x", effect="NoExecute")]))
    sim.call_at(200.0, lambda: sim.update_node(noexec), counts=True)
    res = sim.run()
    rows = sorted((r.arrival, r.node, r.deleted) for r in res.metrics.pods.values())
    assert rows == [(0.0, "a", 200.0), (100.0, "late", None)]
