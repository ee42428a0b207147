"""Kueue's borrowingLimit as the project's own unit test (conformance covers it too, but a missing
../shared must not leave it untested): how much a ClusterQueue may still take from its cohort,
worked out by hand for usage on either side, and what admission makes of it.

Kueue's rule (pkg/cache/scheduler ``available``): a node with a borrowingLimit may use what it
stores in its parent (its subtree quota minus the part a lendingLimit keeps local) plus the
limit, minus what it already uses there; never more than the parent itself has left. Without a
lendingLimit nothing is kept local, so all of a queue's quota counts as stored in the cohort.

Every case: cohort ``co`` with queue ``a`` (nominal 8 GPUs, no limits) and queue ``b``
(nominal 2, borrowingLimit 3): the cohort's subtree quota is 10 GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .builders import (
    load,
    run,
    snapshot,
    states,
    two_gpu_queues,
    workload,
)

GPU = "nvidia.com/gpu"
FR = ("a100", GPU)


def docs(used_a: int, used_b: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [*two_gpu_queues(("8", None, None), ("2", "3", None))]
    for queue, used in (("a", used_a), ("b", used_b)):
        if used:
            out.append(workload(f"{queue}-running", queue, {GPU: str(used)},
                                admitted=(queue, {GPU: "a100"})))
    return out


@pytest.mark.parametrize(("used_a", "used_b", "left_a", "left_b", "b_borrowing"), [
    # Nothing used: b may take 2 + 3 = 5 (its limit binds before the cohort's 10).
    (0, 0, 10, 5, False),
    # b uses 4 (2 borrowed). Cohort: 10 − 4 = 6 left. b: min(2 − 4 + 3, 6) = 1. a: 6.
    (0, 4, 6, 1, True),
    # a uses 7. Cohort: 3 left. b: min(2 − 0 + 3, 3) = 3, the cohort binds. a: 3.
    (7, 0, 3, 3, False),
    # a uses 4, b uses 2. Cohort: 4 left. b: min(2 − 2 + 3, 4) = 3, the limit binds. a: 4.
    (4, 2, 4, 3, False),
    # b at its ceiling, 5. Cohort: 5 left, b: min(2 − 5 + 3, 5) = 0 although a's 5 sit idle.
    (0, 5, 5, 0, True),
])
def test_what_each_queue_may_still_take(tmp_path: Path, used_a: int, used_b: int,
                                        left_a: int, left_b: int, b_borrowing: bool) -> None:
    snap = snapshot(load(tmp_path, docs(used_a, used_b)))
    a, b = snap.cluster_queues["a"], snap.cluster_queues["b"]
    assert (a.available(FR), b.available(FR)) == (left_a * 1000, left_b * 1000)
    assert b.borrowing(FR) is b_borrowing
    # With no usage anywhere b could reach 5 at most, a all 10.
    assert (a.potential_available(FR), b.potential_available(FR)) == (10_000, 5_000)


@pytest.mark.parametrize(("used_b", "asks", "admitted"), [
    (4, 1, True),   # 4 + 1 = 5 = nominal 2 + borrowingLimit 3
    (4, 2, False),  # 6 > 5, although the cohort has 6 GPUs free
    (0, 5, True),
])
def test_admission_stops_at_the_borrowing_limit(tmp_path: Path, used_b: int, asks: int,
                                                admitted: bool) -> None:
    data, _ = run(tmp_path, [*docs(0, used_b), workload("new", "b", {GPU: str(asks)})],
                  cycles=1)
    state, _reason = states(data)["default/new"]
    assert (state == "Admitted") is admitted, states(data)
