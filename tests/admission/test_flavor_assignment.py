"""Flavor assignment: taints, node affinity, fungibility, partial admission; pods on admission."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission import admitted_pod, gated_pod
from kubeberth.admission.flavors import (
    FIT,
    NO_FIT,
    PREEMPT,
    FlavorAssigner,
    reduce_podsets,
)
from kubeberth.admission.model import ADMISSION_GATE, PodSet
from kubeberth.admission.quota import Snapshot
from kubeberth.api.objects import Pod, PodSchedulingGate, PodSpec, Toleration

from .builders import (
    cluster_queue,
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

GPU = "nvidia.com/gpu"
TAINT = {"key": "spot", "value": "true", "effect": "NoSchedule"}


def _two_flavor_queue(**kw: Any) -> list[dict[str, Any]]:
    return [flavor("on-demand", {"tier": "on-demand"}),
            flavor("spot", {"tier": "spot"}, taints=[TAINT]),
            cluster_queue("cq", [group([GPU], ("on-demand", [quota(GPU, "2")]),
                                       ("spot", [quota(GPU, "8")]))], **kw),
            local_queue("cq")]


def _flavors(data: dict[str, Any], name: str) -> dict[str, dict[str, str]]:
    flavors: dict[str, dict[str, str]] = next(
        w["flavors"] for w in data["workloads"] if w["name"] == name)
    return flavors


def test_first_flavor_that_fits(tmp_path: Path) -> None:
    data, _ = run(tmp_path, [*_two_flavor_queue(), workload("w", "cq", {GPU: "2"})])
    assert _flavors(data, "default/w") == {"main": {GPU: "on-demand"}}


def test_untolerated_taint_skips_flavor(tmp_path: Path) -> None:
    data, result = run(tmp_path, [*_two_flavor_queue(), workload("w", "cq", {GPU: "4"})])
    # on-demand is too small, spot is tainted: the reason of the closest flavor is reported.
    assert states(data)["default/w"] == ("Inadmissible", "ExceedsMaxQuota")
    assert "untolerated taint spot=true:NoSchedule in flavor spot" in \
        result.reasons["default/w"][1]


def test_toleration_opens_tainted_flavor(tmp_path: Path) -> None:
    tol = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    data, _ = run(tmp_path, [*_two_flavor_queue(),
                             workload("w", "cq", {GPU: "4"}, tolerations=tol)])
    assert _flavors(data, "default/w") == {"main": {GPU: "spot"}}


def test_flavor_tolerations_count_as_pod_tolerations(tmp_path: Path) -> None:
    docs = _two_flavor_queue()
    docs[1] = flavor("spot", {"tier": "spot"}, taints=[TAINT],
                     tolerations=[{"key": "spot", "operator": "Exists"}])
    data, _ = run(tmp_path, [*docs, workload("w", "cq", {GPU: "4"})])
    assert _flavors(data, "default/w") == {"main": {GPU: "spot"}}


def test_node_selector_restricts_flavors(tmp_path: Path) -> None:
    tol = [{"key": "spot", "operator": "Exists"}]
    data, _ = run(tmp_path, [*_two_flavor_queue(),
                             workload("w", "cq", {GPU: "1"}, tolerations=tol,
                                      node_selector={"tier": "spot", "zone": "a"})])
    # "zone" is not a key of either flavor: it is left to the node, only "tier" decides.
    assert _flavors(data, "default/w") == {"main": {GPU: "spot"}}


def test_no_flavor_matches(tmp_path: Path) -> None:
    data, _ = run(tmp_path, [*_two_flavor_queue(),
                             workload("w", "cq", {GPU: "1"}, node_selector={"tier": "gold"})])
    assert states(data)["default/w"] == ("Inadmissible", "NoMatchingFlavor")


def test_resource_not_in_queue(tmp_path: Path) -> None:
    data, result = run(tmp_path, [*_two_flavor_queue(), workload("w", "cq", {"cpu": "1"})])
    assert states(data)["default/w"] == ("Inadmissible", "NoMatchingFlavor")
    assert "resource cpu unavailable in ClusterQueue" in result.reasons["default/w"][1]


def _snapshot_assign(tmp_path: Path, docs: list[dict[str, Any]], possibility: str = "Preempt",
                     ) -> tuple[int, dict[str, str], int]:
    objs = load(tmp_path, docs)
    snap = snapshot(objs)
    wl = next(w for w in objs.workloads if w.admission is None)
    a = FlavorAssigner(wl.podsets, snap.cluster_queues["cq"], snap.flavors,
                       lambda _cq, _fr, _q: (possibility, 0)).assign()
    return (a.representative_mode(), {r: fa.name for r, fa in a.podsets[0].flavors.items()},
            a.borrowing)


@pytest.mark.parametrize(("when_can_preempt", "flavor_name", "mode"), [
    ("MayStopSearch", "on-demand", PREEMPT),
    ("TryNextFlavor", "spot", FIT),
])
def test_when_can_preempt(tmp_path: Path, when_can_preempt: str, flavor_name: str,
                          mode: int) -> None:
    tol = [{"key": "spot", "operator": "Exists"}]
    docs = [*_two_flavor_queue(within="LowerPriority", when_can_preempt=when_can_preempt),
            workload("used", "cq", {GPU: "2"}, admitted=("cq", {GPU: "on-demand"})),
            workload("w", "cq", {GPU: "1"}, tolerations=tol, priority=5)]
    got_mode, flavors, _ = _snapshot_assign(tmp_path, docs)
    assert (got_mode, flavors) == (mode, {GPU: flavor_name})


@pytest.mark.parametrize(("when_can_borrow", "flavor_name", "borrowing"), [
    ("MayStopSearch", "on-demand", 1),
    ("TryNextFlavor", "spot", 0),
])
def test_when_can_borrow(tmp_path: Path, when_can_borrow: str, flavor_name: str,
                         borrowing: int) -> None:
    tol = [{"key": "spot", "operator": "Exists"}]
    docs = [flavor("on-demand", {"tier": "on-demand"}),
            flavor("spot", {"tier": "spot"}, taints=[TAINT]),
            cluster_queue("cq", [group([GPU], ("on-demand", [quota(GPU, "1")]),
                                       ("spot", [quota(GPU, "8")]))], cohort="co",
                          when_can_borrow=when_can_borrow),
            cluster_queue("lender", [group([GPU], ("on-demand", [quota(GPU, "4")]))],
                          cohort="co"),
            local_queue("cq"),
            workload("w", "cq", {GPU: "2"}, tolerations=tol)]
    mode, flavors, level = _snapshot_assign(tmp_path, docs)
    assert (mode, flavors, level) == (FIT, {GPU: flavor_name}, borrowing)


def test_no_candidates_counts_as_worst_preempt(tmp_path: Path) -> None:
    docs = [*_two_flavor_queue(within="LowerPriority", when_can_preempt="MayStopSearch"),
            workload("used", "cq", {GPU: "2"}, admitted=("cq", {GPU: "on-demand"})),
            workload("w", "cq", {GPU: "1"}, priority=5)]
    mode, flavors, _ = _snapshot_assign(tmp_path, docs, possibility="NoCandidates")
    assert (mode, flavors) == (PREEMPT, {GPU: "on-demand"})


def test_exceeding_every_flavor_is_no_fit(tmp_path: Path) -> None:
    tol = [{"key": "spot", "operator": "Exists"}]
    docs = [*_two_flavor_queue(), workload("w", "cq", {GPU: "9"}, tolerations=tol)]
    mode, flavors, _ = _snapshot_assign(tmp_path, docs)
    assert (mode, flavors) == (NO_FIT, {})


def test_partial_admission_reduces_count(tmp_path: Path) -> None:
    docs = [*_two_flavor_queue(), workload("w", "cq", {GPU: "1"}, count=5, min_count=1)]
    data, result = run(tmp_path, docs)
    assert states(data)["default/w"] == ("Admitted", "Admitted")
    adm = result.state.admitted["default/w"].admission
    assert adm is not None and adm.podset_assignments[0].count == 2


def test_reducer_finds_largest_fitting_counts() -> None:
    podsets = [PodSet("a", 10, {}, 2), PodSet("b", 4, {})]
    assert reduce_podsets(podsets, lambda c: c[0] <= 7) == [7, 4]
    assert reduce_podsets(podsets, lambda c: False) is None
    assert reduce_podsets([PodSet("x", 3, {})], lambda c: True) is None


def test_gated_and_admitted_pod(tmp_path: Path) -> None:
    tol = Toleration(key="spot", operator="Exists")
    docs = [*_two_flavor_queue(), workload("w", "cq", {GPU: "1"})]
    docs[1] = flavor("spot", {"tier": "spot"}, taints=[TAINT],
                     tolerations=[{"key": "spot", "operator": "Exists"}])
    objs = load(tmp_path, docs)
    pod = Pod(spec=PodSpec(node_selector={"zone": "a"}))
    gated = gated_pod(pod)
    assert gated.spec.scheduling_gates == [PodSchedulingGate(name=ADMISSION_GATE)]
    assert gated_pod(gated) is gated
    from kubeberth.admission.model import Admission, PodSetAssignment

    adm = Admission("cq", [PodSetAssignment("main", 1, {GPU: "spot"}, {GPU: 1000})])
    released = admitted_pod(gated, adm, "main", objs.flavors)
    assert released.spec.scheduling_gates == []
    assert released.spec.node_selector == {"zone": "a", "tier": "spot"}
    assert released.spec.tolerations == [tol]
    assert admitted_pod(gated, adm, "other", objs.flavors).spec.node_selector == {"zone": "a"}


def test_worst_resource_decides_the_flavor_mode(tmp_path: Path) -> None:
    mem = "memory"
    docs = [flavor("only"),
            cluster_queue("cq", [group(["cpu", mem], ("only", [quota("cpu", "8"),
                                                              quota(mem, "2Gi")]))],
                          within="LowerPriority"),
            local_queue("cq"),
            workload("used", "cq", {"cpu": "1", mem: "2Gi"}, admitted=(
                "cq", {"cpu": "only", mem: "only"})),
            workload("w", "cq", {"cpu": "1", mem: "1Gi"}, priority=5)]
    objs = load(tmp_path, docs)
    snap = Snapshot(objs)
    from kubeberth.admission.quota import admitted_info

    snap.add_workload(admitted_info(objs.workloads[0]))
    a = FlavorAssigner(objs.workloads[1].podsets, snap.cluster_queues["cq"], snap.flavors,
                       lambda _cq, _fr, _q: ("Preempt", 0)).assign()
    modes = {r: fa.mode for r, fa in a.podsets[0].flavors.items()}
    assert modes == {"cpu": FIT, mem: PREEMPT}
    assert a.representative_mode() == PREEMPT


def test_pods_resource_counts_pods(tmp_path: Path) -> None:
    docs = [flavor("only"),
            cluster_queue("cq", [group(["cpu", "pods"], ("only", [quota("cpu", "100"),
                                                                 quota("pods", "3")]))]),
            local_queue("cq"),
            workload("fits", "cq", {"cpu": "1"}, count=3),
            workload("too-many", "cq", {"cpu": "1"}, count=4)]
    data, result = run(tmp_path, docs)
    assert states(data)["default/fits"] == ("Admitted", "Admitted")
    assert states(data)["default/too-many"] == ("Inadmissible", "ExceedsMaxQuota")
    adm = result.state.admitted["default/fits"].admission
    assert adm is not None and adm.podset_assignments[0].flavors == {"cpu": "only",
                                                                      "pods": "only"}


def test_required_affinity_terms_are_ored(tmp_path: Path) -> None:
    docs = [*_two_flavor_queue(), workload("w", "cq", {GPU: "1"})]
    docs[-1]["spec"]["podSets"][0]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
            {"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                   "values": ["on-demand"]}]}]}}}
    docs[-1]["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [
        {"key": "spot", "operator": "Exists"}]
    data, _ = run(tmp_path, docs)
    assert _flavors(data, "default/w") == {"main": {GPU: "spot"}}


def test_zero_request_for_uncovered_resource_is_ignored(tmp_path: Path) -> None:
    data, _ = run(tmp_path, [*_two_flavor_queue(),
                             workload("w", "cq", {GPU: "1", "example.com/fpga": "0"})])
    assert _flavors(data, "default/w") == {"main": {GPU: "on-demand"}}
