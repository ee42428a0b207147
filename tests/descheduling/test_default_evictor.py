"""DefaultEvictor: its default protections, podProtections, legacy booleans and nodeFit."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from tests.descheduling.builders import evicted, node, pod, policy, run, skipped

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Namespace, Pod, PriorityClass

TAINTS = "RemovePodsViolatingNodeTaints"
FAILED = "RemoveFailedPods"
TAINT = [{"key": "k", "effect": "NoSchedule"}]


def evict_all(pods: list[Pod], evictor: dict[str, Any] | None = None,
              **snapshot: Any) -> tuple[list[str], dict[str, str]]:
    """Run RemovePodsViolatingNodeTaints (and RemoveFailedPods, for failed pods) over pods on a
    tainted node: every pod is a candidate, so what is left is what the evictor protects."""
    pol = policy({"deschedule": [TAINTS, FAILED]},
                 {"DefaultEvictor": evictor or {}, TAINTS: {},
                  FAILED: {"minPodLifetimeSeconds": 0}})
    result = run(pol, [node("n1", taints=TAINT), node("n2")], pods, **snapshot)
    return evicted(result), skipped(result)


def test_default_protections() -> None:
    pods = [
        pod("plain", "n1"),
        pod("daemon", "n1", owner=("DaemonSet", "ds")),
        pod("mirror", "n1", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("static", "n1", annotations={"kubernetes.io/config.source": "file"}),
        pod("api-source", "n1", annotations={"kubernetes.io/config.source": "api"}),
        pod("local", "n1", spec={"volumes": [{"name": "v", "emptyDir": {}}]}),
        pod("critical", "n1", priority=2_000_000_000),
        pod("bare", "n1", owner=None),
        pod("failed-bare", "n1", owner=None, phase="Failed"),
        pod("terminating", "n1", meta={"deletionTimestamp": "2024-06-01T11:00:00Z"}),
        pod("pvc", "n1", spec={"volumes": [{"name": "v", "persistentVolumeClaim":
                                            {"claimName": "c"}}]}),
    ]
    done, refused = evict_all(pods)
    assert done == ["api-source", "plain", "pvc"]
    assert "daemonset pods are protected" in refused["daemon"]
    assert "mirror pod" in refused["mirror"]
    assert "static pod" in refused["static"]
    assert "local storage" in refused["local"]
    assert "system critical priority" in refused["critical"]
    assert "ownerRefs" in refused["bare"] and "ownerRefs" in refused["failed-bare"]
    assert "terminating" in refused["terminating"]


def test_evict_annotation_overrides_every_check() -> None:
    pods = [pod("daemon", "n1", owner=("DaemonSet", "ds"),
                annotations={"descheduler.alpha.kubernetes.io/evict": ""})]
    assert evict_all(pods)[0] == ["daemon"]


@pytest.mark.parametrize(("flag", "name"), [
    ("evictDaemonSetPods", "daemon"), ("evictLocalStoragePods", "local"),
    ("evictSystemCriticalPods", "critical"), ("evictFailedBarePods", "failed-bare")])
def test_legacy_booleans_lift_one_protection(flag: str, name: str) -> None:
    pods = [pod("daemon", "n1", owner=("DaemonSet", "ds")),
            pod("local", "n1", spec={"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}),
            pod("critical", "n1", priority=2_000_000_000),
            pod("failed-bare", "n1", owner=None, phase="Failed")]
    assert evict_all(pods, {flag: True})[0] == [name]


def test_failed_bare_pods_allowed_but_running_bare_pods_still_protected() -> None:
    pods = [pod("failed-bare", "n1", owner=None, phase="Failed"),
            pod("running-bare", "n1", owner=None)]
    done, refused = evict_all(pods, {"podProtections": {"defaultDisabled": ["FailedBarePods"]}})
    assert done == ["failed-bare"]
    assert "not in failed phase" in refused["running-bare"]


def test_pod_protections_override_legacy_booleans() -> None:
    pods = [pod("daemon", "n1", owner=("DaemonSet", "ds")),
            pod("pvc", "n1", spec={"volumes": [{"name": "v", "persistentVolumeClaim":
                                                {"claimName": "c"}}]}),
            pod("claims", "n1", spec={"resourceClaims": [{"name": "gpu"}]})]
    args = {"evictDaemonSetPods": False, "ignorePvcPods": False,
            "podProtections": {"defaultDisabled": ["DaemonSetPods"],
                               "extraEnabled": ["PodsWithPVC", "PodsWithResourceClaims"]}}
    done, refused = evict_all(pods, args)
    assert done == ["daemon"]
    assert "PVC" in refused["pvc"] and "ResourceClaims" in refused["claims"]


def test_ignore_pvc_pods_legacy_flag() -> None:
    pods = [pod("pvc", "n1", spec={"volumes": [{"name": "v", "persistentVolumeClaim":
                                                {"claimName": "c"}}]})]
    assert evict_all(pods, {"ignorePvcPods": True})[0] == []


def test_pods_without_pdb_protection() -> None:
    from tests.descheduling.builders import pdb

    pods = [pod("covered", "n1", labels={"app": "a"}), pod("uncovered", "n1"),
            pod("other", "n2", labels={"app": "a"})]
    budgets = [pdb("b", {"matchLabels": {"app": "a"}}, max_unavailable=1)]
    done, refused = evict_all(pods, {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}},
                              pdbs=budgets)
    assert done == ["covered"]
    assert "PodDisruptionBudget" in refused["uncovered"]


def test_priority_threshold_by_value_and_by_class() -> None:
    pods = [pod("low", "n1", priority=10), pod("high", "n1", priority=1000),
            pod("none", "n1")]
    assert evict_all(pods, {"priorityThreshold": {"value": 1000}})[0] == ["low", "none"]
    classes = [msgspec.convert({"metadata": {"name": "gold"}, "value": 500}, PriorityClass)]
    done, refused = evict_all(pods, {"priorityThreshold": {"name": "gold"}},
                              priority_classes=classes)
    assert done == ["low", "none"]
    assert "higher priority than specified priority class threshold" in refused["high"]


def test_priority_threshold_naming_a_missing_class_is_bad_input() -> None:
    with pytest.raises(InputError, match="PriorityClass 'missing'"):
        evict_all([pod("p", "n1")], {"priorityThreshold": {"name": "missing"}})


def test_label_selector_and_min_replicas() -> None:
    pods = [pod("a1", "n1", labels={"tier": "batch"}, owner=("ReplicaSet", "a")),
            pod("a2", "n2", labels={"tier": "batch"}, owner=("ReplicaSet", "a")),
            pod("b1", "n1", labels={"tier": "batch"}, owner=("ReplicaSet", "b")),
            pod("c1", "n1", labels={"tier": "web"}, owner=("ReplicaSet", "c"))]
    done, refused = evict_all(pods, {"labelSelector": {"matchLabels": {"tier": "batch"}},
                                     "minReplicas": 2})
    assert done == ["a1"]
    assert "less than minReplicas of 2" in refused["b1"]
    assert "labelSelector" in refused["c1"]


def test_min_pod_age_uses_start_time() -> None:
    pods = [pod("old", "n1", started=-601), pod("young", "n1", started=-599),
            pod("unstarted", "n1", started=None)]
    done, refused = evict_all(pods, {"minPodAge": "10m"})
    assert done == ["old"]
    assert set(refused) == {"young", "unstarted"}


def test_node_fit_requires_another_node_that_fits() -> None:
    pol = policy({"deschedule": [TAINTS]}, {"DefaultEvictor": {"nodeFit": True}, TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2", cpu="1"), node("n3", labels={"gpu": "yes"},
                                                                  unschedulable=True)]
    pods = [pod("small", "n1", cpu="500m"), pod("big", "n1", cpu="2"),
            pod("picky", "n1", spec={"nodeSelector": {"gpu": "yes"}})]
    result = run(pol, nodes, pods)
    assert evicted(result) == ["small"]
    assert "nodeFit" in skipped(result)["big"]
    assert "nodeFit" in skipped(result)["picky"]


def test_node_fit_counts_pods_running_on_the_target() -> None:
    pol = policy({"deschedule": [TAINTS]}, {"DefaultEvictor": {"nodeFit": True}, TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2", cpu="1", pods=2)]
    pods = [pod("mover", "n1", cpu="100m"), pod("r1", "n2", cpu="100m"),
            pod("r2", "n2", cpu="100m", phase="Succeeded")]
    # n2 has a free pod slot: the Succeeded pod does not take one.
    assert evicted(run(pol, nodes, pods)) == ["mover"]
    pods.append(pod("r3", "n2", cpu="100m"))
    assert evicted(run(pol, nodes, pods)) == []


def test_node_fit_respects_the_evictor_node_selector() -> None:
    pol = policy({"deschedule": [TAINTS]},
                 {"DefaultEvictor": {"nodeFit": True, "nodeSelector": "pool=gpu"}, TAINTS: {}})
    nodes = [node("n1", taints=TAINT), node("n2", labels={"pool": "cpu"})]
    assert evicted(run(pol, nodes, [pod("p", "n1")])) == []


def test_no_eviction_policy_mandatory_protects_annotated_pods() -> None:
    pods = [pod("keep", "n1",
                annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}),
            pod("go", "n1")]
    assert evict_all(pods, {"noEvictionPolicy": "Mandatory"})[0] == ["go"]
    assert evict_all(pods, {"noEvictionPolicy": "Preferred"})[0] == ["go", "keep"]


def test_namespace_label_selector() -> None:
    namespaces = [msgspec.convert({"metadata": {"name": "prod", "labels": {"env": "prod"}}},
                                  Namespace)]
    pods = [pod("p", "n1", ns="prod"), pod("d", "n1", ns="dev")]
    done, refused = evict_all(pods, {"namespaceLabelSelector": {"matchLabels": {"env": "prod"}}},
                              namespaces=namespaces)
    assert done == ["p"]
    assert "namespaceLabelSelector" in refused["d"]


@pytest.mark.parametrize(("args", "field"), [
    ({"priorityThreshold": {"value": 1, "name": "x"}}, "priorityThreshold"),
    ({"noEvictionPolicy": "Sometimes"}, "noEvictionPolicy"),
    ({"podProtections": {"extraEnabled": ["DaemonSetPods"]}}, "podProtections.extraEnabled[0]"),
    ({"podProtections": {"defaultDisabled": ["PodsWithPVC"]}},
     "podProtections.defaultDisabled[0]"),
    ({"minPodAge": "ten minutes"}, "minPodAge"),
    ({"minReplicas": -1}, "minReplicas"),
    ({"nodeFit": "true"}, "nodeFit"),
    ({"nodeSelector": "a in b"}, "nodeSelector"),
    ({"evictSystemCriticalPod": True}, "evictSystemCriticalPod"),
])
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        evict_all([], args)
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"
