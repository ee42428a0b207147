"""The quota tree at its edges, as Kueue's resource_node.go, fair_sharing.go and clusterqueue.go
compute them: a share of one milli-unit, a resource the cohort lends none of, equal ratios, a
flavor-resource a queue has no quota or no usage for (Go reads a missing map key as 0), usage
added and removed by the milli, lending limits at their bounds, a deep cohort tree, the tree
recomputed while it holds usage, inactive ClusterQueues. (Written against the surviving mutants
of tools/mutation.py's ``quota`` target; each test states upstream's behaviour.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission.model import ResourceQuota
from kubeberth.admission.quota import (
    DRS,
    WorkloadInfo,
    admitted_info,
    lowest_subtree_that_fits,
    quantities_fit_in_quota,
    within_nominal,
)
from kubeberth.api.errors import InputError

from .builders import (
    KUEUE,
    T0,
    cluster_queue,
    cohort,
    flavor,
    group,
    load,
    quota,
    snapshot,
    workload,
)

CPU = "cpu"
MEM = "memory"
GPU = "nvidia.com/gpu"


def _cohort_of_two(a: list[dict[str, Any]], b: list[dict[str, Any]], resources: list[str],
                   *used: dict[str, Any], weight_b: str | None = None) -> list[dict[str, Any]]:
    """ClusterQueues ``a`` and ``b`` in cohort ``co`` on flavor ``default`` with the given
    quotas, and the admitted workloads ``used``."""
    return [flavor("default"),
            cluster_queue("a", [group(resources, ("default", a))], cohort="co"),
            cluster_queue("b", [group(resources, ("default", b))], cohort="co",
                          weight=weight_b),
            *used]


def _on_a(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return workload(name, "a", requests, admitted=("a", dict.fromkeys(requests, "default")))


# ---- dominant resource share -------------------------------------------------------------------
@pytest.mark.parametrize(("a_cpu", "b_cpu", "used", "share"), [
    # One milli-cpu over the nominal quota is borrowing: 1 of the 8000m lendable, per mille.
    ("2", "6", "2001m", DRS(1.0, 0.125, CPU, frozenset({("default", CPU)}))),
    # A cohort that can lend a single milli-cpu: borrowing all of it is 1000 per mille.
    ("0", "1m", "1m", DRS(1.0, 1000.0, CPU, frozenset({("default", CPU)}))),
    # Exactly at the nominal quota is not borrowing.
    ("2", "6", "2", DRS(1.0, 0.0, "")),
])
def test_share_at_the_smallest_amounts(tmp_path: Path, a_cpu: str, b_cpu: str, used: str,
                                       share: DRS) -> None:
    docs = _cohort_of_two([quota(CPU, a_cpu)], [quota(CPU, b_cpu)], [CPU],
                          _on_a("w", {CPU: used}))
    assert snapshot(load(tmp_path, docs)).cluster_queues["a"].dominant_resource_share() == share


@pytest.mark.parametrize(("used", "share"), [
    # Borrowing only a resource no one in the cohort has quota for: no ratio, no resource, yet
    # the queue is borrowing it (what the fair sharing order's "nominal first" rule reads).
    ({GPU: "1"}, DRS(1.0, 0.0, "", frozenset({("default", GPU)}))),
    # Then the resources the cohort does lend decide alone: 1 of 4 cpu.
    ({GPU: "1", CPU: "2"}, DRS(1.0, 250.0, CPU, frozenset({("default", GPU), ("default", CPU)}))),
])
def test_resource_the_cohort_lends_none_of(tmp_path: Path, used: dict[str, str],
                                           share: DRS) -> None:
    docs = _cohort_of_two([quota(CPU, "1"), quota(GPU, "0")], [quota(CPU, "3"), quota(GPU, "0")],
                          [CPU, GPU], _on_a("w", used))
    assert snapshot(load(tmp_path, docs)).cluster_queues["a"].dominant_resource_share() == share


@pytest.mark.parametrize("order", [[CPU, MEM], [MEM, CPU]])
def test_equal_ratios_name_the_first_resource_alphabetically(tmp_path: Path,
                                                              order: list[str]) -> None:
    # a borrows 1 of 4 cpu and 1Gi of 4Gi memory: 250 each, whatever order the quotas list.
    nominal = {CPU: ("1", "3"), MEM: ("1Gi", "3Gi")}
    docs = _cohort_of_two([quota(r, nominal[r][0]) for r in order],
                          [quota(r, nominal[r][1]) for r in order], order,
                          _on_a("w", {CPU: "2", MEM: "2Gi"}))
    assert snapshot(load(tmp_path, docs)).cluster_queues["a"].dominant_resource_share() == \
        DRS(1.0, 250.0, CPU, frozenset({("default", CPU), ("default", MEM)}))


def test_share_carries_the_weight_when_not_borrowing(tmp_path: Path) -> None:
    docs = _cohort_of_two([quota(CPU, "2")], [quota(CPU, "6")], [CPU], weight_b="2")
    snap = snapshot(load(tmp_path, docs))
    assert snap.cluster_queues["b"].dominant_resource_share() == DRS(2.0, 0.0, "")
    # The cohort, named by the queues but never defined, exists implicitly under its name and
    # with the default weight; having no parent, its share is zero.
    assert snap.cohorts["co"].name == "co"
    assert snap.cohorts["co"].dominant_resource_share() == DRS(1.0, 0.0, "")


# ---- flavor-resources without quota or usage ---------------------------------------------------
def _with_old_flavor(tmp_path: Path) -> Any:
    """Queue ``a`` (1 cpu on ``default``) holding 1m cpu on flavor ``old``, which its quotas no
    longer list: usage without quota."""
    docs = [flavor("old"),
            *_cohort_of_two([quota(CPU, "1")], [quota(CPU, "3")], [CPU]),
            workload("w", "a", {CPU: "1m"}, admitted=("a", {CPU: "old"}))]
    return snapshot(load(tmp_path, docs))


def test_quantities_fit_in_quota_reads_missing_quota_as_zero(tmp_path: Path) -> None:
    cq = _with_old_flavor(tmp_path).cluster_queues["a"]
    default, other = ("default", CPU), ("other", CPU)
    # Without a lending limit nothing is kept locally: all of a request is asked of the parent.
    assert quantities_fit_in_quota(cq, {default: 1000}) == (True, {default: 1000})
    assert quantities_fit_in_quota(cq, {default: 1001}) == (False, {default: 1001})
    # No quota and no usage: even 1m does not fit.
    assert quantities_fit_in_quota(cq, {other: 1}) == (False, {other: 1})
    assert quantities_fit_in_quota(cq, {other: 0}) == (True, {other: 0})


def test_quota_for_a_flavor_resource_without_quota_is_zero(tmp_path: Path) -> None:
    cq = _with_old_flavor(tmp_path).cluster_queues["a"]
    assert cq.quota_for(("default", CPU)) == ResourceQuota(1000)
    assert cq.quota_for(("old", CPU)) == ResourceQuota(0, None, None)


def test_within_nominal_reads_missing_quota_and_usage_as_zero(tmp_path: Path) -> None:
    cq = _with_old_flavor(tmp_path).cluster_queues["a"]
    assert within_nominal(cq, {("default", CPU)})
    assert within_nominal(cq, {("other", CPU)})  # no quota, no usage
    assert not within_nominal(cq, {("old", CPU)})  # 1m used of no quota
    assert not within_nominal(cq, {("default", CPU), ("old", CPU)})


def test_queue_without_cohort_reads_missing_quota_as_zero(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("solo", [group([CPU], ("default", [quota(CPU, "2")]))])]
    cq = snapshot(load(tmp_path, docs)).cluster_queues["solo"]
    assert (cq.potential_available(("default", CPU)), cq.available(("default", CPU))) == \
        (2000, 2000)
    assert (cq.potential_available(("other", CPU)), cq.available(("other", CPU))) == (0, 0)


def test_borrowing_reads_missing_quota_as_zero(tmp_path: Path) -> None:
    cq = _with_old_flavor(tmp_path).cluster_queues["a"]
    assert cq.borrowing(("old", CPU))  # 1m used of no quota
    assert not cq.borrowing(("other", CPU))
    assert cq.borrowing_with(("other", CPU), 1)
    assert not cq.borrowing_with(("default", CPU), 1000)
    assert cq.borrowing_with(("default", CPU), 1001)


# ---- removing workloads ------------------------------------------------------------------------
def test_remove_workload_forgets_it_and_its_usage(tmp_path: Path) -> None:
    docs = _cohort_of_two([quota(CPU, "2")], [quota(CPU, "6")], [CPU],
                          _on_a("w", {CPU: "3"}))
    objs = load(tmp_path, docs)
    snap = snapshot(objs)
    cq, fr = snap.cluster_queues["a"], ("default", CPU)
    info = admitted_info(objs.workloads[0])
    assert list(cq.workloads) == [info.key] and cq.usage[fr] == 3000
    snap.remove_workload(info)
    assert cq.workloads == {} and cq.usage[fr] == 0 and snap.cohorts["co"].usage[fr] == 0
    # Kueue deletes from its map whether or not the key is there: a workload the queue does
    # not hold is no error.
    snap.remove_workload(WorkloadInfo(objs.workloads[0], "a"))
    assert cq.workloads == {} and cq.usage[fr] == 0


def test_usage_removed_by_the_milli(tmp_path: Path) -> None:
    docs = _cohort_of_two([quota(CPU, "2")], [quota(CPU, "6", lending="1")], [CPU])
    snap = snapshot(load(tmp_path, docs))
    a, b, co, fr = (snap.cluster_queues["a"], snap.cluster_queues["b"], snap.cohorts["co"],
                    ("default", CPU))
    # b keeps 5 of its 6 cpu to itself: usage that exactly fills them never reaches the cohort,
    # going or coming.
    b.add_usage({fr: 5000})
    b.remove_usage({fr: 5000})
    assert b.usage == {fr: 0} and co.usage == {}
    # Without a lending limit all of a's usage is stored in the cohort, even a single milli.
    a.add_usage({fr: 1})
    assert (a.usage[fr], co.usage[fr]) == (1, 1)
    a.remove_usage({fr: 1})
    assert (a.usage[fr], co.usage[fr]) == (0, 0)


def test_usage_removed_where_none_was_recorded(tmp_path: Path) -> None:
    snap = snapshot(load(tmp_path, _cohort_of_two([quota(CPU, "2")], [quota(CPU, "6")], [CPU])))
    a, co, fr = snap.cluster_queues["a"], snap.cohorts["co"], ("default", CPU)
    assert a.usage == {} and co.usage == {}
    # Kueue reads the missing entry as 0: the queue goes below zero and, having stored nothing
    # in its cohort, takes nothing back from it.
    a.remove_usage({fr: 5})
    assert a.usage == {fr: -5} and co.usage == {}


# ---- a workload's charge -----------------------------------------------------------------------
def test_admitted_usage_sums_pod_sets_and_keeps_unused_flavors(tmp_path: Path) -> None:
    doc = workload("w", "a", {CPU: "2"}, admitted=("a", {CPU: "default", MEM: "default"}))
    # A second podSet on the same flavor, and memory assigned a flavor but no usage.
    pod_set = dict(doc["spec"]["podSets"][0], name="extra")
    doc["spec"]["podSets"].append(pod_set)
    doc["status"]["admission"]["podSetAssignments"].append(
        {"name": "extra", "count": 1, "flavors": {CPU: "default"},
         "resourceUsage": {CPU: "3"}})
    objs = load(tmp_path, [*_cohort_of_two([quota(CPU, "9"), quota(MEM, "1Gi")],
                                          [quota(CPU, "1"), quota(MEM, "1Gi")], [CPU, MEM]),
                           doc])
    info = admitted_info(objs.workloads[0])
    assert info.usage.get(("default", CPU)) == 5000
    assert info.usage.get(("default", MEM), 0) == 0
    assert info.flavor_resources == {("default", CPU), ("default", MEM)}


@pytest.mark.parametrize(("lending", "local", "cohort_quota"), [
    ("2", 0, 8000),  # lends all it has: keeps nothing back
    ("1", 1000, 7000),
    ("0", 2000, 6000),  # lends nothing
])
def test_lending_limit_keeps_the_rest_local(tmp_path: Path, lending: str, local: int,
                                            cohort_quota: int) -> None:
    docs = _cohort_of_two([quota(CPU, "2", lending=lending)], [quota(CPU, "6")], [CPU])
    snap = snapshot(load(tmp_path, docs))
    fr = ("default", CPU)
    assert snap.cluster_queues["a"].local_quota(fr) == local
    assert snap.cohorts["co"].subtree_quota[fr] == cohort_quota


# ---- inactive ClusterQueues -------------------------------------------------------------------
def _check(name: str, active: bool) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": "test.example/approval"},
            "status": {"conditions": [{"type": "Active", "status": str(active), "reason": "R",
                                       "message": "", "lastTransitionTime": T0}]}}


@pytest.mark.parametrize(("spec", "extra", "cause", "message"), [
    ({"stopPolicy": "Hold"}, [], "Stopped", "Stopped"),
    ({"admissionChecksStrategy": {"admissionChecks": [{"name": "ghost-b"}, {"name": "ghost-a"}]}},
     [], "AdmissionCheckNotFound", "references missing AdmissionCheck(s): ghost-a, ghost-b"),
    ({"admissionChecksStrategy": {"admissionChecks": [{"name": "off"}, {"name": "on"}]}},
     [_check("off", False), _check("on", True)],
     "AdmissionCheckInactive", "references inactive AdmissionCheck(s): off"),
])
def test_inactive_queue_reason(tmp_path: Path, spec: dict[str, Any], extra: list[dict[str, Any]],
                               cause: str, message: str) -> None:
    """The reason of the ClusterQueue's Active=False condition (Kueue's
    ClusterQueueActiveReason* values) and what admission reports for its workloads."""
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, "1")]))], extra=spec),
            *extra]
    cq = snapshot(load(tmp_path, docs)).cluster_queues["cq"]
    assert (cq.active, cq.inactive_cause, cq.inactive_reason) == \
        (False, cause, f"ClusterQueue cq is inactive: {message}")


def test_queue_on_a_missing_flavor_is_inactive(tmp_path: Path) -> None:
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU], ("gone-b", [quota(CPU, "1")]),
                                       ("default", [quota(CPU, "1")]),
                                       ("gone-a", [quota(CPU, "1")]))])]
    cq = snapshot(load(tmp_path, docs)).cluster_queues["cq"]
    assert (cq.active, cq.inactive_cause, cq.inactive_reason) == \
        (False, "FlavorNotFound",
         "ClusterQueue cq is inactive: references missing ResourceFlavor(s): gone-a, gone-b")


def test_bad_namespace_selector_names_its_field(tmp_path: Path) -> None:
    selector = {"matchExpressions": [{"key": "team", "operator": "Near", "values": ["a"]}]}
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, "1")]))],
                          namespace_selector=selector)]
    with pytest.raises(InputError) as err:
        snapshot(load(tmp_path, docs))
    assert err.value.field == "spec.namespaceSelector.matchExpressions[0]"
    assert "unknown operator 'Near'" in err.value.message


# ---- recomputing the tree ----------------------------------------------------------------------
def test_recomputing_the_tree_keeps_the_usage_it_holds(tmp_path: Path) -> None:
    """Kueue recomputes a cohort tree's quota and usage from the leaves whenever a queue or
    cohort changes, with workloads admitted: the cohorts' usage must come out as adding the
    workloads one by one left it. Usage a lending limit keeps local stays out of the parent."""
    fr = ("default", CPU)
    docs = [flavor("default"), cohort("root"), cohort("left", parent="root"),
            cluster_queue("a", [group([CPU], ("default", [quota(CPU, "4", lending="1")]))],
                          cohort="left"),
            cluster_queue("b", [group([CPU], ("default", [quota(CPU, "2")]))], cohort="left"),
            cluster_queue("c", [group([CPU], ("default", [quota(CPU, "2", lending="1")]))],
                          cohort="root"),
            # a keeps 3 to itself and uses 5: 2 reach left; b's 1 all does; c's 1 stays in c.
            _on_a("wa", {CPU: "5"}),
            workload("wb", "b", {CPU: "1"}, admitted=("b", {CPU: "default"})),
            workload("wc", "c", {CPU: "1"}, admitted=("c", {CPU: "default"}))]
    snap = snapshot(load(tmp_path, docs))
    usage = {n: dict(co.usage) for n, co in snap.cohorts.items()}
    quotas = {n: dict(co.subtree_quota) for n, co in snap.cohorts.items()}
    assert usage == {"left": {fr: 3000}, "root": {fr: 3000}}
    snap.recompute_quotas()
    assert {n: co.usage for n, co in snap.cohorts.items()} == usage
    assert {n: co.subtree_quota for n, co in snap.cohorts.items()} == quotas


# ---- the lowest subtree that fits --------------------------------------------------------------
@pytest.mark.parametrize(("val", "found"), [
    (4, (0, True)),  # within a's own nominal quota
    (5, (1, True)),  # 1 past it and the 2 a keeps back: 3 of left's 4
    (7, (2, True)),  # 5 past a's, 3 past left's local quota: 3 of mid's 4
    (9, (3, False)),  # 5 past left's: only the root's 6
    (11, (3, False)),  # fits nowhere: the whole tree
])
def test_lowest_subtree_in_a_deep_tree(tmp_path: Path, val: int, found: tuple[int, bool]) -> None:
    """root (d: 2) > mid (c: 2) > left (lends 2 of what a and b lend it) > a (4, lends 2), b (2).
    What a node keeps back by a lending limit is taken off before asking its parent."""
    gpu = [GPU]
    docs = [flavor("default"), cohort("root"), cohort("mid", parent="root"),
            cohort("left", parent="mid",
                   groups=[group(gpu, ("default", [quota(GPU, "0", lending="2")]))]),
            cluster_queue("a", [group(gpu, ("default", [quota(GPU, "4", lending="2")]))],
                          cohort="left"),
            cluster_queue("b", [group(gpu, ("default", [quota(GPU, "2")]))], cohort="left"),
            cluster_queue("c", [group(gpu, ("default", [quota(GPU, "2")]))], cohort="mid"),
            cluster_queue("d", [group(gpu, ("default", [quota(GPU, "2")]))], cohort="root")]
    snap = snapshot(load(tmp_path, docs))
    fr = ("default", GPU)
    assert [snap.cohorts[n].subtree_quota[fr] for n in ("left", "mid", "root")] == \
        [4000, 4000, 6000]
    assert lowest_subtree_that_fits(snap.cluster_queues["a"], fr, val * 1000) == found
