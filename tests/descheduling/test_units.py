"""Small units: utilization arithmetic, args readers, budgets' rounding, the snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.descheduling.builders import NOW, pod

from kubeberth.api.errors import InputError
from kubeberth.api.times import format_time, parse_time
from kubeberth.config.manifests import load_manifests
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import (
    EvictionLimits,
    Evictor,
    PodEvictor,
    Snapshot,
    default_now,
    owner_replicas,
)
from kubeberth.descheduling.pdb import is_ready
from kubeberth.descheduling.plugins.node_utilization import (
    above,
    average,
    below,
    cap_to_threshold,
    deviate,
    percentages,
    resource_names,
)


# ---- utilization ------------------------------------------------------------------------------
def test_percentages_use_millicores_for_cpu_and_whole_units_otherwise() -> None:
    usage = {"cpu": 1500, "memory": 1_500_000, "pods": 3000, "nvidia.com/gpu": 1000}
    capacity = {"cpu": 4000, "memory": 3_000_000, "pods": 10_000}
    assert percentages(usage, capacity) == {"cpu": 37.5, "memory": 50.0, "pods": 30.0}
    assert percentages({"cpu": 5}, {"cpu": 0}) == {"cpu": 0.0}


def test_cap_to_threshold_truncates_like_upstream() -> None:
    capacity = {"cpu": 3333, "memory": 7_000, "pods": 10_000}
    capped = cap_to_threshold(capacity, {"cpu": 33.3, "pods": 25}, ["cpu", "memory", "pods",
                                                                    "nvidia.com/gpu"])
    # cpu: int(33.3 * 0.01 * 3333) = 1109 millicores; pods: int(25 * 0.01 * 10) = 2 whole pods;
    # memory has no threshold: full capacity; the GPU is not advertised: 0.
    assert capped == {"cpu": 1109, "memory": 7_000, "pods": 2000, "nvidia.com/gpu": 0}


def test_below_and_above() -> None:
    assert below({"cpu": 20.0}, {"cpu": 20.0, "pods": 10.0})
    assert not below({"cpu": 20.1}, {"cpu": 20.0})
    assert above({"pods": 60.0}, {"cpu": 50.0, "pods": 50.0})
    assert not above({"cpu": 50.0}, {"cpu": 50.0})


def test_average_and_deviation_clamp() -> None:
    avg = average([{"cpu": 10.0, "gpu": 50.0}, {"cpu": 30.0}])
    assert avg == {"cpu": 20.0, "gpu": 50.0}
    assert deviate(avg, {"cpu": 30.0}, -1.0) == {"cpu": 0.0, "gpu": 50.0}
    assert deviate(avg, {"gpu": 60.0}, 1.0) == {"cpu": 20.0, "gpu": 100.0}


def test_resource_names_add_the_basic_resources_once() -> None:
    assert resource_names({"nvidia.com/gpu": 1, "cpu": 2}) == ["cpu", "memory", "pods",
                                                               "nvidia.com/gpu"]


# ---- args readers ------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [
    ("10m", 600.0), ("1h30m", 5400.0), ("90s", 90.0), ("1.5h", 5400.0), ("0", 0.0),
    ("250ms", 0.25)])
def test_durations(text: str, seconds: float) -> None:
    assert a.duration({"d": text}, "d") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10", "ten", "1x", "", "m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InputError) as err:
        a.duration({"d": text}, "d")
    assert err.value.field == "d"


@pytest.mark.parametrize(("reader", "value", "field"), [
    (a.uint, -1, "x"), (a.uint, 2**32, "x"), (a.uint, True, "x"), (a.integer, 1.5, "x"),
    (a.boolean, "true", "x"), (a.string, 3, "x"), (a.strings, "a", "x"),
    (a.strings, ["a", 1], "x[1]"), (a.integers, [1, "2"], "x[1]"), (a.percentages, [1], "x"),
    (a.percentages, {"cpu": "1"}, "x.cpu"),
])
def test_reader_type_errors(reader: Any, value: Any, field: str) -> None:
    with pytest.raises(InputError) as err:
        reader({"x": value}, "x")
    assert err.value.field == field


def test_namespaces_and_label_selectors() -> None:
    assert a.namespaces({}) == a.ALL_NAMESPACES
    assert a.namespaces({"namespaces": {"exclude": ["kube-system"]}}).exclude == ("kube-system",)
    with pytest.raises(InputError) as err:
        a.namespaces({"namespaces": {"include": [1]}})
    assert err.value.field == "namespaces.include[0]"
    with pytest.raises(InputError) as err:
        a.label_selector({"labelSelector": {"matchExpressions": [
            {"key": "a", "operator": "Exists", "values": ["x"]}]}})
    assert err.value.field == "labelSelector.matchExpressions[0].values"
    with pytest.raises(InputError) as err:
        a.label_selector({"labelSelector": {"matchExpressions": [
            {"key": "a", "operator": "Gt", "values": ["1"]}]}})
    assert err.value.field == "labelSelector.matchExpressions[0].operator"


# ---- budgets -----------------------------------------------------------------------------------
def test_readiness() -> None:
    snap = Snapshot([], [
        pod("plain"), pod("ready", status={"conditions": [{"type": "Ready", "status": "True"}]}),
        pod("unready", status={"conditions": [{"type": "Ready", "status": "False"}]}),
        pod("pending", phase="Pending"),
        pod("deleting", meta={"deletionTimestamp": "2024-06-01T11:00:00Z"})], now=NOW)
    assert [is_ready(p) for p in snap.pods] == [True, True, False, False, False]


# ---- the evictor's per-node loop ----------------------------------------------------------------
class _NoBudgets:
    def try_evict(self, pod: Any) -> str | None:
        return None


def test_evict_on_node_stops_the_node_at_its_limit_and_the_pass_at_the_total() -> None:
    snap = Snapshot([], [pod(f"p{i}", "n1") for i in range(4)], now=NOW)
    chosen = [(p, "why") for p in snap.pods]
    evictor = Evictor("default", PodEvictor(EvictionLimits(per_node=2, total=3), _NoBudgets()))
    assert evictor.evict_on_node(chosen, "P") is False
    assert [d.pod for d in evictor.pod_evictor.evictions] == ["default/p0", "default/p1"]
    assert evictor.evict_on_node(chosen[2:], "P") is False  # still the node limit
    evictor.pod_evictor.node_count.clear()
    assert evictor.evict_on_node(chosen[2:], "P") is True  # the third eviction is the total
    assert len(evictor.pod_evictor.evictions) == 3


# ---- snapshot and clock ------------------------------------------------------------------------
MANIFESTS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {replicas: 3}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec: {}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec: {parallelism: 4}
---
apiVersion: v1
kind: Node
metadata: {name: n1, creationTimestamp: "2024-01-01T00:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: p, creationTimestamp: "2024-03-01T10:00:00Z"}
spec: {containers: [{name: c}]}
status: {startTime: "2024-03-01T10:00:05+00:00"}
"""


