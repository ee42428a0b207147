"""The live admission controller against the embedded API server over HTTP: the same
admissions, flavors and preemptions as `kubeberth admit`, Jobs suspended until admitted and then
scheduled by the live scheduler on their flavor's nodes, preemption suspending the victim,
restarts that never admit twice, dry runs that write nothing, and Kueue's metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from tests.live.harness import Live, node, wait_for, write
from typer.testing import CliRunner

from kubeberth.apiserver import ManualClock
from kubeberth.cli.admit import admit, contract
from kubeberth.cli.main import app
from kubeberth.config.kueue import KueueConfiguration, load_kueue
from kubeberth.config.manifests import load_manifests
from kubeberth.live.admission import LiveAdmission

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

KUEUE = """\
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: t4}
spec:
  nodeLabels: {gpu: t4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: gpus
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 4}
    - name: t4
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: gpus
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 0, borrowingLimit: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-b}
spec: {clusterQueue: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
"""

CLUSTER = (node("a100-0", 4, 64, "{gpu: a100}") + node("t4-0", 2, 64, "{gpu: t4}"))


def job(name: str, ns: str, gpus: int, parallelism: int = 1, priority: str = "",
        duration: int = 0) -> str:
    prio = f", kueue.x-k8s.io/priority-class: {priority}" if priority else ""
    ann = (f"\n      annotations: {{kubeberth.io/duration-seconds: \"{duration}\"}}"
           if duration else "")
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {ns}
  labels: {{kueue.x-k8s.io/queue-name: main{prio}}}
spec:
  parallelism: {parallelism}
  completions: {parallelism}
  template:
    metadata:{ann or " {}"}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}
---
"""


def queued_pod(name: str, ns: str, gpus: int) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels: {{kueue.x-k8s.io/queue-name: main}}
spec:
  containers:
  - name: c
    image: busybox
    resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}
---
"""


class Ctl:
    """Admission controllers started in a test, stopped at teardown."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.running: list[tuple[LiveAdmission, threading.Thread, list[BaseException]]] = []

    def start(self, *, dry_run: bool = False, config: KueueConfiguration | None = None,
              watch_timeout: int = 300, client: Client | None = None) -> LiveAdmission:
        ctl = LiveAdmission(client or self.live.client(), dry_run=dry_run, config=config,
                            watch_timeout=watch_timeout)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ctl.run()
            except BaseException as err:
                errors.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.running.append((ctl, thread, errors))
        wait_for(ctl.ready, "the admission controller's caches to sync")
        return ctl

    def stop(self, ctl: LiveAdmission) -> None:
        for c, thread, errors in self.running:
            if c is ctl:
                c.stop.set()
                thread.join(timeout=10)
                assert not thread.is_alive()
                assert not errors, errors

    def close(self) -> None:
        for c, thread, _errors in self.running:
            c.stop.set()
            thread.join(timeout=10)
        for _c, _thread, errors in self.running:
            assert not errors, errors


@pytest.fixture
def ctl(live: Live) -> Iterator[Ctl]:
    c = Ctl(live)
    try:
        yield c
    finally:
        c.close()


def objects(live: Live, plural: str) -> dict[str, dict[str, Any]]:
    srv = live.server
    assert srv is not None
    api = srv.api

    def read() -> dict[str, dict[str, Any]]:
        rt = next(r for r in api.registry.resources if r.plural == plural)
        return {(f"{o['metadata']['namespace']}/" if o["metadata"].get("namespace") else "")
                + o["metadata"]["name"]: o for o in api.store.items(rt)}

    return srv.call(read)


def workloads(live: Live) -> dict[str, dict[str, Any]]:
    return objects(live, "workloads")


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype), None)


