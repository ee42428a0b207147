"""Two API servers behind one interface, so that the same end-to-end tests run against both:

* ``embedded``: kubeberth's own server (what `kubeberth serve` runs), which also plays kubelet,
  Deployment/ReplicaSet controllers and Kueue's pod webhook;
* ``real``: upstream's etcd, kube-apiserver and kube-controller-manager built from their Go
  modules (`oracle cluster`, `oracle kube-controller-manager`; oracle/README.md), with the
  CRDs kubeberth reads installed. A real API server has no kubelet: the node objects are plain
  objects and :class:`KubeletStandIn` writes what a kubelet would (bound pods Running, a
  terminating pod's final delete). Kueue's webhook is not there either, so queued pods are
  created with Kueue's scheduling gate already on them.
"""

from __future__ import annotations

import json
import selectors
import shutil
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from kubeberth.apiserver import EmbeddedServer
from kubeberth.apiserver.resources import RESOURCES
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
# The group/version both servers serve beyond their defaults (docs/gangs.md).
NATIVE_API = "scheduling.k8s.io/v1beta1"
Json = dict[str, Any]

# What kube-controller-manager runs here: the controllers of a cluster's workloads and API
# objects, not those that need kubelets (node lifecycle would mark every node NotReady and evict
# its pods), cloud providers or volumes.
CONTROLLERS = ",".join([
    "deployment-controller", "replicaset-controller", "job-controller", "disruption-controller",
    "garbage-collector-controller", "pod-garbage-collector-controller", "namespace-controller",
    "serviceaccount-controller", "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
    "endpointslice-controller", "ttl-after-finished-controller", "resourcequota-controller"])


# The groups kube-apiserver serves itself among those of kubeberth.apiserver.resources.
BUILT_IN = frozenset({"", "apps", "batch", "coordination.k8s.io", "policy", "scheduling.k8s.io"})


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def crds() -> list[Json]:
    """Minimal structural CRDs for the third-party kinds kubeberth reads, at the versions the
    embedded server serves (kubeberth.apiserver.resources, the same table): every field kept as
    written (``x-kubernetes-preserve-unknown-fields``; WorkloadPriorityClass has a top-level
    ``value``, like PriorityClass), the status
    subresource where the kind has one. Versions convert with strategy None (apiVersion only),
    as the fields kubeberth reads and writes are the same in each."""
    docs = []
    for r in RESOURCES:
        if r.group in BUILT_IN:
            continue
        schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields":
                                      True, "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
        versions = [{"name": v, "served": True, "storage": i == 0, "schema": schema,
                     **({"subresources": {"status": {}}} if "status" in r.subresources else {})}
                    for i, v in enumerate(r.versions)]
        names: Json = {"plural": r.plural, "singular": r.singular, "kind": r.kind,
                       "listKind": f"{r.kind}List"}
        if r.short_names:
            names["shortNames"] = list(r.short_names)
        meta: Json = {"name": f"{r.plural}.{r.group}"}
        if r.group.endswith(".k8s.io") and not r.group.endswith(".x-k8s.io"):
            # A *.k8s.io group is protected; scheduler-plugins' own CRDs carry this approval.
            meta["annotations"] = {"api-approved.kubernetes.io":
                                   "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"}
        docs.append({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": meta,
                     "spec": {"group": r.group, "scope": "Namespaced" if r.namespaced
                              else "Cluster", "names": names, "versions": versions}})
    return docs


def kubectl(kubeconfig: Path, home: Path, *args: str, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "KUBECACHEDIR": str(home / "cache")}
    proc = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], input=input,
                          capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
    return proc


