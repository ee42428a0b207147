"""Owners in the simulator (re-creation, scale steps, Jobs) and the eviction path with PDBs."""

from __future__ import annotations

from pathlib import Path

from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import EvictionRecord, SimResult, Simulation
from kubeberth.sim.traces import load_workload
from kubeberth.state.disruption import TOO_MANY_REQUESTS

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
"""


def deployment(replicas: int = 3, annotations: str = "") -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {{{annotations}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: c
        resources: {{requests: {{cpu: "1"}}}}
"""


BARE = """\
apiVersion: v1
kind: Pod
metadata: {name: lonely, labels: {app: web}}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "1"}}
"""


def job(completions: int, parallelism: int, backoff: int = 6, duration: int = 100) -> str:
    return f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: train}}
spec:
  completions: {completions}
  parallelism: {parallelism}
  backoffLimit: {backoff}
  template:
    metadata: {{annotations: {{kubeberth.io/duration-seconds: "{duration}"}}}}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        resources: {{requests: {{cpu: "1"}}}}
"""


def pdb(spec: str) -> str:
    return f"""\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web}}
spec: {{{spec}, selector: {{matchLabels: {{app: web}}}}}}
"""


def simulation(tmp_path: Path, *docs: str, until: float | None = None) -> Simulation:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "work.yaml").write_text("---\n".join(docs))
    wl = load_workload([tmp_path / "cluster.yaml"], [tmp_path / "work.yaml"])
    return Simulation(wl, load_scheduler_config(None), in_tree_registry(), sample_interval=10.0,
                      until=until)


def live_pods(sim: Simulation) -> list[str]:
    return sorted(sim.snapshot.objects.pods)


def test_workload_owners_expand_into_pods(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(deployment(2) + "---\n" + job(5, 3))
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    wl = load_workload([tmp_path / "cluster.yaml"], [f])
    assert [o.kind for o in wl.owners] == ["Deployment", "Job"]
    names = [tp.pod.metadata.name for tp in wl.pods]
    assert len(names) == 5 and len(set(names)) == 5
    assert sum(n.startswith("web-") for n in names) == 2
    assert sum(n.startswith("train-") for n in names) == 3
    assert all(tp.duration == 100.0 for tp in wl.pods if tp.pod.metadata.name.startswith("tr"))


def test_evicted_owned_pod_is_replaced_under_a_new_name(tmp_path: Path) -> None:
    sim = simulation(tmp_path, deployment(2))
    records: list[EvictionRecord] = []

    def evict_first() -> None:
        victim = sorted(k for k in sim.snapshot.pods if "/web-" in k)[0]
        sim.evict(victim, plugin="Test", reason="because")
        records.extend(sim.evictions)

    sim.call_at(50.0, evict_first, counts=True)
    res = sim.run()
    (rec,) = records
    assert rec.verdict.allowed and rec.plugin == "Test" and rec.node == "n1"
    assert rec.replacement and rec.replacement != rec.pod
    new = res.metrics.pods[rec.replacement]
    assert new.arrival == 50.0 and new.bound == 50.0
    assert res.metrics.pods[rec.pod].deleted == 50.0
    assert len(live_pods(sim)) == 2 and rec.pod not in live_pods(sim)
    assert res.replacements == 1 and res.unscheduled == []


def test_evicted_bare_pod_is_gone(tmp_path: Path) -> None:
    sim = simulation(tmp_path, BARE)
    sim.call_at(10.0, lambda: sim.evict("default/lonely"), counts=True)
    res = sim.run()
    assert live_pods(sim) == [] and res.replacements == 0
    assert res.evictions[0].verdict.allowed and res.evictions[0].replacement == ""
    assert res.unscheduled == []  # an evicted pod is not "never scheduled"


def test_eviction_refused_by_pdb_against_live_replicas(tmp_path: Path) -> None:
    sim = simulation(tmp_path, deployment(3), pdb("minAvailable: 2"))
    verdicts: list[bool] = []

    def evict_two() -> None:
        pods = sorted(k for k in sim.snapshot.pods if "/web-" in k)
        verdicts.append(sim.evict(pods[0]).allowed)
        # The replacement is Pending (not Ready): only 2 healthy, minAvailable 2.
        verdicts.append(sim.evict(pods[1]).allowed)

    sim.call_at(20.0, evict_two, counts=True)
    res = sim.run()
    assert verdicts == [True, False]
    refused = res.evictions[1].verdict
    assert refused.code == TOO_MANY_REQUESTS and refused.pdb == "default/web"
    assert "needs 2 healthy pods and has 2 currently" in refused.message


def test_percent_pdb_counts_the_deployment_scale(tmp_path: Path) -> None:
    sim = simulation(tmp_path, deployment(4), pdb("maxUnavailable: 25%"))
    out: list[int] = []

    def check() -> None:
        (st,) = sim.disruption_budgets().statuses
        out.extend([st.expected_pods, st.desired_healthy, st.disruptions_allowed])

    sim.call_at(5.0, check, counts=True)
    sim.run()
    assert out == [4, 3, 1]


def test_pending_pod_eviction_skips_the_pdb(tmp_path: Path) -> None:
    # 9 replicas on an 8-cpu node: one stays Pending and may be evicted despite the PDB.
    sim = simulation(tmp_path, deployment(9), pdb("minAvailable: 9"))
    got: list[bool] = []

    def evict_pending() -> None:
        pending = [k for k, pi in sim.snapshot.objects.pods.items() if pi.node < 0]
        got.append(sim.evict(pending[0]).allowed)

    sim.call_at(5.0, evict_pending, counts=True)
    sim.run()
    assert got == [True]


def test_scale_steps_create_and_delete_newest_first(tmp_path: Path) -> None:
    sim = simulation(tmp_path, deployment(2, 'kubeberth.io/replicas-schedule: "100=5,200=1"'))
    res = sim.run()
    pods = res.metrics.pods
    first_two = [k for k, r in pods.items() if r.arrival == 0.0]
    added = [k for k, r in pods.items() if r.arrival == 100.0]
    assert len(first_two) == 2 and len(added) == 3
    # Scaling to 1 deletes the 4 most recently ready pods: all 3 added and one original.
    assert all(pods[k].deleted == 200.0 for k in added)
    survivors = live_pods(sim)
    assert len(survivors) == 1 and survivors[0] in first_two
    assert res.end_time == 200.0


def test_deployment_lifetime_deletes_its_pods(tmp_path: Path) -> None:
    sim = simulation(tmp_path, deployment(3, 'kubeberth.io/duration-seconds: "300"'))
    res = sim.run()
    assert live_pods(sim) == [] and res.end_time == 300.0
    assert all(r.deleted == 300.0 for r in res.metrics.pods.values())


def test_job_runs_completions_with_parallelism(tmp_path: Path) -> None:
    sim = simulation(tmp_path, job(completions=5, parallelism=2))
    res = sim.run()
    finished = sorted(r.finished for r in res.metrics.pods.values())
    assert finished == [100.0, 100.0, 200.0, 200.0, 300.0]
    run = next(iter(sim.owners.runs.values()))
    assert run.succeeded == 5 and run.finished == "Complete"


def test_evicted_job_pod_counts_as_failed_and_is_replaced(tmp_path: Path) -> None:
    sim = simulation(tmp_path, job(completions=1, parallelism=1, backoff=0))
    sim.call_at(50.0, lambda: sim.evict(next(iter(sim.snapshot.pods))), counts=True)
    sim.run()
    run = next(iter(sim.owners.runs.values()))
    # backoffLimit 0: one failure is too many, the Job fails and creates nothing more.
    assert run.failed == 1 and run.finished == "Failed" and live_pods(sim) == []


def test_evicted_job_pod_within_backoff_is_replaced(tmp_path: Path) -> None:
    sim = simulation(tmp_path, job(completions=1, parallelism=1, backoff=2))
    sim.call_at(50.0, lambda: sim.evict(next(iter(sim.snapshot.pods))), counts=True)
    res = sim.run()
    run = next(iter(sim.owners.runs.values()))
    assert run.failed == 1 and run.succeeded == 1 and run.finished == "Complete"
    assert res.end_time == 150.0  # the replacement ran its full 100 s from t=50


def test_preempted_owned_pod_is_replaced_by_its_owner(tmp_path: Path) -> None:
    high = """\
apiVersion: v1
kind: Pod
metadata:
  name: vip
  annotations: {kubeberth.io/arrival-seconds: "10"}
spec:
  priority: 1000
  containers:
  - name: c
    resources: {requests: {cpu: "8"}}
"""
    sim = simulation(tmp_path, deployment(2), high)
    res: SimResult = sim.run()
    assert res.metrics.pods["default/vip"].bound is not None
    originals = [k for k, r in res.metrics.pods.items() if k != "default/vip" and
                 r.arrival == 0.0]
    assert all(res.metrics.pods[k].preempted == 1 for k in originals)
    replacements = [k for k, r in res.metrics.pods.items() if r.arrival > 0.0 and
                    k != "default/vip"]
    assert len(replacements) == 2 and res.replacements == 2


def test_runs_are_reproducible(tmp_path: Path) -> None:
    docs = (deployment(3, 'kubeberth.io/replicas-schedule: "50=6,90=2"'), job(4, 2))
    a = simulation(tmp_path, *docs).run()
    b = simulation(tmp_path, *docs).run()
    assert list(a.metrics.pods) == list(b.metrics.pods)
