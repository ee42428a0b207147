"""Admission checks on the live admission controller, against the embedded API server over
HTTP: the same outcome as `kubeberth admit` on the same manifests (the out-of-tree GPUBudget
check loaded with --plugin), Retry and Rejected written as Kueue's workload controller writes
them, Jobs started only once Admitted, and a check no plugin models reported and waited on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.live.harness import Live, wait_for, write
from tests.live.test_admission_e2e import cond, objects, workloads
from typer.testing import CliRunner

from kubeberth.admission.checks import CheckRegistry, in_tree
from kubeberth.api.times import parse_time
from kubeberth.cli.main import app
from kubeberth.live.admission import LiveAdmission

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "admission-check"
BUNDLE = EXAMPLE / "manifests.yaml"
ACTIVE = {"status": {"conditions": [{
    "type": "Active", "status": "True", "reason": "Active",
    "message": "The admission check is active", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}


def project_row(row: dict[str, Any]) -> tuple[Any, ...]:
    """An `admit -o json` row as far as the API shows it."""
    state = row["state"]
    if state not in ("Admitted", "QuotaReserved"):
        state = "Deactivated" if row["reason"] == "DeactivatedDueToAdmissionCheck" else "Queued"
    checks = tuple((c["name"], c["state"], c["message"], c.get("retryCount", 0))
                   for c in row.get("admissionChecks") or [])
    return state, row["flavors"], checks


def project_workload(wl: dict[str, Any]) -> tuple[Any, ...]:
    """A live Workload projected as :func:`project_row` projects `admit`'s rows."""
    status = wl.get("status") or {}
    adm = status.get("admission")
    evicted = cond(wl, "Evicted") or {}
    if adm:
        state = "Admitted" if (cond(wl, "Admitted") or {}).get("status") == "True" \
            else "QuotaReserved"
    elif wl["spec"].get("active") is False and \
            evicted.get("reason") == "DeactivatedDueToAdmissionCheck":
        state = "Deactivated"
    else:
        state = "Queued"
    flavors = {p["name"]: p["flavors"] for p in adm["podSetAssignments"]} if adm else {}
    checks = tuple((c["name"], c["state"], c.get("message", ""), c.get("retryCount", 0))
                   for c in status.get("admissionChecks") or [])
    return state, flavors, checks


def serve_bundle(live: Live, tmp_path: Path, bundle: Path = BUNDLE) -> None:
    """The bundle applied with kubectl; the unmodelled controller's AdmissionCheck is then
    marked Active through its status, as that controller would."""
    live.serve()
    live.kubectl("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\n"
                                           "metadata: {name: kueue-system}\n")
    live.kubectl("apply", "-f", str(bundle))
    live.kubectl("patch", "admissioncheck", "provisioning", "--subresource=status",
                 "--type=merge", "-p", json.dumps(ACTIVE))


