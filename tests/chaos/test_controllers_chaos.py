"""Chaos for the descheduler, admission and the spill controller: kill -9 and restart mid-run,
slow, failing and lost evictions, Prometheus taken down. Each test runs its own `kubeberth
serve` and controllers as processes; the invariants are read from the API (and sampled while
the faults are on, for the budgets and the quota)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Node, Pod
from tests.chaos.harness import (
    GPU,
    TOKEN,
    Chaos,
    Proc,
    Workload,
    healthy_of,
    node,
    pod,
    violations,
    wait_for,
)
from tests.live.spillenv import POLICY

from kubeberth.api.quantity import to_milli
from kubeberth.live.admission import KueueResources

pytestmark = pytest.mark.slow

VK = "virtual-kubelet"
LOW = "vk.node.com/low-gpu-usage"
KueueResources.of("v1beta1")  # lightkube resolves the Kueue kinds of applied YAML


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[Chaos]]:
    chaos: list[Chaos] = []
    yield chaos
    for c in chaos:
        c.close()


class Sampler:
    """Reads ``value()`` every 50 ms on a thread until stopped; keeps the smallest and the
    largest (the invariants must hold while the faults are on, not only at the end)."""

    def __init__(self, value: Callable[[], int]) -> None:
        self.value = value
        self.seen: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                self.seen.append(self.value())
            except httpx.HTTPError:
                continue

    def close(self) -> list[int]:
        self.stop.set()
        self.thread.join(timeout=10)
        return self.seen


def vk_node() -> str:
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {VK}, labels: {{type: virtual-kubelet}}}}
spec:
  taints:
  - {{key: vk.node.com, value: "true", effect: NoSchedule}}
status:
  allocatable: {{cpu: "1000", memory: 10Ti, {GPU}: "1000", pods: "1000"}}
---
"""


def taints(chaos: Chaos, name: str) -> list[str]:
    spec = chaos.client().get(Node, name).spec
    return [t.key for t in (spec.taints if spec else None) or []]


def set_taints(chaos: Chaos, name: str, keys: list[str]) -> None:
    chaos.client().patch(Node, name, {"spec": {"taints": [
        {"key": k, "value": "true", "effect": "NoSchedule"} for k in keys]}})


LLM = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm, namespace: default}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: llm}}}}
  template:
    metadata: {{labels: {{app: llm}}}}
    spec:
      tolerations:
      - {{key: vk.node.com, operator: Equal, value: "true", effect: NoSchedule}}
      containers:
      - name: main
        image: vllm
        resources:
          requests: {{cpu: "1", memory: 1Gi, {GPU}: "1"}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: llm, namespace: default}}
spec:
  minAvailable: 3
  selector: {{matchLabels: {{app: llm}}}}
---
"""


def on_node(chaos: Chaos, name: str) -> int:
    return sum(1 for p in chaos.pods() if p["spec"].get("nodeName") == name
               and (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp"))


def test_descheduler_killed_mid_pass_with_failing_evictions_never_breaks_the_budget(
        tmp_path: Path, made: list[Chaos]) -> None:
    """Four replicas spilled to the VK node come back to the GPU node one eviction at a time:
    evictions are slow, a third fail and a fifth are carried out but answered 500, and the
    descheduler is killed after the first. The budget (3 of 4) holds at every sample."""
    chaos = Chaos(tmp_path, node("gpu-1", 4, cordoned=True) + vk_node(),
                  faults="evict.delay=0.1,evict.fail=0.3,evict.lost=0.2,seed=5")
    made.append(chaos)
    chaos.start("scheduler", "--no-leader-elect")
    chaos.apply(LLM, "llm.yaml")
    wait_for(lambda: on_node(chaos, VK) == 4, "the replicas to spill to the VK node")
    chaos.client().patch(Node, "gpu-1", {"spec": {"unschedulable": False}})
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    args = ["--policy", str(policy), "--descheduling-interval", "300ms", "--no-leader-elect"]
    first = chaos.start("descheduler", *args)
    sampler = Sampler(lambda: healthy_of(chaos, "llm"))
    try:
        set_taints(chaos, VK, ["vk.node.com", LOW])
        wait_for(lambda: on_node(chaos, "gpu-1") >= 1, "the first replica back on gpu-1")
        first.kill9()
        chaos.start("descheduler", *args)
        wait_for(lambda: on_node(chaos, "gpu-1") == 4 and on_node(chaos, VK) == 0,
                 "every replica back on gpu-1", timeout=90)
    finally:
        seen = sampler.close()
    assert seen and min(seen) >= 3, f"the budget broke: {min(seen)} healthy"
    assert violations(chaos, pdb_min={"default/llm": 3}) == []
    logs = "".join(p.text() for p in chaos.procs if p.name == "descheduler")
    assert "refused (500): injected fault" in logs  # the faults were met, and survived


KUEUE = f"""apiVersion: v1
kind: Namespace
metadata: {{name: team-a}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: a100}}
spec:
  nodeLabels: {{gpu: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: team-a}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, {GPU}]
    flavors:
    - name: a100
      resources:
      - {{name: cpu, nominalQuota: 64}}
      - {{name: {GPU}, nominalQuota: 4}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: main, namespace: team-a}}
