"""Plugins that judge pods one at a time: node affinity, anti-affinity, lifetime, failures,
restarts."""

from __future__ import annotations

from typing import Any

import pytest
from tests.descheduling.builders import at, evicted, node, pod, policy, run, skipped

from kubeberth.api.errors import InputError

AFFINITY = "RemovePodsViolatingNodeAffinity"
ANTI = "RemovePodsViolatingInterPodAntiAffinity"
LIFETIME = "PodLifeTime"
FAILED = "RemoveFailedPods"
RESTARTS = "RemovePodsHavingTooManyRestarts"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def requires_zone(zone: str) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]}}}}


def test_node_affinity_required_evicts_when_another_node_fits() -> None:
    nodes = [node("n1", labels={"zone": "b"}), node("n2", labels={"zone": "a"})]
    pods = [pod("moved", "n1", spec=requires_zone("a")), pod("fine", "n2",
                                                             spec=requires_zone("a")),
            pod("nowhere", "n1", spec=requires_zone("c"))]
    pol = policy({"deschedule": [AFFINITY]}, {AFFINITY: {"nodeAffinityType": [REQUIRED]}})
    result = run(pol, nodes, pods)
    assert evicted(result) == ["moved"]
    assert "no longer matches the pod's required node affinity" in result.evictions[0].reason


def test_node_affinity_preferred_evicts_for_a_better_node() -> None:
    prefers = {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 10, "preference": {
        "matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}}}
    nodes = [node("n1"), node("n2", labels={"gpu": "a100"})]
    pods = [pod("p", "n1", spec=prefers), pod("q", "n2", spec=prefers)]
    pol = policy({"deschedule": [AFFINITY]}, {AFFINITY: {"nodeAffinityType": [PREFERRED]}})
    assert evicted(run(pol, nodes, pods)) == ["p"]


def test_node_affinity_needs_a_type() -> None:
    with pytest.raises(InputError) as err:
        run(policy({"deschedule": [AFFINITY]}, {AFFINITY: {}}), [node("a"), node("b")], [])
    assert err.value.field == "profiles[0].pluginConfig[0].args.nodeAffinityType"


def anti(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {REQUIRED: [{
        "labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}}


def test_anti_affinity_evicts_the_lower_priority_pod_only() -> None:
    nodes = [node("n1", labels={"kubernetes.io/hostname": "n1"}), node("n2")]
    pods = [pod("a", "n1", labels={"app": "a"}, priority=10, spec=anti("b")),
            pod("b", "n1", labels={"app": "b"}, priority=5, spec=anti("a")),
            pod("c", "n2", labels={"app": "b"})]
    result = run(policy({"deschedule": [ANTI]}, {ANTI: {}}), nodes, pods)
    assert evicted(result) == ["b"]


def test_anti_affinity_respects_the_topology_key() -> None:
    nodes = [node("n1", labels={"rack": "r1"}), node("n2", labels={"rack": "r1"}),
             node("n3", labels={"rack": "r2"})]
    pods = [pod("a", "n1", labels={"app": "a"}, spec=anti("b", "rack")),
            pod("b", "n2", labels={"app": "b"})]
    assert evicted(run(policy({"deschedule": [ANTI]}, {ANTI: {}}), nodes, pods)) == ["a"]
    pods[1] = pod("b", "n3", labels={"app": "b"})
    assert evicted(run(policy({"deschedule": [ANTI]}, {ANTI: {}}), nodes, pods)) == []


def test_pod_lifetime_oldest_first() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [pod("young", "n1", created=-100), pod("older", "n2", created=-900),
            pod("old", "n1", created=-700)]
    pol = policy({"deschedule": [LIFETIME]}, {LIFETIME: {"maxPodLifeTimeSeconds": 600}},
                 maxNoOfPodsToEvictTotal=1)
    result = run(pol, nodes, pods)
    assert evicted(result) == ["older"]
    assert "900s old" in result.evictions[0].reason
    assert "maxNoOfPodsToEvictTotal" in skipped(result)["old"]


def test_pod_lifetime_states() -> None:
    nodes = [node("n1"), node("n2")]
    waiting = {"containerStatuses": [{"name": "c", "state": {"waiting": {
        "reason": "CrashLoopBackOff"}}}]}
    pods = [pod("running", "n1", created=-900), pod("pending", "n1", created=-900,
                                                    phase="Pending"),
            pod("crashing", "n1", created=-900, status=waiting)]
    pol = policy({"deschedule": [LIFETIME]}, {LIFETIME: {
        "maxPodLifeTimeSeconds": 600, "states": ["Pending", "CrashLoopBackOff"]}})
    assert sorted(evicted(run(pol, nodes, pods))) == ["crashing", "pending"]


def test_pod_lifetime_036_conditions_exit_codes_and_owner_kinds() -> None:
    """descheduler 0.36: filters without maxPodLifeTimeSeconds, each one narrowing the pods."""
    nodes = [node("n1"), node("n2")]
    unready = {"conditions": [{"type": "Ready", "status": "False", "reason": "PodFailed",
                               "lastTransitionTime": at(-900)}]}
    fresh = {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": at(-30)}]}
    pods = [pod("stuck", "n1", created=-1000, status=unready),
            pod("recent", "n1", created=-1000, status=fresh),
            pod("ready", "n1", created=-1000),
            pod("stuck-job", "n1", created=-1000, status=unready, owner=("Job", "j"))]
    cond = {"conditions": [{"type": "Ready", "status": "False",
                            "minTimeSinceLastTransitionSeconds": 600}]}
    assert sorted(evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: cond}),
                              nodes, pods))) == ["stuck", "stuck-job"]
    without_jobs = {**cond, "ownerKinds": {"exclude": ["Job"]}}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: without_jobs}),
                       nodes, pods)) == ["stuck"]
    only_jobs = {**cond, "ownerKinds": {"include": ["Job"]}}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: only_jobs}),
                       nodes, pods)) == ["stuck-job"]
    reasons = {"conditions": [{"reason": "PodFailed"}], "maxPodLifeTimeSeconds": 2000}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: reasons}),
                       nodes, pods)) == []