def test_live_admission_with_checks_matches_kubeberth_admit(live: Live,
                                                            tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")])}
    offline = subprocess.run(
        [sys.executable, "-m", "kubeberth", "admit", "-f", str(BUNDLE), "--plugin",
         "gpu_budget:GPUBudget", "-o", "json"], capture_output=True, text=True, env=env,
        check=False)
    assert offline.returncode == 0, offline.stderr
    want_doc = json.loads(offline.stdout)
    want = {r["name"]: project_row(r) for r in want_doc["workloads"]}
    # The three outcomes a check can lead to are all in the bundle.
    assert {s for s, _f, _c in want.values()} == {"Admitted", "Deactivated", "QuotaReserved"}
    assert any(c[3] == 1 for _s, _f, checks in want.values() for c in checks)  # one Retry
    serve_bundle(live, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeberth", "admission", "--kubeconfig", str(live.kubeconfig),
         "--metrics-port", "0", "--no-leader-elect", "--plugin", "gpu_budget:GPUBudget"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "/metrics" in banner, banner

        def live_outcome() -> dict[str, tuple[Any, ...]]:
            return {k: project_workload(w) for k, w in workloads(live).items()}

        wait_for(lambda: live_outcome() == want, "the outcome `kubeberth admit` computes")
        base = banner.rsplit(" ", 1)[-1].strip().removesuffix("/metrics")
        text = httpx.get(f"{base}/metrics").text
        assert 'kubeberth_admission_check_not_modelled{admission_check="provisioning",' \
               'controller_name="kueue.x-k8s.io/provisioning-request"} 1.0' in text
        assert 'kueue_evicted_workloads_total{cluster_queue="team-a",reason="AdmissionCheck"}' \
               ' 1.0' in text
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert [u["name"] for u in want_doc["unmodelledAdmissionChecks"]] == ["provisioning"]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> CheckRegistry:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    return in_tree().with_out_of_tree(["gpu_budget:GPUBudget"])


@pytest.fixture
def controllers(live: Live) -> Iterator[list[LiveAdmission]]:
    """Controllers a test starts, stopped (and checked for errors) at teardown."""
    started: list[LiveAdmission] = []
    yield started
    for ctl in started:
        ctl.shutdown()
        assert ctl.error is None, ctl.error


def start(live: Live, started: list[LiveAdmission], registry: CheckRegistry) -> LiveAdmission:
    ctl = LiveAdmission(live.client(), checks=registry)
    ctl.start()
    started.append(ctl)
    wait_for(ctl.ready, "the admission controller's caches")
    return ctl


def more_rounds(live: Live, ctl: LiveAdmission) -> None:
    """An unrelated change (a label on a Workload) makes the controller run two more rounds."""
    for i in range(2):
        before = ctl.rounds
        live.kubectl("label", "workload", "b-train", "-n", "default", f"poke=p{i}",
                     "--overwrite")
        wait_for(lambda before=before: ctl.rounds > before, "another round")


def budget_bundle(tmp_path: Path, **data: str) -> Path:
    """The example bundle with the GPUBudget ConfigMap's data replaced."""
    text = BUNDLE.read_text().replace(
        'data: {maxGPUs: "4", retries: "1", retryAfterSeconds: "0"}',
        "data: {" + ", ".join(f'{k}: "{v}"' for k, v in data.items()) + "}")
    return write(tmp_path / "bundle.yaml", text)


def queued_job(name: str, gpus: int) -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels: {{kueue.x-k8s.io/queue-name: team-a}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def test_retry_releases_the_quota_and_requeues_after_the_delay(
        live: Live, tmp_path: Path, checks: CheckRegistry,
        controllers: list[LiveAdmission]) -> None:
    serve_bundle(live, tmp_path, budget_bundle(tmp_path, maxGPUs="4", retries="1",
                                               retryAfterSeconds="3600"))
    ctl = start(live, controllers, checks)

    def retried(key: str) -> bool:
        wl = workloads(live)[key]
        return (cond(wl, "Evicted") or {}).get("reason") == "AdmissionCheck" and \
            not (wl.get("status") or {}).get("admission")

    wait_for(lambda: retried("default/a-small"), "a-small evicted by its Retry")
    wl = workloads(live)["default/a-small"]
    status = wl["status"]
    assert cond(wl, "QuotaReserved")["status"] == "False"  # type: ignore[index]
    assert cond(wl, "Admitted")["status"] == "False"  # type: ignore[index]
    assert cond(wl, "Evicted")["message"] == \
        'Evicted due to AdmissionCheck in Retry state: "gpu-budget" (the approver is busy)'  # type: ignore[index]
    [check] = status["admissionChecks"]
    assert (check["name"], check["state"], check["retryCount"]) == ("gpu-budget", "Pending", 1)
    assert check["message"] == "Reset to Pending after eviction. Previously: Retry"
    # Requeued no earlier than the Retry's transition + requeueAfterSeconds.
    evicted_at = parse_time(cond(wl, "Evicted")["lastTransitionTime"], "t")  # type: ignore[index]
    requeue_at = parse_time(status["requeueState"]["requeueAt"], "t")
    assert requeue_at - evicted_at >= 3600 - 1
    # The controller wakes for it then (its round ends after the write is seen here).
    wait_for(lambda: ctl._next_wake is not None and ctl._next_wake >= requeue_at - 1,
             "a wake-up at the requeue time")
    assert any(d.action == "evict" and d.workload == "default/a-small" for d in ctl.decisions)


def test_job_starts_only_once_every_check_is_ready(
        live: Live, tmp_path: Path, checks: CheckRegistry,
        controllers: list[LiveAdmission]) -> None:
    serve_bundle(live, tmp_path, budget_bundle(tmp_path, maxGPUs="4", approvalSeconds="3600"))
    live.kubectl("apply", "-f", str(write(tmp_path / "job.yaml", queued_job("train", 2))))
    start(live, controllers, checks)
    wait_for(lambda: (workloads(live).get("default/job-train") or {}).get(
        "status", {}).get("admission") is not None, "the Job's quota reservation")
    wl = workloads(live)["default/job-train"]
    assert cond(wl, "QuotaReserved")["status"] == "True"  # type: ignore[index]
    assert cond(wl, "Admitted") is None
    [check] = wl["status"]["admissionChecks"]
    assert (check["state"], check["message"]) == ("Pending", "waiting for approval")
    assert objects(live, "jobs")["default/train"]["spec"]["suspend"] is True
    # The approval arrives (the ConfigMap now approves at once): Admitted, the Job started.
    live.kubectl("patch", "configmap", "gpu-budget", "-n", "kueue-system", "--type=merge",
                 "-p", json.dumps({"data": {"approvalSeconds": "0"}}))
    wait_for(lambda: objects(live, "jobs")["default/train"]["spec"]["suspend"] is False,
             "the Job started once Admitted")
    wl = workloads(live)["default/job-train"]
    assert cond(wl, "Admitted")["status"] == "True"  # type: ignore[index]
    assert wl["status"]["admissionChecks"][0]["state"] == "Ready"


def test_rejected_check_deactivates_the_workload(
        live: Live, tmp_path: Path, checks: CheckRegistry,
        controllers: list[LiveAdmission]) -> None:
    serve_bundle(live, tmp_path, budget_bundle(tmp_path, maxGPUs="1"))
    ctl = start(live, controllers, checks)
    wait_for(lambda: all(w["spec"].get("active") is False for k, w in workloads(live).items()
                         if k.startswith("default/a-")), "both team-a workloads deactivated")
    for key, gpus in (("default/a-small", 2), ("default/a-large", 8)):
        wl = workloads(live)[key]
        assert not wl["status"].get("admission")
        evicted = cond(wl, "Evicted")
        assert evicted is not None and evicted["reason"] == "DeactivatedDueToAdmissionCheck"
        assert evicted["message"] == ("The workload is deactivated due to AdmissionCheck in "
                                      f'Rejected state: "gpu-budget" (asks {gpus} GPUs, the '
                                      "budget allows 1)")
    assert sorted(d.workload for d in ctl.decisions if d.action == "deactivate") == \
        ["default/a-large", "default/a-small"]
    # Deactivated, they are never admitted again.
    more_rounds(live, ctl)
    assert all(not w["status"].get("admission") for k, w in workloads(live).items()
               if k.startswith("default/a-"))


def test_unmodelled_check_is_reported_and_waited_on_until_its_controller_decides(
        live: Live, tmp_path: Path, controllers: list[LiveAdmission]) -> None:
    # No plugin at all: gpu-budget is unmodelled too; its Active condition is the API's.
    serve_bundle(live, tmp_path)
    live.kubectl("patch", "admissioncheck", "gpu-budget", "--subresource=status",
                 "--type=merge", "-p", json.dumps(ACTIVE))
    ctl = start(live, controllers, in_tree())
    wait_for(lambda: all((w.get("status") or {}).get("admission")
                         for k, w in workloads(live).items() if k != "default/a-large"),
             "quota reserved for a-small and b-train")
    more_rounds(live, ctl)
    wls = workloads(live)
    for key in ("default/a-small", "default/b-train"):
        assert project_workload(wls[key])[0] == "QuotaReserved"
        assert [c["state"] for c in wls[key]["status"]["admissionChecks"]] == ["Pending"]
    text = ctl.metrics.exposition().decode()
    for name, controller in (("gpu-budget", "example.com/gpu-budget"),
                             ("provisioning", "kueue.x-k8s.io/provisioning-request")):
        assert (f'kubeberth_admission_check_not_modelled{{admission_check="{name}",'
                f'controller_name="{controller}"}} 1.0') in text
    ctl.shutdown()  # flushes the Events
    wait_for(lambda: any(e.get("reason") == "AdmissionCheckNotModelled" and
                         e["involvedObject"]["name"] == "team-b"
                         for e in objects(live, "events").values()),
             "the Warning Event on team-b")
    # The check's own controller marks it Ready on b-train: Admitted.
    ctl = start(live, controllers, in_tree())
    b = workloads(live)["default/b-train"]
    updates = [{"name": "main", "labels": {"provisioned": "yes"}}]
    ready = [{**b["status"]["admissionChecks"][0], "state": "Ready", "message": "provisioned",
              "podSetUpdates": updates}]
    live.kubectl("patch", "workload", "b-train", "-n", "default", "--subresource=status",
                 "--type=merge", "-p", json.dumps({"status": {"admissionChecks": ready}}))
    wait_for(lambda: (cond(workloads(live)["default/b-train"], "Admitted") or {}).get(
        "status") == "True", "b-train Admitted once its check is Ready")
    # What kubeberth does not model of the check state is kept as its controller wrote it.
    [check] = workloads(live)["default/b-train"]["status"]["admissionChecks"]
    assert (check["state"], check["message"], check["podSetUpdates"]) == \
        ("Ready", "provisioned", updates)


def test_a_missing_admission_check_makes_the_cluster_queue_inactive(
        live: Live, tmp_path: Path, checks: CheckRegistry,
        controllers: list[LiveAdmission]) -> None:
    text = BUNDLE.read_text().replace("admissionChecks: [{name: provisioning}]",
                                      "admissionChecks: [{name: absent}]")
    serve_bundle(live, tmp_path, write(tmp_path / "bundle.yaml", text))
    start(live, controllers, checks)
    message = "ClusterQueue team-b is inactive: references missing AdmissionCheck(s): absent"
    wait_for(lambda: (cond(workloads(live)["default/b-train"], "QuotaReserved") or {}).get(
        "message") == message, "b-train pending on the inactive ClusterQueue")
    wait_for(lambda: (cond(objects(live, "clusterqueues")["team-b"], "Active") or {}).get(
        "reason") == "AdmissionCheckNotFound", "team-b Active=False")


def test_admission_cli_plugin_flag_rejects_a_bad_plugin(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["admission", "--plugin", "no_such_module:X",
                                      "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert "no_such_module" in result.output
