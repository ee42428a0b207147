"""Minimal repros of the kubeberth bugs the upstream oracle found, one per entry of
``harness.KNOWN_BUGS``. Each compares with every normalisation but its own, so it fails while the
bug is there (strict xfail); when kubeberth is fixed it passes, which fails the run until the
entry and its normalisation are removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.oracle.harness import KNOWN_BUGS, compare


def _node(name: str, cpu: str = "4", taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}}}


def _pod(name: str, cpu: str = "100m", node: str | None = None,
         priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


REPROS: dict[str, list[dict[str, Any]]] = {
    # Two nodes so that the lone-node bug does not also apply.
    "nodename-skip": [_node("a"), _node("b"), _pod("p")],
    "taint-reason": [_node("a"), _node("b", taints=[{"key": "gpu", "value": "true",
                                                      "effect": "NoSchedule"}]),
                     _node("c"), _pod("p")],
    "lone-node-scored": [_node("a"), _pod("p")],
    "preemption-success-message": [_node("a", cpu="1"), _node("b", cpu="1"),
                                   _pod("low", cpu="1", node="a", priority=0),
                                   _pod("low2", cpu="1", node="b", priority=0),
                                   _pod("high", cpu="1", priority=100)],
}


def test_every_known_bug_has_a_repro() -> None:
    assert set(REPROS) == set(KNOWN_BUGS)


@pytest.mark.parametrize("bug", sorted(REPROS))
def test_known_bug(bug: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    request.applymarker(pytest.mark.xfail(strict=True, reason=f"kubeberth bug: {KNOWN_BUGS[bug]}"))
    compare(tmp_path, REPROS[bug], None, bugs=set(KNOWN_BUGS) - {bug})
