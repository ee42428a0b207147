"""Shared pieces of the descheduler and spill-controller tests: a GPU node, the virtual-kubelet
node, a Deployment whose pods may spill there, and the controllers started on threads."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from tests.live.harness import Live, wait_for, write

from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.live.descheduler import LiveDescheduler
from kubeberth.live.leader import LeaderElector, LeaseTiming
from kubeberth.live.spill import LiveSpillController
from kubeberth.spill.config import SpillConfig, load_spill_config

VK = "virtual-kubelet"
LOW = "vk.node.com/low-gpu-usage"


def gpu_node(name: str, gpus: int, *, cordoned: bool = False) -> str:
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {name}}}
spec: {{unschedulable: {str(cordoned).lower()}}}
status:
  allocatable: {{cpu: "32", memory: 256Gi, nvidia.com/gpu: "{gpus}", pods: "110"}}
---
"""


def vk_node(*, low: bool = False) -> str:
    extra = f"\n  - {{key: {LOW}, value: \"true\", effect: NoSchedule}}" if low else ""
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {VK}, labels: {{type: virtual-kubelet}}}}
spec:
  taints:
  - {{key: vk.node.com, value: "true", effect: NoSchedule}}{extra}
status:
  allocatable: {{cpu: "10000", memory: 100Ti, nvidia.com/gpu: "1000", pods: "10000"}}
---
"""


def deployment(name: str, replicas: int, gpus: int = 1) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      tolerations:
      - {{key: vk.node.com, operator: Equal, value: "true", effect: NoSchedule}}
      containers:
      - name: main
        image: vllm
        resources:
          requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "{gpus}"}}
          limits: {{nvidia.com/gpu: "{gpus}"}}
---
"""


def pdb(name: str, app: str, min_available: int) -> str:
    return f"""apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, namespace: default}}
spec:
  minAvailable: {min_available}
  selector: {{matchLabels: {{app: {app}}}}}
---
"""


POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: spill-return
    pluginConfig:
      - name: DefaultEvictor
        args: {}
      - name: RemovePodsViolatingNodeTaints
        args:
          includedTaints: ["vk.node.com/low-gpu-usage"]
    plugins:
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
"""


def running_on(live: Live, node: str, app: str = "") -> list[str]:
    """Running, not terminating pods on ``node`` (of Deployment ``app`` when given)."""
    return sorted(k for k, p in live.pods().items()
                  if p["spec"].get("nodeName") == node
                  and p["status"].get("phase") == "Running"
                  and not p["metadata"].get("deletionTimestamp")
                  and (not app or p["metadata"].get("labels", {}).get("app") == app))


def spilled(live: Live, tmp_path: Path, replicas: int = 2, history: int = 2000,
            audit: bool = False) -> list[str]:
    """A cordoned GPU node, the VK node and ``replicas`` pods the scheduler placed on VK; then
    the GPU node is uncordoned. Returns the VK pods. ``audit`` turns the request audit on."""
    live.serve(write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4, cordoned=True) + vk_node()),
               history=history, audit=audit)
    live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "llm.yaml", deployment("llm", replicas))))
    wait_for(lambda: len(running_on(live, VK, "llm")) == replicas, "the pods to spill to VK")
    live.kubectl("uncordon", "gpu-1")
    return running_on(live, VK, "llm")


def start(live: Live, ctl: Any) -> threading.Thread:
    """Run a controller on a thread, stopped and checked when the test ends."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ctl.run()
        except BaseException as err:  # surfaced at teardown
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    live.controllers.append((ctl, thread, errors))
    return thread


def descheduler(live: Live, tmp_path: Path, *, policy: str = POLICY, interval: float = 0.3,
                dry_run: bool = False, identity: str = "",
                wait_ready: bool = True) -> LiveDescheduler:
    pol = load_descheduler_policy(write(tmp_path / "policy.yaml", policy))
    client = live.client()
    elector = LeaderElector(client, "kubeberth-descheduler", "kube-system", identity,
                            timing=LeaseTiming(1.0, 0.6, 0.05)) if identity else None
    ctl = LiveDescheduler(pol, client, interval=interval, dry_run=dry_run, elector=elector)
    start(live, ctl)
    if wait_ready:
        wait_for(ctl.ready, "the descheduler's caches")
    return ctl


def spill_config(tmp_path: Path, *, threshold: float = 2, window: float = 0.4,
                 stabilization: float = 1.5, interval: float = 0.2,
                 url: str = "") -> SpillConfig:
    signal = f"\n  signal: {{source: prometheus, url: \"{url}\", timeoutSeconds: 1}}" \
        if url else ""
    return load_spill_config(write(tmp_path / "spill.yaml", f"""\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller:
  intervalSeconds: {interval}
  threshold: {threshold}
  windowSeconds: {window}
  stabilizationSeconds: {stabilization}
  maxSignalAgeSeconds: 30{signal}
"""))


def spill_controller(live: Live, cfg: SpillConfig, *, prometheus: str | None = None,
                     dry_run: bool = False, identity: str = "") -> LiveSpillController:
    client = live.client()
    elector = LeaderElector(client, "kubeberth-spill-controller", "kube-system", identity,
                            timing=LeaseTiming(1.0, 0.6, 0.05)) if identity else None
    ctl = LiveSpillController(cfg, client, prometheus=prometheus, dry_run=dry_run,
                              elector=elector)
    start(live, ctl)
    wait_for(ctl.ready, "the spill controller")
    return ctl


def node_taints(live: Live, name: str) -> list[str]:
    srv = live.server
    assert srv is not None
    node = srv.call(lambda: srv.api.store.must_get(srv.api.nodes, "", name))
    return [t["key"] for t in (node.get("spec") or {}).get("taints") or []]


def bound_pod(name: str, node: str, gpus: int = 1) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: busy}}}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "{gpus}"}}
      limits: {{nvidia.com/gpu: "{gpus}"}}
---
"""


class FakePrometheus:
    """A Prometheus instant-query endpoint whose answer the test sets: ``value`` (a number),
    or ``mode`` "error" (HTTP 422 with Prometheus' error body), "empty" (an empty vector) or
    "down" (the server stops answering: connection refused)."""

    def __init__(self) -> None:
        self.value = 0.0
        self.mode = "value"
        self.queries: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                form = parse_qs(self.rfile.read(length).decode())
                outer.queries.append(form.get("query", [""])[0])
                if outer.mode == "error":
                    code, body = 422, {"status": "error", "errorType": "execution",
                                       "error": "query timed out"}
                elif outer.mode == "empty":
                    code, body = 200, {"status": "success",
                                       "data": {"resultType": "vector", "result": []}}
                else:
                    code, body = 200, {"status": "success", "data": {
                        "resultType": "vector",
                        "result": [{"metric": {}, "value": [time.time(), str(outer.value)]}]}}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def down(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
