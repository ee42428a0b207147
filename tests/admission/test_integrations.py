"""Jobs, plain Pods and pod groups through admission, and their pods gated then released."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission import admitted_pod, gated_pod
from kubeberth.admission.model import ADMISSION_GATE
from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.config.manifests import load_manifests

from .builders import (
    cluster_queue,
    configuration,
    flavor,
    group,
    load,
    local_queue,
    quota,
    run,
    states,
    write,
)

CPU = "cpu"
GPU = "nvidia.com/gpu"


def _queue(nominal_gpu: str = "4") -> list[dict[str, Any]]:
    return [flavor("a100", {"gpu": "a100"},
                   taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                   tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
            cluster_queue("cq", [group([CPU, GPU], ("a100", [quota(CPU, "32"),
                                                            quota(GPU, nominal_gpu)]))]),
            local_queue("cq", namespace="ml", name="team")]


def _job(name: str, parallelism: int, gpus: str = "1", *, min_parallelism: int | None = None,
         priority_class: str | None = None, created: str = "2025-01-01T00:00:00Z"
         ) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "team"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "labels": labels,
                            "creationTimestamp": created}
    if min_parallelism is not None:
        meta["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": str(min_parallelism)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "trainer", "resources": {
                    "requests": {CPU: "1", GPU: gpus}}}]}}}}


def _pod(name: str, gpus: str = "1", group_name: str | None = None,
         total: int | None = None, image: str = "worker") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "team"}
    annotations = {}
    if group_name:
        labels["kueue.x-k8s.io/pod-group-name"] = group_name
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "labels": labels,
                         "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": image, "resources": {
                "requests": {CPU: "1", GPU: gpus}}}]}}


def test_job_is_admitted_with_flavor(tmp_path: Path) -> None:
    data, _ = run(tmp_path, [*_queue(), _job("train", 4)])
    row = next(w for w in data["workloads"] if w["name"] == "ml/job-train")
    assert (row["state"], row["flavors"]) == ("Admitted", {"main": {CPU: "a100", GPU: "a100"}})


def test_job_partial_admission_with_min_parallelism(tmp_path: Path) -> None:
    data, result = run(tmp_path, [*_queue(), _job("train", 8, min_parallelism=2)])
    assert states(data)["ml/job-train"] == ("Admitted", "Admitted")
    adm = result.state.admitted["ml/job-train"].admission
    assert adm is not None and adm.podset_assignments[0].count == 4


def test_partial_admission_gate_off(tmp_path: Path) -> None:
    docs = [*_queue(), _job("train", 8, min_parallelism=2),
            configuration(featureGates={"PartialAdmission": False})]
    data, _ = run(tmp_path, docs)
    assert states(data)["ml/job-train"] == ("Inadmissible", "ExceedsMaxQuota")


def test_job_priority_class_orders_the_queue(tmp_path: Path) -> None:
    docs = [*_queue("2"),
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
             "metadata": {"name": "urgent"}, "value": 100},
            _job("first", 2, created="2025-01-01T00:00:00Z"),
            _job("second", 2, priority_class="urgent", created="2025-01-01T00:05:00Z")]
    data, _ = run(tmp_path, docs)
    assert states(data)["ml/job-second"][0] == "Admitted"
    assert states(data)["ml/job-first"][0] == "Inadmissible"


def test_plain_pod_and_pod_group(tmp_path: Path) -> None:
    docs = [*_queue("3"), _pod("single"),
            _pod("driver", gpus="0", group_name="spark", total=3, image="driver"),
            _pod("exec-0", group_name="spark", total=3),
            _pod("exec-1", group_name="spark", total=3)]
    data, result = run(tmp_path, docs)
    s = states(data)
    assert s["ml/pod-single"][0] == "Admitted"
    assert s["ml/spark"][0] == "Admitted"
    grp = result.state.admitted["ml/spark"]
    assert sorted(ps.count for ps in grp.podsets) == [1, 2]
    assert grp.pods["ml/exec-0"] == grp.pods["ml/exec-1"] != grp.pods["ml/driver"]


def test_pod_group_fits_whole_or_not_at_all(tmp_path: Path) -> None:
    docs = [*_queue("2"),
            *[_pod(f"w{i}", group_name="gang", total=3) for i in range(3)]]
    data, _ = run(tmp_path, docs)
    assert states(data)["ml/gang"] == ("Inadmissible", "ExceedsMaxQuota")


def test_admitted_pods_get_flavor_placement(tmp_path: Path) -> None:
    docs = [*_queue(), _pod("single")]
    path = write(tmp_path, docs)
    objs = load(tmp_path, docs)
    _, result = run(tmp_path, docs)
    wl = result.state.admitted["ml/pod-single"]
    assert wl.admission is not None
    pod = next(p for p in load_manifests([path]).pods if p.metadata.name == "single")
    gated = gated_pod(pod)
    assert [g.name for g in gated.spec.scheduling_gates] == [ADMISSION_GATE]
    released = admitted_pod(gated, wl.admission, wl.pods[pod.key], objs.flavors)
    assert released.spec.scheduling_gates == []
    assert released.spec.node_selector == {"gpu": "a100"}
    assert [(t.key, t.operator, t.effect) for t in released.spec.tolerations] == [
        ("gpu", "Exists", "NoSchedule")]


def test_pod_selector_is_kept_when_it_names_the_flavor_label() -> None:
    from kubeberth.admission.model import Admission, PodSetAssignment, ResourceFlavor
    from kubeberth.api.objects import PodSpec

    pod = Pod(spec=PodSpec(node_selector={"gpu": "h100"}))
    adm = Admission("cq", [PodSetAssignment("main", 1, {GPU: "a100"}, {GPU: 1000})])
    out = admitted_pod(pod, adm, "main", {"a100": ResourceFlavor("a100", {"gpu": "a100",
                                                                         "zone": "z1"})})
    assert out.spec.node_selector == {"gpu": "h100", "zone": "z1"}


def test_pods_bound_already_are_not_queued(tmp_path: Path) -> None:
    bound = _pod("running")
    bound["spec"]["nodeName"] = "node-1"
    objs = load(tmp_path, [*_queue(), bound])
    assert objs.workloads == []


@pytest.mark.parametrize(("annotation", "message"), [
    ("0", "min parallelism 0 is outside 1..4"),
    ("x", "'x' is not an integer"),
])
def test_bad_min_parallelism(tmp_path: Path, annotation: str, message: str) -> None:
    job = _job("train", 4)
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": annotation}
    with pytest.raises(InputError) as info:
        load(tmp_path, [*_queue(), job])
    assert message in str(info.value)
    assert "metadata.annotations.kueue.x-k8s.io/job-min-parallelism" in str(info.value)


def test_workload_and_job_with_same_name(tmp_path: Path) -> None:
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "job-train", "namespace": "ml"},
          "spec": {"queueName": "team", "podSets": [
              {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]}}
    with pytest.raises(InputError) as info:
        load(tmp_path, [*_queue(), _job("train", 1), wl])
    assert "manifests.yaml:" in str(info.value)
    assert "Workload ml/job-train is defined twice (from a Job and a Workload)" in \
        str(info.value)


def test_global_default_priority_class_applies_to_pods(tmp_path: Path) -> None:
    docs = [*_queue(), _pod("p"),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": "batch"}, "value": 7, "globalDefault": True}]
    objs = load(tmp_path, docs)
    assert [w.priority for w in objs.workloads] == [7]
