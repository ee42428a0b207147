"""Pods bound per second by the live scheduler against the embedded API server, over HTTP.

N nodes (8 GPUs each) and N one-GPU pods are created in the embedded server; the clock starts
when the controller is started on them (its informers list them) and stops when the server
reports every pod bound. Each binding is one ``pods/binding`` round trip, and the server and
the controller share this process's cores (two threads of work per binding: the HTTP handler and
the scheduling cycle), so the figure is a floor for a real API server on other machines.

``--bind-workers 0`` binds on the control loop (each cycle waits for its round trip), the
default posts bindings from a pool of worker threads; ``--compare`` runs both back to back,
alternating, so a loaded machine affects both alike.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from lightkube import Client, KubeConfig

from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.live.scheduler import BIND_WORKERS, LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry


def _node(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}"},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi",
                                       "nvidia.com/gpu": "8", "pods": "110"}}}


def _pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "trainer", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}


def run(count: int, bind_workers: int = BIND_WORKERS) -> tuple[float, int]:
    with TemporaryDirectory() as tmp, EmbeddedServer(clock=ManualClock()) as srv:
        api = srv.api

        def load() -> None:
            for i in range(count):
                api.create(api.nodes, "", _node(i))
            for i in range(count):
                api.create(api.pods, "default", _pod(i))

        srv.call(load)
        srv.settle()
        kubeconfig = srv.write_kubeconfig(Path(tmp) / "kubeconfig")
        client = Client(config=KubeConfig.from_file(str(kubeconfig)))
        ctl = LiveScheduler(load_scheduler_config(None), in_tree_registry(), client,
                            bind_workers=bind_workers)

        def unbound() -> int:
            return sum(1 for p in api.store.items(api.pods) if not p["spec"].get("nodeName"))

        def decided() -> int:
            return sum(1 for d in ctl.decisions if d.action == "bind")

        start = time.perf_counter()
        thread = threading.Thread(target=ctl.run, daemon=True)
        thread.start()
        # A bind decision is recorded once the API has answered; only then ask the server
        # (walking its pods on its loop thread would slow the run it measures).
        while decided() < count or srv.call(unbound):
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        ctl.stop.set()
        thread.join(timeout=10)
        return elapsed, len([d for d in ctl.decisions if d.action == "bind"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1000, help="pods, and as many nodes")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--bind-workers", type=int, default=BIND_WORKERS,
                        help="binding worker threads (0: bind on the control loop)")
    parser.add_argument("--compare", action="store_true",
                        help="alternate --bind-workers 0 and the given count")
    args = parser.parse_args()
    variants = [0, args.bind_workers] if args.compare else [args.bind_workers]
    best: dict[int, float] = {}
    for _ in range(args.repeat):
        for workers in variants:
            elapsed, bound = run(args.pods, workers)
            assert bound == args.pods, f"{bound} of {args.pods} pods bound"
            best[workers] = min(best.get(workers, elapsed), elapsed)
    for workers in variants:
        print(f"{args.pods} pods on {args.pods} nodes, {workers} binding workers: bound in "
              f"{best[workers]:.2f} s, {args.pods / best[workers]:.0f} pods/s "
              f"(best of {args.repeat})")


if __name__ == "__main__":
    main()
