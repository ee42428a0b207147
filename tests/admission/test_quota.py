"""The quota tree: subtree quota, usage bubbling, borrowing and lending limits, hierarchies."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.admission.quota import (
    admitted_info,
    lowest_subtree_that_fits,
    node_height,
)

from .builders import (
    cluster_queue,
    cohort,
    flavor,
    group,
    load,
    quota,
    run,
    snapshot,
    states,
    two_gpu_queues,
    workload,
)

GPU = "nvidia.com/gpu"
FR = ("a100", GPU)



def test_cohort_subtree_quota_sums_members(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, two_gpu_queues(("8", None, None), ("2", None, None))))
    assert snap.cohorts["co"].subtree_quota[FR] == 10_000
    assert snap.cluster_queues["a"].available(FR) == 10_000
    assert snap.cluster_queues["b"].potential_available(FR) == 10_000


def test_lending_limit_keeps_quota_local(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, two_gpu_queues(("8", None, "3"), ("2", None, None))))
    # a lends only 3 of its 8: the cohort sees 3 + 2, b can reach at most 5.
    assert snap.cohorts["co"].subtree_quota[FR] == 5_000
    assert snap.cluster_queues["a"].local_quota(FR) == 5_000
    assert snap.cluster_queues["b"].potential_available(FR) == 5_000
    assert snap.cluster_queues["a"].potential_available(FR) == 10_000


def test_borrowing_limit_caps_what_a_queue_can_take(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, two_gpu_queues(("8", None, None), ("2", "3", None))))
    assert snap.cluster_queues["b"].potential_available(FR) == 5_000
    assert snap.cluster_queues["b"].available(FR) == 5_000
    assert snap.cluster_queues["a"].available(FR) == 10_000


def test_usage_past_local_quota_bubbles_to_cohort(tmp_path: Path) -> None:
    docs = [*two_gpu_queues(("8", None, "3"), ("2", None, None)),
            workload("w", "a", {GPU: "6"}, admitted=("a", {GPU: "a100"}))]
    snap = snapshot(load(tmp_path, docs))
    a, b, co = snap.cluster_queues["a"], snap.cluster_queues["b"], snap.cohorts["co"]
    assert a.usage[FR] == 6_000
    # 5 are kept locally by the lending limit; only 1 is charged to the cohort.
    assert co.usage[FR] == 1_000
    assert b.available(FR) == 4_000
    assert a.available(FR) == 4_000
    assert not a.borrowing(FR)
    snap.remove_workload(admitted_info(load(tmp_path, docs).workloads[0]))
    assert co.usage.get(FR, 0) == 0 and a.usage[FR] == 0


def test_borrowing_detected_above_nominal(tmp_path: Path) -> None:
    docs = [*two_gpu_queues(("8", None, None), ("2", None, None)),
            workload("w", "b", {GPU: "5"}, admitted=("b", {GPU: "a100"}))]
    snap = snapshot(load(tmp_path, docs))
    b = snap.cluster_queues["b"]
    assert b.borrowing(FR)
    assert snap.cluster_queues["a"].available(FR) == 5_000
    assert lowest_subtree_that_fits(b, FR, 1_000) == (1, False)
    assert lowest_subtree_that_fits(snap.cluster_queues["a"], FR, 1_000) == (0, True)


def test_hierarchical_cohort_quota_and_height(tmp_path: Path) -> None:
    docs = [
        flavor("a100"),
        cohort("root", groups=[group([GPU], ("a100", [quota(GPU, "4")]))]),
        cohort("left", parent="root"),
        cluster_queue("a", [group([GPU], ("a100", [quota(GPU, "2")]))], cohort="left"),
        cluster_queue("b", [group([GPU], ("a100", [quota(GPU, "2")]))], cohort="left"),
        cluster_queue("c", [group([GPU], ("a100", [quota(GPU, "1")]))], cohort="root"),
    ]
    snap = snapshot(load(tmp_path, docs))
    assert snap.cohorts["left"].subtree_quota[FR] == 4_000
    assert snap.cohorts["root"].subtree_quota[FR] == 9_000
    assert node_height(snap.cohorts["left"]) == 1
    assert node_height(snap.cohorts["root"]) == 2
    a = snap.cluster_queues["a"]
    assert lowest_subtree_that_fits(a, FR, 3_000) == (1, True)
    assert lowest_subtree_that_fits(a, FR, 6_000) == (2, False)


def test_admission_respects_borrowing_limit(tmp_path: Path) -> None:
    docs = [*two_gpu_queues(("8", None, None), ("2", "1", None)),
            workload("small", "b", {GPU: "3"}, created=1),
            workload("big", "b", {GPU: "4"}, created=0)]
    data, _ = run(tmp_path, docs)
    s = states(data)
    assert s["default/small"] == ("Admitted", "Admitted")
    # 4 > nominal 2 + borrowingLimit 1: can never fit.
    assert s["default/big"] == ("Inadmissible", "ExceedsMaxQuota")


def test_admission_respects_lending_limit(tmp_path: Path) -> None:
    docs = [*two_gpu_queues(("8", None, "2"), ("2", None, None)),
            workload("borrow", "b", {GPU: "5"})]
    data, _ = run(tmp_path, docs)
    # b may use its 2 plus the 2 that a lends: 5 exceeds the maximum.
    assert states(data)["default/borrow"] == ("Inadmissible", "ExceedsMaxQuota")
    docs[-1] = workload("borrow", "b", {GPU: "4"})
    data, _ = run(tmp_path, docs)
    assert states(data)["default/borrow"] == ("Admitted", "Admitted")


@pytest.mark.parametrize(("used", "expected"), [("0", "Admitted"), ("7", "Admitted"),
                                                ("8", "Inadmissible")])
def test_borrowed_quota_is_shared_with_usage(tmp_path: Path, used: str, expected: str) -> None:
    docs = [*two_gpu_queues(("8", None, None), ("2", None, None)),
            workload("b-wl", "b", {GPU: "3"})]
    if used != "0":
        docs.append(workload("a-wl", "a", {GPU: used}, admitted=("a", {GPU: "a100"})))
    data, _ = run(tmp_path, docs, cycles=1)
    assert states(data)["default/b-wl"][0] == expected