def test_owner_replicas_and_default_now(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFESTS)
    m = load_manifests(path)
    assert owner_replicas(m) == {("Deployment", "shop", "web"): 3,
                                 ("StatefulSet", "default", "db"): 1,
                                 ("Job", "default", "train"): 4}
    assert format_time(default_now(m)) == "2024-03-01T10:00:05Z"
    snap = Snapshot.from_manifests(m, default_now(m))
    (p,) = snap.pods
    assert snap.now - p.created == 5 and p.started == snap.now


def test_default_now_without_timestamps_is_the_epoch(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    assert default_now(load_manifests(path)) == 0.0


def test_unknown_priority_class_is_located(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
                    "spec:\n  priorityClassName: gold\n  containers: [{name: c}]\n")
    with pytest.raises(InputError) as err:
        Snapshot.from_manifests(load_manifests(path), 0.0)
    assert err.value.source == str(path) and err.value.line == 5
    assert err.value.field == "spec.priorityClassName"


@pytest.mark.parametrize("text", ["2024-06-01T12:00:00Z", "2024-06-01T12:00:00.000000Z",
                                  "2024-06-01T14:00:00+02:00", "2024-06-01T12:00:00"])
def test_parse_time_forms(text: str) -> None:
    assert parse_time(text) == NOW


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(InputError) as err:
        parse_time("noon", "status.startTime")
    assert err.value.field == "status.startTime"


def test_replica_set_of_a_deployment_scales_with_the_deployment(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 6}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-5d8f
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, controller: true}]
spec: {replicas: 2}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: lone}
spec: {replicas: 2}
""")
    assert owner_replicas(load_manifests(path)) == {
        ("Deployment", "default", "web"): 6, ("ReplicaSet", "default", "web-5d8f"): 6,
        ("ReplicaSet", "default", "lone"): 2}
