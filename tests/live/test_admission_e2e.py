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

from kubeberth.admission.model import KueueConfiguration, load_kueue
from kubeberth.cli.admit import admit, contract
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.live.admission import LiveAdmission
from kubeberth.live.leader import LeaderElector, LeaseTiming

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GROUP = "kueue.x-k8s.io"

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


def queued_pod(name: str, ns: str, gpus: int, group: str = "") -> str:
    """A pod queued in the namespace's LocalQueue main; with ``group``, joining that native
    PodGroup."""
    joins = f"\n  schedulingGroup: {{podGroupName: {group}}}" if group else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels: {{kueue.x-k8s.io/queue-name: main}}
spec:{joins}
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
              watch_timeout: int = 300, client: Client | None = None,
              elector: LeaderElector | None = None, version: str | None = None
              ) -> LiveAdmission:
        ctl = LiveAdmission(client or self.live.client(), dry_run=dry_run, config=config,
                            watch_timeout=watch_timeout, elector=elector, version=version)
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
        # Kueue's kind first where scheduling.k8s.io serves the same plural (workloads).
        rt = next(r for r in sorted(api.registry.resources, key=lambda r: r.group != GROUP)
                  if r.plural == plural)
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


# team-a with 2 a100 GPUs and no other flavor: a higher-priority Job must preempt.
SMALL_KUEUE = KUEUE.replace("nominalQuota: 4}", "nominalQuota: 2}").replace("""    - name: t4
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 2}
""", "")


def test_job_stays_suspended_until_admitted_then_runs_on_its_flavor(live: Live, ctl: Ctl,
                                                                    tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    sched = live.scheduler()
    c = ctl.start()
    # Two 2-pod Jobs of 2 GPUs each: the first takes a100 (4 GPUs), the second t4 (2 GPUs)
    # cannot hold 4, so it waits; the first's pods run on the a100 node.
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml",
                                          job("first", "team-a", 2, 2, duration=30)
                                          + job("second", "team-a", 2, 2, duration=30))))
    wait_for(lambda: "team-a/job-first" in admitted(live), "the first Job's admission")
    wait_for(lambda: sum(1 for k, n in live.placement().items() if n) == 2, "its pods bound")
    placement = live.placement()
    assert {n for n in placement.values() if n} == {"a100-0"}
    assert all(k.startswith("team-a/first-") for k, n in placement.items())
    second = objects(live, "jobs")["team-a/second"]
    assert second["spec"]["suspend"] is True and not second["status"].get("active")
    wl = workloads(live)["team-a/job-second"]
    assert cond(wl, "QuotaReserved")["reason"] == "WaitingForQuota"  # type: ignore[index]
    # The first Job completes: its Workload is Finished, its quota released, the second runs.
    srv = live.server
    assert srv is not None
    srv.advance(31)
    wait_for(lambda: (cond(workloads(live)["team-a/job-first"], "Finished") or {}).get(
        "reason") == "Succeeded", "the first Workload to finish")
    wait_for(lambda: "team-a/job-second" in admitted(live), "the second Job's admission")
    wait_for(lambda: sum(1 for k, n in live.placement().items()
                         if k.startswith("team-a/second-") and n) == 2, "its pods bound")
    assert {n for k, n in live.placement().items() if k.startswith("team-a/second-")} == \
        {"a100-0"}
    assert sched.decisions and [d.action for d in c.decisions].count("admit") == 2


