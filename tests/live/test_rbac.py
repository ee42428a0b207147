"""Each controller's RBAC rules in ``kubeberth manifests`` cover exactly the verbs it uses.

The controller runs against the embedded API server over HTTP with its own bearer token,
through a scenario that takes every path that talks to the API; the server's request audit
records each ``(verb, apiGroup, resource, subresource)`` as the real API server's authorizer
would see it. Used ⊆ granted (the controller would not be refused anything on a real cluster)
and granted ⊆ used (it is granted nothing it does not need).

To add a controller: write its scenario (start it with ``live.client(token)``, drive it until
every API path it has was taken, stop it cleanly) and add one entry to ``SCENARIOS``. The spill
controller has two entries, one per signal source, since its rules depend on the source.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType
from tests.live.harness import Live, bound, node, pod, wait_for, write
from tests.live.spillenv import (
    LOW,
    POLICY,
    VK,
    FakePrometheus,
    bound_pod,
    gpu_node,
    node_taints,
    pdb,
    spill_config,
    spilled,
    start,
    vk_node,
)
from tests.live.test_admission_e2e import NATIVE_GANG as QUEUED_GANG
from tests.live.test_admission_e2e import queued_pod

from kubeberth.admission.checks import CheckRegistry, CheckRequest, Verdict
from kubeberth.api.objects import to_dict
from kubeberth.apiserver.audit import Access
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.live.admission import KueueResources, LiveAdmission
from kubeberth.live.deploy import rbac_rows, scheduler_reads_config_maps
from kubeberth.live.descheduler import LiveDescheduler
from kubeberth.live.leader import LeaderElector, LeaseTiming
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.live.spill import LiveSpillController
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

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


class RacingClient(Client):
    """The first binding this client posts loses a race: the pod is bound to ``other`` just
    before the post reaches the server, so the scheduler takes its conflict path."""

    def __init__(self, live: Live, token: str, other: str) -> None:
        super().__init__(config=live.client(token).config)
        self.live = live
        self.other = other
        self.raced: list[str] = []

    def create(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj).__name__ == "PodBinding" and not self.raced:
            name, ns = obj.metadata.name, obj.metadata.namespace
            srv = self.live.server
            assert srv is not None
            srv.call(lambda: srv.api.bind(ns, name, {"target": {"kind": "Node",
                                                                "name": self.other}}))
            self.raced.append(name)
        return super().create(obj, *args, **kwargs)


NETWORK_PROFILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled: [{name: NetworkCapacity}]
"""


NATIVE_GANG = """\
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 1}}
---
apiVersion: v1
kind: Pod
metadata: {name: pair-0, namespace: default}
spec:
  schedulingGroup: {podGroupName: pair}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""


def run_scheduler(live: Live, tmp_path: Path, token: str, config: Path | None = None) -> None:
    """Leader election (create, renew, release), a binding that loses a 409 race (read back),
    a preemption (victim deleted, preemptor nominated), an unschedulable pod (PodScheduled
    condition, FailedScheduling event), Scheduled events, and a native PodGroup's condition."""
    live.serve(write(tmp_path / "cluster.yaml", node("big", 4) + node("small", 2)
                     + PRIORITIES), audit=True, runtime_config="scheduling.k8s.io/v1beta1=true")
    client = RacingClient(live, token, "small")
    elector = LeaderElector(client, "kubeberth-scheduler", "kube-system", "rbac",
                            timing=LeaseTiming(1.0, 0.6, 0.05))
    ctl = LiveScheduler(load_scheduler_config(config), in_tree_registry(), client,
                        elector=elector)
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    live.controllers.append((ctl, thread, []))
    wait_for(ctl.ready, "the scheduler's caches")
    wait_for(elector.leading.is_set, "the scheduler to lead")
    live.kubectl("apply", "-f", str(write(tmp_path / "race.yaml", pod("race", 2, "1"))))
    wait_for(lambda: ctl.conflicts == 1, "the lost race")
    live.kubectl("apply", "-f", str(write(tmp_path / "low.yaml", pod("low", 4, "1", "low"))))
    wait_for(lambda: bound(live).get("default/low") == "big", "the low-priority pod")
    live.kubectl("apply", "-f", str(write(tmp_path / "high.yaml",
                                          pod("high", 4, "1", "high"))))
    wait_for(lambda: bound(live).get("default/high") == "big", "the preemptor")
    live.kubectl("apply", "-f", str(write(tmp_path / "huge.yaml", pod("huge", 16, "1"))))
    wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 1, "the huge pod")
    live.kubectl("apply", "-f", str(write(tmp_path / "gang.yaml", NATIVE_GANG)))
    wait_for(lambda: "Scheduled" in live.kubectl("get", "podgroups.scheduling.k8s.io", "pair"),
             "the native group's condition")
    actions = {d.action for d in ctl.decisions}
    assert {"conflict", "bind", "preempt", "nominate"} <= actions
    live.stop_controller(ctl)  # flushes the events and releases the Lease
    assert ctl.recorder is not None and ctl.recorder.posted >= 3


