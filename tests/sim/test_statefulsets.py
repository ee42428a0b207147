"""StatefulSets in explain and simulate: ordinal names, OrderedReady on the virtual clock,
Parallel, replacement under the same name, scale-down from the highest ordinal."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import load_workload

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
"""


def stateful_set(replicas: int | None = 3, policy: str = "OrderedReady",
                 annotations: str = "") -> str:
    count = "" if replicas is None else f"replicas: {replicas}\n  "
    return f"""\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  annotations: {{{annotations}}}
spec:
  {count}podManagementPolicy: {policy}
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers:
      - name: c
        resources: {{requests: {{cpu: "1"}}}}
"""


def bound_pod(name: str, status: str = "") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: db}}}}
spec:
  nodeName: n1
  containers:
  - name: c
    resources: {{requests: {{cpu: "1"}}}}
{status}"""


def explain_pods(tmp_path: Path, *docs: str) -> list[str]:
    (tmp_path / "b.yaml").write_text("---\n".join((NODE, *docs)))
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "b.yaml"), "-o", "json"])
    assert res.exit_code == 0, res.stderr
    return [p["pod"] for p in json.loads(res.stdout)["pods"]]


def test_explain_ordered_ready_creates_the_first_missing_ordinal(tmp_path: Path) -> None:
    assert explain_pods(tmp_path, stateful_set()) == ["default/db-0"]
    # Bound pods without a status stand for running ones: the next ordinal is pending.
    assert explain_pods(tmp_path, stateful_set(), bound_pod("db-0")) == ["default/db-1"]
    # A status that is not Running and Ready blocks the ordinals after it.
    pending = "status: {phase: Pending}\n"
    assert explain_pods(tmp_path, stateful_set(), bound_pod("db-0", pending)) == []
    ready = ("status:\n  phase: Running\n  conditions: [{type: Ready, status: \"True\"}]\n")
    assert explain_pods(tmp_path, stateful_set(), bound_pod("db-0", ready),
                        bound_pod("db-1")) == ["default/db-2"]


def test_explain_parallel_creates_every_missing_ordinal(tmp_path: Path) -> None:
    assert explain_pods(tmp_path, stateful_set(policy="Parallel"), bound_pod("db-1")) == [
        "default/db-0", "default/db-2"]
    # spec.replicas defaults to 1.
    assert explain_pods(tmp_path, stateful_set(None, "Parallel")) == ["default/db-0"]


def simulation(tmp_path: Path, *docs: str) -> Simulation:
    (tmp_path / "cluster.yaml").write_text(NODE)
    (tmp_path / "work.yaml").write_text("---\n".join(docs))
    wl = load_workload([tmp_path / "cluster.yaml"], [tmp_path / "work.yaml"])
    return Simulation(wl, load_scheduler_config(None), in_tree_registry(), sample_interval=10.0)


def test_simulate_ordered_ready_waits_for_each_pod_to_be_ready(tmp_path: Path) -> None:
    sim = simulation(tmp_path, stateful_set())
    sim.start_latency["n1"] = 30.0  # each pod is Running and Ready 30 s after binding
    res = sim.run()
    arrivals = {k: r.arrival for k, r in res.metrics.pods.items()}
    assert arrivals == {"default/db-0": 0.0, "default/db-1": 30.0, "default/db-2": 60.0}
    pod = sim.snapshot.objects.pods["default/db-2"].pod
    labels = pod.metadata.labels
    assert labels["statefulset.kubernetes.io/pod-name"] == "db-2"
    assert labels["apps.kubernetes.io/pod-index"] == "2"
    assert [(r.kind, r.name) for r in pod.metadata.owner_references] == [("StatefulSet", "db")]


def test_simulate_parallel_creates_all_at_once(tmp_path: Path) -> None:
    sim = simulation(tmp_path, stateful_set(policy="Parallel"))
    sim.start_latency["n1"] = 30.0
    res = sim.run()
    assert {k: r.arrival for k, r in res.metrics.pods.items()} == {
        "default/db-0": 0.0, "default/db-1": 0.0, "default/db-2": 0.0}


def test_deleted_pod_comes_back_under_its_ordinal_name(tmp_path: Path) -> None:
    sim = simulation(tmp_path, stateful_set())
    sim.call_at(50.0, lambda: sim.evict("default/db-1"), counts=True)
    res = sim.run()
    (rec,) = res.evictions
    assert rec.verdict.allowed and rec.replacement == "default/db-1"
    assert sorted(sim.snapshot.objects.pods) == ["default/db-0", "default/db-1", "default/db-2"]
    again = res.metrics.pods["default/db-1"]
    assert (again.arrival, again.bound) == (50.0, 50.0) and res.replacements == 1


def test_scale_down_removes_the_highest_ordinals(tmp_path: Path) -> None:
    sim = simulation(tmp_path, stateful_set(
        4, "OrderedReady", 'kubeberth.io/replicas-schedule: "100=2"'))
    sim.run()
    assert sorted(sim.snapshot.objects.pods) == ["default/db-0", "default/db-1"]
