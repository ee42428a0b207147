"""One scheduling cycle end to end: entry order, skips, reservations, checks, evictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubeberth.admission import AdmissionState, finish_evictions, run_cycle
from kubeberth.api.times import parse_time

from .builders import (
    at,
    cluster_queue,
    cohort,
    flavor,
    group,
    load,
    local_queue,
    quota,
    run,
    states,
    victims,
    workload,
)

CPU = "cpu"
NOW = parse_time(at(600), "now")


def _cq(name: str, nominal: str, **kw: Any) -> dict[str, Any]:
    return cluster_queue(name, [group([CPU], ("default", [quota(CPU, nominal,
                                                                kw.pop("borrowing", None))]))],
                         **kw)


def _cycle(tmp_path: Path, docs: list[dict[str, Any]]) -> Any:
    return run_cycle(AdmissionState.from_objects(load(tmp_path, docs)), NOW)


def test_non_borrowing_entry_goes_before_higher_priority_borrower(tmp_path: Path) -> None:
    # Both queues want the last 2 cpus of the cohort. "b" fits in its own quota; "a" would
    # borrow. Kueue considers non-borrowing entries first, whatever their priority.
    docs = [flavor("default"),
            _cq("a", "2", cohort="co"), _cq("b", "2", cohort="co"),
            local_queue("a"), local_queue("b"),
            workload("a-run", "a", {CPU: "2"}, admitted=("a", {CPU: "default"})),
            workload("a-more", "a", {CPU: "2"}, priority=100),
            workload("b-own", "b", {CPU: "2"}, priority=0)]
    result = _cycle(tmp_path, docs)
    assert [a.workload.key for a in result.admitted] == ["default/b-own"]
    skipped = {n.workload: n for n in result.not_admitted}
    assert skipped["default/a-more"].message == \
        "Workload no longer fits after processing another workload"
    assert skipped["default/a-more"].active  # skipped after nomination: retried at once


def test_same_borrowing_level_orders_by_priority_then_age(tmp_path: Path) -> None:
    docs = [flavor("default"),
            _cq("a", "0", cohort="co"), _cq("b", "0", cohort="co"), _cq("c", "3", cohort="co"),
            local_queue("a"), local_queue("b"),
            workload("old", "a", {CPU: "2"}, created=1),
            workload("young", "b", {CPU: "2"}, created=9)]
    result = _cycle(tmp_path, docs)
    assert [a.workload.key for a in result.admitted] == ["default/old"]
    docs[-1] = workload("young", "b", {CPU: "2"}, created=9, priority=1)
    result = _cycle(tmp_path, docs)
    assert [a.workload.key for a in result.admitted] == ["default/young"]


def test_overlapping_preemption_targets_are_issued_once(tmp_path: Path) -> None:
    # Two queues reclaim from the same borrower: the first issues the preemption, the second
    # is skipped because its only candidate is already a target.
    docs = [flavor("default"),
            _cq("a", "2", cohort="co", reclaim="Any"), _cq("b", "2", cohort="co", reclaim="Any"),
            _cq("borrower", "0", cohort="co"),
            local_queue("a"), local_queue("b"),
            workload("hog", "borrower", {CPU: "4"}, admitted=("borrower", {CPU: "default"})),
            workload("a-in", "a", {CPU: "2"}, created=1),
            workload("b-in", "b", {CPU: "2"}, created=2)]
    result = _cycle(tmp_path, docs)
    assert [(p.workload, p.by) for p in result.preempted] == [("default/hog", "default/a-in")]
    skipped = {n.workload: n for n in result.not_admitted}
    assert skipped["default/b-in"].message == \
        "Workload has overlapping preemption targets with another workload"
    assert skipped["default/a-in"].reason == "WaitingForPreemptedWorkloads"


def test_preempting_entry_holds_quota_for_the_cycle(tmp_path: Path) -> None:
    # "urgent" preempts "low" and reserves its quota in this cycle's snapshot, so "filler" in
    # the cohort's other queue cannot take the capacity the preemption frees.
    docs = [flavor("default"),
            _cq("a", "4", cohort="co", within="LowerPriority"), _cq("b", "0", cohort="co"),
            local_queue("a"), local_queue("b"),
            workload("low", "a", {CPU: "4"}, priority=-1, admitted=("a", {CPU: "default"})),
            workload("urgent", "a", {CPU: "4"}, priority=10),
            workload("filler", "b", {CPU: "1"})]
    result = _cycle(tmp_path, docs)
    assert [p.workload for p in result.preempted] == ["default/low"]
    assert result.admitted == []


def test_unreclaimable_preempt_reserves_nominal(tmp_path: Path) -> None:
    # "a" needs preemption but has no candidates. With reclaimWithinCohort other than Any it
    # holds its free nominal quota back, so "b" may not borrow it in the same cycle.
    def docs(reclaim: str) -> list[dict[str, Any]]:
        return [flavor("default"),
                _cq("a", "4", cohort="co", within="LowerPriority", reclaim=reclaim),
                _cq("b", "0", cohort="co"),
                local_queue("a"), local_queue("b"),
                workload("a-run", "a", {CPU: "2"}, priority=5,
                         admitted=("a", {CPU: "default"})),
                workload("a-big", "a", {CPU: "4"}, priority=5),
                workload("b-small", "b", {CPU: "2"})]

    held = _cycle(tmp_path, docs("LowerPriority"))
    assert held.admitted == []
    free = _cycle(tmp_path, docs("Any"))
    assert [a.workload.key for a in free.admitted] == ["default/b-small"]


def test_stopped_queue_is_inactive(tmp_path: Path) -> None:
    docs = [flavor("default"), _cq("cq", "4", extra={"stopPolicy": "Hold"}),
            local_queue("cq"), workload("w", "cq", {CPU: "1"})]
    data, result = run(tmp_path, docs)
    assert states(data)["default/w"] == ("Inadmissible", "Inadmissible")
    assert result.state.inactive["cq"] == "ClusterQueue cq is inactive: Stopped"


def test_admission_written_like_kueue(tmp_path: Path) -> None:
    docs = [flavor("default"), _cq("cq", "8"), local_queue("cq"),
            workload("w", "cq", {CPU: "500m"}, count=3)]
    result = _cycle(tmp_path, docs)
    (adm,) = result.admitted
    assert adm.admission.cluster_queue == "cq"
    (psa,) = adm.admission.podset_assignments
    assert (psa.name, psa.count, psa.flavors, psa.resource_usage) == (
        "main", 3, {CPU: "default"}, {CPU: 1500})
    assert adm.workload.quota_reserved_time == NOW


def test_multiple_podsets_and_resource_groups(tmp_path: Path) -> None:
    gpu = "nvidia.com/gpu"
    docs = [flavor("cpu-pool"), flavor("a100"), flavor("h100"),
            cluster_queue("cq", [group([CPU], ("cpu-pool", [quota(CPU, "16")])),
                                 group([gpu], ("a100", [quota(gpu, "2")]),
                                       ("h100", [quota(gpu, "8")]))]),
            local_queue("cq")]
    wl = workload("train", "cq", {CPU: "1", gpu: "1"}, count=4)
    wl["spec"]["podSets"].append({"name": "launcher", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {CPU: "2"}}}]}}})
    data, _ = run(tmp_path, [*docs, wl])
    flavors = next(w["flavors"] for w in data["workloads"] if w["name"] == "default/train")
    assert flavors == {"main": {CPU: "cpu-pool", gpu: "h100"}, "launcher": {CPU: "cpu-pool"}}


def test_later_podset_sees_earlier_podsets_usage(tmp_path: Path) -> None:
    docs = [flavor("small"), flavor("big"),
            cluster_queue("cq", [group([CPU], ("small", [quota(CPU, "3")]),
                                       ("big", [quota(CPU, "10")]))]),
            local_queue("cq")]
    wl = workload("w", "cq", {CPU: "2"})
    wl["spec"]["podSets"].append({"name": "second", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {CPU: "2"}}}]}}})
    data, _ = run(tmp_path, [*docs, wl])
    flavors = next(w["flavors"] for w in data["workloads"] if w["name"] == "default/w")
    assert flavors == {"main": {CPU: "small"}, "second": {CPU: "big"}}


def test_victims_requeue_and_readmit_when_room_returns(tmp_path: Path) -> None:
    docs = [flavor("default"), _cq("cq", "4", within="LowerPriority"), local_queue("cq"),
            workload("low", "cq", {CPU: "4"}, priority=-1, admitted=("cq", {CPU: "default"})),
            workload("high", "cq", {CPU: "4"}, priority=5)]
    state = AdmissionState.from_objects(load(tmp_path, docs))
    first = run_cycle(state, NOW)
    assert [p.workload for p in first.preempted] == ["default/low"]
    assert "default/low" in first.state.admitted  # eviction not observed yet
    state = finish_evictions(first.state, ["default/low"], NOW)
    assert "default/low" not in state.admitted
    second = run_cycle(state, NOW)
    assert [a.workload.key for a in second.admitted] == ["default/high"]
    # The victim is queued again (active: it has not been tried since its eviction).
    pending = {e.key: active for e, active in second.state.queues.pending()}
    assert pending == {"default/low": True}


def _hierarchy(team_quota: bool) -> list[dict[str, Any]]:
    quota_group = [group([CPU], ("default", [quota(CPU, "4")]))]
    return [flavor("default"),
            cohort("root", groups=None if team_quota else quota_group),
            cohort("team", parent="root", groups=quota_group if team_quota else None),
            cohort("other", parent="root"),
            _cq("mine", "0", cohort="team", reclaim="Any"),
            _cq("borrower", "0", cohort="other"),
            local_queue("mine"), local_queue("borrower"),
            workload("vip", "borrower", {CPU: "4"}, priority=1000,
                     admitted=("borrower", {CPU: "default"})),
            workload("in", "mine", {CPU: "2"}, priority=0)]


def test_hierarchical_reclaim_of_own_subtree_quota(tmp_path: Path) -> None:
    # Cohort "team" owns 4 cpus that a queue in another subtree borrowed. "mine" has no quota
    # of its own and must borrow from "team", which borrowWithinCohort: Never would forbid for
    # an ordinary reclaim; quota of its own subtree is reclaimed regardless.
    data, _ = run(tmp_path, _hierarchy(team_quota=True), cycles=1)
    assert victims(data) == [("default/vip", "default/in", "InCohortReclamation")]
    # The same 4 cpus owned by the root: no hierarchical advantage, no preemption.
    data, _ = run(tmp_path, _hierarchy(team_quota=False), cycles=1)
    assert victims(data) == []
    assert states(data)["default/in"] == ("Inadmissible", "WaitingForQuota")


def test_run_cycle_is_deterministic(tmp_path: Path) -> None:
    docs = [flavor("default"),
            *[_cq(f"q{i}", "2", cohort="co", within="LowerPriority", reclaim="Any")
              for i in range(3)],
            *[local_queue(f"q{i}") for i in range(3)],
            *[workload(f"w{i}-{j}", f"q{i}", {CPU: "1"}, created=j, priority=j % 2)
              for i in range(3) for j in range(4)]]
    a, _ = run(tmp_path, docs)
    b, _ = run(tmp_path, docs)
    assert a == b
    assert sum(1 for w in a["workloads"] if w["state"] == "Admitted") == 6
