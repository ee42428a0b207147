"""``kubeberth snapshot``: ``serve -f X`` -> ``snapshot`` -> ``explain``/``admit -f snap/``
decides as ``explain``/``admit -f X``; the folder is deterministic and loads in ``simulate``;
``--anonymize`` keeps the decisions under its map (0600); bad input exits 2."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.paths import EXAMPLES
from typer.testing import CliRunner

from kubeberth.cli.main import app

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: extra, namespace: default}
spec:
  template:
    metadata: {annotations: {kubeberth.io/duration-seconds: "60"}}
    spec:
      restartPolicy: Never
      containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"},
                                         limits: {nvidia.com/gpu: "1"}}}]
"""


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


class Served:
    """``kubeberth serve -f ...`` as a subprocess on a free port, reached by its kubeconfig."""

    def __init__(self, tmp: Path, files: list[Path]) -> None:
        self.kubeconfig = tmp / "kubeconfig"
        args = [a for f in files for a in ("-f", str(f))]
        self.log = tmp / "serve.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kubeberth", "serve", *args, "--port", "0",
                 "--kubeconfig-out", str(self.kubeconfig), "--cert-dir", str(tmp / "certs")],
                stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "listening" in line, line + self.log.read_text()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.communicate()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start(*files: Path) -> Served:
        s = Served(tmp_path, list(files))
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def snapshot(served: Served, out: Path, *extra: str) -> Any:
    return run("snapshot", "--kubeconfig", str(served.kubeconfig), "--out-dir", str(out),
               "-q", *extra)


def decisions(*args: str) -> list[tuple[Any, ...]]:
    data = json.loads(run("explain", *args, "-o", "json").stdout)
    return [(p["pod"], p["result"], p.get("selectedNode"), p.get("victims"))
            for p in data["pods"]]


def admissions(*args: str) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """Each workload's queue, state, reason and flavors (podSet names aside: a pod's is a hash
    of its spec, which the server completed with its defaults)."""
    data = json.loads(run("admit", *args, "-o", "json").stdout)
    return ([(w["name"], w["clusterQueue"], w["state"], w["reason"],
              sorted(sorted(f.items()) for f in w["flavors"].values()))
             for w in data["workloads"]], data["preempted"])


@pytest.mark.parametrize("example", [
    ["gpu/cluster.yaml"],
    ["gangs/cluster.yaml", "gangs/workload.yaml"],
])
def test_explain_on_the_snapshot_decides_as_on_the_manifests(
        serve: Any, tmp_path: Path, example: list[str]) -> None:
    files = [EXAMPLES / e for e in example]
    served = serve(*files)
    snapshot(served, tmp_path / "snap")
    want = decisions(*(a for f in files for a in ("-f", str(f))))
    assert any(d[1] == "Scheduled" for d in want)
    assert decisions("-f", str(tmp_path / "snap")) == want


def test_admit_on_the_snapshot_decides_as_on_the_manifests(serve: Any, tmp_path: Path) -> None:
    files = [EXAMPLES / "four-queues" / f for f in ("vk-node.yaml", "kueue.yaml",
                                                     "workload.yaml")]
    served = serve(*files)
    snapshot(served, tmp_path / "snap")
    want = admissions(*(a for f in files for a in ("-f", str(f))))
    assert {w[2] for w in want[0]} >= {"Admitted", "Inadmissible"} and want[1]
    assert admissions("-f", str(tmp_path / "snap")) == want