spec: {{clusterQueue: team-a}}
---
"""


def job(name: str, gpus: int, seconds: float) -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/queue-name: main}}
spec:
  parallelism: 1
  completions: 1
  template:
    metadata: {{annotations: {{kubeberth.io/duration-seconds: "{seconds}"}}}}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {{requests: {{cpu: "1", {GPU}: "{gpus}"}}}}
---
"""


def admitted_gpus(chaos: Chaos) -> int:
    """GPUs held by admitted, unfinished Workloads (the ClusterQueue's usage)."""
    total = 0
    for wl in chaos.client().list(Workload, namespace="*"):
        data = wl.to_dict()
        status = data.get("status") or {}
        finished = any(c.get("type") == "Finished" and c.get("status") == "True"
                       for c in status.get("conditions") or [])
        if finished or not status.get("admission"):
            continue
        for ps in status["admission"].get("podSetAssignments") or []:
            total += to_milli(GPU, (ps.get("resourceUsage") or {}).get(GPU, 0)) // 1000
    return total


def test_admission_killed_and_restarted_never_admits_past_the_quota(
        tmp_path: Path, made: list[Chaos]) -> None:
    chaos = Chaos(tmp_path, node("a100-0", 8, labels="{gpu: a100}") + KUEUE)
    made.append(chaos)
    chaos.start("scheduler", "--no-leader-elect")
    first = chaos.start("admission", "--no-leader-elect")
    names = [f"train-{i}" for i in range(6)]
    sampler = Sampler(lambda: admitted_gpus(chaos))
    try:
        chaos.apply("".join(job(n, 2, 2) for n in names), "jobs.yaml")
        wait_for(lambda: admitted_gpus(chaos) > 0, "the first admissions")
        first.kill9()
        chaos.start("admission", "--no-leader-elect")

        def done() -> bool:
            return all((j.status.succeeded or 0) >= 1 if j.status else False
                       for j in chaos.client().list(Job, namespace="team-a"))

        wait_for(done, "every Job to complete", timeout=90)
    finally:
        seen = sampler.close()
    assert seen and max(seen) <= 4, f"admitted {max(seen)} GPUs on a quota of 4"
    owners = [ref["name"] for wl in chaos.client().list(Workload, namespace="*")
              for ref in wl.to_dict()["metadata"].get("ownerReferences") or []]
    assert sorted(owners) == sorted(names)  # one Workload per Job, none twice
    assert violations(chaos) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """Debian's prometheus binary scraping the server's /metrics every 0.5 s."""

    def __init__(self, tmp_path: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("the prometheus binary is not installed (apt-get install prometheus)")
        self.binary = binary
        self.tmp = tmp_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = tmp_path / "prometheus.yml"
        self.config.write_text(f"""\
global: {{scrape_interval: 500ms, evaluation_interval: 500ms}}
scrape_configs:
- job_name: kube-state-metrics
  scheme: https
  # serve's certificate is self-signed and made anew at each restart; the target is loopback.
  tls_config: {{insecure_skip_verify: true}}
  authorization: {{credentials: {TOKEN}}}
  static_configs: [{{targets: ["{target}"]}}]
""")
        self.proc: subprocess.Popen[str] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        log = (self.tmp / f"prometheus-{self.runs}.log").open("w")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={self.config}",
             f"--storage.tsdb.path={self.tmp / f'tsdb-{self.runs}'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, text=True)

        def ready() -> bool:
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, "prometheus to be ready")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)


