"""The live controllers end to end, each test once against the embedded server and once against
a real cluster (upstream's kube-apiserver, etcd and kube-controller-manager): the scheduler
binds, the descheduler evicts through the Eviction API within a PodDisruptionBudget, the spill
controller flips the taint, Kueue admission ungates a pod. On the real cluster a kubelet
stand-in marks bound pods Running (tests/realcluster/cluster.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.live.harness import node, pod
from tests.live.spillenv import (
    LOW,
    POLICY,
    VK,
    bound_pod,
    deployment,
    gpu_node,
    pdb,
    spill_config,
    vk_node,
)
from tests.live.test_admission_e2e import CLUSTER as KUEUE_NODES
from tests.live.test_admission_e2e import KUEUE
from tests.realcluster.cluster import (
    Api,
    Running,
    bound,
    queued_pod,
    running_on,
    scheduler,
    wait_for,
)

from kubeberth.config.manifests import load_manifests
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.live.admission import LiveAdmission
from kubeberth.live.descheduler import LiveDescheduler
from kubeberth.live.spill import LiveSpillController
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain

NODES = node("a-small", 2, 16) + node("b-large", 8, 64) + node("c-mid", 4, 32) + node(
    "d-mid", 4, 32)
PODS = "".join(pod(f"p{i:02d}", g, c) for i, (g, c) in enumerate(
    [(1, "2"), (4, "8"), (2, "4"), (1, "1"), (3, "6"), (2, "2"), (1, "4"), (2, "8"),
     (1, "2"), (1, "1")]))


def test_scheduler_binds_where_explain_says(api: Api, running: Running, tmp_path: Path) -> None:
    api.apply(NODES)
    api.apply(PODS)
    scheduler(api, running)
    wait_for(lambda: len(bound(api)) == 10, "every pod to be bound")
    (tmp_path / "all.yaml").write_text(NODES + PODS)
    want = {e["pod"]: e["selectedNode"] for e in explain(
        load_manifests([tmp_path / "all.yaml"]), load_scheduler_config(None),
        in_tree_registry(), seed=0)["pods"]}
    assert bound(api) == want
    # A binding is the pods/binding subresource on both: the node is set, the pod Running
    # once the kubelet (stand-in, on the real server) has it.
    wait_for(lambda: all(p["status"].get("phase") == "Running" for p in api.pods().values()),
             "the pods to run")


def test_descheduler_evicts_through_the_eviction_api_within_the_pdb(
        api: Api, running: Running, tmp_path: Path) -> None:
    api.apply(gpu_node("gpu-1", 4, cordoned=True) + vk_node())
    scheduler(api, running)
    api.apply(deployment("llm", 3))
    wait_for(lambda: len(running_on(api, VK, "llm")) == 3, "the pods to spill to VK")
    on_vk = running_on(api, VK, "llm")
    api.apply(pdb("llm", "llm", 2))
    # The disruption controller (kube-controller-manager's, or the embedded server's) has
    # counted the pods: one disruption allowed.
    wait_for(lambda: api.objects("pdb", "default")["default/llm"].get("status", {})
             .get("disruptionsAllowed") == 1, "the budget's status")
    api.kubectl("uncordon", "gpu-1")
    (tmp_path / "policy.yaml").write_text(POLICY)
    ctl = running.start(LiveDescheduler(load_descheduler_policy(tmp_path / "policy.yaml"),
                                        api.client(), interval=0.3))
    api.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    # One at a time: each eviction waits for the replacement to run on gpu-1 and the budget
    # to allow the next.
    wait_for(lambda: len(running_on(api, "gpu-1", "llm")) == 3,
             "the Deployment's pods to come back to gpu-1", timeout=120)
    assert running_on(api, VK, "llm") == []
    evicted = [o for o in ctl.outcomes if o.result == "evicted"]
    assert sorted(o.pod for o in evicted) == on_vk
    # Anything else is the API's own 429 for a budget its status did not allow yet.
    assert {o.result for o in ctl.outcomes} <= {"evicted", "pdb"}
    found = re.search(r'kubeberth_descheduler_pods_skipped_total\{profile="spill-return",'
                      r'strategy="RemovePodsViolatingNodeTaints"\} (\d+)',
                      ctl.metrics.exposition().decode())
    assert found is not None and int(found.group(1)) >= 2  # the pass's own budget check


def test_spill_controller_flips_the_taint(api: Api, running: Running, tmp_path: Path) -> None:
    api.apply(gpu_node("gpu-1", 4) + vk_node()
              + "".join(bound_pod(f"busy-{i}", "gpu-1") for i in range(4)))

    def taints() -> list[str]:
        node_obj = api.objects("nodes")[VK]
        return [t["key"] for t in node_obj["spec"].get("taints") or []]

    ctl = running.start(LiveSpillController(spill_config(tmp_path, threshold=2,
                                                         stabilization=1.0), api.client()))
    wait_for(lambda: len(ctl.ticks) >= 3, "three ticks")
    assert LOW not in taints()
    for i in range(3):
        api.kubectl("delete", "pod", f"busy-{i}")
    wait_for(lambda: LOW in taints(), "the taint to be added")
    api.apply("".join(bound_pod(f"again-{i}", "gpu-1") for i in range(3)))
    wait_for(lambda: LOW not in taints(), "the taint to be removed")
    # The controller writes the taint, then records the flip: the record may lag a moment.
    wait_for(lambda: [d for _, d in ctl.flips] == ["add", "remove"], "the flips' record")
    assert "vk.node.com" in taints()  # the permanent taint is left alone


def test_kueue_admission_ungates_the_pod(api: Api, running: Running) -> None:
    api.apply(KUEUE_NODES)
    api.apply(KUEUE)
    api.apply(queued_pod("nb", "team-b", 1))
    assert api.pods()["team-b/nb"]["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"}]
    scheduler(api, running)
    running.start(LiveAdmission(api.client()))
    wait_for(lambda: api.placement().get("team-b/nb") == "a100-0", "the pod to run on a100")
    pod_obj = api.pods()["team-b/nb"]
    assert not pod_obj["spec"].get("schedulingGates")
    assert pod_obj["spec"]["nodeSelector"] == {"gpu": "a100"}
    # Both servers serve scheduling.k8s.io's Workload too, which kubectl's "workloads" names
    # first (docs/gangs.md): Kueue's by its full name.
    wl = api.objects("workloads.kueue.x-k8s.io", "team-b")["team-b/pod-nb"]
    admission = wl["status"]["admission"]
    assert {p["name"]: p["flavors"] for p in admission["podSetAssignments"]} == {
        "main": {"cpu": "a100", "nvidia.com/gpu": "a100"}}
    assert {c["type"] for c in wl["status"]["conditions"] if c["status"] == "True"} >= {
        "QuotaReserved", "Admitted"}


RACKS = "".join(node(f"{r}{i}", 8, 64, labels=f"{{topology.kubernetes.io/rack: rack-{r}}}")
                for r in ("a", "b") for i in (1, 2))
NATIVE_GANG = """\
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 3}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
---
""" + "".join(f"""\
apiVersion: v1
kind: Pod
metadata: {{name: train-{i}, namespace: default}}
spec:
  schedulingGroup: {{podGroupName: train}}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}}
      limits: {{nvidia.com/gpu: "4"}}
---
""" for i in range(3))
GANG_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "native-gangs" / \
    "scheduler-config.yaml"


def test_native_gang_binds_in_one_rack_with_its_condition(api: Api, running: Running) -> None:
    """Kubernetes 1.37's PodGroup (both servers serve scheduling.k8s.io/v1beta1): the live
    scheduler binds the three members in one rack, all together, and writes the
    PodGroupInitiallyScheduled condition kubectl's Status column reads."""
    api.apply(RACKS)
    api.apply(NATIVE_GANG)
    scheduler(api, running, config=GANG_CONFIG)
    wait_for(lambda: len(bound(api)) == 3, "the gang's three pods")
    racks = {n[0] for n in bound(api).values()}
    assert len(racks) == 1
    wait_for(lambda: "Scheduled" in api.kubectl("get", "podgroups.scheduling.k8s.io", "train"),
             "the group's Status column")
    (group,) = api.objects("podgroups.scheduling.k8s.io").values()
    (cond,) = group["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled", "True", "Scheduled")
