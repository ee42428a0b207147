"""Defaulting, validation and the pod-update rules, without HTTP."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeberth.apiserver import admission
from kubeberth.apiserver.disruption import (
    budget_status,
    pod_healthy,
    scale_lookup,
    selector_matches,
    status_object,
)
from kubeberth.apiserver.errors import ApiError
from kubeberth.apiserver.resources import Registry, ResourceType


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = Registry().by_path(group, version, plural)
    assert rt is not None
    return rt


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


@pytest.mark.parametrize(("resources", "qos"), [
    ({}, "BestEffort"),
    ({"requests": {"nvidia.com/gpu": "1"}}, "BestEffort"),
    ({"requests": {"cpu": "1"}}, "Burstable"),
    ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
     "Guaranteed"),
    ({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
     "Burstable"),
])
def test_qos_class(resources: dict[str, Any], qos: str) -> None:
    assert admission.qos_class({"containers": [{"resources": resources}]}) == qos


def test_default_pod_with_global_default_priority_class() -> None:
    pod = _pod()
    classes = [{"metadata": {"name": "low"}, "value": 10},
               {"metadata": {"name": "base"}, "value": 100, "globalDefault": True,
                "preemptionPolicy": "Never"}]
    admission.default_pod(pod)
    admission.resolve_priority(pod, classes)
    assert pod["spec"]["priority"] == 100
    assert pod["spec"]["priorityClassName"] == "base"
    assert pod["spec"]["preemptionPolicy"] == "Never"
    assert pod["spec"]["restartPolicy"] == "Always"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_explicit_priority_must_match_the_class() -> None:
    pod = _pod(priorityClassName="low", priority=5)
    with pytest.raises(ApiError) as err:
        admission.resolve_priority(pod, [{"metadata": {"name": "low"}, "value": 10}])
    assert err.value.code == 403
    assert "computed 10" in err.value.message
    pod = _pod(priority=0)
    admission.resolve_priority(pod, [])
    assert pod["spec"]["priority"] == 0


def test_node_name_with_gates_is_invalid() -> None:
    with pytest.raises(ApiError) as err:
        admission.default_pod(_pod(nodeName="n", schedulingGates=[{"name": "g"}]))
    assert err.value.code == 422


def test_default_node_registers_ready_and_fills_capacity() -> None:
    node: dict[str, Any] = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}}
    admission.default_node(node, "t")
    assert node["status"]["allocatable"] == {"cpu": "4"}
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert node["status"]["conditions"][0]["lastHeartbeatTime"] == "t"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == admission.KUBELET_VERSION
    keep = {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}
    admission.default_node(keep, "t")
    assert keep["status"]["conditions"] == [{"type": "Ready", "status": "False"}]


def test_default_job_parallel_work_queue() -> None:
    job: dict[str, Any] = {"metadata": {"name": "j", "uid": "u"},
                           "spec": {"parallelism": 3, "template": {"metadata": {}, "spec": {}}}}
    defaulted = admission.defaulted_job(job)
    assert "completions" not in defaulted["spec"]
    assert defaulted["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"
    # The stored Job it came from is left as it was (the store keeps it in its history).
    assert job == {"metadata": {"name": "j", "uid": "u"},
                   "spec": {"parallelism": 3, "template": {"metadata": {}, "spec": {}}}}
    manual = {"metadata": {"name": "j", "uid": "u"},
              "spec": {"manualSelector": True, "selector": {"matchLabels": {"a": "b"}},
                       "template": {"metadata": {"labels": {"a": "b"}}, "spec": {}}}}
    defaulted = admission.defaulted_job(manual)
    assert defaulted["spec"]["selector"] == {"matchLabels": {"a": "b"}}
    assert defaulted["spec"]["completions"] == 1


def test_check_body_fills_kind_and_namespace() -> None:
    pods = _rt("", "v1", "pods")
    body = admission.check_body(pods, {"metadata": {"name": "x"}}, "v1", "team")
    assert (body["apiVersion"], body["kind"], body["metadata"]["namespace"]) == (
        "v1", "Pod", "team")
    with pytest.raises(ApiError):
        admission.check_body(pods, [], "v1", "team")
    with pytest.raises(ApiError):
        admission.check_body(pods, {"metadata": "x"}, "v1", "team")


def test_validate_uses_the_manifest_rules() -> None:
    pcs = _rt("scheduling.k8s.io", "v1", "priorityclasses")
    body = admission.check_body(pcs, {"metadata": {"name": "huge"}, "value": 2_000_000_000},
                                "v1", "")
    with pytest.raises(ApiError) as err:
        admission.validate(pcs, body)
    assert err.value.code == 422
    assert err.value.details is not None
    assert err.value.details["causes"][0]["field"] == "value"
    cms = _rt("", "v1", "configmaps")
    admission.validate(cms, {"metadata": {"name": "c", "namespace": "d"}, "data": {"x": 1}})


def test_pod_update_rules() -> None:
    old = _pod(tolerations=[], schedulingGates=[{"name": "a"}])
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "j"
    new["spec"]["tolerations"] = [{"operator": "Exists"}]
    new["spec"]["schedulingGates"] = []
    new["spec"]["activeDeadlineSeconds"] = 5
    admission.check_pod_update("p", old, new)
    bad = copy.deepcopy(old)
    bad["spec"]["containers"][0]["name"] = "renamed"
    with pytest.raises(ApiError, match=r"changed: containers"):
        admission.check_pod_update("p", old, bad)


def test_selector_matching_and_health() -> None:
    sel = {"matchLabels": {"a": "1"}, "matchExpressions": [
        {"key": "b", "operator": "In", "values": ["x", "y"]},
        {"key": "c", "operator": "DoesNotExist"}]}
    assert selector_matches(sel, {"a": "1", "b": "y"})
    assert not selector_matches(sel, {"a": "1", "b": "z"})
    assert not selector_matches(sel, {"a": "1", "b": "x", "c": ""})
    assert selector_matches({}, {})
    assert not selector_matches(None, {})
    ready = {"metadata": {}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}}
    assert pod_healthy(ready)
    assert not pod_healthy({**ready, "metadata": {"deletionTimestamp": "t"}})
    assert not pod_healthy({"metadata": {}, "status": {"phase": "Running"}})


def _pdb_pod(ns: str, phase: str, owner: str | None = "r") -> dict[str, Any]:
    refs = [{"kind": "ReplicaSet", "name": owner, "controller": True}] if owner else []
    return {"metadata": {"namespace": ns, "labels": {"app": "a"}, "ownerReferences": refs},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if phase == "Running" else "False"}]}}


def _lookup(objs: dict[tuple[str, str], dict[str, Any]]) -> Any:
    return scale_lookup(lambda kind, ns, name: objs.get((kind, name)))


def test_pdb_status_scales_by_the_deployment_of_the_pods_replica_set() -> None:
    """Upstream's disruption controller: a percentage is taken of the controllers' scale (a
    ReplicaSet's Deployment), healthy pods are the Ready ones in the budget's namespace."""
    objs = {("ReplicaSet", "r"): {"metadata": {"ownerReferences": [
                {"kind": "Deployment", "name": "d", "controller": True}]},
                "spec": {"replicas": 9}},
            ("Deployment", "d"): {"spec": {"replicas": 4}}}
    pdb = {"metadata": {"name": "b", "namespace": "x", "generation": 3},
           "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "a"}}}}
    pods = [_pdb_pod("x", "Running"), _pdb_pod("x", "Running"), _pdb_pod("x", "Running"),
            _pdb_pod("x", "Pending"), _pdb_pod("x", "Succeeded"), _pdb_pod("y", "Running")]
    status = status_object(pdb, budget_status(pdb, pods, _lookup(objs)))
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"],
            status["disruptionsAllowed"], status["observedGeneration"]) == (4, 3, 2, 1, 3)
    assert status["conditions"][0]["reason"] == "SufficientPods"


def test_pdb_status_fails_safe_without_a_scale() -> None:
    """A percentage over pods whose controller has no scale (a Job) allows nothing."""
    pdb = {"metadata": {"name": "b", "namespace": "x"},
           "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "a"}}}}
    pods = [_pdb_pod("x", "Running", owner=None), _pdb_pod("x", "Running")]
    status = status_object(pdb, budget_status(pdb, pods, _lookup({})))
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "SyncFailed"
    assert "found no controllers" in status["conditions"][0]["message"]
