"""Classical preemption: each policy, the minimal victim set, the reasons written on victims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    Preemptor,
)
from kubeberth.api.times import parse_time

from .builders import (
    admitted,
    at,
    cluster_queue,
    flavor,
    group,
    load,
    local_queue,
    quota,
    run,
    snapshot,
    states,
    victims,
    workload,
)

CPU = "cpu"


def _standalone(within: str, nominal: str = "6") -> list[dict[str, Any]]:
    return [flavor("default"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, nominal)]))],
                          within=within),
            local_queue("cq")]


@pytest.mark.parametrize(("policy", "victim"), [
    ("LowerPriority", "default/low"),
    ("LowerOrNewerEqualPriority", "default/low"),
])
def test_within_cluster_queue_preempts_lowest_priority(tmp_path: Path, policy: str,
                                                       victim: str) -> None:
    docs = [*_standalone(policy),
            admitted("low", "cq", "2", -1), admitted("mid", "cq", "2", 0),
            admitted("high", "cq", "2", 1),
            workload("in", "cq", {CPU: "2"}, priority=1, created=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [(victim, "default/in", IN_CLUSTER_QUEUE)]
    assert states(data)["default/in"] == ("Pending", "WaitingForPreemptedWorkloads")


def test_within_cluster_queue_never_does_not_preempt(tmp_path: Path) -> None:
    docs = [*_standalone("Never"), admitted("low", "cq", "6", -1),
            workload("in", "cq", {CPU: "2"}, priority=10)]
    data, _ = run(tmp_path, docs)
    assert victims(data) == []
    assert states(data)["default/in"] == ("Inadmissible", "WaitingForQuota")


def test_lower_priority_spares_equal_priority(tmp_path: Path) -> None:
    docs = [*_standalone("LowerPriority"), admitted("same", "cq", "6", 0, created=10),
            workload("in", "cq", {CPU: "2"}, priority=0, created=5)]
    data, _ = run(tmp_path, docs)
    assert victims(data) == []


def test_lower_or_newer_equal_priority_preempts_newer_equal(tmp_path: Path) -> None:
    docs = [*_standalone("LowerOrNewerEqualPriority"),
            admitted("newer", "cq", "6", 0, created=10),
            workload("in", "cq", {CPU: "2"}, priority=0, created=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/newer", "default/in", IN_CLUSTER_QUEUE)]
    docs[-2] = admitted("older", "cq", "6", 0, created=1)
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == []


def test_minimal_victim_set_adds_back_unneeded(tmp_path: Path) -> None:
    # Candidates are removed lowest priority first until the workload fits (low1, low2, low3);
    # then low1 and low2 are added back if the workload still fits: only low3 (4 cpu) goes.
    docs = [*_standalone("LowerPriority", nominal="8"),
            admitted("low1", "cq", "1", -3), admitted("low2", "cq", "1", -2),
            admitted("low3", "cq", "4", -1), admitted("keep", "cq", "2", 5),
            workload("in", "cq", {CPU: "4"}, priority=1)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/low3", "default/in", IN_CLUSTER_QUEUE)]


def test_preempts_newest_reservation_first_among_equals(tmp_path: Path) -> None:
    docs = [*_standalone("LowerPriority", nominal="4"),
            admitted("old", "cq", "2", 0, reserved_at=1),
            admitted("new", "cq", "2", 0, reserved_at=50),
            workload("in", "cq", {CPU: "2"}, priority=1)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/new", "default/in", IN_CLUSTER_QUEUE)]


def _cohort(reclaim: str, borrow_within: str = "Never", threshold: int | None = None,
            lender_nominal: str = "6", borrower_nominal: str = "0") -> list[dict[str, Any]]:
    return [
        flavor("default"),
        cluster_queue("lender", [group([CPU], ("default", [quota(CPU, lender_nominal)]))],
                      cohort="co", within="LowerPriority", reclaim=reclaim,
                      borrow_within=borrow_within, threshold=threshold),
        cluster_queue("borrower", [group([CPU], ("default", [quota(CPU, borrower_nominal)]))],
                      cohort="co"),
        local_queue("lender"), local_queue("borrower"),
    ]


@pytest.mark.parametrize(("reclaim", "prio", "expected"), [
    ("Never", -1, []),
    ("LowerPriority", 5, []),
    ("LowerPriority", -1, [("default/b", "default/in", IN_COHORT_RECLAMATION)]),
    ("Any", 5, [("default/b", "default/in", IN_COHORT_RECLAMATION)]),
])
def test_reclaim_within_cohort(tmp_path: Path, reclaim: str, prio: int,
                               expected: list[tuple[str, str, str]]) -> None:
    docs = [*_cohort(reclaim), admitted("b", "borrower", "6", prio),
            workload("in", "lender", {CPU: "3"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == expected


def test_reclaim_needs_the_candidate_queue_to_borrow(tmp_path: Path) -> None:
    # The other queue uses only its own nominal quota: nothing to reclaim.
    docs = [flavor("default"),
            cluster_queue("a", [group([CPU], ("default", [quota(CPU, "2")]))], cohort="co",
                          reclaim="Any"),
            cluster_queue("b", [group([CPU], ("default", [quota(CPU, "4")]))], cohort="co"),
            local_queue("a"), local_queue("b"),
            admitted("a-full", "a", "2", 0), admitted("b-own", "b", "4", -5),
            workload("in", "a", {CPU: "2"}, priority=10)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == []


def test_borrow_within_cohort_preempts_below_threshold_while_borrowing(tmp_path: Path) -> None:
    # lender has 2 nominal and wants 3: it must borrow, which reclaimWithinCohort alone does
    # not allow; borrowWithinCohort LowerPriority with threshold 0 allows preempting priority
    # -1 (below the threshold) but never priority 1.
    docs = [*_cohort("LowerPriority", "LowerPriority", threshold=0, lender_nominal="2",
                     borrower_nominal="4"),
            admitted("b-low", "borrower", "3", -1), admitted("b-high", "borrower", "3", 1),
            workload("in", "lender", {CPU: "3"}, priority=2)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/b-low", "default/in", IN_COHORT_RECLAIM_WHILE_BORROWING)]


def test_borrow_within_cohort_never_keeps_borrowing_preemptor_out(tmp_path: Path) -> None:
    docs = [*_cohort("LowerPriority", "Never", lender_nominal="2", borrower_nominal="4"),
            admitted("b-low", "borrower", "3", -1), admitted("b-high", "borrower", "3", 1),
            workload("in", "lender", {CPU: "3"}, priority=2)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == []


def test_preemptor_restores_snapshot(tmp_path: Path) -> None:
    docs = [*_standalone("LowerPriority"),
            admitted("low", "cq", "2", -1), admitted("mid", "cq", "2", 0),
            admitted("high", "cq", "2", 1),
            workload("in", "cq", {CPU: "4"}, priority=1)]
    objs = load(tmp_path, docs)
    snap = snapshot(objs)
    before = dict(snap.cluster_queues["cq"].usage), sorted(snap.cluster_queues["cq"].workloads)
    pending = next(w for w in objs.workloads if w.admission is None)
    targets = Preemptor().get_targets(snap, pending, "cq", {("default", CPU): 4000},
                                      {("default", CPU)}, parse_time(at(0), "now"))
    assert sorted(t.info.key for t in targets) == ["default/low", "default/mid"]
    after = dict(snap.cluster_queues["cq"].usage), sorted(snap.cluster_queues["cq"].workloads)
    assert before == after


def test_victims_release_quota_and_preemptor_is_admitted_next_cycle(tmp_path: Path) -> None:
    docs = [*_standalone("LowerPriority"),
            admitted("low", "cq", "6", -1),
            workload("in", "cq", {CPU: "4"}, priority=1)]
    data, result = run(tmp_path, docs)
    s = states(data)
    assert s["default/in"] == ("Admitted", "Admitted")
    assert s["default/low"] == ("Preempted", IN_CLUSTER_QUEUE)
    assert result.cycles >= 2
    assert "default/low" not in result.state.admitted


def test_only_workloads_on_the_contested_flavor_are_candidates(tmp_path: Path) -> None:
    docs = [flavor("default"), flavor("spare"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, "4")]),
                                       ("spare", [quota(CPU, "4")]))],
                          within="LowerPriority", when_can_preempt="MayStopSearch"),
            local_queue("cq"),
            workload("on-spare", "cq", {CPU: "4"}, priority=-5,
                     admitted=("cq", {CPU: "spare"})),
            workload("on-default", "cq", {CPU: "4"}, priority=-1,
                     admitted=("cq", {CPU: "default"})),
            workload("in", "cq", {CPU: "2"}, priority=1)]
    data, _ = run(tmp_path, docs, cycles=1)
    # The first flavor needs preemption and MayStopSearch stops there: only workloads using
    # "default" can make room, even though "on-spare" has the lowest priority.
    assert victims(data) == [("default/on-default", "default/in", IN_CLUSTER_QUEUE)]


def test_already_evicted_candidates_go_first(tmp_path: Path) -> None:
    evicting = admitted("evicting", "cq", "3", 0)
    evicting["status"]["conditions"].append({"type": "Evicted", "status": "True",
                                             "reason": "Preempted"})
    docs = [*_standalone("LowerPriority"), evicting, admitted("lowest", "cq", "3", -10),
            workload("in", "cq", {CPU: "3"}, priority=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/evicting", "default/in", IN_CLUSTER_QUEUE)]


def test_other_queues_are_candidates_before_own(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("mine", [group([CPU], ("default", [quota(CPU, "4")]))],
                          cohort="co", within="LowerPriority", reclaim="Any"),
            cluster_queue("theirs", [group([CPU], ("default", [quota(CPU, "0")]))],
                          cohort="co"),
            local_queue("mine"), local_queue("theirs"),
            admitted("own-low", "mine", "2", -10),
            admitted("borrowed", "theirs", "2", 50),
            workload("in", "mine", {CPU: "2"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/borrowed", "default/in", IN_COHORT_RECLAMATION)]


def test_lower_or_newer_equal_priority_in_cohort(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("mine", [group([CPU], ("default", [quota(CPU, "4")]))],
                          cohort="co", reclaim="LowerPriority"),
            cluster_queue("theirs", [group([CPU], ("default", [quota(CPU, "0")]))],
                          cohort="co"),
            local_queue("mine"), local_queue("theirs"),
            admitted("same-prio", "theirs", "4", 0, created=50),
            workload("in", "mine", {CPU: "2"}, priority=0, created=10)]
    # reclaimWithinCohort has no LowerOrNewerEqualPriority: equal priority is never reclaimed.
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == []
    docs[1] = cluster_queue("mine", [group([CPU], ("default", [quota(CPU, "4")]))],
                            cohort="co", reclaim="Any")
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/same-prio", "default/in", IN_COHORT_RECLAMATION)]


def test_preemption_with_two_resources_needs_both(tmp_path: Path) -> None:
    mem = "memory"
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU, mem], ("default", [quota(CPU, "4"),
                                                               quota(mem, "4Gi")]))],
                          within="LowerPriority"),
            local_queue("cq"),
            workload("cpu-heavy", "cq", {CPU: "3", mem: "1Gi"}, priority=-2,
                     admitted=("cq", {CPU: "default", mem: "default"})),
            workload("mem-heavy", "cq", {CPU: "1", mem: "3Gi"}, priority=-1,
                     admitted=("cq", {CPU: "default", mem: "default"})),
            workload("in", "cq", {CPU: "2", mem: "2Gi"}, priority=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    # Removing only the lowest (cpu-heavy) frees 3 cpu but 1Gi: both must go.
    assert victims(data) == [("default/cpu-heavy", "default/in", IN_CLUSTER_QUEUE),
                             ("default/mem-heavy", "default/in", IN_CLUSTER_QUEUE)]
