"""Hostile inputs given to explain, admit, deschedule and simulate through the real CLI.

Each case is generated (some are megabytes or 100,000 levels deep) and run in a subprocess, whose
timeout is only a hang detector: a hang fails the test, a slow machine does not. Every case must
exit 2 with one paragraph naming the field (or the file, for a file that cannot be read), and no
traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

HANG = 300  # seconds; generous, only a hang exceeds it

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110", nvidia.com/gpu: "4"}}
"""
POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - {name: RemovePodsViolatingNodeTaints, args: {}}
  plugins:
    deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""
CLUSTER_QUEUE = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq2}
spec:
  cohort: c0
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: 8}]
"""
KUEUE = """apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
---
""" + CLUSTER_QUEUE.replace("cq2", "cq") + """---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team}
spec: {clusterQueue: cq}
"""
NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,16384,2,T4\n"
PODS_CSV = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
            "creation_time,deletion_time,scheduled_time\n")


def pod(requests: str, *, name: str = "p", extra: str = "") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers:
  - name: c
    resources: {{requests: {requests}}}
{extra}"""


def node(name: str = "n2", *, alloc: str = 'cpu: "8"', spec: str = "") -> str:
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {name}}}
spec: {{{spec}}}
status: {{allocatable: {{{alloc}}}}}
"""


def deep_json(levels: int) -> str:
    return ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"}, "spec": '
            + "[" * levels + "]" * levels + "}")


def alias_bomb() -> str:
    lines = ['apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nextra:\n',
             '  a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]\n']
    for i in range(1, 9):
        lines.append(f"  a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n")
    return "".join(lines)


def cohort_chain(length: int) -> str:
    docs = [f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {{name: c{i}}}
spec: {{parentName: c{i + 1}}}
""" for i in range(length)]
    return "---\n".join(docs)


@dataclass(frozen=True)
class Case:
    name: str
    command: str  # explain | admit | deschedule | simulate
    files: Callable[[], dict[str, str]]  # the hostile files: name -> text
    said: str  # what the error must name: the field (or the file's problem)


