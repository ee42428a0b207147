"""Minimal repros of the kubeberth bugs the upstream oracle found. An open bug is an entry of
``harness.KNOWN_BUGS`` with its repro in ``REPROS``, compared with every normalisation but its
own, so it fails while the bug is there (strict xfail); when kubeberth is fixed it passes, which
fails the run until the entry and its normalisation are removed and the repro joins ``FIXED``
(or a test of its own below), where it must agree with upstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.oracle.harness import KNOWN_BUGS, compare


def _node(name: str, cpu: str = "4", taints: list[dict[str, str]] | None = None,
          pods: str = "10", gpus: int = 0) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": pods}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"taints": taints or []}, "status": {"allocatable": alloc}}


def _pod(name: str, cpu: str = "100m", node: str | None = None, priority: int | None = None,
         gpus: int = 0, started: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    if started:
        doc["status"] = {"phase": "Running", "startTime": started}
    return doc


REPROS: dict[str, list[dict[str, Any]]] = {}

# Were known bugs; each repro now agrees with upstream.
FIXED: dict[str, list[dict[str, Any]]] = {
    # Upstream v1.37's TaintToleration reason does not name the taint. Two untainted nodes so
    # that the lone-node rule does not also apply.
    "taint-reason": [_node("a"), _node("b", taints=[{"key": "gpu", "value": "true",
                                                      "effect": "NoSchedule"}]),
                     _node("c"), _pod("p")],
    # schedulePod takes a lone feasible node without PreScore/Score.
    "lone-node-scored": [_node("a"), _pod("p")],
    # The FitError ends with PostFilter's message after a successful preemption too.
    "preemption-success-message": [_node("a", cpu="1"), _node("b", cpu="1"),
                                   _pod("low", cpu="1", node="a", priority=0),
                                   _pod("low2", cpu="1", node="b", priority=0),
                                   _pod("high", cpu="1", priority=100)],
    # high preempts low and is nominated to a; mid is then judged on a with high counted, in
    # each plugin's verdict too.
    "nominated-verdicts": [_node("a", cpu="2", pods="1"), _node("b", cpu="0"),
                           _pod("low", cpu="2", node="a", priority=0),
                           _pod("high", cpu="1", priority=100), _pod("mid", priority=10)],
    # The node's status is the one with its nominated pods counted when that run fails.
    "nominated-status-order": [_node("a", cpu="2", gpus=1), _node("b", cpu="0"),
                               _pod("low", cpu="2", node="a", priority=0),
                               _pod("high", cpu="1", priority=100),
                               _pod("mid", cpu="1500m", gpus=2, priority=10)],
}


def test_every_known_bug_has_a_repro() -> None:
    assert set(REPROS) == set(KNOWN_BUGS)


def test_known_bugs_still_differ(tmp_path: Path) -> None:
    """Each open bug's repro, compared with every normalisation but its own, still disagrees
    with upstream; once kubeberth is fixed this fails until the entry moves to ``FIXED``. (One
    loop, not a parametrized test: with no bug open a parametrized test would skip.)"""
    for bug, docs in sorted(REPROS.items()):
        case = tmp_path / bug
        case.mkdir()
        with pytest.raises(AssertionError):
            compare(case, docs, None, bugs=set(KNOWN_BUGS) - {bug})


@pytest.mark.parametrize("bug", sorted(FIXED))
def test_fixed_bug(bug: str, tmp_path: Path) -> None:
    compare(tmp_path, FIXED[bug], None)


def test_a_victim_without_a_start_time_counts_as_started_now(tmp_path: Path) -> None:
    """Was a known bug: upstream's GetPodStartTime reads a missing startTime as now, so that
    pod is the newest and goes first among equal priorities."""
    compare(tmp_path, [_node("a", cpu="1"), _node("b", cpu="0"),
                       _pod("old", cpu="500m", node="a", started="2024-01-01T00:00:00Z"),
                       _pod("new", cpu="500m", node="a"),
                       _pod("high", cpu="500m", priority=100)], None)


def test_node_name_filters_every_node_for_a_pod_without_one(tmp_path: Path) -> None:
    """Was a known bug: NodeName's PreFilter skipped pods without spec.nodeName; upstream
    v1.37's succeeds, so its Filter verdict is on every node."""
    compare(tmp_path, [_node("a"), _node("b"), _pod("p")], None)


_NO_PRE_SCORE = {"apiVersion": "kubescheduler.config.k8s.io/v1",
                 "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "default-scheduler",
                               "plugins": {"preScore": {"disabled": [{"name": "*"}]}}}]}


def test_score_without_its_pre_score_state_fails_the_pods_cycle(tmp_path: Path) -> None:
    """Was a crash (#14): with every PreScore disabled upstream's TaintToleration Score fails
    reading its state and the pod's cycle ends in that Error; a lone feasible node is taken
    without Score and schedules."""
    compare(tmp_path, [_node("a"), _node("b", cpu="1"), _pod("p"), _pod("big", cpu="3")],
            _NO_PRE_SCORE)


@pytest.mark.parametrize("plugin", ["PodTopologySpread", "InterPodAffinity",
                                    "NodeResourcesFit"])
def test_one_score_plugin_without_its_pre_score(plugin: str, tmp_path: Path) -> None:
    """Each plugin's own wording when its state is missing, or (NodeResourcesFit) its
    computing without it."""
    config = {**_NO_PRE_SCORE, "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "preScore": {"disabled": [{"name": "*"}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": plugin}]}}}]}
    compare(tmp_path, [_node("a"), _node("b", cpu="8"), _pod("p")], config)


def _without_pre_filter(*names: str) -> dict[str, Any]:
    return {**_NO_PRE_SCORE, "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "preFilter": {"disabled": [{"name": n} for n in names]}}}]}


_TAINT = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]


def test_filters_without_their_pre_filter_state_fail_the_pods_cycle(tmp_path: Path) -> None:
    """Was a crash (#14): with every PreFilter disabled upstream's first Filter that reads its
    state (NodePorts, in the default order) fails the cycle with that Error. The search stops
    at the first node that reaches it (a tainted node before it is judged and rejected), and
    the next pod's search starts where this one's did. A pod that no node lets reach it is
    unschedulable as usual."""
    nowhere = _pod("r")
    nowhere["spec"]["nodeSelector"] = {"zone": "none"}
    compare(tmp_path, [_node("a", taints=_TAINT), _node("b"), _node("c"), _pod("p"), _pod("q"),
                       nowhere], _without_pre_filter("*"))


@pytest.mark.parametrize("plugin", ["NodeResourcesFit", "PodTopologySpread",
                                    "InterPodAffinity", "DynamicResources", "NodePorts",
                                    "VolumeRestrictions", "VolumeBinding"])
def test_one_filter_without_its_pre_filter(plugin: str, tmp_path: Path) -> None:
    """Each plugin's own wording when only its PreFilter is disabled."""
    compare(tmp_path, [_node("a"), _node("b", cpu="1"), _pod("p", cpu="2")],
            _without_pre_filter(plugin))
