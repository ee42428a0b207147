"""Kueue v1beta1 <-> v1beta2 conversion of raw objects, as Kueue's conversion webhook renames."""

from __future__ import annotations

from typing import Any

import pytest

from kubeberth.config.kueue_versions import V1BETA1, V1BETA2, convert

CQ_V1BETA1: dict[str, Any] = {
    "apiVersion": V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
    "spec": {"cohort": "all", "namespaceSelector": {}, "admissionChecks": ["prov"],
             "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 9}]}]}]},
}
CQ_V1BETA2: dict[str, Any] = {
    "apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
    "spec": {"cohortName": "all", "namespaceSelector": {},
             "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
             "resourceGroups": CQ_V1BETA1["spec"]["resourceGroups"]},
}
WL_V1BETA1: dict[str, Any] = {
    "apiVersion": V1BETA1, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
    "spec": {"queueName": "q", "podSets": [], "priorityClassName": "high",
             "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
    "status": {"accumulatedPastExexcutionTimeSeconds": 30},
}
WL_V1BETA2: dict[str, Any] = {
    "apiVersion": V1BETA2, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
    "spec": {"queueName": "q", "podSets": [], "priorityClassRef": {
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}},
    "status": {"accumulatedPastExecutionTimeSeconds": 30},
}


@pytest.mark.parametrize(("v1beta1", "v1beta2"), [
    (WL_V1BETA1, WL_V1BETA2),
    ({"apiVersion": V1BETA1, "kind": "LocalQueue", "metadata": {"name": "q"},
      "spec": {"clusterQueue": "cq"}, "status": {"flavorUsage": [{"name": "f"}]}},
     {"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": "q"},
      "spec": {"clusterQueue": "cq"}, "status": {"flavorsUsage": [{"name": "f"}]}}),
    ({"apiVersion": V1BETA1, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
     {"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": "f"}}),
])
def test_both_ways(v1beta1: dict[str, Any], v1beta2: dict[str, Any]) -> None:
    assert convert(v1beta1, V1BETA2) == v1beta2
    assert convert(v1beta2, V1BETA1) == v1beta1


def test_cluster_queue_up_and_down() -> None:
    assert convert(CQ_V1BETA1, V1BETA2) == CQ_V1BETA2
    down = convert(CQ_V1BETA2, V1BETA1)
    # v1beta1 reads the strategy as it is (it has both fields); the cohort is renamed back.
    assert down["spec"]["cohort"] == "all" and "cohortName" not in down["spec"]
    assert down["spec"]["admissionChecksStrategy"] == CQ_V1BETA2["spec"][
        "admissionChecksStrategy"]


def test_v1beta1_only_policies_read_as_may_stop_search() -> None:
    cq = {**CQ_V1BETA1, "spec": {"flavorFungibility": {"whenCanBorrow": "Borrow",
                                                        "whenCanPreempt": "Preempt"}}}
    assert convert(cq, V1BETA2)["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}


def test_pod_priority_class_reference_and_inputs_left_alone() -> None:
    wl = {**WL_V1BETA2, "spec": {"priorityClassRef": {
        "group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"}}}
    assert convert(wl, V1BETA1)["spec"] == {
        "priorityClassSource": "scheduling.k8s.io/priorityclass", "priorityClassName": "p"}
    assert convert(WL_V1BETA2, V1BETA2) == WL_V1BETA2
    assert WL_V1BETA1["spec"]["priorityClassName"] == "high"  # the input is not changed
