"""A PodDisruptionBudget's ``status.disruptedPods`` through ``kubeberth explain -o json``: a victim
the budget already counts as disrupted does not spend it, which changes which node preemption
picks (upstream's ``filterPodsWithPDBViolation``, then ``pickOneNodeForPreemption``: fewest PDB
violations first, then the lowest highest-priority victim)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import app

BASE = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: high}}
value: 1000
---
apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}}}
---
apiVersion: v1
kind: Node
metadata: {{name: n2}}
status: {{allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: v1, namespace: default, labels: {{app: a}}}}
spec:
  nodeName: n1
  priority: 10
  containers: [{{name: c, resources: {{requests: {{cpu: "4"}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: v2, namespace: default, labels: {{app: {v2_app}}}}}
spec:
  nodeName: n2
  priority: 20
  containers: [{{name: c, resources: {{requests: {{cpu: "4"}}}}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: pdb-a, namespace: default}}
spec: {{minAvailable: 2, selector: {{matchLabels: {{app: a}}}}}}
status:
  disruptionsAllowed: 0
  currentHealthy: 2
  desiredHealthy: 2
  expectedPods: 2
  disruptedPods: {{{disrupted}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: big, namespace: default}}
spec:
  priorityClassName: high
  containers: [{{name: c, resources: {{requests: {{cpu: "4"}}}}}}]
"""


def explain(tmp_path: Path, v2_app: str, disrupted: list[str]) -> tuple[str, list[str]]:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(BASE.format(
        v2_app=v2_app, disrupted=", ".join(f'{p}: "2026-01-01T00:00:00Z"' for p in disrupted)))
    res = CliRunner().invoke(app, ["explain", "-f", str(manifest), "-o", "json"])
    assert res.exit_code == 0, res.output
    (pod,) = json.loads(res.stdout)["pods"]
    assert pod["pod"] == "default/big" and pod["result"] == "Unschedulable"
    return pod["nominatedNode"], pod["victims"]


@pytest.mark.parametrize(("v2_app", "disrupted", "nominated", "victims"), [
    # Only v1 is covered by the exhausted budget: evicting it violates the PDB, so n2 wins
    # even though v2 has the higher priority.
    ("b", [], "n2", ["default/v2"]),
    # v1 is already in disruptedPods: evicting it spends nothing, no violation on either
    # node, and n1's lower-priority victim wins.
    ("b", ["v1"], "n1", ["default/v1"]),
    # Both pods are covered: every candidate violates the budget once, so the chosen victim
    # violates it too (preemption goes ahead), and the lower priority decides: n1.
    ("a", [], "n1", ["default/v1"]),
    # ... unless v2 is already counted as disrupted: then n2 has no violation and wins.
    ("a", ["v2"], "n2", ["default/v2"]),
])
def test_disrupted_pods_decide_the_victims(tmp_path: Path, v2_app: str, disrupted: list[str],
                                           nominated: str, victims: list[str]) -> None:
    assert explain(tmp_path, v2_app, disrupted) == (nominated, victims)
