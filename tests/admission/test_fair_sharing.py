"""Fair sharing: dominant resource share with weights, fair preemption, the tournament order."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission.preemption import IN_COHORT_FAIR_SHARING
from kubeberth.admission.quota import (
    DRS,
    MAX_INT64,
    compare_drs,
)

from .builders import (
    admitted,
    cluster_queue,
    configuration,
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
FR = ("default", CPU)


def _queues(weights: dict[str, str | None], nominal: dict[str, str],
            reclaim: str = "Never", within: str = "Never") -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [flavor("default")]
    for name in sorted(nominal):
        docs.append(cluster_queue(name, [group([CPU], ("default", [quota(CPU, nominal[name])]))],
                                  cohort="co", weight=weights.get(name), reclaim=reclaim,
                                  within=within))
        docs.append(local_queue(name))
    return docs



def test_share_is_borrowed_over_lendable_per_mille(tmp_path: Path) -> None:
    docs = [*_queues({}, {"a": "2", "b": "6"}), admitted("w", "a", "4")]
    snap = snapshot(load(tmp_path, docs))
    drs = snap.cluster_queues["a"].dominant_resource_share()
    # a borrows 2 of the 8 the cohort can lend it.
    assert drs.rounded_weighted_share() == 250
    assert drs.dominant_resource == CPU
    assert snap.cluster_queues["b"].dominant_resource_share().is_zero()


@pytest.mark.parametrize(("weight", "share"), [("1", 250), ("2", 125), ("0.5", 500),
                                                ("0", MAX_INT64)])
def test_weight_divides_share(tmp_path: Path, weight: str, share: int) -> None:
    docs = [*_queues({"a": weight}, {"a": "2", "b": "6"}), admitted("w", "a", "4")]
    snap = snapshot(load(tmp_path, docs))
    assert snap.cluster_queues["a"].dominant_resource_share().rounded_weighted_share() == share


def test_share_with_hypothetical_request(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, _queues({}, {"a": "2", "b": "6"})))
    drs = snap.cluster_queues["a"].dominant_resource_share({FR: 3000})
    assert drs.rounded_weighted_share() == math.ceil(1000 * 1000 / 8000)


def test_compare_drs_puts_zero_weight_borrowers_last() -> None:
    zero_weight = DRS(0.0, 10.0, CPU)
    big = DRS(1.0, 900.0, CPU)
    idle = DRS(0.0, 0.0, "")
    assert compare_drs(big, zero_weight) < 0
    assert compare_drs(zero_weight, big) > 0
    assert compare_drs(idle, big) < 0
    assert compare_drs(DRS(0.0, 5.0, CPU), zero_weight) < 0


def test_fair_preemption_reclaims_from_highest_share(tmp_path: Path) -> None:
    docs = [*_queues({}, {"a": "3", "b": "3", "c": "3"}, reclaim="Any"),
            configuration(fair_sharing=True),
            admitted("b1", "b", "3"), admitted("b2", "b", "2", created=5),
            admitted("c1", "c", "3"), admitted("c2", "c", "1", created=5),
            workload("in", "a", {CPU: "1"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    # b borrows 2, c borrows 1: the tree walk picks b, and its newest workload goes. a stays
    # within its nominal quota, so the share strategies are not consulted (reclamation).
    assert victims(data) == [("default/b2", "default/in", "InCohortReclamation")]


def test_fair_preemption_strategy_blocks_when_preemptor_would_exceed(tmp_path: Path) -> None:
    # a already borrows as much as b: taking b's workload would leave a with a larger share
    # than b, so neither strategy allows it.
    docs = [*_queues({}, {"a": "2", "b": "2", "c": "4"}, reclaim="Any"),
            configuration(fair_sharing=True),
            admitted("a1", "a", "4"), admitted("b1", "b", "4"),
            workload("in", "a", {CPU: "2"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == []


def test_fair_preemption_prefers_fair_sharing_reason(tmp_path: Path) -> None:
    docs = [*_queues({}, {"a": "1", "b": "1", "c": "4"}, reclaim="Any"),
            configuration(fair_sharing=True),
            admitted("c-own", "c", "1"), admitted("b1", "b", "4"),
            workload("in", "a", {CPU: "2"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    # a will borrow 1 after admission (share 1/5), b borrows 3 (3/5) and keeps 2 (1/5) after.
    assert victims(data) == [("default/b1", "default/in", IN_COHORT_FAIR_SHARING)]


def test_tournament_admits_lowest_share_first(tmp_path: Path) -> None:
    docs = [*_queues({}, {"a": "0", "b": "0", "lender": "4"}),
            admitted("a-running", "a", "2"),
            workload("a-next", "a", {CPU: "1"}, priority=10),
            workload("b-next", "b", {CPU: "2"}, priority=0)]
    classical, _ = run(tmp_path, docs, cycles=1)
    fair, _ = run(tmp_path, [*docs, configuration(fair_sharing=True)], cycles=1)
    # Classical: both borrow, higher priority first. Fair sharing: b's share after admission
    # (2/4) is below a's (3/4), so b goes first and a no longer fits.
    assert states(classical)["default/a-next"][0] == "Admitted"
    assert states(classical)["default/b-next"][0] == "Pending"
    assert states(fair)["default/b-next"][0] == "Admitted"
    assert states(fair)["default/a-next"][0] == "Pending"


def test_tournament_puts_nominal_quota_before_a_lower_share(tmp_path: Path) -> None:
    def two_flavors(premium: str, cheap: str) -> list[dict[str, Any]]:
        return [group([CPU], ("premium", [quota(CPU, premium)]), ("cheap", [quota(CPU, cheap)]))]

    docs = [flavor("premium"), flavor("cheap"), configuration(fair_sharing=True),
            cluster_queue("a", two_flavors("3", "0"), cohort="co"), local_queue("a"),
            cluster_queue("b", two_flavors("0", "6"), cohort="co"), local_queue("b"),
            workload("a-premium", "a", {CPU: "2"}, admitted=("a", {CPU: "premium"})),
            workload("a-cheap", "a", {CPU: "5"}, admitted=("a", {CPU: "cheap"})),
            workload("b-next", "b", {CPU: "1"}, priority=0),
            workload("a-next", "a", {CPU: "1"}, priority=0, created=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    # a borrows 5 cheap, so its share after admission is far above b's (b-next borrows the last
    # premium); b-next is also older. But a-next stays within a's premium quota while b would
    # borrow premium: Kueue (FairSharingPrioritizeNonBorrowing) takes a-next first, and b-next
    # no longer fits on premium.
    assert states(data)["default/a-next"][0] == "Admitted"
    assert states(data)["default/b-next"][0] == "Pending"


def test_cohort_weight_in_hierarchy(tmp_path: Path) -> None:
    from .builders import cohort

    docs = [flavor("default"),
            cohort("root", groups=[group([CPU], ("default", [quota(CPU, "10")]))]),
            cohort("team", parent="root", weight="2"),
            cluster_queue("a", [group([CPU], ("default", [quota(CPU, "2")]))], cohort="team"),
            admitted("w", "a", "6")]
    snap = snapshot(load(tmp_path, docs))
    team = snap.cohorts["team"].dominant_resource_share()
    # team borrows 4 of the 12 it could reach; weight 2 halves it.
    assert team.rounded_weighted_share() == math.ceil(4000 * 1000 / 12000 / 2)
    assert snap.cohorts["root"].dominant_resource_share().is_zero()


def _strategy_docs(strategies: list[str] | None) -> list[dict[str, Any]]:
    # b borrows 2 of 9 (share 222); a would borrow 1 after admission (111). Taking b2 leaves
    # b at its nominal quota (share 0): rule S2-a (preemptor <= target after) refuses, rule
    # S2-b (preemptor < target before) allows.
    return [*_queues({}, {"a": "1", "b": "4", "c": "4"}, reclaim="Any"),
            configuration(fair_sharing=True, strategies=strategies),
            admitted("b1", "b", "3"), admitted("b2", "b", "3", created=5), admitted("c1", "c", "3"),
            workload("in", "a", {CPU: "2"}, priority=0)]


@pytest.mark.parametrize(("strategies", "expected"), [
    (None, [("default/b2", "default/in", IN_COHORT_FAIR_SHARING)]),
    (["LessThanOrEqualToFinalShare"], []),
    (["LessThanInitialShare"], [("default/b2", "default/in", IN_COHORT_FAIR_SHARING)]),
    (["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
     [("default/b2", "default/in", IN_COHORT_FAIR_SHARING)]),
])
def test_preemption_strategies(tmp_path: Path, strategies: list[str] | None,
                               expected: list[tuple[str, str, str]]) -> None:
    data, _ = run(tmp_path, _strategy_docs(strategies), cycles=1)
    assert victims(data) == expected


def test_fair_sharing_within_own_queue_by_priority(tmp_path: Path) -> None:
    docs = [*_queues({}, {"a": "2", "b": "2"}, within="LowerPriority"),
            configuration(fair_sharing=True),
            admitted("low", "a", "2", priority=-1), admitted("b-own", "b", "2"),
            workload("in", "a", {CPU: "2"}, priority=5)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert victims(data) == [("default/low", "default/in", "InClusterQueue")]


def test_zero_weight_queue_is_preempted_first(tmp_path: Path) -> None:
    # b and c borrow the same amount; c has weight 0, so its share is infinite.
    docs = [*_queues({"c": "0"}, {"a": "4", "b": "1", "c": "1"}, reclaim="Any"),
            configuration(fair_sharing=True),
            admitted("b1", "b", "2"), admitted("c1", "c", "2"), admitted("a1", "a", "2"),
            workload("in", "a", {CPU: "2"}, priority=0)]
    data, _ = run(tmp_path, docs, cycles=1)
    assert [v[0] for v in victims(data)] == ["default/c1"]


def test_share_sums_borrowing_over_flavors(tmp_path: Path) -> None:
    docs = [flavor("on-demand"), flavor("spot"),
            cluster_queue("a", [group([CPU], ("on-demand", [quota(CPU, "1")]),
                                      ("spot", [quota(CPU, "1")]))], cohort="co"),
            cluster_queue("b", [group([CPU], ("on-demand", [quota(CPU, "4")]),
                                      ("spot", [quota(CPU, "4")]))], cohort="co"),
            workload("x", "a", {CPU: "3"}, admitted=("a", {CPU: "on-demand"})),
            workload("y", "a", {CPU: "2"}, admitted=("a", {CPU: "spot"}))]
    snap = snapshot(load(tmp_path, docs))
    # Borrowed: 2 on-demand + 1 spot = 3 cpu, over 10 cpu lendable in both flavors.
    assert snap.cluster_queues["a"].dominant_resource_share().rounded_weighted_share() == 300


def test_lending_limit_shrinks_what_others_can_borrow(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("a", [group([CPU], ("default", [quota(CPU, "2")]))], cohort="co"),
            cluster_queue("b", [group([CPU], ("default", [quota(CPU, "8", lending="2")]))],
                          cohort="co"),
            admitted("w", "a", "3")]
    snap = snapshot(load(tmp_path, docs))
    # Only 2 + 2 are visible to a from the cohort: borrowing 1 of 4.
    assert snap.cluster_queues["a"].dominant_resource_share().rounded_weighted_share() == 250


def test_dominant_resource_is_the_larger_ratio(tmp_path: Path) -> None:
    mem = "memory"
    docs = [flavor("default"),
            cluster_queue("a", [group([CPU, mem], ("default", [quota(CPU, "1"),
                                                              quota(mem, "1Gi")]))],
                          cohort="co"),
            cluster_queue("b", [group([CPU, mem], ("default", [quota(CPU, "9"),
                                                              quota(mem, "9Gi")]))],
                          cohort="co"),
            workload("w", "a", {CPU: "2", mem: "5Gi"}, admitted=("a", {CPU: "default",
                                                                     mem: "default"}))]
    drs = snapshot(load(tmp_path, docs)).cluster_queues["a"].dominant_resource_share()
    assert (drs.dominant_resource, drs.rounded_weighted_share()) == (mem, 400)
