"""Hypothesis-generated clusters and pending pods through ``kubeberth explain`` and the upstream
oracle (issue #13, 3b). Derandomised: a fixed seed (ORACLE_SEED, printed) and ORACLE_EXAMPLES
examples per run; ``tools/differential.py --cases N`` runs more. A disagreement fails with both
outputs side by side and the input hypothesis shrank it to.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from tests.oracle.generate import cluster
from tests.oracle.harness import compare

SEED = int(os.environ.get("ORACLE_SEED", "13"))
# 500 per CI run (issue #13): about 0.19 s of CPU each, mostly the oracle process; measured in
# oracle/README.md "Tests".
EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", "500"))


# The seed is in the test id, so every report names it.
@pytest.mark.parametrize("seed_", [SEED], ids=[f"seed={SEED}-examples={EXAMPLES}"])
@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@seed(SEED)
@given(docs=cluster())
def test_generated_cluster_agrees_with_upstream(seed_: int, docs: list[dict[str, Any]]) -> None:
    note(f"ORACLE_SEED={seed_} ORACLE_EXAMPLES={EXAMPLES}")
    with tempfile.TemporaryDirectory() as d:
        compare(Path(d), docs, None)
