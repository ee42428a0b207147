"""Every shared descheduler conformance case through ``kubeberth deschedule -o json``.

The cases call one plugin on exactly the listed nodes, without the descheduler's guard that skips
a cycle when fewer than two nodes are ready. Cases with two or more nodes run through the CLI;
for single-node cases the CLI must skip the cycle (the guard) and the same pass is run through
``Descheduler.run_pass(..., min_ready_nodes=0)``, which is the CLI's code path without the guard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conformance.casefiles import load_cases
from tests.conformance.deschedcases import NODE_KEYS, NOW_TEXT, POD_KEYS, write_case
from typer.testing import CliRunner

from kubeberth.api.times import parse_time
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.descheduling.framework import Snapshot
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.descheduling.registry import build_descheduler

CASES = load_cases("descheduler")


def _evicted_names(evictions: list[dict[str, Any]]) -> list[str]:
    return [e["pod"].split("/", 1)[1] for e in evictions]


def _check(case: dict[str, Any], evictions: list[dict[str, Any]]) -> None:
    expect = case["expect"]
    names = _evicted_names(evictions)
    assert len(names) == expect["evicted_count"], names
    if "evicted_pods" in expect:
        assert sorted(names) == sorted(expect["evicted_pods"])


@pytest.mark.skipif(not CASES, reason="../shared/conformance/descheduler is not available")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any], tmp_path: Path) -> None:
    manifests, policy = write_case(case, tmp_path)
    result = CliRunner().invoke(app, ["deschedule", "-f", str(manifests), "--policy", str(policy),
                                      "-o", "json", "--now", NOW_TEXT])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    if len(case["nodes"]) >= 2:
        _check(case, out["evictions"])
        return
    assert out == {"evictions": [], "skipped": []}
    descheduler = build_descheduler(load_descheduler_policy(policy))
    snapshot = Snapshot.from_manifests(load_manifests(manifests), parse_time(NOW_TEXT))
    _check(case, descheduler.run_pass(snapshot, min_ready_nodes=0).to_json()["evictions"])


@pytest.mark.skipif(not CASES, reason="../shared/conformance/descheduler is not available")
def test_every_case_field_is_translated() -> None:
    """A field the converter does not know would be dropped silently; fail instead."""
    pod_keys = {k for c in CASES for p in c["pods"] for k in p}
    node_keys = {k for c in CASES for n in c["nodes"] for k in n}
    assert pod_keys <= POD_KEYS, pod_keys - POD_KEYS
    assert node_keys <= NODE_KEYS, node_keys - NODE_KEYS
