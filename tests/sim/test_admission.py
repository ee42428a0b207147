"""Kueue admission inside ``kubeberth simulate``: pods gated until their workload is admitted,
flavor labels and tolerations steering them, borrowing and reclaim preemption, queueing
strategies, waitForPodsReady, the per-queue outputs and determinism."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import load_workload

Doc = dict[str, Any]


def node(name: str, pool: str, gpu: int = 4, taint: bool = False) -> Doc:
    spec: Doc = {}
    if taint:
        spec["taints"] = [{"key": "vk.node.com", "value": "true", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"pool": pool}}, "spec": spec,
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi",
                                       "nvidia.com/gpu": str(gpu), "pods": "110"}}}


def flavor(name: str, pool: str, vk: bool = False) -> Doc:
    spec: Doc = {"nodeLabels": {"pool": pool}}
    if vk:
        spec["nodeTaints"] = [{"key": "vk.node.com", "value": "true", "effect": "NoSchedule"}]
        spec["tolerations"] = [{"key": "vk.node.com", "operator": "Equal", "value": "true",
                                "effect": "NoSchedule"}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, flavor_name: str, gpu: int, *, cohort: str = "",
                  strategy: str = "BestEffortFIFO", reclaim: str = "Never") -> Doc:
    spec: Doc = {"namespaceSelector": {}, "queueingStrategy": strategy,
                 "preemption": {"reclaimWithinCohort": reclaim},
                 "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                     {"name": flavor_name, "resources": [
                         {"name": "cpu", "nominalQuota": str(4 * gpu)},
                         {"name": "nvidia.com/gpu", "nominalQuota": str(gpu)}]}]}]}
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str) -> Doc:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"clusterQueue": cq}}


def pod(name: str, gpu: int, arrival: float, duration: float | None, queue: str = "",
        group: tuple[str, int] | None = None) -> Doc:
    labels: dict[str, str] = {}
    annotations = {"kubeberth.io/arrival-seconds": str(arrival)}
    if duration is not None:
        annotations["kubeberth.io/duration-seconds"] = str(duration)
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group[0]
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(group[1])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels,
                         "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": "1", "nvidia.com/gpu": str(gpu)}}}]}}


def write(path: Path, docs: list[Doc]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def simulate(tmp: Path, nodes: list[Doc], docs: list[Doc],
             out: str = "out") -> tuple[dict[str, dict[str, str]], dict[str, Any]]:
    cluster = write(tmp / "cluster.yaml", nodes)
    wl = write(tmp / "workload.yaml", docs)
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "-w", str(wl), "-q",
                                   "-o", str(tmp / out)])
    assert res.exit_code == 0, res.output
    with (tmp / out / "pods.csv").open() as f:
        pods = {r["pod"].split("/", 1)[1]: r for r in csv.DictReader(f)}
    return pods, json.loads((tmp / out / "summary.json").read_text())


TWO_POOLS = [node("a1", "a"), node("b1", "b")]


def one_queue(gpu: int = 4, strategy: str = "BestEffortFIFO") -> list[Doc]:
    return [flavor("fa", "a"), cluster_queue("cq", "fa", gpu, strategy=strategy),
            local_queue("q", "cq")]


def test_pods_wait_gated_until_their_workload_is_admitted(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(),
        pod("first", 4, 0, 100, "q"),
        pod("second", 4, 10, 50, "q")])
    # The second pod fits on b1 at once, but its workload has no quota until the first ends.
    assert pods["first"]["bound"] == "0.0"
    assert pods["second"]["bound"] == "100.0"
    # Gated pods are never tried by the scheduler: one attempt each.
    assert pods["second"]["attempts"] == "1"
    adm = summary["admission"]["clusterQueues"]["cq"]
    assert adm["workloads"] == 2 and adm["admitted"] == 2 and adm["pending"] == 0
    assert adm["waitAdmitSeconds"]["max"] == 90.0
    assert adm["waitBindSeconds"]["max"] == 90.0


def test_flavor_node_labels_steer_admitted_pods(tmp_path: Path) -> None:
    pods, _ = simulate(tmp_path, TWO_POOLS, [*one_queue(gpu=8),
        pod("p1", 2, 0, None, "q"),
        pod("p2", 2, 0, None, "q"),
        pod("free", 2, 0, None)])
    assert pods["p1"]["node"] == pods["p2"]["node"] == "a1"
    assert pods["free"]["node"]  # not managed by Kueue: scheduled as before


def test_flavor_tolerations_let_pods_onto_the_tainted_virtual_node(tmp_path: Path) -> None:
    nodes = [node("a1", "a"), node("vk", "vk", gpu=1000, taint=True)]
    docs = [flavor("fa", "a"), flavor("virtual", "vk", vk=True),
            cluster_queue("cq", "fa", 4), cluster_queue("cq-vk", "virtual", 1000),
            local_queue("q", "cq"), local_queue("q-vk", "cq-vk"),
            *[pod(f"vk-{i}", 4, 0, None, "q-vk") for i in range(3)],
            pod("plain", 4, 0, None), pod("other", 4, 0, None)]
    pods, _ = simulate(tmp_path, nodes, docs)
    assert {pods[f"vk-{i}"]["node"] for i in range(3)} == {"vk"}
    # Without the flavor's toleration nothing lands on the tainted node.
    assert pods["plain"]["node"] == "a1" and pods["other"]["bound"] == ""


def cohort_setup() -> list[Doc]:
    return [flavor("fa", "a"),
            cluster_queue("owner", "fa", 4, cohort="all", reclaim="Any"),
            cluster_queue("borrower", "fa", 0, cohort="all"),
            local_queue("qa", "owner"), local_queue("qb", "borrower")]


def test_borrowing_then_reclaim_preempts_running_pods(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*cohort_setup(),
        pod("b-1", 2, 0, 1000, "qb"),
        pod("b-2", 2, 0, 1000, "qb"),
        pod("a-1", 4, 100, 500, "qa")])
    # The borrower ran on the owner's quota until the owner reclaimed it at t=100.
    assert pods["a-1"]["bound"] == "100.0" and pods["a-1"]["node"] == "a1"
    for name in ("b-1", "b-2"):
        assert pods[name]["preempted"] == "1"
        # Requeued, re-admitted once the owner's workload finished, and run to the end.
        assert pods[name]["bound"] == "600.0" and pods[name]["finished"] == "1600.0"
    adm = summary["admission"]
    assert adm["preemptions"] == 2
    assert adm["clusterQueues"]["borrower"]["preempted"] == 2
    assert adm["clusterQueues"]["borrower"]["preemptionReasons"] == {"InCohortReclamation": 2}
    # 4 GPUs borrowed for 100 s, then for the 1000 s after re-admission.
    assert adm["clusterQueues"]["borrower"]["borrowedGpuHours"] == pytest.approx(
        4 * 1100 / 3600, abs=1e-5)
    assert adm["clusterQueues"]["owner"]["borrowedGpuHours"] == 0
    assert summary["pods"]["preemptions"] == 2


def test_without_reclaim_the_owner_waits_for_the_borrower(tmp_path: Path) -> None:
    docs = cohort_setup()
    docs[1] = cluster_queue("owner", "fa", 4, cohort="all", reclaim="Never")
    pods, summary = simulate(tmp_path, TWO_POOLS, [*docs,
        pod("b-1", 2, 0, 1000, "qb"),
        pod("b-2", 2, 0, 1000, "qb"),
        pod("a-1", 4, 100, 500, "qa")])
    assert pods["a-1"]["bound"] == "1000.0"
    assert summary["admission"]["preemptions"] == 0


@pytest.mark.parametrize(("strategy", "small_bound"), [("StrictFIFO", "100.0"),
                                                       ("BestEffortFIFO", "20.0")])
def test_queueing_strategy_orders_admission(tmp_path: Path, strategy: str,
                                            small_bound: str) -> None:
    nodes = [node("a1", "a", gpu=8), node("b1", "b")]
    pods, _ = simulate(tmp_path, nodes, [*one_queue(gpu=6, strategy=strategy),
        pod("running", 4, 0, 100, "q"),
        pod("big", 4, 10, 100, "q"),
        pod("small", 1, 20, 100, "q")])
    # StrictFIFO: the small workload waits behind the big head; BestEffortFIFO lets it pass.
    assert pods["big"]["bound"] == "100.0"
    assert pods["small"]["bound"] == small_bound


def test_pod_group_is_one_workload_admitted_when_all_pods_exist(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(),
        pod("g-0", 2, 0, 100, "q", ("g", 2)),
        pod("g-1", 2, 30, 100, "q", ("g", 2))])
    assert pods["g-0"]["bound"] == pods["g-1"]["bound"] == "30.0"
    assert summary["admission"]["clusterQueues"]["cq"]["workloads"] == 1


def native_group(name: str, min_count: int) -> Doc:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def joins(doc: Doc, group: str) -> Doc:
    doc["spec"]["schedulingGroup"] = {"podGroupName": group}
    return doc


def test_native_gang_pod_group_is_one_workload_bound_as_a_gang(tmp_path: Path) -> None:
    """KEP-13150's proposal: the Workload is made once minCount pods exist; until then the
    first pod waits gated; admission ungates both and the group cycle binds them together."""
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(), native_group("g", 2),
        joins(pod("g-0", 2, 0, 100, "q"), "g"),
        joins(pod("g-1", 2, 30, 100, "q"), "g")])
    assert pods["g-0"]["bound"] == pods["g-1"]["bound"] == "30.0"
    assert summary["admission"]["clusterQueues"]["cq"]["workloads"] == 1
    groups = summary["podGroups"]
    assert (groups["total"], groups["allBound"], groups["partialPlacements"]) == (1, 1, 0)


def test_never_admitted_pods_report_the_kueue_reason(tmp_path: Path) -> None:
    _, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(), pod("huge", 8, 0, 10, "q")])
    assert summary["unscheduledPods"] == ["default/huge"]
    assert summary["pendingReasons"]["default/huge"].startswith("waiting for Kueue admission")
    assert summary["admission"]["clusterQueues"]["cq"]["pending"] == 1


def test_pods_ready_timeout_evicts_and_requeues_with_backoff(tmp_path: Path) -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
              "waitForPodsReady": {"enable": True, "timeout": "60s",
                                   "requeuingStrategy": {"backoffLimitCount": 1}}}
    # Quota for 8 GPUs on pool a, but a1 has only 4: the gang of two 4-GPU pods never
    # becomes ready.
    docs = [config, *one_queue(gpu=8), pod("g-0", 4, 0, 100, "q", ("g", 2)),
            pod("g-1", 4, 0, 100, "q", ("g", 2))]
    pods, summary = simulate(tmp_path, TWO_POOLS, docs)
    cq = summary["admission"]["clusterQueues"]["cq"]
    # Admitted at 0, timed out at 60, requeued after 60 s backoff, timed out again at 180,
    # then deactivated (backoffLimitCount 1).
    assert cq["gangTimeouts"] == 2
    assert sum(int(pods[p]["preempted"]) for p in ("g-0", "g-1")) == 2  # the one bound pod
    assert summary["pendingReasons"]["default/g-0"] == (
        "waiting for Kueue admission: The workload is deactivated: exceeded the maximum number "
        "of re-queuing retries")


def test_outputs_are_deterministic_and_include_queue_files(tmp_path: Path) -> None:
    docs = cohort_setup() + [pod(f"b-{i}", 1, i, 300, "qb") for i in range(6)] + [
        pod(f"a-{i}", 2, 50 + i, 200, "qa") for i in range(3)]
    simulate(tmp_path, TWO_POOLS, docs, "one")
    simulate(tmp_path, TWO_POOLS, docs, "two")
    for name in ("summary.json", "timeseries.csv", "pods.csv", "queues.csv",
                 "queue_timeseries.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    with (tmp_path / "one" / "queues.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["scope"], r["name"]) for r in rows] == [
        ("clusterQueue", "borrower"), ("clusterQueue", "owner"),
        ("localQueue", "default/qa"), ("localQueue", "default/qb"), ("priority", "0")]
    by = {(r["scope"], r["name"]): r for r in rows}
    # A LocalQueue's row counts the workloads submitted through it.
    assert by[("localQueue", "default/qb")]["workloads"] == by[
        ("clusterQueue", "borrower")]["workloads"] == "6"
    with (tmp_path / "one" / "queue_timeseries.csv").open() as f:
        series = list(csv.DictReader(f))
    borrower = [r for r in series if r["cluster_queue"] == "borrower"]
    assert max(float(r["gpu_borrowed"]) for r in borrower) > 0
    assert max(float(r["dominant_share"]) for r in borrower) > 0


def test_without_kueue_objects_queue_labels_change_nothing(tmp_path: Path) -> None:
    labelled = [pod("p", 4, 0, 10, "q"), pod("r", 4, 0, 10, "q")]
    plain = [pod("p", 4, 0, 10), pod("r", 4, 0, 10)]
    simulate(tmp_path, TWO_POOLS, labelled, "labelled")
    simulate(tmp_path, TWO_POOLS, plain, "plain")
    for name in ("summary.json", "timeseries.csv", "pods.csv"):
        a = (tmp_path / "labelled" / name).read_text().replace("labelled", "x")
        b = (tmp_path / "plain" / name).read_text().replace("plain", "x")
        assert a == b
    assert not (tmp_path / "labelled" / "queues.csv").exists()
    assert "admission" not in json.loads((tmp_path / "labelled" / "summary.json").read_text())


def test_default_trace_runs_without_a_driver() -> None:
    wl = load_workload(None, None)
    sim = Simulation(wl, load_scheduler_config(None), in_tree_registry())
    assert sim.kueue is None


def job(name: str, gpu: int, *, queue: str = "q", completions: int = 2, parallelism: int = 2,
        duration: float = 50, arrival: float = 0, min_parallelism: int | None = None,
        backoff_limit: int | None = None) -> Doc:
    meta: Doc = {"name": name, "namespace": "default",
                 "annotations": {"kubeberth.io/arrival-seconds": str(arrival)}}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    if min_parallelism is not None:
        meta["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = str(min_parallelism)
    spec: Doc = {"completions": completions, "parallelism": parallelism,
                 "template": {"metadata": {"annotations": {
                     "kubeberth.io/duration-seconds": str(duration)}},
                     "spec": {"restartPolicy": "Never", "containers": [
                         {"name": "c", "resources": {"requests": {
                             "cpu": "1", "nvidia.com/gpu": str(gpu)}}}]}}}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def job_pods(pods: dict[str, dict[str, str]], name: str) -> list[dict[str, str]]:
    return sorted((r for k, r in pods.items() if k.startswith(f"{name}-")),
                  key=lambda r: (float(r["arrival"]), r["pod"]))


def test_queued_job_is_suspended_until_its_workload_is_admitted(tmp_path: Path) -> None:
    # The quota (4 GPUs) is held by a pod until 100 s; node b1 has room all along.
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(),
        pod("holder", 4, 0, 100, "q"),
        job("train", 2, arrival=10)])
    created = job_pods(pods, "train")
    # No pod exists before admission (not created, not merely gated); the Job then runs its
    # two completions in parallel on the flavor's pool.
    assert [r["arrival"] for r in created] == ["100.0", "100.0"]
    assert all(r["bound"] == "100.0" and r["node"] == "a1" for r in created)
    assert all(r["finished"] == "150.0" for r in created)
    cq = summary["admission"]["clusterQueues"]["cq"]
    assert cq["workloads"] == 2 and cq["admitted"] == 2 and cq["pending"] == 0
    # The Job's Workload was created with the Job at 10 s and admitted at 100 s.
    assert cq["waitAdmitSeconds"]["max"] == 90.0
    assert "unsimulatedWorkloads" not in summary["admission"]


def test_job_pods_get_the_flavor_node_labels(tmp_path: Path) -> None:
    nodes = [node("a1", "a", gpu=2), node("b1", "b", gpu=8)]
    pods, _ = simulate(tmp_path, nodes, [*one_queue(gpu=8),
        job("train", 2, completions=4, parallelism=2)])
    created = job_pods(pods, "train")
    # Only a1 (pool a, the flavor's label) is used, one 2-GPU pod at a time on its 2 GPUs,
    # although b1 has 8 free GPUs.
    assert len(created) == 4 and {r["node"] for r in created} == {"a1"}
    assert sorted(float(r["bound"]) for r in created) == [0.0, 50.0, 100.0, 150.0]


def test_job_waits_for_quota_behind_another_job(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(),
        job("first", 4, completions=2, parallelism=1, duration=100),
        job("second", 2, completions=1, parallelism=1, duration=10, arrival=5)])
    # The first Job holds its 4 GPUs until its last completion (200 s), not per pod.
    assert [r["bound"] for r in job_pods(pods, "first")] == ["0.0", "100.0"]
    assert [r["bound"] for r in job_pods(pods, "second")] == ["200.0"]
    assert summary["admission"]["clusterQueues"]["cq"]["admitted"] == 2


def test_preempted_job_is_suspended_and_requeued(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*cohort_setup(),
        job("etl", 2, queue="qb", completions=4, parallelism=2, duration=1000),
        pod("a-1", 4, 100, 500, "qa")])
    etl = job_pods(pods, "etl")
    # Two pods started at 0 and were deleted at 100 when the owner reclaimed its quota
    # (suspension, not failure: no replacement while suspended), then the Job restarted at
    # 600 and ran its four completions.
    first = [r for r in etl if r["arrival"] == "0.0"]
    assert len(first) == 2 and all(r["finished"] == "" for r in first)
    later = [r for r in etl if r["arrival"] != "0.0"]
    assert [r["arrival"] for r in later] == ["600.0", "600.0", "1600.0", "1600.0"]
    assert all(r["node"] == "a1" for r in later)
    assert [r["finished"] for r in later] == ["1600.0", "1600.0", "2600.0", "2600.0"]
    adm = summary["admission"]
    assert adm["preemptions"] == 1
    assert adm["clusterQueues"]["borrower"]["preemptionReasons"] == {"InCohortReclamation": 1}
    assert adm["clusterQueues"]["borrower"]["admitted"] == 1
    assert pods["a-1"]["bound"] == "100.0"


def test_suspension_deletes_are_not_job_failures(tmp_path: Path) -> None:
    # backoffLimit 0: one failure would fail the Job; being suspended twice must not.
    pods, _ = simulate(tmp_path, TWO_POOLS, [*cohort_setup(),
        job("etl", 2, queue="qb", completions=2, parallelism=2, duration=1000,
            backoff_limit=0),
        pod("a-1", 4, 100, 100, "qa"),
        pod("a-2", 4, 300, 100, "qa")])
    etl = job_pods(pods, "etl")
    assert sum(1 for r in etl if r["finished"]) == 2
    assert max(float(r["finished"]) for r in etl if r["finished"]) == 1400.0


def test_partial_admission_lowers_the_job_parallelism(tmp_path: Path) -> None:
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(),
        pod("holder", 2, 0, 1000, "q"),
        job("wide", 1, completions=8, parallelism=8, duration=100, min_parallelism=2,
            arrival=10)])
    wide = job_pods(pods, "wide")
    # 2 of the 4 GPUs are held, so the Job is admitted with parallelism 2 (quota for two
    # pods): four waves of two pods, never more than two at once.
    assert [r["bound"] for r in wide] == [str(float(t)) for t in (10, 10, 110, 110, 210, 210,
                                                                  310, 310)]
    assert summary["admission"]["clusterQueues"]["cq"]["admitted"] == 2


def deployment(name: str, gpu: int, replicas: int, schedule: str, queue: str = "q") -> Doc:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kubeberth.io/replicas-schedule": schedule}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {
                         "app": name, "kueue.x-k8s.io/queue-name": queue}},
                         "spec": {"containers": [{"name": "c", "resources": {"requests": {
                             "cpu": "1", "nvidia.com/gpu": str(gpu)}}}]}}}}


def test_pods_a_controller_creates_later_get_their_own_workloads(tmp_path: Path) -> None:
    nodes = [node("a1", "a", gpu=8), node("b1", "b")]
    pods, summary = simulate(tmp_path, nodes, [*one_queue(gpu=6),
        pod("holder", 2, 0, 200, "q"),
        deployment("web", 2, 2, "100=3")])
    web = sorted((r for k, r in pods.items() if k.startswith("web-")),
                 key=lambda r: (float(r["arrival"]), r["pod"]))
    assert [r["arrival"] for r in web] == ["0.0", "0.0", "100.0"]
    # The scale-up's pod waits for quota (6 GPUs, all in use) although a1 has room, and is
    # admitted at 200 when the holder's Workload finishes.
    assert web[2]["bound"] == "200.0" and web[2]["node"] == "a1"
    cq = summary["admission"]["clusterQueues"]["cq"]
    assert cq["workloads"] == 4 and cq["admitted"] == 4 and cq["pending"] == 0


def test_deleted_pods_release_their_workloads_quota(tmp_path: Path) -> None:
    web = deployment("web", 2, 2, "0=2")
    web["metadata"]["annotations"]["kubeberth.io/duration-seconds"] = "150"
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(), web, pod("p", 4, 10, 10, "q")])
    # The Deployment is deleted at 150 with its pods: their Workloads are finished and the
    # quota goes to the waiting pod.
    assert pods["p"]["bound"] == "150.0"
    assert summary["admission"]["clusterQueues"]["cq"]["pending"] == 0


def test_a_preempted_replica_is_replaced_under_a_new_workload(tmp_path: Path) -> None:
    docs = [*cohort_setup(), deployment("web", 2, 2, "0=2", queue="qb"),
            pod("a-1", 4, 100, 100, "qa")]
    pods, summary = simulate(tmp_path, TWO_POOLS, docs)
    web = sorted((r for k, r in pods.items() if k.startswith("web-")),
                 key=lambda r: (float(r["arrival"]), r["pod"]))
    # The two borrowing replicas are deleted at 100; the ReplicaSet's replacements are new
    # pods with new Workloads, admitted when the owner's pod finishes at 200.
    assert [r["arrival"] for r in web] == ["0.0", "0.0", "100.0", "100.0"]
    assert [r["bound"] for r in web[2:]] == ["200.0", "200.0"]
    assert all(r["preempted"] == "1" for r in web[:2])
    borrower = summary["admission"]["clusterQueues"]["borrower"]
    assert borrower["workloads"] == 4 and borrower["preempted"] == 2
    assert borrower["pending"] == 0


def test_workload_objects_without_an_owner_hold_their_quota(tmp_path: Path) -> None:
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
          "metadata": {"name": "reserved", "namespace": "default"},
          "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
              "spec": {"containers": [{"name": "c", "resources": {"requests": {
                  "cpu": "1", "nvidia.com/gpu": "4"}}}]}}}]}}
    pods, summary = simulate(tmp_path, TWO_POOLS, [*one_queue(), wl, pod("p", 2, 10, 10, "q")])
    # Kueue admits the Workload (at 0) and it keeps the quota: the pod is never admitted.
    assert pods["p"]["bound"] == ""
    cq = summary["admission"]["clusterQueues"]["cq"]
    assert cq["admitted"] == 1 and cq["pending"] == 1
    assert summary["pendingReasons"]