class RealCluster:
    """`oracle cluster` (etcd + kube-apiserver in one process) and `oracle
    kube-controller-manager` as subprocesses of the test run, on loopback; with ``kwok``, also
    `oracle kwok` as every node's kubelet (bench/peer.py; the fixture uses
    :class:`KubeletStandIn`)."""

    def __init__(self, oracle: Path, workdir: Path, *, kwok: bool = False) -> None:
        self.oracle = oracle
        self.workdir = workdir
        self.kwok = kwok
        self.procs: list[subprocess.Popen[bytes]] = []
        self.info: Json = {}

    @property
    def kubeconfig(self) -> Path:
        return Path(self.info["kubeconfig"])

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log (level Metadata: who did what, and the answer)."""
        return self.workdir / "audit.log"

    def audit(self, username: str) -> list[Json]:
        """Every audited request of ``username`` so far, once answered."""
        events = (json.loads(line) for line in self.audit_log.read_text().splitlines())
        return [e for e in events if e["user"].get("username") == username
                and e["stage"] == "ResponseComplete"]

    @property
    def ca(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    def start(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        log = (self.workdir / "apiserver.log").open("wb")
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                          "rules": [{"level": "Metadata"}]}))
        proc = subprocess.Popen([str(self.oracle), "cluster", "--data-dir", str(self.workdir),
                                 f"--apiserver-arg=--audit-policy-file={policy}",
                                 f"--apiserver-arg=--audit-log-path={self.audit_log}",
                                 # Kubernetes 1.37's native Workload and PodGroup (beta, off
                                 # by default), as the embedded server's --runtime-config,
                                 # and the alpha topology constraints it always keeps.
                                 "--apiserver-arg=--feature-gates=GenericWorkload=true,"
                                 "TopologyAwareWorkloadScheduling=true",
                                 f"--apiserver-arg=--runtime-config={NATIVE_API}=true"],
                                stdout=subprocess.PIPE, stderr=log)
        self.procs.append(proc)
        self.info = json.loads(self._first_line(proc, deadline))
        wait_for(self._ready, "kube-apiserver's /readyz", deadline - time.monotonic())
        pki = self.workdir / "pki"
        kcm_log = (self.workdir / "controller-manager.log").open("wb")
        self.procs.append(subprocess.Popen(
            [str(self.oracle), "kube-controller-manager", f"--kubeconfig={self.kubeconfig}",
             "--leader-elect=false", "--secure-port=0", f"--controllers={CONTROLLERS}",
             f"--service-account-private-key-file={pki / 'service-account.key'}",
             f"--root-ca-file={self.ca}"], stdout=kcm_log, stderr=kcm_log))
        if self.kwok:
            # KWOK's controller as kwokctl runs it: every node is its fake node, with a lease.
            kwok_log = (self.workdir / "kwok.log").open("wb")
            self.procs.append(subprocess.Popen(
                [str(self.oracle), "kwok", f"--kubeconfig={self.kubeconfig}",
                 "--manage-all-nodes=true", "--node-lease-duration-seconds=40"],
                stdout=kwok_log, stderr=kwok_log))
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(crds()))
        self.kubectl("wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
        # kube-controller-manager's ServiceAccount controller is up once it made this one.
        wait_for(lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default",
                                      check=False).returncode == 0,
                 "kube-controller-manager", deadline - time.monotonic())

    def _first_line(self, proc: subprocess.Popen[bytes], deadline: float) -> str:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and proc.poll() is None, \
                f"oracle cluster did not start; see {self.workdir / 'apiserver.log'}"
            if sel.select(min(left, 1.0)):
                return proc.stdout.readline().decode()

    def _ready(self) -> bool:
        assert self.procs[0].poll() is None, \
            f"oracle cluster exited; see {self.workdir / 'apiserver.log'}"
        try:
            r = httpx.get(f"{self.info['server']}/readyz",
                          verify=ssl.create_default_context(cafile=str(self.ca)),
                          headers={"Authorization": f"Bearer {self.info['token']}"}, timeout=5)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def kubectl(self, *args: str, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return kubectl(self.kubeconfig, self.workdir, *args, input=input, check=check)

    def kubeconfig_dict(self, token: str | None = None) -> Json:
        config: Json = yaml.safe_load(self.kubeconfig.read_text())
        if token is not None:
            for user in config["users"]:
                user["user"] = {"token": token}
        return config

    def stop(self) -> None:
        """SIGTERM, as a process manager stops them; both must exit on their own."""
        codes = []
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            try:
                codes.append(proc.wait(timeout=60))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
        self.procs.clear()
        # kube-controller-manager ends by the signal itself, as upstream's does (it traps it
        # only with its ControllerManagerReleaseLeaderElectionLockOnExit gate); KWOK cancels
        # its context and returns.
        assert codes == [0] * self.kwok + [-signal.SIGTERM, 0], \
            f"exit codes after SIGTERM: {codes}; see {self.workdir}"


class KubeletStandIn:
    """What the kubelet of every node would write, since a real API server has none: a bound
    pending pod starts Running (Ready), and a terminating pod is deleted for good at once (its
    containers stopped). Nothing else."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[BaseException] = []

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._sync()
            except ApiError as err:
                if err.status.code not in (404, 409):
                    self.errors.append(err)
            except httpx.HTTPError:
                pass  # the server is going away at teardown
            except Exception as err:  # surfaced at close
                self.errors.append(err)
                return
            self.stop.wait(0.1)

    def _sync(self) -> None:
        for pod in self.client.list(Pod, namespace="*"):
            meta, spec, status = pod.metadata, pod.spec, pod.status
            assert meta is not None and spec is not None
            if meta.deletionTimestamp is not None:
                self.client.delete(Pod, meta.name or "", namespace=meta.namespace,
                                   grace_period=0)
            elif spec.nodeName and (status is None or status.phase == "Pending"):
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.client.patch(Pod.Status, meta.name or "", {"status": {
                    "phase": "Running", "startTime": now,
                    "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                                   for t in ("Initialized", "ContainersReady", "Ready")],
                    "containerStatuses": [{"name": c.name, "image": c.image or "",
                                           "imageID": "", "ready": True, "restartCount": 0,
                                           "started": True,
                                           "state": {"running": {"startedAt": now}}}
                                          for c in spec.containers]}},
                    namespace=meta.namespace, patch_type=PatchType.MERGE)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.errors, self.errors


