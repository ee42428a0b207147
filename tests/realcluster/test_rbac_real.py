"""`kubeberth manifests`' RBAC enforced by kube-apiserver's own authorizer (Node,RBAC): each
controller runs with its ServiceAccount's token (a TokenRequest, bound by the generated
ClusterRole and leader-election Role) through a scenario that writes what it writes in a
cluster, and a request outside its rules is refused with 403. kube-apiserver's audit log then
shows that those deliberate requests were the only ones it refused.

Only the real cluster: the embedded server has no authorizer (tests/live/test_rbac.py checks the
same rules against its request audit instead)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod
from tests.live.harness import node, pod
from tests.live.spillenv import (
    LOW,
    POLICY,
    VK,
    bound_pod,
    deployment,
    gpu_node,
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

from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.live.admission import LiveAdmission
from kubeberth.live.deploy import manifests
from kubeberth.live.descheduler import LiveDescheduler
from kubeberth.live.leader import LeaderElector, LeaseTiming
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.live.spill import LiveSpillController
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

NAMESPACE = "kubeberth"
PRIORITIES = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
"""


def service_account_client(api: Api, controller: str) -> Client:
    """`kubeberth manifests`' objects for ``controller`` without its Deployment (the
    controller runs here), and a client with its ServiceAccount's token."""
    docs = [d for d in manifests([controller], namespace=NAMESPACE)
            if d["kind"] != "Deployment"]
    api.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    token = api.kubectl("create", "token", f"kubeberth-{controller}", "-n", NAMESPACE,
                        "--duration=1h").strip()
    return api.client(token)


def elector(client: Client, controller: str) -> LeaderElector:
    return LeaderElector(client, f"kubeberth-{controller}", NAMESPACE, "rbac",
                         timing=LeaseTiming(1.0, 0.6, 0.05))


def forbidden(call: Callable[[], object]) -> None:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.status.code == 403, err.value.status


def run_scheduler(api: Api, running: Running, client: Client, tmp_path: Path) -> None:
    api.apply(node("big", 4) + PRIORITIES)
    lease = elector(client, "scheduler")
    ctl = running.start(LiveScheduler(load_scheduler_config(None), in_tree_registry(), client,
                                      elector=lease))
    wait_for(lease.leading.is_set, "the scheduler to lead")
    api.apply(pod("low", 4, "1", "low"))
    wait_for(lambda: bound(api).get("default/low") == "big", "the low-priority pod")
    api.apply(pod("high", 4, "1", "high"))
    wait_for(lambda: bound(api).get("default/high") == "big", "the preemptor")
    assert {"bind", "preempt", "nominate"} <= {d.action for d in ctl.decisions}
    forbidden(lambda: client.delete(Node, "big"))
    forbidden(lambda: client.create(Pod.from_dict(next(yaml.safe_load_all(pod("mine", 1))))))


def run_descheduler(api: Api, running: Running, client: Client, tmp_path: Path) -> None:
    api.apply(gpu_node("gpu-1", 4, cordoned=True) + vk_node())
    scheduler(api, running)  # the admin's: only the descheduler runs with its own token here
    api.apply(deployment("llm", 2))
    wait_for(lambda: len(running_on(api, VK, "llm")) == 2, "the pods to spill to VK")
    api.kubectl("uncordon", "gpu-1")
    (tmp_path / "policy.yaml").write_text(POLICY)
    lease = elector(client, "descheduler")
    ctl = running.start(LiveDescheduler(load_descheduler_policy(tmp_path / "policy.yaml"),
                                        client, interval=0.3, elector=lease))
    api.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: len(running_on(api, "gpu-1", "llm")) == 2, "the pods to come back")
    assert {o.result for o in ctl.outcomes} == {"evicted"}
    forbidden(lambda: client.delete(Pod, running_on(api, "gpu-1", "llm")[0].split("/")[1],
                                    namespace="default"))
    forbidden(lambda: client.patch(Node, "gpu-1", {"spec": {"unschedulable": True}}))


def run_spill(api: Api, running: Running, client: Client, tmp_path: Path) -> None:
    api.apply(gpu_node("gpu-1", 4) + vk_node()
              + "".join(bound_pod(f"busy-{i}", "gpu-1") for i in range(4)))
    lease = elector(client, "spill-controller")
    ctl = running.start(LiveSpillController(spill_config(tmp_path, stabilization=0.5), client,
                                            elector=lease))
    for i in range(3):
        api.kubectl("delete", "pod", f"busy-{i}")
    wait_for(lambda: [d for _, d in ctl.flips] == ["add"], "the taint to be added")
    assert LOW in [t["key"] for t in api.objects("nodes")[VK]["spec"]["taints"]]
    forbidden(lambda: client.delete(Pod, "busy-3", namespace="default"))
    forbidden(lambda: client.delete(Node, VK))


def run_admission(api: Api, running: Running, client: Client, tmp_path: Path) -> None:
    api.apply(KUEUE_NODES)
    api.apply(KUEUE)
    api.apply(queued_pod("nb", "team-b", 1))
    scheduler(api, running)
    lease = elector(client, "admission")
    running.start(LiveAdmission(client, elector=lease))
    wait_for(lambda: api.placement().get("team-b/nb") == "a100-0", "the pod to be admitted")
    forbidden(lambda: client.patch(Node, "a100-0", {"spec": {"unschedulable": True}}))
    forbidden(lambda: client.create(Pod.from_dict(next(yaml.safe_load_all(pod("mine", 1))))))


# The requests each scenario makes outside its rules, as the audit log names them.
DELIBERATE = {"scheduler": [("delete", "nodes"), ("create", "pods")],
              "descheduler": [("delete", "pods"), ("patch", "nodes")],
              "spill-controller": [("delete", "pods"), ("delete", "nodes")],
              "admission": [("patch", "nodes"), ("create", "pods")]}
SCENARIOS = {"scheduler": run_scheduler, "descheduler": run_descheduler,
             "spill-controller": run_spill, "admission": run_admission}


@pytest.mark.slow
@pytest.mark.parametrize("controller", list(SCENARIOS))
def test_generated_rbac_lets_the_controller_work_and_refuses_the_rest(
        controller: str, real_api: Api, running: Running, tmp_path: Path) -> None:
    client = service_account_client(real_api, controller)
    SCENARIOS[controller](real_api, running, client, tmp_path)
    # kube-apiserver's own audit log: the only refusals are the scenario's deliberate ones.
    assert real_api.real is not None
    user = f"system:serviceaccount:{NAMESPACE}:kubeberth-{controller}"
    seen = real_api.real.audit(user)
    assert len(seen) > 10, f"no audited requests of {user}"
    refused = sorted((e["verb"], e["objectRef"]["resource"]) for e in seen
                     if e["responseStatus"]["code"] == 403)
    assert refused == sorted(DELIBERATE[controller])
