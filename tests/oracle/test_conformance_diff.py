"""Every kube-scheduler conformance case that tests/conformance runs through explain, run through
``kubeberth explain`` and the upstream oracle and compared field by field (issue #13, 3a).

The cases' own expectations are hand-transcribed from upstream's unit tests; here the same inputs
go through upstream's code itself, so every field explain prints is checked, not only the one
the case was written for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conformance import test_kube_scheduler as ks
from tests.oracle.harness import (
    compare,
    differences,
    normalise,
    run_kubeberth,
    run_oracle,
    write_inputs,
)

CASES = ks._ids("score") + ks._ids("filter") + ks._ids("postfilter*")

pytestmark = pytest.mark.skipif(not CASES, reason="../shared/conformance is not present")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_case_agrees_with_upstream(case: dict[str, Any], tmp_path: Path) -> None:
    compare(tmp_path, ks._manifests(case), ks._config(case))


def test_comparison_catches_a_changed_score(tmp_path: Path) -> None:
    """The comparison is not vacuous: one altered score in kubeberth's output is reported."""
    case = next(c for c in CASES if c["extension_point"] == "score")
    manifests, cfg = write_inputs(tmp_path, ks._manifests(case), ks._config(case))
    kb = run_kubeberth(manifests, cfg)
    oracle = run_oracle(manifests, cfg)
    node = next(n for n in kb["pods"][0]["nodes"].values() if n["scored"])
    plugin = next(iter(node["score"]))
    node["score"][plugin]["normalized"] += 1
    left, right = normalise(kb, oracle)
    assert any(f".score.{plugin}.normalized" in d for d in differences(left, right))