def test_preemption_suspends_the_victim_and_requeues_it(live: Live, ctl: Ctl,
                                                        tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", SMALL_KUEUE)))
    live.scheduler()
    c = ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "low.yaml",
                                          job("low", "team-a", 2, 1, priority="low"))))
    wait_for(lambda: "team-a/job-low" in admitted(live), "the low Job's admission")
    wait_for(lambda: any(k.startswith("team-a/low-") and n for k, n in live.placement().items()),
             "the low Job's pod to run")
    live.kubectl("apply", "-f", str(write(tmp_path / "high.yaml",
                                          job("high", "team-a", 1, 2, priority="high"))))
    wait_for(lambda: "team-a/job-high" in admitted(live), "the high Job's admission")
    low = workloads(live)["team-a/job-low"]
    assert cond(low, "Preempted")["reason"] == "InClusterQueue"  # type: ignore[index]
    assert cond(low, "Evicted")["reason"] == "Preempted"  # type: ignore[index]
    assert not (low.get("status") or {}).get("admission")  # released once its Job stopped
    assert cond(low, "QuotaReserved")["status"] == "False"  # type: ignore[index]
    job_low = objects(live, "jobs")["team-a/low"]
    assert job_low["spec"]["suspend"] is True
    assert "nodeSelector" not in job_low["spec"]["template"]["spec"]
    assert not any(k.startswith("team-a/low-") for k in live.pods())
    assert [d.detail for d in c.decisions if d.action == "preempt"] == \
        ["team-a/job-high InClusterQueue"]
    wait_for(lambda: sum(1 for k, n in live.placement().items()
                         if k.startswith("team-a/high-") and n) == 2, "the high pods bound")
    text = c.metrics.exposition().decode()
    assert 'kueue_evicted_workloads_total{cluster_queue="team-a",reason="Preempted"} 1.0' in text
    assert 'kueue_preempted_workloads_total{preempting_cluster_queue="team-a",' \
           'reason="InClusterQueue"} 1.0' in text


def test_restart_reads_admissions_back_and_never_admits_twice(live: Live, ctl: Ctl,
                                                              tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    first = ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml",
                                          job("a", "team-a", 4) + job("b", "team-a", 2))))
    wait_for(lambda: len(admitted(live)) == 2, "two admissions")
    before = {k: wl["metadata"]["resourceVersion"] for k, wl in workloads(live).items()}
    ctl.stop(first)
    # A new Job arrives while no controller runs; the restarted one admits only it, where the
    # quota read back from status.admission leaves room (t4 is taken, a100 is full).
    live.kubectl("apply", "-f", str(write(tmp_path / "more.yaml", job("c", "team-a", 2))))
    second = ctl.start()
    wait_for(lambda: "team-a/job-c" in workloads(live) and cond(
        workloads(live)["team-a/job-c"], "QuotaReserved") is not None, "the new Workload")
    assert [d.workload for d in second.decisions if d.action == "admit"] == []
    after = workloads(live)
    assert {k: after[k]["metadata"]["resourceVersion"] for k in before} == before
    assert cond(after["team-a/job-c"], "QuotaReserved")["status"] == "False"  # type: ignore
    text = second.metrics.exposition().decode()
    assert 'kueue_cluster_queue_resource_usage{cluster_queue="team-a",cohort="gpus",' \
           'flavor="a100",resource="nvidia.com/gpu"} 4.0' in text
    assert 'kueue_pending_workloads{cluster_queue="team-a",status="inadmissible"} 1.0' in text


