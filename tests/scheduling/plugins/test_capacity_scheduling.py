"""CapacityScheduling: ElasticQuota limits in PreFilter, borrowing reclaimed by preemption,
upstream's integer comparison rules, and bad quota input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.plugins.capacity_scheduling import (
    UNBOUNDED,
    QuotaInfo,
    QuotaInfos,
    exceeds,
)
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain

CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "preFilter": {"enabled": [{"name": "CapacityScheduling"}]},
        "postFilter": {"enabled": [{"name": "CapacityScheduling"}],
                       "disabled": [{"name": "*"}]},
        "reserve": {"enabled": [{"name": "CapacityScheduling"}]},
    }}],
}


def node(name: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "20"}}}


def quota(ns: str, lo: str, hi: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": ns},
            "spec": {"min": {"cpu": lo, "memory": "64Gi"}, "max": {"cpu": hi, "memory": "64Gi"}}}


def pod(name: str, ns: str, cpu: str, node_name: str = "", priority: int = 0,
        start: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": ns}, "spec": spec}
    if node_name:
        spec["nodeName"] = node_name
        doc["status"] = {"phase": "Running", "startTime": f"2024-01-01T00:00:{start:02d}Z"}
    return doc


def run(tmp: Path, docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    m = tmp / "m.yaml"
    m.write_text(yaml.safe_dump_all(docs))
    c = tmp / "c.yaml"
    c.write_text(yaml.safe_dump(CONFIG))
    out = explain(load_manifests([m]), load_scheduler_config(c), in_tree_registry())
    return {p["pod"]: p for p in out["pods"]}


# ---- integer rules ---------------------------------------------------------------------------
def test_missing_fixed_resources_count_as_zero_and_extended_as_the_bound() -> None:
    assert exceeds({"cpu": 1}, {}, {"memory": 10}, UNBOUNDED)
    assert not exceeds({"example.com/gpu": 5}, {}, {"cpu": 1}, UNBOUNDED)
    assert exceeds({"example.com/gpu": 5}, {}, {"cpu": 1}, 0)
    assert not exceeds({"cpu": 2}, {"cpu": 3}, {"cpu": 5}, 0)
    assert exceeds({"cpu": 2}, {"cpu": 4}, {"cpu": 5}, 0)


def test_quota_defaults_and_aggregates() -> None:
    unlimited = QuotaInfo.of("a", None, None)
    assert unlimited.min == {"cpu": 0, "memory": 0, "ephemeral-storage": 0}
    assert not unlimited.used_over_max_with({"cpu": 10**12})
    infos = QuotaInfos(a=QuotaInfo.of("a", {"cpu": "2"}, {"cpu": "4"}),
                       b=QuotaInfo.of("b", {"cpu": "2"}, {"cpu": "4"}))
    infos["a"].add_pod("a/p", {"cpu": 3000})
    infos["a"].add_pod("a/p", {"cpu": 3000})  # counted once
    assert infos["a"].used == {"cpu": 3000}
    assert infos["a"].used_over_min()
    assert not infos.aggregated_used_over_min_with({"cpu": 1000})
    assert infos.aggregated_used_over_min_with({"cpu": 1001})
    clone = infos.clone()
    clone["a"].remove_pod("a/p", {"cpu": 3000})
    assert infos["a"].used == {"cpu": 3000} and clone["a"].used == {"cpu": 0}


# ---- PreFilter -------------------------------------------------------------------------------
def test_a_pod_beyond_its_namespace_max_is_rejected(tmp_path: Path) -> None:
    docs = [node("n1", "16"), quota("a", "2", "4"), pod("run", "a", "3", "n1"),
            pod("more", "a", "2")]
    got = run(tmp_path, docs)["a/more"]
    assert got["result"] == "Unschedulable"
    assert "Pod a/more is rejected in PreFilter because ElasticQuota a is more than Max" \
        in got["message"]


def test_namespaces_may_borrow_up_to_the_sum_of_mins(tmp_path: Path) -> None:
    docs = [node("n1", "16"), quota("a", "2", "8"), quota("b", "2", "8"),
            pod("a1", "a", "3"), pod("a2", "a", "1"), pod("a3", "a", "1")]
    got = run(tmp_path, docs)
    assert got["a/a1"]["result"] == got["a/a2"]["result"] == "Scheduled"
    assert got["a/a3"]["result"] == "Unschedulable"
    assert "total ElasticQuota used is more than min" in got["a/a3"]["message"]


def test_pods_outside_quota_namespaces_are_not_limited(tmp_path: Path) -> None:
    docs = [node("n1", "16"), quota("a", "1", "1"), pod("free", "other", "8")]
    assert run(tmp_path, docs)["other/free"]["result"] == "Scheduled"


# ---- preemption ------------------------------------------------------------------------------
def test_a_namespace_within_its_min_reclaims_borrowed_capacity(tmp_path: Path) -> None:
    # b borrowed all of a's min; a's pod takes back just enough: one of b's pods.
    docs = [node("n1", "8"), quota("a", "4", "8"), quota("b", "4", "8")] + \
        [pod(f"b{i}", "b", "2", "n1", priority=100, start=i) for i in range(4)] + \
        [pod("claim", "a", "2", priority=0)]
    got = run(tmp_path, docs)["a/claim"]
    assert got["result"] == "Unschedulable"
    assert got["nominatedNode"] == "n1"
    # Least important first is b3 (latest start); it is the one victim after reprieve.
    assert got["victims"] == ["b/b3"]


def test_a_namespace_over_its_min_preempts_only_its_own_lower_priority_pods(
        tmp_path: Path) -> None:
    docs = [node("n1", "4"), quota("a", "2", "4"), quota("b", "2", "4"),
            pod("a-low", "a", "2", "n1", priority=0), pod("b-low", "b", "2", "n1", priority=0),
            pod("a-high", "a", "2", priority=10)]
    got = run(tmp_path, docs)["a/a-high"]
    assert got["nominatedNode"] == "n1"
    assert got["victims"] == ["a/a-low"]


def test_no_preemption_when_no_pod_qualifies(tmp_path: Path) -> None:
    # a is over its min and has no lower-priority pod of its own; b's pods are safe.
    docs = [node("n1", "4"), quota("a", "1", "4"), quota("b", "3", "4"),
            pod("a-run", "a", "2", "n1", priority=10), pod("b-low", "b", "2", "n1"),
            pod("a-high", "a", "2", priority=10)]
    got = run(tmp_path, docs)["a/a-high"]
    assert got["result"] == "Unschedulable" and not got["nominatedNode"]
    assert got["victims"] == []


# ---- input -----------------------------------------------------------------------------------
def test_two_quotas_in_one_namespace_is_an_input_error(tmp_path: Path) -> None:
    second = quota("a", "1", "2")
    second["metadata"]["name"] = "other"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([node("n1", "4")]))
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump_all([quota("a", "1", "2"), second, pod("p", "a", "1")]))
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl), "-q",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "wl.yaml:" in res.output and "has a second ElasticQuota" in res.output


def test_bad_quota_quantity_names_the_field(tmp_path: Path) -> None:
    bad = quota("a", "1", "2")
    bad["spec"]["max"]["cpu"] = "lots"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([node("n1", "4")]))
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump_all([bad]))
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl), "-q",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "spec.max.cpu" in res.output


def test_capacity_scheduling_args_are_refused(tmp_path: Path) -> None:
    cfg = dict(CONFIG)
    cfg["profiles"] = [{**CONFIG["profiles"][0],
                        "pluginConfig": [{"name": "CapacityScheduling", "args": {"x": 1}}]}]
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(cfg))
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump_all([node("n1", "4"), pod("p", "a", "1")]))
    res = CliRunner().invoke(app, ["explain", "-f", str(m), "--config", str(c)])
    assert res.exit_code == 2
    assert "CapacityScheduling takes no args" in res.output


def test_simulated_borrowing_is_reclaimed_when_the_owner_arrives(tmp_path: Path) -> None:
    # b borrows a's idle min at t=0; a's pods arrive at t=10 and take it back; b keeps its min.
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([node("n1", "8")]))
    docs = [quota("a", "4", "8"), quota("b", "4", "8")]
    for i in range(4):
        docs.append(pod(f"b{i}", "b", "2"))
    for i in range(2):
        p = pod(f"a{i}", "a", "2")
        p["metadata"]["annotations"] = {"kubeberth.io/arrival-seconds": "10"}
        docs.append(p)
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump_all(docs))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl),
                                   "-c", str(cfg), "-q", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = yaml.safe_load((out / "summary.json").read_text())
    assert summary["pods"]["preemptions"] == 2
    # Two of b's pods (equally important: the first two on the node) were evicted and, b
    # being back at its min, their re-created copies may not borrow again.
    pending = summary["unscheduledPods"]
    assert len(pending) == 2 and all(k.startswith("b/") for k in pending)
    assert all("total ElasticQuota used is more than min" in summary["pendingReasons"][k]
               for k in pending)
