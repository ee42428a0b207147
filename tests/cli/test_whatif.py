"""``kubeberth whatif``: on a snapshot (``serve -f X`` -> ``snapshot``) it predicts what a
following simulation of the snapshot plus the workload does (placements, start times), says
whom the workload preempts and whether Kueue admits it on which flavor; bad input exits 2."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_snapshot import Served, run, serve, snapshot
from tests.paths import EXAMPLES
from typer.testing import CliRunner

from kubeberth.cli.main import app

__all__ = ["serve"]  # the fixture, shared with test_snapshot

# One 4-GPU node; two pods run on it, ending at 100 s and 300 s (their annotations); a
# low-priority pending pod waits. Kueue: one ClusterQueue of 4 GPUs on flavor "a100".
CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {gpu: a100}}
status: {allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""
RUNNING = """\
---
apiVersion: v1
kind: Pod
metadata: {name: run-%(name)s, namespace: default,
           annotations: {kubeberth.io/duration-seconds: "%(seconds)s"}}
spec:
  nodeName: gpu-1
  priorityClassName: %(priority)s
  containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "2"},
                                     limits: {nvidia.com/gpu: "2"}}}]
"""
KUEUE = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {gpu: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: %(gpus)s}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: default}
spec: {clusterQueue: gpus}
"""
JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: default%(labels)s}
spec:
  parallelism: 1
  template:
    metadata: {annotations: {kubeberth.io/duration-seconds: "50"}}
    spec:
      restartPolicy: Never
      priorityClassName: %(priority)s
      containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "%(gpus)s"},
                                         limits: {nvidia.com/gpu: "%(gpus)s"}}}]
"""


def _cluster(tmp_path: Path, kueue: bool) -> Path:
    text = CLUSTER + RUNNING % {"name": "a", "seconds": 100, "priority": "low"} \
        + RUNNING % {"name": "b", "seconds": 300, "priority": "high"}
    if kueue:
        text += KUEUE % {"gpus": 4}
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _job(tmp_path: Path, gpus: int, priority: str, queue: bool) -> Path:
    path = tmp_path / "job.yaml"
    labels = ", labels: {kueue.x-k8s.io/queue-name: main}" if queue else ""
    path.write_text(JOB % {"gpus": gpus, "priority": priority, "labels": labels})
    return path


def whatif(*args: str) -> Any:
    return json.loads(run("whatif", *args, "-o", "json", "-q").stdout)


def simulated(snap: Path, job: Path, out: Path) -> dict[str, tuple[str, str]]:
    run("simulate", "--cluster", str(snap), "--workload", str(job), "--out-dir", str(out), "-q")
    with (out / "pods.csv").open() as f:
        return {r["pod"]: (r["node"], r["bound"]) for r in csv.DictReader(f)}


def predicted(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for row in data["pods"]:
        after = row["after"]
        out[row["pod"]] = (after["node"] or "", "" if after["startSeconds"] is None
                           else str(float(after["startSeconds"])))
    return out


@pytest.mark.parametrize(("gpus", "start"), [(3, 300.0), (2, 100.0)])
def test_whatif_predicts_the_following_simulation(
        serve: Any, tmp_path: Path, gpus: int, start: float) -> None:
    served: Served = serve(_cluster(tmp_path, kueue=False))
    snapshot(served, tmp_path / "snap")
    job = _job(tmp_path, gpus, "low", queue=False)
    data = whatif("-f", str(tmp_path / "snap"), "--add", str(job))
    assert data["added"]["startSeconds"] == start
    assert [p["node"] for p in data["added"]["pods"]] == ["gpu-1"]
    sim = simulated(tmp_path / "snap", job, tmp_path / "out")
    for pod, outcome in predicted(data).items():
        assert sim[pod] == outcome, pod
    assert data["added"]["admitted"] is None and data["preempts"] == {"pods": [],
                                                                      "workloads": []}


def test_whatif_says_whom_it_preempts(serve: Any, tmp_path: Path) -> None:
    served: Served = serve(_cluster(tmp_path, kueue=False))
    snapshot(served, tmp_path / "snap")
    job = _job(tmp_path, 2, "high", queue=False)
    data = whatif("-f", str(tmp_path / "snap"), "--add", str(job))
    assert data["preempts"]["pods"] == [{"pod": "default/run-a", "node": "gpu-1"}]
    sim = simulated(tmp_path / "snap", job, tmp_path / "out")
    for pod, outcome in predicted(data).items():
        assert sim[pod] == outcome, pod


def test_whatif_through_kueue(serve: Any, tmp_path: Path) -> None:
    served: Served = serve(_cluster(tmp_path, kueue=True))
    snapshot(served, tmp_path / "snap")
    job = _job(tmp_path, 2, "low", queue=True)
    data = whatif("-f", str(tmp_path / "snap"), "--add", str(job))
    assert data["added"]["admitted"] is True
    [wl] = data["added"]["workloads"]
    assert wl["clusterQueue"] == "gpus" and wl["state"] == "Admitted"
    assert {f for fl in wl["flavors"].values() for f in fl.values()} == {"a100"}
    # A queue of 1 GPU (--kueue replaces the snapshot's ClusterQueue): not admitted.
    small = tmp_path / "small.yaml"
    small.write_text(KUEUE % {"gpus": 1})
    data = whatif("-f", str(tmp_path / "snap"), "--add", str(job), "--kueue", str(small))
    assert data["added"]["admitted"] is False
    assert data["added"]["startSeconds"] is None
    table = run("whatif", "-f", str(tmp_path / "snap"), "--add", str(job), "-q").stdout
    assert "admitted: yes" in table and "before and after" in table


def test_bad_input_exits_2(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, kueue=False)
    runner = CliRunner()
    result = runner.invoke(app, ["whatif", "-f", str(cluster), "--add", str(cluster)])
    assert result.exit_code == 2 and "--add holds a Node" in result.output
    result = runner.invoke(app, ["whatif", "-f", str(cluster), "--add",
                                 str(_job(tmp_path, 1, "low", queue=False)),
                                 "--assume-runtime", "soon"])
    assert result.exit_code == 2 and "--assume-runtime" in result.output
    result = runner.invoke(app, ["whatif", "-f", str(cluster), "--add",
                                 str(_job(tmp_path, 1, "low", queue=False)), "--kueue",
                                 str(cluster)])
    assert result.exit_code == 2 and "--kueue" in result.output
    assert "Traceback" not in result.output


def test_the_snapshot_scheduler_configuration_is_used(tmp_path: Path) -> None:
    """``config/scheduler-config.yaml`` in the folder is read (a broken one is reported as
    that file's error) unless --config names another."""
    snap = tmp_path / "snap"
    shutil.copytree(EXAMPLES / "whatif" / "snap", snap)
    (snap / "config").mkdir()
    (snap / "config" / "scheduler-config.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: default-scheduler, plugins: {score: {enabled: "
        "[{name: NoSuchPlugin}]}}}]\n")
    job = EXAMPLES / "whatif" / "job.yaml"
    result = CliRunner().invoke(app, ["whatif", "-f", str(snap), "--add", str(job)])
    assert result.exit_code == 2 and "scheduler-config.yaml" in result.output
    assert "NoSuchPlugin" in result.output
    good = tmp_path / "sched.yaml"
    good.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n")
    assert whatif("-f", str(snap), "--add", str(job), "--config", str(good))["added"][
        "admitted"] is True
