"""Reading Kueue objects: both API versions, Jobs/Pods/pod groups, Configuration, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeberth.admission.model import KueueObjects, ResourceQuota, load_kueue
from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests

V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"


def _load(tmp_path: Path, text: str) -> KueueObjects:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return load_kueue(load_manifests([path]))


def _docs(tmp_path: Path, docs: list[dict[str, Any]]) -> KueueObjects:
    return _load(tmp_path, yaml.safe_dump_all(docs, sort_keys=False))


def _error(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    return info.value


CQ_V1B1 = f"""apiVersion: {V1B1}
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  cohort: team
  queueingStrategy: StrictFIFO
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {{policy: LowerPriority, maxPriorityThreshold: 100}}
  flavorFungibility: {{whenCanBorrow: Borrow, whenCanPreempt: Preempt}}
  fairSharing: {{weight: "1.5"}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: 10, borrowingLimit: "2", lendingLimit: 4}}
      - {{name: memory, nominalQuota: 16Gi}}
"""


def test_cluster_queue_v1beta1(tmp_path: Path) -> None:
    cq = _load(tmp_path, CQ_V1B1).cluster_queues["cq"]
    assert cq.cohort == "team"
    assert cq.queueing_strategy == "StrictFIFO"
    assert cq.preemption.within_cluster_queue == "LowerPriority"
    assert cq.preemption.borrow_within_cohort == "LowerPriority"
    assert cq.preemption.max_priority_threshold == 100
    # v1beta1's Borrow/Preempt are the old spellings of MayStopSearch.
    assert cq.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert cq.flavor_fungibility.when_can_preempt == "MayStopSearch"
    assert cq.fair_weight == 1.5
    assert cq.resource_groups[0].flavors[0].resources == {
        "cpu": ResourceQuota(10_000, 2_000, 4_000), "memory": ResourceQuota(16 * 2**30 * 1000)}


def test_namespace_selector_unset_selects_nothing(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [{"apiVersion": V1B2, "kind": "ClusterQueue",
                             "metadata": {"name": "cq"}, "spec": {}}])
    assert objs.cluster_queues["cq"].namespace_selector is None


def test_cluster_queue_v1beta2_defaults(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [{"apiVersion": V1B2, "kind": "ClusterQueue",
                             "metadata": {"name": "cq"},
                             "spec": {"cohortName": "team", "resourceGroups": []}}])
    cq = objs.cluster_queues["cq"]
    assert cq.cohort == "team"
    assert cq.queueing_strategy == "BestEffortFIFO"
    assert cq.preemption.within_cluster_queue == "Never"
    assert cq.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert cq.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert cq.fair_weight == 1.0


def test_cohort_and_flavor(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [
        {"apiVersion": V1B1, "kind": "Cohort", "metadata": {"name": "child"},
         "spec": {"parentName": "root", "fairSharing": {"weight": "2"}}},
        {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "root"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}},
        {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "f"},
         "spec": {"nodeLabels": {"pool": "a"},
                  "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                  "tolerations": [{"key": "k", "operator": "Exists"}]}}])
    assert objs.cohorts["child"].parent == "root"
    assert objs.cohorts["child"].fair_weight == 2.0
    assert objs.cohorts["root"].resource_groups[0].flavors[0].resources["cpu"].nominal == 4000
    f = objs.flavors["f"]
    assert f.node_labels == {"pool": "a"}
    assert f.node_taints[0].effect == "NoSchedule"
    assert f.tolerations[0].operator == "Exists"


def test_workload_with_admission_and_priority_class(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [
        {"apiVersion": V1B2, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
         "value": 1000},
        {"apiVersion": V1B2, "kind": "Workload",
         "metadata": {"name": "w", "namespace": "ns", "uid": "u1",
                      "creationTimestamp": "2025-01-01T00:00:10Z"},
         "spec": {"queueName": "q", "priorityClassName": "high",
                  "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                  "podSets": [{"name": "workers", "count": 4, "minCount": 2, "template": {
                      "spec": {"containers": [{"name": "c", "resources": {
                          "requests": {"cpu": "500m", "nvidia.com/gpu": 1}}}]}}}]},
         "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
             {"name": "workers", "count": 4, "flavors": {"cpu": "f", "nvidia.com/gpu": "f"},
              "resourceUsage": {"cpu": "2", "nvidia.com/gpu": "4"}}]},
             "conditions": [{"type": "QuotaReserved", "status": "True",
                             "lastTransitionTime": "2025-01-01T00:01:00Z"}]}}])
    (wl,) = objs.workloads
    assert wl.key == "ns/w" and wl.priority == 1000 and wl.uid == "u1"
    assert wl.podsets[0].requests == {"cpu": 500, "nvidia.com/gpu": 1000}
    assert (wl.podsets[0].count, wl.podsets[0].min_count) == (4, 2)
    assert wl.admission is not None
    assert wl.admission.podset_assignments[0].resource_usage == {"cpu": 2000,
                                                                 "nvidia.com/gpu": 4000}
    assert wl.quota_reserved_time is not None
    assert wl.quota_reserved_time - wl.creation_time == 50


def test_workload_v1beta2_priority_class_ref(tmp_path: Path) -> None:
    podsets = [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]
    objs = _docs(tmp_path, [
        {"apiVersion": V1B2, "kind": "WorkloadPriorityClass", "metadata": {"name": "prod"},
         "value": 70},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "gpu"}, "value": 9},
        {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w"},
         "spec": {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                       "name": "prod"}, "podSets": podsets}},
        {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "p"},
         "spec": {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                       "name": "gpu"}, "podSets": podsets}}])
    assert {w.name: (w.priority, w.priority_class) for w in objs.workloads} == {
        "w": (70, "prod"), "p": (9, "gpu")}


def test_job_and_pods_become_workloads(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "gpu-8"}, "value": 800},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "train", "namespace": "ml",
                      "labels": {"kueue.x-k8s.io/queue-name": "q"},
                      "annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
         "spec": {"parallelism": 4, "completions": 8, "template": {"spec": {
             "priorityClassName": "gpu-8",
             "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "not-queued"},
         "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "solo", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        *[{"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"g{i}", "labels": {"kueue.x-k8s.io/queue-name": "q",
                                                     "kueue.x-k8s.io/pod-group-name": "grp"},
                        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"}},
           "spec": {"containers": [{"name": "c", "resources": {
               "requests": {"cpu": "2" if i == 0 else "1"}}}]}} for i in range(3)]])
    by_key = {w.key: w for w in objs.workloads}
    assert sorted(by_key) == ["default/grp", "default/pod-solo", "ml/job-train"]
    job = by_key["ml/job-train"]
    assert (job.podsets[0].count, job.podsets[0].min_count, job.priority) == (4, 2, 800)
    assert job.source == "Job"
    grp = by_key["default/grp"]
    assert sorted((ps.count, ps.requests["cpu"]) for ps in grp.podsets) == [(1, 2000),
                                                                           (2, 1000)]
    assert sorted(grp.pods) == ["default/g0", "default/g1", "default/g2"]
    assert by_key["default/pod-solo"].pods == {"default/solo": "main"}


def _group_pod(name: str, total: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/queue-name": "q",
                                    "kueue.x-k8s.io/pod-group-name": "grp"},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": total}},
            "spec": {"containers": [{"name": "c"}]}}


def test_incomplete_pod_group_has_no_workload_yet(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [_group_pod("g0", "3"), _group_pod("g1", "3")])
    assert objs.workloads == []
    assert objs.incomplete_groups == {
        "default/grp": "waiting for 1 more pod(s) of group grp (total count 3)"}


def test_pods_in_system_namespaces_are_not_managed(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [_group_pod("g0", "1", namespace="kube-system")])
    assert objs.workloads == [] and objs.incomplete_groups == {}


def test_configuration(tmp_path: Path) -> None:
    objs = _docs(tmp_path, [{
        "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
        "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]},
        "waitForPodsReady": {"enable": True, "timeout": "1h30m", "blockAdmission": True,
                             "requeuingStrategy": {"timestamp": "Creation",
                                                   "backoffLimitCount": 3}},
        "featureGates": {"PartialAdmission": False}}])
    cfg = objs.config
    assert cfg.fair_sharing and cfg.preemption_strategies == ("LessThanInitialShare",)
    w = cfg.wait_for_pods_ready
    assert w.enable and w.block_admission and w.timeout_seconds == 5400
    assert w.requeuing.timestamp == "Creation" and w.requeuing.backoff_limit_count == 3
    assert not cfg.partial_admission


def test_configuration_v1beta2_sections_enable(tmp_path: Path) -> None:
    cfg = _docs(tmp_path, [{"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                            "kind": "Configuration", "fairSharing": {},
                            "waitForPodsReady": {"timeout": "10m"}}]).config
    assert cfg.fair_sharing and cfg.wait_for_pods_ready.enable
    assert cfg.wait_for_pods_ready.timeout_seconds == 600
    off = _docs(tmp_path, [{"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                            "kind": "Configuration"}]).config
    assert not off.fair_sharing and not off.wait_for_pods_ready.enable


def test_defaults_without_configuration(tmp_path: Path) -> None:
    cfg = _docs(tmp_path, []).config
    assert not cfg.fair_sharing and not cfg.wait_for_pods_ready.enable
    assert cfg.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


BAD = [
    (CQ_V1B1.replace("queueingStrategy: StrictFIFO", "queueingStrategy: Fifo"),
     "m.yaml:6: field spec.queueingStrategy: unknown value 'Fifo'. Expected BestEffortFIFO or "
     "StrictFIFO."),
    (CQ_V1B1.replace("nominalQuota: 10,", "nominalQuota: 10x,"),
     "field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    (CQ_V1B1.replace("lendingLimit: 4", "lendingLimit: 40"),
     "lendingLimit is larger than nominalQuota"),
    (f"apiVersion: {V1B2}\nkind: Cohort\nmetadata: {{name: root}}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
     "      - {name: cpu, nominalQuota: 4, lendingLimit: 1}\n",
     "m.yaml:10: field spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
     "lendingLimit is set for cpu but the Cohort has no parent"),
    (CQ_V1B1.replace("  cohort: team\n", ""),
     "field spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: borrowingLimit is "
     "set for cpu but the ClusterQueue has no cohort"),
    (CQ_V1B1.replace("- {name: memory, nominalQuota: 16Gi}", ""),
     "field spec.resourceGroups[0].flavors[0].resources: the flavor lists resources ['cpu']"),
    (CQ_V1B1.replace("withinClusterQueue: LowerPriority", "withinClusterQueue: Always"),
     "field spec.preemption.withinClusterQueue: unknown value 'Always'"),
    (f"apiVersion: {V1B2}\nkind: LocalQueue\nmetadata: {{name: q, namespace: a}}\nspec: {{}}\n",
     "m.yaml:4: field spec.clusterQueue: the LocalQueue names no ClusterQueue"),
    (f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {{name: w}}\nspec:\n  podSets: []\n",
     "field spec.podSets: the Workload has no podSets"),
    (f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {{name: w}}\nspec:\n  podSets:\n"
     "  - {name: m, count: 2, minCount: 3, template: {spec: {containers: []}}}\n",
     "field spec.podSets[0].minCount: minCount 3 is outside 0..count (2)"),
    (f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {{name: w}}\nspec:\n"
     "  priorityClassName: nope\n  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n"
     "  podSets:\n  - {name: m, count: 1, template: {spec: {containers: []}}}\n",
     "field spec.priorityClassName: WorkloadPriorityClass 'nope' does not exist"),
    (f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {{name: w}}\nspec:\n"
     "  priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: nope}\n"
     "  podSets:\n  - {name: m, count: 1, template: {spec: {containers: []}}}\n",
     "m.yaml:5: field spec.priorityClassRef.name: PriorityClass 'nope' does not exist"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n"
     "  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n",
     "field fairSharing.preemptionStrategies: unsupported strategy list"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n"
     "  enable: true\n", "field fairSharing.enable: fairSharing.enable is not a v1beta2 field"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n"
     "  enable: 'yes'\n", "field fairSharing.enable: 'yes' is not a boolean"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n"
     "  timeout: 5 minutes\n", "field waitForPodsReady.timeout: '5 minutes' is not a duration"),
    ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfeatureGates:\n"
     "  TopologyAwareScheduling: true\n", "unsupported feature gate 'TopologyAwareScheduling'"),
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n"
     "    kueue.x-k8s.io/queue-name: q\n    kueue.x-k8s.io/pod-group-name: g\n"
     "  annotations:\n    kueue.x-k8s.io/pod-group-total-count: '0'\n"
     "spec: {containers: [{name: c}]}\n",
     "the pod group g has 1 pods but a total count of 0"),
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n"
     "    kueue.x-k8s.io/queue-name: q\n    kueue.x-k8s.io/pod-group-name: g\n"
     "  annotations:\n    kueue.x-k8s.io/pod-group-total-count: '2'\n"
     "spec: {containers: [{name: c}]}\n---\n"
     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p2\n  labels:\n"
     "    kueue.x-k8s.io/queue-name: q\n    kueue.x-k8s.io/pod-group-name: g\n"
     "  annotations:\n    kueue.x-k8s.io/pod-group-total-count: '3'\n"
     "spec: {containers: [{name: c}]}\n",
     "the pods of group g disagree on the total count (2, 3)"),
    (f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\nspec:\n  nodeTaints:\n"
     "  - {key: a, effect: Sometimes}\n", "field spec.nodeTaints[0].effect: unknown taint effect"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_is_located(tmp_path: Path, text: str, message: str) -> None:
    err = _error(tmp_path, text)
    assert message in str(err)
    assert str(err).startswith(str(tmp_path / "m.yaml"))


def test_cohort_cycle_is_an_error(tmp_path: Path) -> None:
    text = "\n---\n".join(
        f"apiVersion: {V1B2}\nkind: Cohort\nmetadata: {{name: {a}}}\nspec: {{parentName: {b}}}"
        for a, b in (("x", "y"), ("y", "z"), ("z", "x")))
    err = _error(tmp_path, text)
    assert "cohorts form a cycle: x -> y -> z -> x" in str(err)
    assert "m.yaml:4: field spec.parentName" in str(err)


def test_cohort_self_parent(tmp_path: Path) -> None:
    err = _error(tmp_path, f"apiVersion: {V1B2}\nkind: Cohort\nmetadata: {{name: x}}\n"
                           "spec: {parentName: x}\n")
    assert "Cohort x names itself as parent" in str(err)


def test_duplicate_names(tmp_path: Path) -> None:
    text = f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\n---\n" * 2
    assert "ResourceFlavor f is defined twice" in str(_error(tmp_path, text))


def test_references_are_not_load_errors(tmp_path: Path) -> None:
    # Kueue keeps these objects and reports them as inactive or pending: so does kubeberth.
    objs = _docs(tmp_path, [
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "ghost", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}},
        {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "q"},
         "spec": {"clusterQueue": "missing"}}])
    assert "cq" in objs.cluster_queues and "default/q" in objs.local_queues
