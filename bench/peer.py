"""kubeberth's scheduler beside upstream's own, on the same real API server and the same objects.

For each scheduler in turn, a fresh real cluster (upstream's etcd, kube-apiserver and
kube-controller-manager from the oracle module, `oracle cluster`; oracle/README.md) with KWOK's
controller (`oracle kwok`, sigs.k8s.io/kwok's own, kwokctl's default stages) playing the kubelet
of N fake nodes (8 GPUs each), and P one-GPU pods created unbound once KWOK has made every
node Ready. The clock starts when the scheduler process is started (its informers list
everything) and stops when the API reports every pod bound; it keeps running until KWOK has
made every pod Running. Upstream is ``oracle kube-scheduler`` (kube-scheduler v1.37's own
command, default profile, client QPS/burst raised so its client-side rate limit is not what is
measured); kubeberth is ``kubeberth scheduler`` (default profile). Both run as processes beside
the API server and KWOK on the same cores.

Then, offline, on the same nodes and pods written as manifests: ``kubeberth explain`` and
``oracle explain`` (upstream's framework and plugins, every filter verdict and score of every
node recorded for each pod) timed end to end, and kubeberth's scheduling decisions/s on the
snapshot (bench/decisions.py's measure).

Usage: python bench/peer.py [--nodes 1000] [--pods 5000] [--explain-pods 100]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node, Pod

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.oracle.harness import BINARY, oracle_binary  # noqa: E402
from tests.realcluster.cluster import RealCluster  # noqa: E402

from kubeberth.config.manifests import load_manifests  # noqa: E402

SCHEDULER_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": False},
    "clientConnection": {"qps": 10000, "burst": 10000},
}


def node_doc(i: int) -> dict[str, Any]:
    """A fake node: capacity in the created object (a kubelet registers its node with it
    too), the conditions and the rest of its status left to KWOK."""
    name = f"node-{i:05d}"
    resources = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": resources, "capacity": resources}}


def pod_doc(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "trainer", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}


def load(cluster: RealCluster, client: Client, nodes: int, pods: int) -> None:
    for i in range(nodes):
        client.create(Node.from_dict(node_doc(i)))
    while not all(ready(n) for n in client.list(Node)):
        assert all(p.poll() is None for p in cluster.procs), \
            f"a cluster process exited; see the logs in {cluster.workdir}"
        time.sleep(0.2)
    for i in range(pods):
        client.create(Pod.from_dict(pod_doc(i)))


def ready(node: Node) -> bool:
    conditions = (node.status and node.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def pods_where(client: Client, fields: dict[str, str]) -> int:
    """Pods matching a field selector, filtered by the API server (5,000 whole pods listed
    five times a second would load the server the schedulers share)."""
    return sum(1 for _ in client.list(Pod, namespace="default", fields=fields))


def race(workdir: Path, command: list[str], nodes: int, pods: int) -> tuple[float, float]:
    """Seconds from starting ``command`` until every pod is bound, and until KWOK has made
    every pod Running, on a fresh cluster of its own in ``workdir`` (its kubeconfig:
    ``workdir/kubeconfig``)."""
    cluster = RealCluster(BINARY, workdir, kwok=True)
    cluster.start()
    try:
        client = Client(config=KubeConfig.from_file(str(cluster.kubeconfig)))
        load(cluster, client, nodes, pods)
        log = workdir / "scheduler.log"
        with log.open("wb") as out:
            start = time.perf_counter()
            proc = subprocess.Popen(command, stdout=out, stderr=out)
            try:
                times = []
                for unfinished in ({"spec.nodeName": ""}, {"status.phase": "Pending"}):
                    while pods_where(client, unfinished):
                        assert proc.poll() is None, f"{command[0]} exited; see {log}"
                        time.sleep(0.2)
                    times.append(time.perf_counter() - start)
                return times[0], times[1]
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
    finally:
        cluster.stop()


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--explain-pods", type=int, default=100,
                    help="pods for the offline explain timing (every node's verdicts and "
                         "scores are recorded per pod, so it is much slower than scheduling)")
    args = ap.parse_args()
    if not BINARY.exists():
        oracle_binary()
    kubeberth = shutil.which("kubeberth", path=str(Path(sys.executable).parent))
    if kubeberth is None:
        sys.exit("bench/peer.py: run it with the venv's python (its kubeberth command)")
    with TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"real kube-apiserver v1.37.2, {args.nodes} nodes x 8 GPUs, {args.pods} one-GPU "
              f"pods, bound per second from the scheduler's start:", flush=True)
        (work / "upstream").mkdir()
        cfg = work / "upstream" / "kube-scheduler.yaml"
        # kube-scheduler takes its kubeconfig from the configuration file once one is given.
        cfg.write_text(yaml.safe_dump(dict(SCHEDULER_CONFIG, clientConnection={
            **SCHEDULER_CONFIG["clientConnection"],
            "kubeconfig": str(work / "upstream" / "kubeconfig")})))
        upstream, up_running = race(
            work / "upstream", [str(BINARY), "kube-scheduler", f"--config={cfg}",
                                "--secure-port=0"], args.nodes, args.pods)
        print(f"  kube-scheduler (upstream) {args.pods / upstream:8.0f} pods/s "
              f"({upstream:.1f} s; all Running after {up_running:.1f} s)", flush=True)
        (work / "kubeberth").mkdir()
        ours, our_running = race(
            work / "kubeberth", [kubeberth, "scheduler", "--kubeconfig",
                                 str(work / "kubeberth" / "kubeconfig"), "--metrics-port", "0"],
            args.nodes, args.pods)
        print(f"  kubeberth scheduler       {args.pods / ours:8.0f} pods/s "
              f"({ours:.1f} s; all Running after {our_running:.1f} s)")
        print(f"  ratio kubeberth/upstream  {upstream / ours:8.2f} "
              f"(to all Running: {up_running / our_running:.2f})")

        manifests = work / "snapshot.yaml"
        docs = [node_doc(i) for i in range(args.nodes)] + [
            pod_doc(i) for i in range(args.explain_pods)]
        manifests.write_text(yaml.safe_dump_all(docs))
        t_ours = timed([kubeberth, "explain", "-f", str(manifests), "-o", "json"])
        t_up = timed([str(BINARY), "explain", "-f", str(manifests)])
        print(f"offline explain, {args.nodes} nodes, {args.explain_pods} pods, whole command:")
        print(f"  oracle explain (upstream framework) {args.explain_pods / t_up:8.1f} pods/s "
              f"({t_up:.1f} s)")
        print(f"  kubeberth explain                   {args.explain_pods / t_ours:8.1f} pods/s "
              f"({t_ours:.1f} s)")
        sys.path.insert(0, str(ROOT / "bench"))
        from common import measure_decisions
        snapshot = load_manifests([manifests])
        rate, scheduled = measure_decisions(snapshot.nodes, args.pods)
        print(f"kubeberth decisions/s on the same nodes (bench/decisions.py's measure, "
              f"{args.pods} openb pods): {rate:,.0f} ({scheduled} scheduled)")


if __name__ == "__main__":
    main()
