"""Queues: StrictFIFO vs BestEffortFIFO, requeue of parked workloads, backoff, pending reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission import (
    AdmissionState,
    finish_workloads,
    mark_pods_ready,
    pods_ready_timeout,
    run_cycle,
)
from kubeberth.admission.cycle import backoff_seconds
from kubeberth.api.times import parse_time

from .builders import (
    at,
    cluster_queue,
    configuration,
    flavor,
    group,
    load,
    local_queue,
    quota,
    run,
    states,
    workload,
)

CPU = "cpu"
NOW = parse_time(at(600), "now")


def _queue(strategy: str, nominal: str = "4", **kw: Any) -> list[dict[str, Any]]:
    return [flavor("default"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, nominal)]))],
                          strategy=strategy, **kw),
            local_queue("cq")]


def _blocked_head(strategy: str) -> list[dict[str, Any]]:
    # "big" is the oldest and cannot fit now (only 1 cpu left); "small" behind it could.
    return [*_queue(strategy),
            workload("running", "cq", {CPU: "3"}, admitted=("cq", {CPU: "default"})),
            workload("big", "cq", {CPU: "3"}, created=1),
            workload("small", "cq", {CPU: "1"}, created=2)]


def test_strict_fifo_head_blocks_the_queue(tmp_path: Path) -> None:
    data, result = run(tmp_path, _blocked_head("StrictFIFO"))
    s = states(data)
    assert s["default/big"] == ("Pending", "WaitingForQuota")
    assert s["default/small"] == ("Pending", "Pending")
    assert result.cycles == 1


def test_best_effort_fifo_parks_head_and_admits_next(tmp_path: Path) -> None:
    data, result = run(tmp_path, _blocked_head("BestEffortFIFO"))
    s = states(data)
    assert s["default/big"] == ("Inadmissible", "WaitingForQuota")
    assert s["default/small"] == ("Admitted", "Admitted")
    assert result.cycles >= 2


def test_higher_priority_is_head_before_older(tmp_path: Path) -> None:
    docs = [*_queue("StrictFIFO", nominal="1"),
            workload("old", "cq", {CPU: "1"}, created=1, priority=0),
            workload("urgent", "cq", {CPU: "1"}, created=9, priority=5)]
    data, _ = run(tmp_path, docs)
    assert states(data)["default/urgent"][0] == "Admitted"
    assert states(data)["default/old"][0] == "Pending"


def test_parked_workloads_wake_when_quota_is_released(tmp_path: Path) -> None:
    objs = load(tmp_path, _blocked_head("BestEffortFIFO"))
    state = AdmissionState.from_objects(objs)
    for _ in range(3):
        state = run_cycle(state, NOW).state
    parked = [e.key for e, active in state.queues.pending() if not active]
    assert parked == ["default/big"]
    # Nothing changes while the quota is held.
    again = run_cycle(state, NOW)
    assert not again.admitted and again.state.queues.pending() == state.queues.pending()
    state = finish_workloads(state, ["default/running"])
    assert [e.key for e, active in state.queues.pending() if active] == ["default/big"]
    result = run_cycle(state, NOW)
    assert [a.workload.key for a in result.admitted] == ["default/big"]


def test_run_cycle_does_not_mutate_its_input(tmp_path: Path) -> None:
    objs = load(tmp_path, _blocked_head("BestEffortFIFO"))
    state = AdmissionState.from_objects(objs)
    def snapshot() -> object:
        return (dict(state.admitted), [(e.key, e.reason, e.message, dict(e.last_tried), a)
                                       for e, a in state.queues.pending()])

    before = snapshot()
    run_cycle(state, NOW)
    assert snapshot() == before


def test_missing_local_queue_is_inadmissible(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO"), workload("lost", "nope", {CPU: "1"})]
    data, _ = run(tmp_path, docs)
    row = next(w for w in data["workloads"] if w["name"] == "default/lost")
    assert (row["state"], row["reason"], row["clusterQueue"]) == ("Inadmissible",
                                                                  "Inadmissible", "")


def test_local_queue_naming_missing_cluster_queue(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO"), local_queue("ghost", name="ghosts"),
            workload("w", "ghosts", {CPU: "1"})]
    data, result = run(tmp_path, docs)
    assert states(data)["default/w"] == ("Inadmissible", "Inadmissible")
    assert result.state.queues.unqueued["default/w"][2] == "ClusterQueue ghost doesn't exist"


def test_cluster_queue_with_unknown_flavor_is_inactive(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU], ("missing", [quota(CPU, "4")]))]),
            local_queue("cq"), workload("w", "cq", {CPU: "1"})]
    data, result = run(tmp_path, docs)
    assert states(data)["default/w"] == ("Inadmissible", "Inadmissible")
    assert "missing ResourceFlavor(s): missing" in result.state.inactive["cq"]


def test_namespace_selector_mismatch(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO",
                    namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": "ml"}}),
            workload("w", "cq", {CPU: "1"})]
    data, result = run(tmp_path, docs)
    assert states(data)["default/w"] == ("Inadmissible", "Inadmissible")
    assert result.reasons["default/w"][1] == \
        "Workload namespace doesn't match ClusterQueue selector"
    docs += [local_queue("cq", namespace="ml"), workload("w", "cq", {CPU: "1"}, namespace="ml")]
    data, _ = run(tmp_path, docs)
    assert states(data)["ml/w"] == ("Admitted", "Admitted")


@pytest.mark.parametrize(("count", "seconds"), [(1, 60.0), (2, 120.0), (3, 240.0),
                                                 (7, 3600.0)])
def test_backoff_doubles_up_to_max(count: int, seconds: float) -> None:
    from kubeberth.admission.model import WaitForPodsReady

    assert backoff_seconds(count, WaitForPodsReady(enable=True)) == seconds


def _pods_ready_docs(limit: int | None) -> list[dict[str, Any]]:
    strategy: dict[str, Any] = {"backoffBaseSeconds": 10, "backoffMaxSeconds": 100}
    if limit is not None:
        strategy["backoffLimitCount"] = limit
    return [*_queue("BestEffortFIFO"),
            configuration(waitForPodsReady={"enable": True, "timeout": "5m",
                                            "blockAdmission": True,
                                            "requeuingStrategy": strategy}),
            workload("a", "cq", {CPU: "1"}, created=1),
            workload("b", "cq", {CPU: "1"}, created=2)]


def test_block_admission_waits_for_pods_ready(tmp_path: Path) -> None:
    objs = load(tmp_path, _pods_ready_docs(None))
    state = AdmissionState.from_objects(objs)
    first = run_cycle(state, NOW)
    assert [a.workload.key for a in first.admitted] == ["default/a"]
    second = run_cycle(first.state, NOW)
    assert not second.admitted
    assert [n.reason for n in second.not_admitted] == ["Waiting"]
    ready = mark_pods_ready(second.state, ["default/a"])
    third = run_cycle(ready, NOW)
    assert [a.workload.key for a in third.admitted] == ["default/b"]


def test_pods_ready_timeout_requeues_with_backoff(tmp_path: Path) -> None:
    objs = load(tmp_path, _pods_ready_docs(None))
    state = run_cycle(AdmissionState.from_objects(objs), NOW).state
    evicted = pods_ready_timeout(state, ["default/a"], NOW)
    assert "default/a" not in evicted.admitted
    entry = next(e for e, _ in evicted.queues.pending() if e.key == "default/a")
    assert entry.wl.requeue_at == NOW + 10 and entry.wl.requeue_count == 1
    # Before the backoff expires "a" is not a head; "b" (queued behind by time) goes.
    early = run_cycle(evicted, NOW + 5)
    assert [a.workload.key for a in early.admitted] == ["default/b"]
    late = run_cycle(mark_pods_ready(early.state, ["default/b"]), NOW + 11)
    assert [a.workload.key for a in late.admitted] == ["default/a"]


def test_pods_ready_timeout_past_limit_deactivates(tmp_path: Path) -> None:
    objs = load(tmp_path, _pods_ready_docs(0))
    state = run_cycle(AdmissionState.from_objects(objs), NOW).state
    evicted = pods_ready_timeout(state, ["default/a"], NOW)
    wl, reason, _ = evicted.queues.unqueued["default/a"]
    assert reason == "RequeuingLimitExceeded" and not wl.active


def test_unset_namespace_selector_admits_nothing(tmp_path: Path) -> None:
    docs = _queue("BestEffortFIFO")
    del docs[1]["spec"]["namespaceSelector"]
    data, _ = run(tmp_path, [*docs, workload("w", "cq", {CPU: "1"})])
    assert states(data)["default/w"] == ("Inadmissible", "Inadmissible")


@pytest.mark.parametrize(("timestamp", "first"), [("Eviction", "default/b"),
                                                  ("Creation", "default/a")])
def test_requeuing_timestamp_orders_timed_out_workload(tmp_path: Path, timestamp: str,
                                                       first: str) -> None:
    docs = [*_queue("StrictFIFO", nominal="1"),
            configuration(waitForPodsReady={"enable": True, "requeuingStrategy": {
                "timestamp": timestamp, "backoffBaseSeconds": 1}}),
            workload("a", "cq", {CPU: "1"}, created=1),
            workload("b", "cq", {CPU: "1"}, created=2)]
    state = run_cycle(AdmissionState.from_objects(load(tmp_path, docs)), NOW).state
    assert list(state.admitted) == ["default/a"]
    state = pods_ready_timeout(state, ["default/a"], NOW)
    # After the backoff, "a" competes again: by its eviction time (behind "b") or by its
    # creation time (ahead of "b").
    result = run_cycle(state, NOW + 5)
    assert [a.workload.key for a in result.admitted] == [first]


def test_pods_ready_not_required_without_block_admission(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO"),
            configuration(waitForPodsReady={"enable": True, "blockAdmission": False}),
            workload("a", "cq", {CPU: "1"}, created=1),
            workload("b", "cq", {CPU: "1"}, created=2)]
    data, _ = run(tmp_path, docs)
    assert states(data)["default/a"][0] == states(data)["default/b"][0] == "Admitted"


def test_cycle_without_heads_changes_nothing(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO"),
            workload("a", "cq", {CPU: "1"}, admitted=("cq", {CPU: "default"}))]
    state = AdmissionState.from_objects(load(tmp_path, docs))
    result = run_cycle(state, NOW)
    assert (result.admitted, result.preempted, result.not_admitted) == ([], [], [])
    assert result.state.admitted == state.admitted


def test_finishing_unknown_workloads_is_harmless(tmp_path: Path) -> None:
    from kubeberth.admission import finish_evictions

    state = AdmissionState.from_objects(load(tmp_path, _blocked_head("StrictFIFO")))
    assert finish_evictions(state, ["default/nope"], NOW).admitted == state.admitted
    assert finish_workloads(state, ["default/nope"]).admitted == state.admitted


def test_never_tried_workloads_report_pending(tmp_path: Path) -> None:
    data, _ = run(tmp_path, _blocked_head("StrictFIFO"), cycles=1)
    assert states(data)["default/small"] == ("Pending", "Pending")
    assert states(data)["default/running"] == ("Admitted", "Admitted")


def test_admitted_to_unknown_cluster_queue_is_reported_as_is(tmp_path: Path) -> None:
    docs = [*_queue("BestEffortFIFO"),
            workload("orphan", "cq", {CPU: "1"}, admitted=("gone", {CPU: "default"}))]
    data, result = run(tmp_path, docs)
    row = next(w for w in data["workloads"] if w["name"] == "default/orphan")
    assert (row["clusterQueue"], row["state"]) == ("gone", "Admitted")
    assert result.cycles == 1
