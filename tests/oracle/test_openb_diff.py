"""The openb default trace's first decisions through ``kubeberth explain`` and the upstream oracle
(issue #13, 3c): ORACLE_OPENB_PODS pods (1000) in arrival order on ORACLE_OPENB_NODES (99) of its
nodes, every decision and every per-node verdict and score compared. About a minute."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.oracle import openb
from tests.oracle.harness import compare

PODS = int(os.environ.get("ORACLE_OPENB_PODS", "1000"))
NODES = int(os.environ.get("ORACLE_OPENB_NODES", "99"))


@pytest.mark.slow
@pytest.mark.skipif(not openb.TRACE.exists(), reason="../shared/data/alibaba-gpu-v2023 is absent")
def test_openb_first_decisions_agree_with_upstream(tmp_path: Path) -> None:
    compare(tmp_path, openb.manifests(PODS, NODES), None)