def admitted(live: Live) -> dict[str, dict[str, dict[str, str]]]:
    """workload -> podSet -> resource -> flavor, for every admitted, not evicted Workload."""
    out = {}
    for key, wl in workloads(live).items():
        adm = (wl.get("status") or {}).get("admission")
        ev = cond(wl, "Evicted")
        if adm and not (ev and ev["status"] == "True"):
            out[key] = {p["name"]: p["flavors"] for p in adm["podSetAssignments"]}
    return out


def expected(*paths: Path) -> dict[str, Any]:
    return contract(admit(load_kueue(load_manifests([str(p) for p in paths])), 0.0, None))


def test_kubectl_applied_jobs_are_admitted_as_kubeberth_admit_says(live: Live, ctl: Ctl,
                                                                   tmp_path: Path) -> None:
    kueue = write(tmp_path / "kueue.yaml", KUEUE)
    jobs = write(tmp_path / "jobs.yaml", job("a1", "team-a", 2) + job("a2", "team-a", 2)
                 + job("a3", "team-a", 2) + job("a4", "team-a", 1) + job("b1", "team-b", 1)
                 + job("b2", "team-b", 8))
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(kueue))
    live.kubectl("apply", "-f", str(jobs))
    # Kueue's webhook (emulated by the server) suspends every queued Job.
    assert all(j["spec"]["suspend"] for j in objects(live, "jobs").values())
    c = ctl.start()
    want = expected(kueue, jobs)
    admitted_rows = {r["name"]: r["flavors"] for r in want["workloads"]
                     if r["state"] == "Admitted"}
    assert len(admitted_rows) == 3 and any(r["state"] != "Admitted" for r in want["workloads"])
    wait_for(lambda: admitted(live) == admitted_rows, "the admissions `admit` computes")
    pending = {r["name"]: r["reason"] for r in want["workloads"]
               if r["state"] not in ("Admitted", "Preempted")}
    # The same preemptions, in the same order, with Kueue's conditions on the victims.
    preempted = [(p["workload"], f"{p['by']} {p['reason']}") for p in want["preempted"]]
    assert preempted == [("team-b/job-b1", "team-a/job-a3 InCohortReclamation")]
    assert [(d.workload, d.detail) for d in c.decisions if d.action == "preempt"] == preempted
    victim = workloads(live)["team-b/job-b1"]
    assert cond(victim, "Preempted")["reason"] == "InCohortReclamation"  # type: ignore[index]
    assert cond(victim, "Evicted")["reason"] == "Preempted"  # type: ignore[index]
    wait_for(lambda: all((cond(workloads(live)[k], "QuotaReserved") or {}).get("reason") == v
                         for k, v in pending.items()), "the pending reasons")
    wls = workloads(live)
    for key in admitted_rows:
        wl = wls[key]
        assert cond(wl, "QuotaReserved")["status"] == "True"  # type: ignore[index]
        assert cond(wl, "Admitted")["reason"] == "Admitted"  # type: ignore[index]
        ref = wl["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "Job" and key.endswith("job-" + ref["name"])
    # Admitted Jobs are started with the flavor's node labels; the others stay suspended.
    jobs_now = objects(live, "jobs")
    for key, flavors in admitted_rows.items():
        ns, name = key.split("/")
        j = jobs_now[f"{ns}/{name.removeprefix('job-')}"]
        wait_for(lambda j=j: not objects(live, "jobs")[_key(j)]["spec"]["suspend"], "start")
        j = objects(live, "jobs")[_key(j)]
        selector = j["spec"]["template"]["spec"]["nodeSelector"]
        assert selector == {"gpu": flavors["main"]["nvidia.com/gpu"]}
    for key in pending:
        ns, name = key.split("/")
        assert jobs_now[f"{ns}/{name.removeprefix('job-')}"]["spec"]["suspend"] is True
    # Queue status as Kueue's queue controller reports it.
    wait_for(lambda: (objects(live, "clusterqueues")["team-a"].get("status") or {}).get(
        "admittedWorkloads") == sum(1 for k in admitted_rows if k.startswith("team-a/")),
        "ClusterQueue status")
    assert c.conflicts >= 0


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