def test_dry_run_writes_nothing(live: Live, ctl: Ctl, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    kueue = write(tmp_path / "kueue.yaml", KUEUE)
    jobs = write(tmp_path / "jobs.yaml", job("a", "team-a", 4) + job("b", "team-b", 1)
                 + queued_pod("nb", "team-a", 1))
    live.kubectl("apply", "-f", str(kueue))
    live.kubectl("apply", "-f", str(jobs))
    snapshot = {p: objects(live, p) for p in ("workloads", "jobs", "pods", "clusterqueues",
                                              "localqueues", "events")}
    c = ctl.start(dry_run=True)
    wait_for(lambda: any(d.action == "admit" for d in c.decisions), "a decision")
    rounds = c.rounds
    live.kubectl("label", "namespace", "team-b", "touched=yes")  # an event: another round
    wait_for(lambda: c.rounds > rounds, "another round")
    snapshot["namespaces"] = objects(live, "namespaces")
    assert {p: objects(live, p) for p in snapshot} == snapshot
    assert workloads(live) == {}
    want = expected(kueue, jobs)
    assert sorted(d.workload for d in c.decisions if d.action == "admit") == \
        sorted(r["name"] for r in want["workloads"] if r["state"] == "Admitted") == \
        ["team-a/job-a", "team-a/pod-nb"]


def test_queued_pod_is_gated_then_ungated_onto_its_flavor(live: Live, ctl: Ctl,
                                                          tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    live.kubectl("apply", "-f", str(write(tmp_path / "pod.yaml",
                                          queued_pod("nb", "team-b", 1))))
    pod = live.pods()["team-b/nb"]
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    live.scheduler()
    ctl.start()
    wait_for(lambda: live.placement().get("team-b/nb") == "a100-0", "the pod to run on a100")
    pod = live.pods()["team-b/nb"]
    assert not pod["spec"].get("schedulingGates")
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    wl = workloads(live)["team-b/pod-nb"]
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert admitted(live) == {"team-b/pod-nb": {"main": {"cpu": "a100",
                                                         "nvidia.com/gpu": "a100"}}}
    events = [e for e in objects(live, "events").values()
              if e["involvedObject"].get("kind") == "Workload"]
    assert {"QuotaReserved", "Admitted"} <= {e["reason"] for e in events}


def test_status_conflict_rereads_and_retries(live: Live, ctl: Ctl, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    c = ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml", job("a", "team-b", 8))))
    wait_for(lambda: cond(workloads(live).get("team-b/job-a", {}), "QuotaReserved")
             is not None, "the pending condition")
    c.stop.set()
    wait_for(lambda: not any(t.is_alive() for cc, t, _ in ctl.running if cc is c), "stop")
    stale = copy_of(c.cache["Workload"]["team-b/job-a"])
    live.kubectl("label", "workloads.kueue.x-k8s.io", "-n", "team-b", "job-a", "touched=yes")
    c.cache["Workload"]["team-b/job-a"] = stale
    written = c._write_status("team-b/job-a", lambda cur: {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Test", "message": "m"}]})
    assert written is not None and c.conflicts == 1
    assert written["metadata"]["labels"]["touched"] == "yes"


def copy_of(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(obj))


def test_cli_bad_config_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path / "kueue-config.yaml", """\
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: true
  preemptionStrategies: [Sometimes]
""")
    result = CliRunner().invoke(app, ["admission", "--config", str(bad), "--kubeconfig",
                                      str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "preemptionStrategies" in result.output
    notconfig = write(tmp_path / "not.yaml", KUEUE)
    result = CliRunner().invoke(app, ["admission", "--config", str(notconfig)])
    assert result.exit_code == 2 and "Configuration" in result.output
    result = CliRunner().invoke(app, ["admission", "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code == 2 and "kubeconfig" in result.output


def test_watch_gone_relists_and_admission_continues(live: Live, ctl: Ctl,
                                                    tmp_path: Path) -> None:
    srv = live.serve(write(tmp_path / "cluster.yaml", CLUSTER), history=5)
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    c = ctl.start(watch_timeout=1)
    live.kubectl("apply", "-f", str(write(tmp_path / "a.yaml", job("a", "team-a", 1))))
    wait_for(lambda: "team-a/job-a" in admitted(live), "the first admission")
    # Compact every watch history: a watch resuming from before it gets 410 Gone and its
    # informer re-lists; admission goes on from the re-listed cache.
    srv.call(lambda: srv.api.store.compact())
    wait_for(lambda: sum(inf.stats.watch_restarts for inf in c.informers) > 0,
             "watches to end (1 s server timeout) and resume")
    live.kubectl("apply", "-f", str(write(tmp_path / "b.yaml", job("b", "team-a", 1))))
    wait_for(lambda: "team-a/job-b" in admitted(live), "an admission after the re-list")
    assert [d.workload for d in c.decisions if d.action == "admit"] == \
        ["team-a/job-a", "team-a/job-b"]


def test_bundled_example_matches_kubeberth_admit(live: Live, ctl: Ctl) -> None:
    """examples/kueue/admission.yaml: an admitted Workload (its status written as Kueue wrote
    it), a Job reclaiming lent GPUs and a plain pod; the Configuration goes to --config."""
    example = EXAMPLES / "kueue" / "admission.yaml"
    srv = live.serve(example)
    manifests = load_manifests([str(example)])
    doc = next(d for d in manifests.other if d.kind == "Workload")
    api = srv.api

    def write_status() -> None:
        rt = api.registry.by_kind(doc.api_version, "Workload")
        assert rt is not None
        cur = api.get(rt, "team-b", "b-train")
        api.update(rt, "team-b", "b-train", {**cur, "status": doc.data["status"]}, "status")

    srv.call(write_status)
    config = load_kueue(manifests).config
    c = ctl.start(config=config)
    want = expected(example)
    rows = {r["name"]: r for r in want["workloads"]}
    admitted_rows = {k: r["flavors"] for k, r in rows.items() if r["state"] == "Admitted"}
    wait_for(lambda: admitted(live) == admitted_rows, "the admissions `admit` computes")
    assert [(d.workload, d.detail) for d in c.decisions if d.action == "preempt"] == \
        [(p["workload"], f"{p['by']} {p['reason']}") for p in want["preempted"]]
    wls = workloads(live)
    victim = wls["team-b/b-train"]
    assert cond(victim, "Preempted")["reason"] == rows["team-b/b-train"]["reason"]  # type: ignore
    assert not victim["status"].get("admission")
    for key, row in rows.items():
        if row["state"] == "Pending":
            wait_for(lambda key=key, row=row: (cond(workloads(live)[key], "QuotaReserved")
                                               or {}).get("reason") == row["reason"],
                     f"{key}'s pending reason")


def test_invalid_objects_are_left_out_until_fixed(live: Live, ctl: Ctl, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    c = ctl.start()
    # A Job naming a WorkloadPriorityClass that does not exist gets no Workload (the loader
    # `admit` uses rejects it); the other Job is admitted.
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml",
                                          job("ok", "team-a", 1)
                                          + job("orphan", "team-a", 1, priority="urgent"))))
    wait_for(lambda: "team-a/job-ok" in admitted(live), "the valid Job's admission")
    assert "team-a/job-orphan" not in workloads(live)
    assert c.healthy()
    # Once the class exists, the Job gets its Workload (with the class's priority), admitted.
    live.kubectl("apply", "-f", str(write(tmp_path / "wpc.yaml", """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 5000
""")))
    wait_for(lambda: "team-a/job-orphan" in admitted(live), "the fixed Job's admission")
    wl = workloads(live)["team-a/job-orphan"]
    assert wl["spec"]["priority"] == 5000
    assert wl["spec"]["priorityClassName"] == "urgent"
    assert wl["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"


def test_only_the_leader_admits_and_a_standby_takes_over(live: Live, ctl: Ctl,
                                                         tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))

    def candidate(identity: str) -> LiveAdmission:
        client = live.client()
        elector = LeaderElector(client, "kubeberth-admission", "kube-system", identity,
                                timing=LeaseTiming(1.0, 0.6, 0.05))
        return ctl.start(client=client, elector=elector)

    one = candidate("one")
    assert one.elector is not None
    wait_for(one.elector.leading.is_set, "the first candidate to lead")
    two = candidate("two")
    live.kubectl("apply", "-f", str(write(tmp_path / "a.yaml", job("a", "team-a", 1))))
    wait_for(lambda: "team-a/job-a" in admitted(live), "the leader's admission")
    assert two.decisions == [] and two.elector is not None
    assert not two.elector.leading.is_set()
    # The leader stops (releasing the Lease); the standby leads and admits what comes next,
    # without touching what the first admitted.
    ctl.stop(one)
    wait_for(two.elector.leading.is_set, "the standby to take over", timeout=10)
    live.kubectl("apply", "-f", str(write(tmp_path / "b.yaml", job("b", "team-a", 1))))
    wait_for(lambda: "team-a/job-b" in admitted(live), "the new leader's admission")
    assert [d.workload for d in two.decisions if d.action == "admit"] == ["team-a/job-b"]



def test_a_v1beta2_workload_is_admitted(live: Live, ctl: Ctl, tmp_path: Path) -> None:
    """A Workload (and a ClusterQueue) written in v1beta2 by kubectl: read through the
    served version, admitted, its status written."""
    kueue = KUEUE.replace("""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: gpus""", """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: gpus""")
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", kueue)))
    live.kubectl("apply", "-f", str(write(tmp_path / "wl.yaml", """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: by-hand, namespace: team-b}
spec:
  queueName: main
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}
""")))
    ctl.start()
    # team-b has no a100 quota of its own: it borrows 2 GPUs from its cohort (cohortName).
    wait_for(lambda: admitted(live) == {"team-b/by-hand": {"main": {
        "cpu": "a100", "nvidia.com/gpu": "a100"}}}, "the hand-written Workload's admission")
    usage = [{"name": "a100", "resources": [
        {"name": "cpu", "total": "2", "borrowed": "0"},
        {"name": "nvidia.com/gpu", "total": "2", "borrowed": "2"}]}]
    wait_for(lambda: (objects(live, "clusterqueues")["team-b"].get("status") or {}).get(
        "flavorsUsage") == usage, "team-b's status to show the borrowed GPUs")
    status = objects(live, "clusterqueues")["team-b"]["status"]
    assert (status["admittedWorkloads"], status["pendingWorkloads"]) == (1, 0)
    # LocalQueue statuses are written after the ClusterQueues' in the same pass.
    wait_for(lambda: (objects(live, "localqueues")["team-b/main"].get("status") or {}).get(
        "admittedWorkloads") == 1, "team-b/main's status to count the admitted Workload")


def group_pod(name: str, gpus: int, total: int, image: str = "busybox") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/queue-name: main, kueue.x-k8s.io/pod-group-name: g}}
  annotations: {{kueue.x-k8s.io/pod-group-total-count: "{total}"}}
spec:
  containers:
  - name: c
    image: {image}
    resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}
---
"""


def test_pod_group_becomes_one_workload_once_complete(live: Live, ctl: Ctl,
                                                      tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    live.scheduler()
    c = ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "p0.yaml", group_pod("g-0", 1, 3))))
    wait_for(lambda: c.rounds > 0, "a round")
    assert workloads(live) == {}  # Kueue waits for every pod of the group
    # Two roles (different images): two podSets in one Workload, owned by all three pods.
    pods = group_pod("g-1", 1, 3) + group_pod("g-2", 2, 3, image="trainer")
    live.kubectl("apply", "-f", str(write(tmp_path / "rest.yaml", pods)))
    wait_for(lambda: "team-a/g" in admitted(live), "the group's admission")
    wl = workloads(live)["team-a/g"]
    assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == \
        ["g-0", "g-1", "g-2"]
    assert sorted(p["count"] for p in wl["spec"]["podSets"]) == [1, 2]
    wait_for(lambda: all(live.placement().get(f"team-a/g-{i}") for i in range(3)),
             "every pod of the group to run")
    for i in range(3):
        pod = live.pods()[f"team-a/g-{i}"]
        assert not pod["spec"].get("schedulingGates")
        assert pod["spec"]["nodeSelector"]["gpu"] in ("a100", "t4")
    flavors = admitted(live)["team-a/g"]
    want = expected(write(tmp_path / "all.yaml", KUEUE + group_pod("g-0", 1, 3) + pods))
    # PodSets are named by a hash of the pod's shape, which the API server's pod defaults
    # change (priority, preemptionPolicy): compare the flavors per podSet, not the names.
    assert [r["name"] for r in want["workloads"]] == ["team-a/g"]
    assert sorted(map(str, want["workloads"][0]["flavors"].values())) == \
        sorted(map(str, flavors.values()))


NATIVE_GANG = """apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: team-a}
spec:
  schedulingPolicy: {gang: {minCount: 3}}
---
"""


def test_native_pod_group_becomes_one_workload_and_binds_as_a_gang(live: Live, ctl: Ctl,
                                                                   tmp_path: Path) -> None:
    """KEP-13150's proposal: queue-labelled pods joining a native gang PodGroup are one
    Workload once the group has minCount pods; admission ungates them all and the live
    scheduler binds the gang."""
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER),
               runtime_config="scheduling.k8s.io/v1beta1=true")
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    live.scheduler()
    c = ctl.start()
    first = NATIVE_GANG + "".join(queued_pod(f"train-{i}", "team-a", 1, "train")
                                  for i in range(2))
    live.kubectl("apply", "-f", str(write(tmp_path / "first.yaml", first)))
    wait_for(lambda: c.rounds > 0 and len(live.pods()) == 2, "a round with the two pods")
    assert workloads(live) == {}  # below the gang's minCount: no Workload, pods stay gated
    assert all(p["spec"].get("schedulingGates") for p in live.pods().values())
    live.kubectl("apply", "-f", str(write(tmp_path / "last.yaml",
                                          queued_pod("train-2", "team-a", 1, "train"))))
    wait_for(lambda: "team-a/train" in admitted(live), "the native group's admission")
    assert list(workloads(live)) == ["team-a/train"]
    wl = workloads(live)["team-a/train"]
    assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == \
        ["train-0", "train-1", "train-2"]
    assert [p["count"] for p in wl["spec"]["podSets"]] == [3]
    wait_for(lambda: all(live.placement().get(f"team-a/train-{i}") for i in range(3)),
             "every pod of the gang to bind")
    for i in range(3):
        pod = live.pods()[f"team-a/train-{i}"]
        assert not pod["spec"].get("schedulingGates")
        assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    want = expected(write(tmp_path / "all.yaml",
                          KUEUE + first + queued_pod("train-2", "team-a", 1, "train")))
    assert [r["name"] for r in want["workloads"]] == ["team-a/train"]
    assert list(want["workloads"][0]["flavors"].values()) == \
        list(admitted(live)["team-a/train"].values())


def test_cli_serves_health_and_kueue_metrics_and_stops_on_sigterm(live: Live,
                                                                  tmp_path: Path) -> None:
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    import httpx

    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml", job("a", "team-a", 1))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeberth", "admission", "--kubeconfig", str(live.kubeconfig),
         "--metrics-port", "0", "--no-leader-elect"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", banner)
        assert found, banner
        base = f"http://127.0.0.1:{found[1]}"
        wait_for(lambda: "team-a/job-a" in admitted(live), "the CLI controller's admission")
        wait_for(lambda: httpx.get(f"{base}/readyz").status_code == 200, "/readyz")
        assert httpx.get(f"{base}/healthz").text == "ok"
        text = httpx.get(f"{base}/metrics").text
        assert 'kueue_admitted_workloads_total{cluster_queue="team-a"} 1.0' in text
        assert 'kueue_admission_attempts_total{result="success"}' in text
        assert 'kueue_cluster_queue_nominal_quota{cluster_queue="team-a",cohort="gpus",' \
               'flavor="a100",resource="nvidia.com/gpu"} 4.0' in text
        assert 'kueue_cluster_queue_status{cluster_queue="team-a",status="active"} 1.0' in text
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.returncode == 0
        rest = proc.stdout.read()
        assert "kubeberth admission stopped" in rest
        assert "admitted team-a/job-a in ClusterQueue team-a" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_failed_job_finishes_its_workload_and_releases_quota(live: Live, ctl: Ctl,
                                                             tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", SMALL_KUEUE)))
    c = ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml",
                                          job("first", "team-a", 2) + job("second", "team-a", 2))))
    wait_for(lambda: "team-a/job-first" in admitted(live), "the first admission")
    assert "team-a/job-second" not in admitted(live)
    # Without a scheduler, mark the Job failed as the Job controller would.
    srv = live.server
    assert srv is not None
    api = srv.api

    def fail_job() -> None:
        rt = api.registry.by_kind("batch/v1", "Job")
        assert rt is not None
        cur = api.get(rt, "team-a", "first")
        status = {**cur["status"], "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"}]}
        api.update(rt, "team-a", "first", {**cur, "status": status}, "status")

    srv.call(fail_job)
    wait_for(lambda: (cond(workloads(live)["team-a/job-first"], "Finished") or {}).get(
        "reason") == "Failed", "the Workload to finish")
    finished = cond(workloads(live)["team-a/job-first"], "Finished")
    assert finished is not None
    assert finished["message"] == "Job has reached the specified backoff limit"
    wait_for(lambda: "team-a/job-second" in admitted(live), "the freed quota to be used")
    assert [d.workload for d in c.decisions if d.action == "finish"] == ["team-a/job-first"]


def test_queue_status_reports_an_inactive_cluster_queue(live: Live, ctl: Ctl,
                                                        tmp_path: Path) -> None:
    missing = KUEUE.replace("    - name: t4\n", "    - name: h100\n", 1)
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", missing)))
    ctl.start()
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml", job("a", "team-a", 1))))
    wait_for(lambda: cond(workloads(live).get("team-a/job-a", {}), "QuotaReserved")
             is not None, "the pending condition")
    qr = cond(workloads(live)["team-a/job-a"], "QuotaReserved")
    assert qr is not None and qr["status"] == "False" and qr["reason"] == "Inadmissible"
    assert "h100" in qr["message"]
    wait_for(lambda: (cond(objects(live, "clusterqueues")["team-a"], "Active") or {}).get(
        "status") == "False", "team-a's Active condition")
    active = cond(objects(live, "clusterqueues")["team-a"], "Active")
    assert active is not None and "h100" in active["message"]
    assert objects(live, "clusterqueues")["team-a"]["status"]["pendingWorkloads"] == 1
    assert objects(live, "jobs")["team-a/a"]["spec"]["suspend"] is True


def partial_job(name: str, ns: str, gpus: int, parallelism: int, minimum: int) -> str:
    return job(name, ns, gpus, parallelism).replace(
        "  labels:", f"  annotations: {{kueue.x-k8s.io/job-min-parallelism: \"{minimum}\"}}\n"
                     "  labels:", 1)


STRICT = KUEUE.replace("""  cohort: gpus
  namespaceSelector: {}
  resourceGroups:""", """  cohort: gpus
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:""")
SELECTIVE = KUEUE.replace("""metadata: {name: team-b}
spec:
  cohort: gpus
  namespaceSelector: {}""", """metadata: {name: team-b}
spec:
  cohort: gpus
  namespaceSelector: {matchLabels: {tier: gold}}""")
FAIR = """apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true}
---
""" + KUEUE.replace("reclaimWithinCohort: Any}", "reclaimWithinCohort: Any, "
                    "borrowWithinCohort: {policy: LowerPriority}}")

SCENARIOS = {
    # team-b's big head blocks its StrictFIFO queue; the small one behind it waits.
    "strict-fifo": (STRICT, job("b-big", "team-b", 8) + job("b-small", "team-b", 1)
                    + job("a1", "team-a", 3)),
    # team-b's namespace is not selected by its ClusterQueue.
    "namespace-selector": (SELECTIVE, job("b1", "team-b", 1) + job("a1", "team-a", 2)),
    # Partial admission: 4 pods of 1 GPU with a minimum of 2, where 2 t4 GPUs are left.
    "partial-admission": (KUEUE, job("a-big", "team-a", 4) + partial_job("a-part", "team-a",
                                                                        1, 4, 2)),
    # Fair sharing between the two queues of the cohort.
    "fair-sharing": (FAIR, job("a1", "team-a", 2, priority="low")
                     + job("b1", "team-b", 2) + job("b2", "team-b", 2, priority="high")),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_decisions_as_admit(live: Live, ctl: Ctl, tmp_path: Path, scenario: str) -> None:
    queues, jobs_text = SCENARIOS[scenario]
    manifests = write(tmp_path / "all.yaml", queues + jobs_text)
    served = write(tmp_path / "served.yaml", "---\n".join(
        part for part in queues.split("---\n") if "kind: Configuration" not in part))
    live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
    live.kubectl("apply", "-f", str(served))
    live.kubectl("apply", "-f", str(write(tmp_path / "jobs.yaml", jobs_text)))
    c = ctl.start(config=load_kueue(load_manifests([str(manifests)])).config)
    want = expected(manifests)
    rows = {r["name"]: r for r in want["workloads"]}
    admitted_rows = {k: r["flavors"] for k, r in rows.items() if r["state"] == "Admitted"}
    assert admitted_rows, want
    wait_for(lambda: admitted(live) == admitted_rows, "the admissions `admit` computes")
    assert [(d.workload, d.detail) for d in c.decisions if d.action == "preempt"] == \
        [(p["workload"], f"{p['by']} {p['reason']}") for p in want["preempted"]]
    for key, row in rows.items():
        if row["state"] in ("Pending", "Inadmissible") and row["reason"] != "Pending":
            wait_for(lambda key=key, row=row: (cond(workloads(live)[key], "QuotaReserved")
                                               or {}).get("reason") == row["reason"],
                     f"{key}'s reason {row['reason']}")
        elif row["reason"] == "Pending":
            # Never tried (behind a StrictFIFO head): no QuotaReserved condition yet.
            assert cond(workloads(live)[key], "QuotaReserved") is None
    if scenario == "partial-admission":
        adm = workloads(live)["team-a/job-a-part"]["status"]["admission"]
        count = adm["podSetAssignments"][0]["count"]
        assert count < 4
        wait_for(lambda: objects(live, "jobs")["team-a/a-part"]["spec"]["parallelism"]
                 == count, "the Job's parallelism cut to the admitted count")
