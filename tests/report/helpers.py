"""Report test helpers: a small simulation through the real CLI, and readers that take the
figures and sections back out of a report's HTML."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from typer.testing import CliRunner

from kubeberth.cli.main import app

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10", nvidia.com/gpu: "2"}}
"""

# low holds the node, high preempts it at t=10 (low is re-created and waits until high ends
# at t=60), huge never fits anywhere.
WORKLOAD = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: low
  annotations: {kubeberth.io/arrival-seconds: "0", kubeberth.io/duration-seconds: "100"}
spec:
  priorityClassName: low
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 1Gi, nvidia.com/gpu: "1"},
                                     limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: high
  annotations: {kubeberth.io/arrival-seconds: "10", kubeberth.io/duration-seconds: "50"}
spec:
  priorityClassName: high
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: huge
  annotations: {kubeberth.io/arrival-seconds: "5", kubeberth.io/duration-seconds: "10"}
spec:
  containers: [{name: c, resources: {requests: {cpu: "64", memory: 1Gi}}}]
"""


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def simulate(inputs: Path, out: Path, *extra: str) -> Path:
    code, stdout, stderr = invoke("simulate", "--cluster", str(inputs / "cluster.yaml"),
                                  "--workload", str(inputs / "workload.yaml"), "-o", str(out),
                                  "-q", *extra)
    assert code == 0, stdout + stderr
    return out


def figures(html: str) -> list[str]:
    """The SVG documents embedded in a report, in page order."""
    return [base64.b64decode(m).decode()
            for m in re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)]


def section_titles(html: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", html)