def test_the_folder_is_deterministic_and_simulates(serve: Any, tmp_path: Path) -> None:
    served = serve(EXAMPLES / "gpu" / "cluster.yaml")
    snapshot(served, tmp_path / "a")
    snapshot(served, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["00-namespaces.yaml", "01-nodes.yaml", "23-pods.yaml"]
    for name in names:
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    text = (tmp_path / "a" / "23-pods.yaml").read_text()
    assert "managedFields" not in text and "resourceVersion" not in text
    assert "uid:" not in text and "creationTimestamp" in text
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    run("simulate", "--cluster", str(tmp_path / "a"), "--workload", str(job), "--out-dir",
        str(tmp_path / "out"), "-q")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["pods"]["total"] == 4  # the snapshot's three and the job's one


def test_missing_kinds_are_said_once(serve: Any, tmp_path: Path) -> None:
    served = serve(EXAMPLES / "gpu" / "cluster.yaml")
    result = snapshot(served, tmp_path / "snap")
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert "note: workloads.scheduling.k8s.io is not served by this cluster: skipped" in notes
    assert len(notes) == len(set(notes))


def test_anonymized_snapshot_decides_the_same_under_its_map(serve: Any, tmp_path: Path) -> None:
    files = [EXAMPLES / "gangs" / "cluster.yaml", EXAMPLES / "gangs" / "workload.yaml"]
    served = serve(*files)
    snapshot(served, tmp_path / "snap", "--anonymize")
    mapping_file = tmp_path / "snap.mapping.json"
    assert stat.S_IMODE(mapping_file.stat().st_mode) == 0o600
    mapping = json.loads(mapping_file.read_text())
    text = "".join(p.read_text() for p in (tmp_path / "snap").iterdir() if p.is_file())
    for node in mapping["node"]:
        assert node not in text
    ns, pods, nodes = mapping["namespace"], mapping["pod"], mapping["node"]

    def renamed(key: str) -> str:
        namespace, name = key.split("/")
        return f"{ns.get(namespace, namespace)}/{pods[name]}"

    want = [(renamed(p), r, nodes.get(n, n) if n else n, v)
            for p, r, n, v in decisions(*(a for f in files for a in ("-f", str(f))))]
    assert decisions("-f", str(tmp_path / "snap")) == want


def test_bad_input_exits_2_naming_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    result = CliRunner().invoke(app, ["snapshot", "--kubeconfig", str(bad), "--out-dir",
                                      str(tmp_path / "snap")])
    assert result.exit_code == 2 and "--kubeconfig" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(app, ["snapshot", "--namespace", "Not_A_Name", "--out-dir",
                                      str(tmp_path / "snap")])
    assert result.exit_code == 2 and "--namespace" in result.output


CONFIG_MAPS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-scheduler-config, namespace: kube-system}
data:
  notes.txt: "not a configuration"
  config.yaml: |
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: default-scheduler
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-manager-config, namespace: kueue-system}
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta1
    kind: Configuration
    manager: {}
    fairSharing: {enable: true}
"""


def test_configurations_are_found_in_their_config_maps(serve: Any, tmp_path: Path) -> None:
    maps = tmp_path / "maps.yaml"
    maps.write_text(CONFIG_MAPS)
    served = serve(EXAMPLES / "gpu" / "cluster.yaml", maps)
    out = snapshot(served, tmp_path / "snap").stdout
    assert "kube-system/kube-scheduler-config:config.yaml" in out
    config = tmp_path / "snap" / "config" / "scheduler-config.yaml"
    assert "MostAllocated" in config.read_text()
    kueue = tmp_path / "snap" / "config" / "kueue-configuration.yaml"
    assert "fairSharing: {enable: true}" in kueue.read_text()
    mostly = decisions("-f", str(tmp_path / "snap"), "--config", str(config))
    assert mostly != decisions("-f", str(tmp_path / "snap"))
    run("admit", "-f", str(tmp_path / "snap"), "-f", str(kueue))
    snapshot(served, tmp_path / "anon", "--anonymize")
    anon_config = tmp_path / "anon" / "config" / "scheduler-config.yaml"
    nodes = json.loads((tmp_path / "anon.mapping.json").read_text())["node"]
    assert [d[1:3] for d in decisions("-f", str(tmp_path / "anon"), "--config",
                                      str(anon_config))] == [(r, nodes.get(n, n))
                                                             for _, r, n, _ in mostly]


OWNED = """\
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team}
spec: {clusterQueue: cq}
---
apiVersion: batch/v1
kind: Job
metadata: {name: etl, namespace: team, labels: {kueue.x-k8s.io/queue-name: main}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, resources: {requests: {cpu: "3"}}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: job-etl-7f3a2
  namespace: team
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: etl, controller: true}]
spec:
  queueName: main
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "3"}}}]}}
status:
  admission:
    clusterQueue: cq
    podSetAssignments: [{name: main, flavors: {cpu: default}, count: 1}]
"""


def test_a_workload_and_the_job_it_was_made_for_are_one(tmp_path: Path) -> None:
    """A cluster dump holds Kueue's Workload and its Job: admitting both would count the
    Job's 3 CPUs twice on a queue of 4."""
    path = tmp_path / "dump.yaml"
    path.write_text(OWNED)
    rows = json.loads(run("admit", "-f", str(path), "-o", "json").stdout)["workloads"]
    assert [(w["name"], w["state"]) for w in rows] == [("team/job-etl-7f3a2", "Admitted")]
