"""``kubeberth experiment gangs`` and the simulator's guard against a scheduler spinning at one
virtual instant (docs/gangs.md, "The gang experiment")."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from tests.paths import ROOT
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.sim.gangs import GangRun, _interval, scenario

SMALL = ["--nodes", "16", "--pods", "300", "-j", "1"]


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "gangs.csv").open() as f:
        return {r["mode"]: r for r in csv.DictReader(f)}


def test_gangs_never_strand_gpus_and_no_gang_does(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["experiment", "gangs", *SMALL, "--load", "1.5",
                                   "--out-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = _rows(tmp_path)
    assert sorted(rows) == ["coscheduling", "native", "none"]
    # The same jobs in every mode; a gang holds GPUs only once all its pods are placed.
    assert len({r["jobs"] for r in rows.values()}) == 1 and int(rows["none"]["jobs"]) > 0
    assert float(rows["native"]["stranded_gpu_hours"]) == 0.0
    assert float(rows["coscheduling"]["stranded_gpu_hours"]) == 0.0
    assert float(rows["none"]["stranded_gpu_hours"]) > 0.0
    assert "gang experiment" in res.output and (tmp_path / "gangs.csv").is_file()


def test_the_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        res = CliRunner().invoke(app, ["experiment", "gangs", *SMALL, "--mode", "native",
                                       "--out-dir", str(out), "-o", "json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)[0]["mode"] == "native"
    assert (outs[0] / "gangs.csv").read_bytes() == (outs[1] / "gangs.csv").read_bytes()


def test_jobs_become_one_gpu_pods_with_the_jobs_resources() -> None:
    scen, jobs = scenario(GangRun("native", "multigpu50", 7, 1.2, 8, 400))
    pods = {tp.pod.key: tp for tp in scen.pods}
    groups = {d.data["metadata"]["name"]: d.data for d in scen.extras.workload_api}
    assert jobs and set(groups) == set(jobs)
    for name, keys in jobs.items():
        assert groups[name]["spec"]["schedulingPolicy"]["gang"]["minCount"] == len(keys) >= 2
        members = [pods[k] for k in keys]
        assert len({tp.arrival for tp in members}) == 1
        for tp in members:
            assert tp.pod.spec.scheduling_group is not None
            assert tp.pod.spec.scheduling_group.pod_group_name == name
            assert int(tp.pod.spec.containers[0].resources.requests["nvidia.com/gpu"]) == 1000


def test_the_interval_offers_the_asked_load() -> None:
    # Two 1-GPU pods of 100 s and one that never ends: at interval I the span is 3I, and the
    # average demand is (2·min(100, 3I) + 3I) / 3I GPUs; 1.5 GPUs asks for 3I = 400.
    interval = _interval([(1.0, 100.0), (1.0, 100.0), (1.0, None)], 1.5)
    assert abs(interval * 3 - 400) < 1e-6


def test_a_gang_permit_keeps_rejecting_without_hanging_the_simulator(tmp_path: Path) -> None:
    """Coscheduling with no group backoff: two members wait at Permit, the third fits nowhere,
    its PostFilter rejects the waiting two and Permit re-activates them, round and round at
    one instant. The simulator pauses that loop until the next event (here the Permit
    timeout), where upstream's scheduler would spin in real time; nothing binds."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2",
                                       "pods": "110"}}}
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"g-{i}", "namespace": "default",
                          "labels": {"scheduling.x-k8s.io/pod-group": "g"}},
             "spec": {"containers": [{"name": "c", "resources": {
                 "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                 "limits": {"nvidia.com/gpu": "1"}}}]}} for i in range(3)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(node))
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump_all([group, *pods]))
    res = CliRunner().invoke(app, [
        "simulate", "--cluster", str(tmp_path / "cluster.yaml"),
        "-w", str(tmp_path / "workload.yaml"),
        "-c", str(ROOT / "examples" / "gangs" / "scheduler-config.yaml"),
        "--out-dir", str(tmp_path / "out"), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["pods"]["scheduled"] == 0 and summary["pods"]["unscheduled"] == 3
