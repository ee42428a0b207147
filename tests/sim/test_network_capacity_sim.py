"""NetworkCapacity's ConfigMap as a simulation input: initial capacity, timed updates that wake
pending pods, malformed values, and the same reasons through ``kubeberth explain``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.api.errors import InputError
from kubeberth.cli.main import app
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import SimResult, Simulation
from kubeberth.sim.traces import load_workload

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gpu"
PROFILE = EXAMPLE / "packing-profile.yaml"

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: rdma-a, labels: {kubeberth.io/network: high-speed}}
status: {allocatable: {cpu: "96", memory: 384Gi, nvidia.com/gpu: "8", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: rdma-b, labels: {kubeberth.io/network: high-speed}}
status: {allocatable: {cpu: "96", memory: 384Gi, nvidia.com/gpu: "8", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: plain}
status: {allocatable: {cpu: "96", memory: 384Gi, nvidia.com/gpu: "8", pods: "110"}}
"""


def capacity(data: str, at: float | None = None) -> str:
    annotations = f", annotations: {{kubeberth.io/arrival-seconds: \"{at:g}\"}}" \
        if at is not None else ""
    return f"""\
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: network-capacity, namespace: kube-system{annotations}}}
data: {data}
"""


def trainer(name: str, *, arrival: float = 0, duration: float | None = None) -> str:
    timing = f'kubeberth.io/arrival-seconds: "{arrival:g}"'
    if duration is not None:
        timing += f', kubeberth.io/duration-seconds: "{duration:g}"'
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {{kubeberth.io/network-slots: "1", {timing}}}}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: "8", nvidia.com/gpu: "2"}},
                                       limits: {{nvidia.com/gpu: "2"}}}}}}]