def run_scheduler_network(live: Live, tmp_path: Path, token: str) -> None:
    """The same with NetworkCapacity in the profile: the scheduler also lists and watches
    ConfigMaps (its slots), and `kubeberth manifests` grants that for such a profile."""
    config = write(tmp_path / "network-profile.yaml", NETWORK_PROFILE)
    assert scheduler_reads_config_maps(config) and not scheduler_reads_config_maps(None)
    run_scheduler(live, tmp_path, token, config)


def elector(client: Client, controller: str) -> LeaderElector:
    """A candidate with short periods, so the scenario sees acquire, renewals and release."""
    return LeaderElector(client, f"kubeberth-{controller}", "kube-system", "rbac",
                         timing=LeaseTiming(1.0, 0.6, 0.05))


def run_descheduler(live: Live, tmp_path: Path, token: str) -> None:
    """Informers (nodes, pods, namespaces, priority classes, PDBs, Deployments, ReplicaSets,
    Jobs), leader election, an eviction the API grants (and its Event) and one it refuses with
    a 429 because a PodDisruptionBudget appeared after the pass."""
    on_vk = spilled(live, tmp_path, audit=True)
    client = live.client(token)
    lease = elector(client, "descheduler")
    policy = load_descheduler_policy(write(tmp_path / "policy.yaml", POLICY))
    ctl = LiveDescheduler(policy, client, interval=3600, elector=lease)
    start(live, ctl)
    wait_for(lambda: ctl.passes == 1, "the first pass (nothing to evict)")
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: LOW in json.dumps(to_dict(ctl.cache.get("Node", VK))),
             "the cache to see the taint")
    planned = ctl.plan().evictions
    assert sorted(d.pod for d in planned) == on_vk
    first = ctl.apply(planned[:1])
    live.kubectl("apply", "-f", str(write(tmp_path / "pdb.yaml", pdb("llm", "llm", 3))))
    second = ctl.apply(planned[1:])
    assert [o.result for o in first + second] == ["evicted", "pdb"]
    live.stop_controller(ctl)  # type: ignore[arg-type]  # flushes the Event, releases the Lease
    assert ctl.recorder is not None and ctl.recorder.posted == 1


# A share of more than one GPU: kubeberth cannot model its demand.
POISON_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "poison", "namespace": "default"},
    "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
        "requests": {"kubeberth.io/gpu-milli": "1500"}}}]}}
BUSY = "".join(bound_pod(f"busy-{i}", "gpu-1") for i in range(4))


def _spill(live: Live, tmp_path: Path, token: str, prometheus: FakePrometheus | None) -> None:
    """The taint added (GPUs free up) and removed again (demand returns), each a node get and a
    JSON patch, with leader election; with the API as signal source, informers of nodes and
    pods feed the signal."""
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node() + BUSY),
               audit=True)
    if prometheus is None:
        # A pod it cannot read: the informer refuses it with a Warning Event.
        live.plant("pods", POISON_POD)
    cfg = spill_config(tmp_path, threshold=2, stabilization=0.5,
                       url=prometheus.url if prometheus else "")
    assert cfg.controller.signal.source == ("prometheus" if prometheus else "cluster")
    ctl = LiveSpillController(cfg, live.client(token), elector=elector(live.client(token),
                                                                       "spill-controller"))
    start(live, ctl)
    wait_for(ctl.ready, "the spill controller")
    if prometheus is not None:
        prometheus.value = 3
    else:
        for i in range(3):
            live.kubectl("delete", "pod", f"busy-{i}")
    wait_for(lambda: LOW in node_taints(live, VK), "the taint to be added", timeout=20)
    if prometheus is not None:
        prometheus.value = 0
    else:
        live.kubectl("apply", "-f", str(write(tmp_path / "more.yaml", "".join(
            bound_pod(f"again-{i}", "gpu-1") for i in range(3)))))
    wait_for(lambda: len(ctl.flips) == 2, "the taint to be removed", timeout=20)
    assert [d for _, d in ctl.flips] == ["add", "remove"]
    assert LOW not in node_taints(live, VK)
    live.stop_controller(ctl)  # type: ignore[arg-type]
    if prometheus is None:
        assert ctl.recorder is not None and ctl.recorder.posted == 1