def gauge(chaos: Chaos, proc: Proc, name: str) -> float | None:
    text = httpx.get(f"{chaos.health_url(proc)}/metrics", timeout=5).text
    match = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def busy(i: int) -> str:
    return pod(f"busy-{i}").replace("spec:\n", "spec:\n  nodeName: gpu-1\n", 1)


def test_spill_holds_the_taint_while_prometheus_is_down_and_a_restart_flips_nothing(
        tmp_path: Path, made: list[Chaos]) -> None:
    """Three GPUs free up: the average rises above the threshold, then Prometheus dies before
    the stabilization is over. No flip on the stale signal, however long it lasts; back, the
    taint comes after a full stabilization. A killed and restarted controller reads the taint
    from the node and flips nothing more."""
    chaos = Chaos(tmp_path, node("gpu-1", 4) + vk_node() + "".join(busy(i) for i in range(4)))
    made.append(chaos)
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{chaos.port}")
    prometheus.start()
    try:
        spill = tmp_path / "spill.yaml"
        spill.write_text(f"""\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller:
  intervalSeconds: 0.5
  threshold: 2
  windowSeconds: 1
  stabilizationSeconds: 5
  maxSignalAgeSeconds: 30
  signal: {{source: prometheus, url: "{prometheus.url}", timeoutSeconds: 1}}
""")
        args = ["--config", str(spill), "--no-leader-elect"]
        ctl = chaos.start("spill-controller", *args)
        wait_for(lambda: gauge(chaos, ctl, "kubeberth_spill_free_gpus") == 0.0,
                 "the first good reading")
        for i in range(3):
            chaos.client().delete(Pod, f"busy-{i}", namespace="default")
        wait_for(lambda: (gauge(chaos, ctl, "kubeberth_spill_free_gpus_average") or 0) > 2,
                 "the average above the threshold", timeout=30)
        prometheus.kill()  # before the 5 s stabilization is over
        assert LOW not in taints(chaos, VK)
        wait_for(lambda: gauge(chaos, ctl, "kubeberth_spill_signal_stale") == 1.0,
                 "the stale signal")
        held = Sampler(lambda: int(LOW in taints(chaos, VK)))
        wait_for(lambda: (gauge(chaos, ctl, "kubeberth_spill_signal_age_seconds") or 0) > 7,
                 "more than a stabilization without a signal", timeout=30)
        assert held.close() and max(held.seen) == 0  # no flip on a stale signal
        assert gauge(chaos, ctl, "kubeberth_spill_taint_flips_total") is None
        prometheus.start()
        wait_for(lambda: LOW in taints(chaos, VK), "the taint after Prometheus is back",
                 timeout=60)
        assert gauge(chaos, ctl, "kubeberth_spill_taint_flips_total") == 1.0
        ctl.kill9()
        again = chaos.start("spill-controller", *args)
        wait_for(lambda: gauge(chaos, again, "kubeberth_spill_taint") == 1.0,
                 "the restarted controller to read the taint")
        steady = Sampler(lambda: int(LOW in taints(chaos, VK)))
        wait_for(lambda: (gauge(chaos, again, "kubeberth_spill_free_gpus") or 0) == 3.0,
                 "a reading")
        assert min(steady.close() or [1]) == 1
        assert gauge(chaos, again, "kubeberth_spill_taint_flips_total") is None
    finally:
        prometheus.kill()
    assert violations(chaos) == []