def test_pod_lifetime_036_exit_codes_and_terminated_states() -> None:
    nodes = [node("n1"), node("n2")]
    oom = {"containerStatuses": [{"name": "c", "state": {"terminated": {
        "exitCode": 137, "reason": "OOMKilled"}}}]}
    init_error = {"initContainerStatuses": [{"name": "i", "state": {"terminated": {
        "exitCode": 1, "reason": "Error"}}}]}
    pods = [pod("oom", "n1", created=-100, status=oom),
            pod("init", "n1", created=-200, status=init_error), pod("fine", "n1", created=-300)]
    codes = {"exitCodes": [137, 1]}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: codes}), nodes, pods)) \
        == ["oom"]
    with_init = {**codes, "includingInitContainers": True}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: with_init}), nodes,
                       pods)) == ["init", "oom"]
    states = {"states": ["OOMKilled"]}
    assert evicted(run(policy({"deschedule": [LIFETIME]}, {LIFETIME: states}), nodes,
                       pods)) == ["oom"]


@pytest.mark.parametrize(("args", "field", "words"), [
    ({}, "maxPodLifeTimeSeconds", "at least one filtering criterion must be specified"),
    ({"conditions": [{}]}, "conditions[0]", "at least one of type, status, reason"),
    ({"exitCodes": [1], "ownerKinds": {"include": ["Job"], "exclude": ["DaemonSet"]}},
     "ownerKinds", "only one of Include/Exclude ownerKinds can be set"),
    ({"conditions": [{"type": "Ready", "since": 1}]}, "conditions[0].since", "unknown field"),
    ({"exitCodes": [2**31]}, "exitCodes[0]", "32-bit"),
])
def test_pod_lifetime_036_bad_args(args: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InputError, match=words) as err:
        run(policy({"deschedule": [LIFETIME]}, {LIFETIME: args}), [node("a"), node("b")], [])
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"


@pytest.mark.parametrize(("args", "field"), [
    ({}, "maxPodLifeTimeSeconds"), ({"maxPodLifeTimeSeconds": -1}, "maxPodLifeTimeSeconds"),
    ({"maxPodLifeTimeSeconds": 1, "states": ["Sleeping"]}, "states[0]"),
])
def test_pod_lifetime_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        run(policy({"deschedule": [LIFETIME]}, {LIFETIME: args}), [node("a"), node("b")], [])
    assert err.value.field == f"profiles[0].pluginConfig[0].args.{field}"


def failed(name: str, created: float, reason: str = "", code: int = 1, **kw: Any) -> Any:
    status = {"containerStatuses": [{"name": "c", "state": {"terminated": {
        "exitCode": code, "reason": reason}}}]}
    return pod(name, "n1", phase="Failed", created=created, status=status, **kw)


def test_failed_pods_default_minimum_lifetime_is_an_hour() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [failed("old", -7200), failed("new", -60), pod("running", "n1", created=-7200)]
    result = run(policy({"deschedule": [FAILED]}, {FAILED: {}}), nodes, pods)
    assert evicted(result) == ["old"]


def test_failed_pods_reasons_exit_codes_and_owner_kinds() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [failed("oom", -7200, reason="OOMKilled", code=137),
            failed("error", -7200, reason="Error", code=2),
            failed("job", -7200, reason="OOMKilled", owner=("Job", "j"))]
    by_reason = policy({"deschedule": [FAILED]}, {FAILED: {
        "reasons": ["OOMKilled"], "excludeOwnerKinds": ["Job"]}})
    assert evicted(run(by_reason, nodes, pods)) == ["oom"]
    by_code = policy({"deschedule": [FAILED]}, {FAILED: {"exitCodes": [2]}})
    assert evicted(run(by_code, nodes, pods)) == ["error"]


def restarting(name: str, app: int, init: int = 0) -> Any:
    status = {"containerStatuses": [{"name": "c", "restartCount": app}],
              "initContainerStatuses": [{"name": "i", "restartCount": init}]}
    return pod(name, "n1", status=status)


def test_too_many_restarts_most_restarts_first() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [restarting("few", 3), restarting("some", 5), restarting("many", 10),
            restarting("init-heavy", 1, init=6)]
    pol = policy({"deschedule": [RESTARTS]}, {RESTARTS: {"podRestartThreshold": 5}})
    assert evicted(run(pol, nodes, pods)) == ["many", "some"]
    with_init = policy({"deschedule": [RESTARTS]}, {RESTARTS: {
        "podRestartThreshold": 5, "includingInitContainers": True}})
    assert evicted(run(with_init, nodes, pods)) == ["many", "init-heavy", "some"]


def test_too_many_restarts_threshold_must_be_positive() -> None:
    with pytest.raises(InputError) as err:
        run(policy({"deschedule": [RESTARTS]}, {RESTARTS: {"podRestartThreshold": 0}}),
            [node("a"), node("b")], [])
    assert err.value.field == "profiles[0].pluginConfig[0].args.podRestartThreshold"
