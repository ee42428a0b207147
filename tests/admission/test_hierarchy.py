"""Hierarchical cohorts: cohort quota and limits, borrowing across levels, fair tournaments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission import (
    AdmissionState,
    finish_workloads,
    run_cycle,
)
from kubeberth.admission.model import MAX_COHORT_DEPTH
from kubeberth.api.errors import InputError
from kubeberth.api.times import parse_time

from .builders import (
    at,
    cluster_queue,
    cohort,
    configuration,
    flavor,
    group,
    load,
    local_queue,
    quota,
    run,
    snapshot,
    states,
    workload,
)

CPU = "cpu"
FR = ("default", CPU)
NOW = parse_time(at(600), "now")


def _cq(name: str, parent: str, nominal: str, **kw: Any) -> dict[str, Any]:
    return cluster_queue(name, [group([CPU], ("default", [quota(CPU, nominal)]))],
                         cohort=parent, **kw)


def _tree(child_limits: tuple[str | None, str | None] = (None, None),
          child_quota: str = "0") -> list[dict[str, Any]]:
    borrow, lend = child_limits
    return [flavor("default"),
            cohort("root", groups=[group([CPU], ("default", [quota(CPU, "4")]))]),
            cohort("left", parent="root",
                   groups=[group([CPU], ("default", [quota(CPU, child_quota, borrow, lend)]))]),
            cohort("right", parent="root"),
            _cq("l1", "left", "2"), _cq("l2", "left", "2"), _cq("r1", "right", "2"),
            local_queue("l1"), local_queue("l2"), local_queue("r1")]



def test_cohort_quota_is_shared_by_its_subtree(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, _tree(child_quota="3")))
    assert snap.cohorts["left"].subtree_quota[FR] == 7_000
    assert snap.cohorts["root"].subtree_quota[FR] == 13_000
    assert snap.cluster_queues["l1"].available(FR) == 13_000


def test_cohort_borrowing_limit_caps_the_subtree(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, _tree(child_limits=("1", None))))
    # left's subtree has 4 and may take 1 more from the rest of the tree.
    assert snap.cluster_queues["l1"].potential_available(FR) == 5_000
    assert snap.cluster_queues["r1"].potential_available(FR) == 10_000


def test_cohort_lending_limit_keeps_subtree_quota(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, _tree(child_limits=(None, "1"), child_quota="2")))
    # left owns 2 + 2 + 2 and lends at most 1 of it upward.
    assert snap.cohorts["left"].local_quota(FR) == 5_000
    assert snap.cluster_queues["r1"].potential_available(FR) == 7_000
    assert snap.cluster_queues["l1"].potential_available(FR) == 12_000


def test_borrowing_level_grows_with_distance(tmp_path: Path) -> None:
    docs = [*_tree(), workload("near", "l1", {CPU: "3"}), workload("far", "l2", {CPU: "8"})]
    objs = load(tmp_path, docs)
    state = AdmissionState.from_objects(objs)
    result = run_cycle(state, NOW)
    admitted = {a.workload.key for a in result.admitted}
    # "near" borrows within "left" (level 1) and goes first; "far" would need the root
    # (level 2) and no longer fits once "near" is admitted.
    assert admitted == {"default/near"}


def test_finish_wakes_only_the_same_tree(tmp_path: Path) -> None:
    docs = [*_tree(),
            flavor("other"),
            cluster_queue("alone", [group([CPU], ("other", [quota(CPU, "1")]))]),
            local_queue("alone"),
            workload("hog", "l1", {CPU: "10"}, admitted=("l1", {CPU: "default"})),
            workload("single", "alone", {CPU: "1"}, admitted=("alone", {CPU: "other"})),
            workload("wait-tree", "r1", {CPU: "1"}),
            workload("wait-alone", "alone", {CPU: "1"})]
    state = AdmissionState.from_objects(load(tmp_path, docs))
    for _ in range(2):
        state = run_cycle(state, NOW).state
    assert sorted(e.key for e, active in state.queues.pending() if not active) == [
        "default/wait-alone", "default/wait-tree"]
    state = finish_workloads(state, ["default/hog"])
    assert [e.key for e, active in state.queues.pending() if active] == ["default/wait-tree"]
    result = run_cycle(state, NOW)
    assert [a.workload.key for a in result.admitted] == ["default/wait-tree"]


def test_fair_tournament_across_subtrees(tmp_path: Path) -> None:
    # The left subtree already borrows; the right one does not. With fair sharing the
    # right subtree's workload wins the root's tournament even at lower priority.
    docs = [*_tree(), configuration(fair_sharing=True),
            workload("left-run", "l1", {CPU: "5"}, admitted=("l1", {CPU: "default"})),
            workload("left-more", "l2", {CPU: "3"}, priority=100),
            workload("right-new", "r1", {CPU: "3"}, priority=0)]
    fair = run_cycle(AdmissionState.from_objects(load(tmp_path, docs)), NOW)
    assert [a.workload.key for a in fair.admitted] == ["default/right-new"]
    classical = run_cycle(AdmissionState.from_objects(load(tmp_path, docs[:-4] + docs[-3:])),
                          NOW)
    assert [a.workload.key for a in classical.admitted] == ["default/left-more"]


def test_everything_fits_until_the_root_is_full(tmp_path: Path) -> None:
    docs = [*_tree(), *[workload(f"w{i}", q, {CPU: "2"}, created=i)
                        for i, q in enumerate(["l1", "l2", "r1", "l1", "r1", "l2"])]]
    data, _ = run(tmp_path, docs)
    admitted = [k for k, (s, _) in states(data).items() if s == "Admitted"]
    # 10 cpus in the tree (2 + 2 + 2 + 4 at the root): five workloads of 2.
    assert len(admitted) == 5


def _chain(length: int) -> list[dict[str, Any]]:
    """c0 -> c1 -> ... -> c<length-1>: only the root holds quota; cq sits below c0."""
    cohorts = [cohort(f"c{i}", parent=f"c{i + 1}") for i in range(length - 1)]
    root = cohort(f"c{length - 1}", groups=[group([CPU], ("default", [quota(CPU, "4")]))])
    return [flavor("default"), *cohorts, root, _cq("cq", "c0", "0"), local_queue("cq")]


def test_a_chain_at_the_depth_limit_borrows_from_its_root(tmp_path: Path) -> None:
    docs = [*_chain(MAX_COHORT_DEPTH), workload("w", "cq", {CPU: "3"})]
    data, _ = run(tmp_path, docs)
    assert states(data)["default/w"][0] == "Admitted"


@pytest.mark.parametrize("length", [MAX_COHORT_DEPTH + 1, 1000, 5000])
def test_a_deeper_chain_is_an_input_error(tmp_path: Path, length: int) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path, _chain(length))
    assert err.value.field == "spec.parentName"
    assert f"{MAX_COHORT_DEPTH + 1} levels below its root" in str(err.value)


def test_a_long_cycle_is_reported_once(tmp_path: Path) -> None:
    docs = [flavor("default"), *(cohort(f"c{i}", parent=f"c{(i + 1) % 3000}")
                                 for i in range(3000))]
    with pytest.raises(InputError, match="cohorts form a cycle: c0 -> c1 -> c2"):
        load(tmp_path, docs)