class Api:
    """One API server as the tests see it: a kubeconfig, clients, kubectl, and what the
    server's own components do not do on that kind of server (see the module docstring)."""

    def __init__(self, kind: str, tmp_path: Path, *, embedded: EmbeddedServer | None = None,
                 real: RealCluster | None = None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.embedded = embedded
        self.real = real
        self.kubeconfig = tmp_path / "kubeconfig"
        if embedded is not None:
            embedded.write_kubeconfig(self.kubeconfig)
        else:
            assert real is not None
            self.kubeconfig.write_text(yaml.safe_dump(real.kubeconfig_dict()))
        self.kubelet: KubeletStandIn | None = None
        if real is not None:
            self.kubelet = KubeletStandIn(self.client())
            self.kubelet.start()

    @property
    def is_real(self) -> bool:
        return self.real is not None

    def client(self, token: str | None = None) -> Client:
        if self.real is not None:
            return Client(config=KubeConfig.from_dict(self.real.kubeconfig_dict(token)))
        if token is None:
            return Client(config=KubeConfig.from_file(str(self.kubeconfig)))
        assert self.embedded is not None
        config = self.embedded.kubeconfig()
        config["users"][0]["user"] = {"token": token}
        return Client(config=KubeConfig.from_dict(config))

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return kubectl(self.kubeconfig, self.tmp_path, *args, input=input).stdout

    def apply(self, text: str) -> None:
        """``kubectl apply`` of manifests: on the real server, a node's status (kubelet-owned)
        is written as the kubelet would, and queued pods get Kueue's gate (its webhook's)."""
        docs = [d for d in yaml.safe_load_all(text) if d]
        if self.is_real:
            for d in docs:
                labels = (d.get("metadata") or {}).get("labels") or {}
                if d.get("kind") == "Pod" and "kueue.x-k8s.io/queue-name" in labels:
                    d["spec"].setdefault("schedulingGates", [{"name": "kueue.x-k8s.io/admission"}])
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        if self.is_real:
            for d in docs:
                if d.get("kind") == "Node":
                    self.node_status(d["metadata"]["name"], d.get("status") or {})

    def node_status(self, name: str, status: Json) -> None:
        """A kubelet's node status: capacity = allocatable as given, Ready."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        alloc = status.get("allocatable") or {}
        body = {"status": {"allocatable": alloc, "capacity": status.get("capacity") or alloc,
                           "conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady",
                                           "lastHeartbeatTime": now,
                                           "lastTransitionTime": now}]}}
        self.kubectl("patch", "node", name, "--subresource=status", "--type=merge",
                     "-p", json.dumps(body))

    def objects(self, resource: str, namespace: str | None = None) -> dict[str, Json]:
        """``namespace/name`` (or ``name``) -> object, read through kubectl."""
        scope = ["-n", namespace] if namespace else ["-A"]
        items = json.loads(self.kubectl("get", resource, *scope, "-o", "json"))["items"]
        return {(f"{o['metadata']['namespace']}/" if o["metadata"].get("namespace") else "")
                + o["metadata"]["name"]: o for o in items}

    def pods(self) -> dict[str, Json]:
        return self.objects("pods")

    def placement(self) -> dict[str, str]:
        return {k: p["spec"].get("nodeName", "") for k, p in self.pods().items()}

    def close(self) -> None:
        if self.kubelet is not None:
            self.kubelet.close()


def reset(real: RealCluster) -> None:
    """Everything a test made, gone, so the next test on the same real cluster starts empty
    (namespaces stay: deleting one waits for the namespace controller's finalizer)."""
    kinds = ["deployments", "replicasets", "jobs", "poddisruptionbudgets",
             "workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io",
             "podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io"]
    for kind in kinds:
        real.kubectl("delete", kind, "--all", "-A", "--wait=false", "--ignore-not-found")
    real.kubectl("delete", "leases", "--all", "-n", "kubeberth", "--ignore-not-found")
    real.kubectl("delete", "pods", "--all", "-A", "--grace-period=0", "--force",
                 "--ignore-not-found", check=False)
    for kind in ["nodes", "clusterqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io",
                 "workloadpriorityclasses.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io"]:
        real.kubectl("delete", kind, "--all", "--ignore-not-found")
    real.kubectl("delete", "priorityclasses",
                 "--field-selector=metadata.name!=system-node-critical,"
                 "metadata.name!=system-cluster-critical", "--ignore-not-found")

    def empty() -> bool:
        out = real.kubectl("get", "pods", "-A", "-o", "name").stdout.strip()
        return not out
    wait_for(empty, "the previous test's pods to be gone")


class Running:
    """Controllers on threads, stopped and checked for errors at teardown."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, threading.Thread, list[BaseException]]] = []

    def start(self, ctl: Any) -> Any:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ctl.run()
            except BaseException as err:  # surfaced at teardown
                errors.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.items.append((ctl, thread, errors))
        wait_for(ctl.ready, f"{type(ctl).__name__}'s caches")
        return ctl

    def close(self) -> None:
        for ctl, thread, _ in self.items:
            ctl.stop.set()
            thread.join(timeout=10)
        for _, thread, errors in self.items:
            assert not thread.is_alive()
            assert not errors, errors


def scheduler(api: Api, running: Running, seed: int = 0,
              config: Path | None = None) -> LiveScheduler:
    ctl = LiveScheduler(load_scheduler_config(config), in_tree_registry(), api.client(),
                        seed=seed)
    return running.start(ctl)  # type: ignore[no-any-return]


def bound(api: Api) -> dict[str, str]:
    return {k: n for k, n in api.placement().items() if n}


def running_on(api: Api, node_name: str, app: str) -> list[str]:
    return sorted(k for k, p in api.pods().items()
                  if p["spec"].get("nodeName") == node_name
                  and p["status"].get("phase") == "Running"
                  and not p["metadata"].get("deletionTimestamp")
                  and p["metadata"].get("labels", {}).get("app") == app)


def queued_pod(name: str, ns: str, gpus: int) -> str:
    """A pod for Kueue's pod integration (queue label), valid on a real API server: an
    extended resource's request needs its limit (the embedded server does not insist)."""
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
    resources:
      requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}
      limits: {{nvidia.com/gpu: "{gpus}"}}
---
"""