def run_spill_api(live: Live, tmp_path: Path, token: str) -> None:
    _spill(live, tmp_path, token, None)


def run_spill_prometheus(live: Live, tmp_path: Path, token: str) -> None:
    prometheus = FakePrometheus()
    try:
        _spill(live, tmp_path, token, prometheus)
    finally:
        prometheus.down()


KUEUE = """\
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: veto}
spec: {controllerName: example.com/veto}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: vetted}
spec:
  namespaceSelector: {}
  admissionChecks: [veto]
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: vetted, namespace: team-a}
spec: {clusterQueue: vetted}
---
"""

VETOED = """apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: vetoed, namespace: team-a}
spec:
  queueName: vetted
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - {name: c, resources: {requests: {nvidia.com/gpu: "1"}}}
"""


class Veto:
    """An admission check controller that rejects every workload: Kueue deactivates it."""

    NAME = "example.com/veto"

    @staticmethod
    def parse_args(parameters: Any) -> None:
        return None

    @staticmethod
    def evaluate(args: None, request: CheckRequest) -> Verdict:
        return Verdict("Rejected", "vetoed")


def queued_job(name: str, gpus: int, priority: str = "") -> str:
    prio = f", kueue.x-k8s.io/priority-class: {priority}" if priority else ""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/queue-name: main{prio}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}