"""


def run(tmp_path: Path, cluster: str, workload: str) -> SimResult:
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "workload.yaml").write_text(workload)
    wl = load_workload([tmp_path / "cluster.yaml"], [tmp_path / "workload.yaml"])
    sim = Simulation(wl, load_scheduler_config(PROFILE), in_tree_registry())
    return sim.run()


def placed(result: SimResult) -> dict[str, tuple[float | None, str]]:
    return {k.split("/")[1]: (r.bound, r.node) for k, r in result.metrics.pods.items()}


def test_an_update_event_adds_slots_and_wakes_the_pending_pod(tmp_path: Path) -> None:
    result = run(tmp_path, NODES + capacity('{rdma-a: "1"}'),
                 capacity('{rdma-a: "1", rdma-b: "1"}', at=100) + trainer("t0")
                 + trainer("t1"))
    # Woken by the ConfigMap event at 100 s, well before the 5-minute unschedulable flush.
    assert placed(result) == {"t0": (0.0, "rdma-a"), "t1": (100.0, "rdma-b")}


def test_without_the_update_the_pod_never_lands_on_the_unlabelled_node(tmp_path: Path) -> None:
    result = run(tmp_path, NODES + capacity('{rdma-a: "1"}'), trainer("t0") + trainer("t1"))
    assert placed(result)["t1"] == (None, "")
    assert result.unscheduled == ["default/t1"]
    assert "had no free network slot" in result.metrics.pods["default/t1"].reason


def test_a_shrunk_capacity_keeps_running_pods_and_admits_no_new_one(tmp_path: Path) -> None:
    # rdma-a goes from 2 slots to 1 while t0 and t1 hold both; when t0 ends at 200 its slot
    # does not come back for t2 (1 slot, still held by t1); rdma-b's update at 300 takes it.
    result = run(tmp_path, NODES + capacity('{rdma-a: "2"}'),
                 capacity('{rdma-a: "1"}', at=50) + capacity('{rdma-a: "1", rdma-b: "1"}',
                                                             at=300)
                 + trainer("t0", duration=150) + trainer("t1")
                 + trainer("t2", arrival=60))
    got = placed(result)
    assert got["t0"] == (0.0, "rdma-a") and got["t1"] == (0.0, "rdma-a")
    assert got["t2"] == (300.0, "rdma-b")


def test_completion_returns_the_slot(tmp_path: Path) -> None:
    result = run(tmp_path, NODES + capacity('{rdma-a: "1"}'),
                 trainer("t0", duration=40) + trainer("t1"))
    assert placed(result) == {"t0": (0.0, "rdma-a"), "t1": (40.0, "rdma-a")}


def test_a_malformed_initial_value_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        run(tmp_path, NODES + capacity('{rdma-a: "two"}'), trainer("t0"))
    text = str(caught.value)
    assert "ConfigMap kube-system/network-capacity: field data.rdma-a: 'two'" in text
    assert "whole number" in text


def test_a_malformed_update_is_an_error_status_until_fixed(tmp_path: Path) -> None:
    result = run(tmp_path, NODES + capacity('{rdma-a: "1"}'),
                 capacity('{rdma-a: "1", rdma-b: "x"}', at=10)
                 + capacity('{rdma-a: "1", rdma-b: "1"}', at=120)
                 + trainer("t0") + trainer("t1", arrival=20))
    got = placed(result)
    assert got["t0"] == (0.0, "rdma-a")
    # An Error status sends the pod to backoff (as upstream), so it binds at its first retry
    # after the fix, not at the fix itself.
    bound, node = got["t1"]
    assert node == "rdma-b" and bound is not None and 120.0 < bound < 300.0
    assert result.metrics.attempts["error"] >= 3


def test_the_cli_reports_a_bad_value_with_its_place(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(NODES + capacity("{rdma-a: 4}"))
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "c.yaml")])
    assert res.exit_code == 2
    assert "data.rdma-a" in res.output and 'quote it' in res.output
    (tmp_path / "c.yaml").write_text(NODES + capacity('{rdma-a: "-1"}') + trainer("t0"))
    res = CliRunner().invoke(app, ["explain", "-f", str(tmp_path / "c.yaml"),
                                   "--config", str(PROFILE)])
    assert res.exit_code == 2
    assert "ConfigMap kube-system/network-capacity: field data.rdma-a: '-1'" in res.output
    assert "packing-profile" not in res.output  # not blamed on the scheduler configuration


def test_explain_shows_each_nodes_reason_from_the_example() -> None:
    res = CliRunner().invoke(app, ["explain", "-f", str(EXAMPLE / "network-cluster.yaml"),
                                   "-f", str(EXAMPLE / "network-workload.yaml"),
                                   "--config", str(PROFILE), "-o", "json"])
    assert res.exit_code == 0, res.output
    pods = {p["pod"]: p for p in json.loads(res.output)["pods"]}
    assert pods["default/train-0"]["selectedNode"] == "rdma-a"
    assert pods["default/train-1"]["selectedNode"] == "rdma-a"
    waiting = pods["default/train-2"]
    assert waiting["result"] == "Unschedulable"
    verdicts = {n: v["filter"]["NetworkCapacity"] for n, v in waiting["nodes"].items()}
    assert verdicts == {
        "rdma-a": {"code": "Unschedulable", "reasons": ["node(s) had no free network slot"]},
        "rdma-b": {"code": "Unschedulable", "reasons": [
            "node(s) had no network slots in ConfigMap kube-system/network-capacity"]},
        "plain": {"code": "UnschedulableAndUnresolvable",
                  "reasons": ["node(s) didn't have high-speed networking"]},
    }


def test_the_example_simulation_binds_the_third_trainer_at_the_update(tmp_path: Path) -> None:
    wl = load_workload([EXAMPLE / "network-cluster.yaml"], [EXAMPLE / "network-workload.yaml"])
    result = Simulation(wl, load_scheduler_config(PROFILE), in_tree_registry()).run()
    assert placed(result)["train-2"] == (600.0, "rdma-b")
