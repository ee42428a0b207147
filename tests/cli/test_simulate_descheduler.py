"""``kubeberth simulate --deschedule-policy``: the Descheduler as a periodic pass in a run, and the
spill scenario's return path end to end (spill when full, come back when GPUs free, PDB held)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.cli.spill_example import EXAMPLE, simulate
from typer.testing import CliRunner

from kubeberth.cli.main import app

SPILL = ("--spill-config", str(EXAMPLE / "spill.yaml"))
KUEUE = ("-w", str(EXAMPLE / "kueue.yaml"))


def test_spilled_pods_return_to_the_cluster_within_the_pdb(tmp_path: Path) -> None:
    code, output, out = simulate(tmp_path, *KUEUE, *SPILL, "--deschedule-policy",
                                 str(EXAMPLE / "descheduler.yaml"),
                                 workload="workload-return.yaml")
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    desched = summary["run"]["descheduler"]
    assert desched["requestedByPlugin"] == {"RemovePodsViolatingNodeTaints": 4}
    assert summary["evictions"]["evicted"] == 4
    assert summary["evictions"]["replacementsCreated"] == 4
    rows = list(csv.DictReader((out / "evictions.csv").open()))
    # Only VK pods, only after the low-usage taint came back, never more than the PDB's two
    # at a time (minAvailable 80% of 14), and at most two per pass (maxNoOfPodsToEvictPerNode).
    flips = summary["spill"]["flips"]
    back = next(f["time"] for f in flips if f["taint"] == "added" and f["time"] > 1000)
    assert all(r["node"] == "virtual-kubelet" and r["allowed"] == "1" for r in rows)
    assert all(float(r["time"]) >= back for r in rows)
    per_pass: dict[str, int] = {}
    for r in rows:
        per_pass[r["time"]] = per_pass.get(r["time"], 0) + 1
    assert max(per_pass.values()) <= 2
    # The replacements run in the cluster: nothing is left on the VK node at the end.
    assert summary["spill"]["podsOnVirtualNodeAtEnd"] == 0
    pods = {r["pod"]: r for r in csv.DictReader((out / "pods.csv").open())}
    for r in rows:
        assert pods[r["replacement"]]["node"] != "virtual-kubelet"


def test_no_return_while_the_burst_is_scaled_down_first(tmp_path: Path) -> None:
    """In the base scenario the scale-down deletes the VK pods before the taint returns, so the
    descheduler runs its passes and evicts nothing."""
    code, output, out = simulate(tmp_path, *SPILL, "--deschedule-policy",
                                 str(EXAMPLE / "descheduler.yaml"))
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["descheduler"]["passes"] > 0
    assert summary["run"]["descheduler"]["requested"] == 0
    assert "evictions" not in summary


def test_bad_policy_and_interval_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
                   "  - name: p\n    plugins:\n      deschedule:\n        enabled: [Nope]\n")
    code, output, _ = simulate(tmp_path, *SPILL, "--deschedule-policy", str(bad))
    assert code == 2 and "Nope" in output and "Traceback" not in output
    code, output, _ = simulate(tmp_path, *SPILL, "--deschedule-policy",
                               str(EXAMPLE / "descheduler.yaml"), "--descheduling-interval", "0")
    assert code == 2 and "--descheduling-interval" in output


def test_sweep_compares_min_pod_age_and_eviction_limits() -> None:
    """The spill sweep's descheduler knobs: one run per (minPodAge, per-node limit); a limit
    of one eviction per pass returns the VK pods more slowly, so it costs more GPU-hours."""
    res = CliRunner().invoke(app, [
        "spill", "sweep", "--cluster", str(EXAMPLE / "cluster.yaml"),
        "-w", str(EXAMPLE / "workload-return.yaml"), *KUEUE, *SPILL, "--stabilizations", "300",
        "--deschedule-policy", str(EXAMPLE / "descheduler.yaml"),
        "--min-pod-ages", "0,1800", "--evictions-per-node", "1,2", "-o", "json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    knobs = [(r["minPodAgeSeconds"], r["maxEvictionsPerNode"]) for r in runs]
    assert knobs == [(0.0, 1), (0.0, 2), (1800.0, 1), (1800.0, 2)]
    assert all(r["evictions"] == 4 for r in runs)
    by = {(r["minPodAgeSeconds"], r["maxEvictionsPerNode"]): r for r in runs}
    assert by[(0.0, 1)]["gpuHours"] > by[(0.0, 2)]["gpuHours"]


def test_sweep_descheduler_knobs_need_a_policy() -> None:
    res = CliRunner().invoke(app, [
        "spill", "sweep", "--cluster", str(EXAMPLE / "cluster.yaml"),
        "-w", str(EXAMPLE / "workload.yaml"), *SPILL, "--min-pod-ages", "60"])
    assert res.exit_code == 2 and "--deschedule-policy" in res.output