MANIFEST_CASES = [
    Case("cpu-huge-exponent", "explain", lambda: {"x.yaml": pod('{cpu: "1e999999999"}')},
         "spec.containers[0].resources.requests.cpu"),
    Case("cpu-inf", "explain", lambda: {"x.yaml": pod("{cpu: -.inf}")},
         "spec.containers[0].resources.requests.cpu"),
    Case("cpu-nan", "deschedule", lambda: {"x.yaml": pod("{cpu: .nan}")},
         "spec.containers[0].resources.requests.cpu"),
    Case("memory-float-overflow", "explain", lambda: {"x.yaml": pod("{memory: 1.0e+400}")},
         "spec.containers[0].resources.requests.memory"),
    Case("gpu-past-int64", "explain",
         lambda: {"x.yaml": pod("{nvidia.com/gpu: 18446744073709551616}")},
         "spec.containers[0].resources.requests.nvidia.com/gpu"),
    Case("gpu-milli-overflow", "explain",
         lambda: {"x.yaml": pod('{kubeberth.io/gpu-milli: "600e400"}')},
         "kubeberth.io/gpu-milli"),
    Case("node-cpu-1e400", "deschedule", lambda: {"x.yaml": node(alloc='cpu: "1e400"')},
         "status.allocatable.cpu"),
    Case("json-nan", "explain", lambda: {"x.json": (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": '
        '{"containers": [{"name": "c", "resources": {"requests": {"cpu": NaN}}}]}}')},
         "NaN"),
    Case("yaml-5000-digit-int", "explain", lambda: {"x.yaml": pod("{cpu: " + "7" * 5000 + "}")},
         "spec.containers[0].resources.requests.cpu"),
    Case("json-5000-digit-int", "explain", lambda: {"x.json": (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": '
        '[{"name": "c", "resources": {"requests": {"cpu": ' + "7" * 5000 + '}}}]}}')},
         "spec.containers[0].resources.requests.cpu"),
    Case("json-100k-deep", "explain", lambda: {"x.json": deep_json(100_000)}, "nesting"),
    Case("yaml-100k-deep", "deschedule",
         lambda: {"x.yaml": "a: " + "[" * 100_000 + "]" * 100_000 + "\n"}, "nesting"),
    Case("alias-bomb", "explain", lambda: {"x.yaml": alias_bomb()}, "aliases"),
    Case("job-spec-scalar", "explain", lambda: {"x.yaml": (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default}\n"
        "spec: 32Gi\n")}, "spec"),
    Case("node-name-not-rfc1123", "explain", lambda: {"x.yaml": node("Bad_Name")},
         "metadata.name"),
    Case("taint-effect-explode", "deschedule",
         lambda: {"x.yaml": node(spec="taints: [{key: k, effect: Explode}]")},
         "spec.taints[0].effect"),
    Case("priority-1e23", "explain",
         lambda: {"x.yaml": pod('{cpu: "1"}', extra="  priority: 1.0e+23\n")},
         "spec.priority"),
    Case("cohort-chain-1000", "admit", lambda: {"x.yaml": cohort_chain(1000)},
         "spec.parentName"),
    Case("cohort-chain-5000", "admit", lambda: {"x.yaml": cohort_chain(5000)},
         "spec.parentName"),
    Case("quota-1e999", "admit", lambda: {"x.yaml": CLUSTER_QUEUE.replace(
        "nominalQuota: 8", 'nominalQuota: "1e999"')}, "nominalQuota"),
]
CSV_CASES = [
    Case("csv-400-digit-time", "simulate", lambda: {"pods.csv": PODS_CSV + (
        "p1,1000,1024,0,0,,LS,Running," + "9" * 400 + ",,\n")}, "creation_time"),
    Case("csv-cpu-past-int64", "simulate", lambda: {"pods.csv": PODS_CSV + (
        "p1," + "9" * 30 + ",1024,0,0,,LS,Running,0,,\n")}, "cpu_milli"),
    Case("csv-5000-digit-memory", "simulate", lambda: {"pods.csv": PODS_CSV + (
        "p1,1000," + "7" * 5000 + ",0,0,,LS,Running,0,,\n")}, "memory_mib"),
]


def _argv(case: Case, tmp: Path, paths: list[Path]) -> list[str]:
    base = [sys.executable, "-m", "kubeberth", case.command]
    files = [a for p in paths for a in ("-f", str(p))]
    if case.command == "explain":
        return [*base, "-f", str(tmp / "node.yaml"), *files]
    if case.command == "deschedule":
        return [*base, "-f", str(tmp / "node.yaml"), *files, "--policy", str(tmp / "policy.yaml")]
    if case.command == "admit":
        return [*base, "-f", str(tmp / "kueue.yaml"), *files]
    return [*base, "--cluster", str(tmp / "nodes.csv"), "--workload", str(paths[0]),
            "--out-dir", str(tmp / "out"), "-q"]


@pytest.mark.parametrize("case", MANIFEST_CASES + CSV_CASES, ids=lambda c: c.name)
def test_hostile_input_exits_2_naming_the_field(case: Case, tmp_path: Path) -> None:
    (tmp_path / "node.yaml").write_text(NODE)
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "kueue.yaml").write_text(KUEUE)
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    paths = []
    for name, text in case.files().items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    try:
        res = subprocess.run(_argv(case, tmp_path, paths), capture_output=True, text=True,
                             timeout=HANG, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: no answer within {HANG} s (a hang)")
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.returncode == 2, (res.returncode, res.stderr[-3000:])
    assert case.said in res.stderr, res.stderr[-3000:]
    assert str(paths[0]) in res.stderr, res.stderr[-3000:]
