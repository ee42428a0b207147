"""Volcano-style fair share: the resource arithmetic, the proportion water-filling, the
VolcanoProportion PreFilter (queues held to their deserved share) and VolcanoDRF job order."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from typer.testing import CliRunner

from kubeberth.api.objects import Pod
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.plugins.volcano_proportion import QueueAttr, water_fill
from kubeberth.scheduling.plugins.volcano_resource import (
    Default,
    diff,
    dominant_share,
    from_milli,
    job_of,
    less_equal,
    min_dimension,
)
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain
from kubeberth.state.cluster import make_pod_info

GPU = "nvidia.com/gpu"
CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "queueSort": {"enabled": [{"name": "VolcanoDRF"}], "disabled": [{"name": "*"}]},
        "preFilter": {"enabled": [{"name": "VolcanoProportion"}]},
    }}],
}


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "50"}}}


def queue(name: str, weight: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": weight, **spec}}


def pod(name: str, q: str | None = None, cpu: str = "1", job: str | None = None,
        node_name: str = "", arrival: float = 0) -> dict[str, Any]:
    ann: dict[str, str] = {"kubeberth.io/arrival-seconds": str(arrival)}
    if q:
        ann["scheduling.volcano.sh/queue-name"] = q
    if job:
        ann["scheduling.k8s.io/group-name"] = job
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": ann}, "spec": spec}


def write(tmp: Path, name: str, docs: Any) -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else yaml.safe_dump(docs))
    return p


# ---- arithmetic ------------------------------------------------------------------------------
def test_units_follow_volcano() -> None:
    assert from_milli({"cpu": 1500, "memory": 2048_000, GPU: 2000, "pods": 3000}) == \
        {"cpu": 1500.0, "memory": 2048.0, GPU: 2000.0}


def test_less_equal_tolerates_a_tenth_and_applies_defaults() -> None:
    assert less_equal({"cpu": 1000.05}, {"cpu": 1000.0}, Default.ZERO)
    assert not less_equal({"cpu": 1000.2}, {"cpu": 1000.0}, Default.ZERO)
    assert not less_equal({"cpu": 1.0, GPU: 1.0}, {"cpu": 5.0}, Default.ZERO)
    assert less_equal({"cpu": 1.0, GPU: 1.0}, {"cpu": 5.0}, Default.INFINITY)


def test_min_dimension_defaults() -> None:
    assert min_dimension({"cpu": 5.0, GPU: 3.0}, {"cpu": 2.0}, Default.INFINITY) == \
        {"cpu": 2.0, GPU: 3.0}
    assert min_dimension({"cpu": 5.0, GPU: 3.0}, {"cpu": 2.0}, Default.ZERO) == \
        {"cpu": 2.0, GPU: 0.0}
    assert min_dimension({"cpu": 5.0, GPU: 3.0}, {"cpu": 9.0, GPU: 1.0}, Default.ZERO) == \
        {"cpu": 5.0, GPU: 1.0}


def test_diff_and_dominant_share() -> None:
    inc, dec = diff({"cpu": 5.0, GPU: 1.0}, {"cpu": 2.0, "memory": 4.0})
    assert inc == {"cpu": 3.0, "memory": 0.0, GPU: 1.0}
    assert dec == {"cpu": 0.0, "memory": 4.0}
    assert dominant_share({"cpu": 2.0, "memory": 30.0}, {"cpu": 10.0, "memory": 100.0}) == 0.3
    assert dominant_share({GPU: 1.0}, {"cpu": 10.0, GPU: 0.0}) == 0.0


# ---- water-filling ---------------------------------------------------------------------------
def test_capability_caps_a_queue_and_the_rest_is_shared() -> None:
    a = QueueAttr("a", 1, capability={"cpu": 1000.0, "memory": 1.7976931348623157e308},
                  request={"cpu": 10000.0})
    b = QueueAttr("b", 1, request={"cpu": 10000.0})
    rounds = water_fill({"cpu": 10000.0}, [a, b])
    assert a.deserved["cpu"] == 1000.0
    assert b.deserved["cpu"] == pytest.approx(9000.0)
    assert rounds >= 2


def test_guarantee_raises_deserved_and_is_reserved_from_others() -> None:
    a = QueueAttr("a", 1, guarantee={"cpu": 6000.0}, request={"cpu": 10000.0})
    b = QueueAttr("b", 3, request={"cpu": 10000.0})
    water_fill({"cpu": 8000.0}, [a, b])
    assert a.deserved["cpu"] >= 6000.0
    assert b.deserved["cpu"] <= 2000.0 + 0.1


def test_a_queue_that_asks_for_little_gets_what_it_asks() -> None:
    a = QueueAttr("a", 5, request={"cpu": 500.0})
    b = QueueAttr("b", 1, request={"cpu": 20000.0})
    water_fill({"cpu": 6000.0}, [a, b])
    assert a.deserved["cpu"] == 500.0
    assert b.deserved["cpu"] == pytest.approx(5500.0)


# ---- the plugins through the CLI -------------------------------------------------------------
def test_proportion_holds_each_queue_to_its_weighted_share(tmp_path: Path) -> None:
    cluster = write(tmp_path, "cluster.yaml", [node("n1"), node("n2")])
    docs: list[dict[str, Any]] = [queue("research", 1), queue("prod", 3)]
    docs += [pod(f"r{i}", "research") for i in range(16)]
    docs += [pod(f"p{i}", "prod") for i in range(16)]
    wl = write(tmp_path, "wl.yaml", docs)
    cfg = write(tmp_path, "sched.yaml", CONFIG)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl),
                                   "-c", str(cfg), "-q", "-o", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "pods.csv").open() as f:
        bound = Counter(r["pod"].split("/")[1][0] for r in csv.DictReader(f) if r["bound"])
    # 16 cpus split 1:3 between two queues that each ask for 16.
    assert bound == {"r": 4, "p": 12}


def test_a_pod_of_an_unknown_queue_stays_pending_with_the_reason(tmp_path: Path) -> None:
    m = write(tmp_path, "m.yaml", [node("n1"), pod("lost", "nowhere")])
    out = explain(load_manifests([m]), load_scheduler_config(write(tmp_path, "c.yaml", CONFIG)),
                  in_tree_registry())
    entry = out["pods"][0]
    assert entry["result"] == "Unschedulable"
    assert "queue nowhere of pod default/lost not found" in entry["message"]


def test_drf_orders_jobs_by_lowest_dominant_share(tmp_path: Path) -> None:
    # Job "big" holds 6 of 16 cpus, job "small" 1; their pending pods are listed big first,
    # but DRF attempts the small job's pods first.
    docs = [node("n1"), node("n2"),
            pod("big-run", job="big", cpu="6", node_name="n1"),
            pod("small-run", job="small", cpu="1", node_name="n2"),
            pod("big-0", job="big"), pod("big-1", job="big"),
            pod("small-0", job="small"), pod("small-1", job="small"),
            pod("solo")]
    m = write(tmp_path, "m.yaml", docs)
    out = explain(load_manifests([m]), load_scheduler_config(write(tmp_path, "c.yaml", CONFIG)),
                  in_tree_registry())
    assert [p["pod"] for p in out["pods"]] == [
        "default/solo", "default/small-0", "default/small-1", "default/big-0", "default/big-1"]


def test_priority_comes_before_share(tmp_path: Path) -> None:
    docs = [node("n1"), pod("big-run", job="big", cpu="6", node_name="n1"),
            pod("big-0", job="big"), pod("solo")]
    docs[2]["spec"]["priority"] = 5
    m = write(tmp_path, "m.yaml", docs)
    out = explain(load_manifests([m]), load_scheduler_config(write(tmp_path, "c.yaml", CONFIG)),
                  in_tree_registry())
    assert [p["pod"] for p in out["pods"]] == ["default/big-0", "default/solo"]


def test_job_identity() -> None:
    def job(meta: dict[str, Any]) -> str:
        pod = msgspec.convert({"metadata": meta, "spec": {"containers": []}}, Pod)
        return job_of(make_pod_info(pod))

    assert job({"name": "a", "annotations": {"scheduling.k8s.io/group-name": "g"}}) == \
        "default/g"
    assert job({"name": "a", "labels": {"scheduling.x-k8s.io/pod-group": "pg"}}) == \
        "default/pg"
    assert job({"name": "a", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "1",
         "controller": True}]}) == "default/Job/train"
    assert job({"name": "a"}) == "default/a"


def test_a_queue_weight_below_one_is_an_input_error(tmp_path: Path) -> None:
    cluster = write(tmp_path, "cluster.yaml", [node("n1")])
    wl = write(tmp_path, "wl.yaml", [queue("q", 0), pod("p", "q")])
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl), "-q",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "wl.yaml:" in res.output and "spec.weight" in res.output
    assert "positive integer" in res.output