---
"""


class ConflictingClient(Client):
    """The first patch this client sends to a Job, a pod and a Workload's status each meets a
    concurrent change (another client labels the object just before), so the controller takes
    its 409 path: it reads the object back and patches again."""

    def __init__(self, live: Live, token: str) -> None:
        super().__init__(config=live.client(token).config)
        self.other = live.client()
        self.raced: list[str] = []

    def patch(self, res: Any, name: str, obj: Any, *args: Any, **kwargs: Any) -> Any:
        info = res._api_info
        kind, action = info.resource.kind, info.action
        targets: dict[tuple[str, str | None], Any] = {
            ("Job", None): Job, ("Pod", None): Pod,
            ("Workload", "status"): KueueResources.of(info.resource.version).by_kind["Workload"]}
        target = targets.get((kind, action))
        if target is not None and kind not in self.raced:
            self.raced.append(kind)
            self.other.patch(target, name, {"metadata": {"labels": {"raced": "yes"}}},
                             namespace=kwargs.get("namespace"), patch_type=PatchType.MERGE)
        return super().patch(res, name, obj, *args, **kwargs)


def _admission(live: Live, tmp_path: Path, token: str, version: str | None) -> None:
    """Informers (every Kueue kind, namespaces, priority classes, queue-labelled Jobs and
    pods), leader election, Workloads created for a Job and a pod, their status, ClusterQueue
    and LocalQueue status written, the Job started and the pod ungated, then a higher-priority
    Job preempting both: the Job stopped, the pod deleted; a Workload an admission check
    rejects, deactivated; a native gang PodGroup's pods, one Workload, ungated; Events; one
    409 each on a Job, a pod and a Workload status patch, so each is read back. ``version``:
    the Kueue version read (None: the served one the controller finds, v1beta1 here)."""
    live.serve(write(tmp_path / "cluster.yaml", node("a100-0", 4, 64, "{gpu: a100}")),
               audit=True, runtime_config="scheduling.k8s.io/v1beta1=true")
    live.kubectl("apply", "-f", str(write(tmp_path / "kueue.yaml", KUEUE)))
    client = ConflictingClient(live, token)
    ctl = LiveAdmission(client, elector=elector(live.client(token), "admission"),
                        version=version, checks=CheckRegistry({Veto.NAME: Veto()}))
    assert ctl.version == (version or "v1beta1")
    start(live, ctl)
    wait_for(ctl.ready, "the admission controller's caches")
    live.kubectl("apply", "-f", str(write(tmp_path / "low.yaml", queued_job("low", 2)
                                          + queued_pod("solo", "team-a", 2))))

    def did(action: str, workload: str) -> bool:
        return any(d.action == action and d.workload == workload for d in ctl.decisions)

    wait_for(lambda: did("start", "team-a/job-low") and did("start", "team-a/pod-solo"),
             "the Job started and the pod ungated")
    live.kubectl("apply", "-f", str(write(tmp_path / "high.yaml",
                                          queued_job("high", 4, "high"))))
    wait_for(lambda: did("stop", "team-a/job-low"), "the low Job stopped")
    wait_for(lambda: "team-a/solo" not in live.pods(), "the preempted pod deleted")
    live.kubectl("apply", "-f", str(write(tmp_path / "vetoed.yaml", VETOED)))
    wait_for(lambda: did("deactivate", "team-a/vetoed"), "the rejected Workload deactivated")
    gang = QUEUED_GANG + "".join(queued_pod(f"train-{i}", "team-a", 0, "train")
                                 for i in range(3))
    live.kubectl("apply", "-f", str(write(tmp_path / "gang.yaml", gang)))
    wait_for(lambda: did("start", "team-a/train"), "the native group's pods ungated")
    assert sorted(client.raced) == ["Job", "Pod", "Workload"]
    assert ctl.conflicts >= 3
    live.stop_controller(ctl)  # type: ignore[arg-type]  # flushes the Events
    assert ctl.recorder is not None and ctl.recorder.posted >= 3


def run_admission(live: Live, tmp_path: Path, token: str) -> None:
    _admission(live, tmp_path, token, None)


def run_admission_v1beta2(live: Live, tmp_path: Path, token: str) -> None:
    """The same through Kueue v1beta2 (Cohorts too): RBAC names the group, not the version,
    so the rules are the same."""
    _admission(live, tmp_path, token, "v1beta2")


Scenario = Callable[[Live, Path, str], None]
# Scenario id -> (controller, the spill controller's signal source, scenario).
SCENARIOS: dict[str, tuple[str, str, Scenario]] = {
    "scheduler": ("scheduler", "cluster", run_scheduler),
    "scheduler-network-capacity": ("scheduler", "cluster", run_scheduler_network),
    "descheduler": ("descheduler", "cluster", run_descheduler),
    "spill-controller-api-signal": ("spill-controller", "cluster", run_spill_api),
    "spill-controller-prometheus-signal": ("spill-controller", "prometheus",
                                           run_spill_prometheus),
    "admission": ("admission", "cluster", run_admission),
    "admission-kueue-v1beta2": ("admission", "cluster", run_admission_v1beta2),
}


# Scenarios whose scheduler profile reads ConfigMaps.
CONFIG_MAP_SCENARIOS = frozenset({"scheduler-network-capacity"})


def granted(controller: str, signal: str = "cluster", config_maps: bool = False) -> set[Access]:
    out = set()
    for group, resource, verbs in rbac_rows(controller, signal, config_maps):
        res, _, sub = resource.partition("/")
        out |= {Access(verb, group, res, sub) for verb in verbs}
    return out


def _show(accesses: set[Access]) -> list[str]:
    return [f"{a.verb} {a.api_group or 'core'}/{a.rbac_resource}" for a in sorted(accesses)]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_rbac_rules_cover_exactly_the_verbs_used(scenario: str, live: Live,
                                                 tmp_path: Path) -> None:
    controller, signal, run = SCENARIOS[scenario]
    token = f"{scenario}-token"
    run(live, tmp_path, token)
    srv = live.server
    assert srv is not None and srv.cluster.audit is not None
    used = srv.cluster.audit.accesses(token)
    allowed = granted(controller, signal, scenario in CONFIG_MAP_SCENARIOS)
    assert not used - allowed, f"used but not granted: {_show(used - allowed)}"
    assert not allowed - used, f"granted but never used: {_show(allowed - used)}"

