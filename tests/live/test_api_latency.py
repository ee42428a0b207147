"""A slow API server (every request delayed on the server side) changes timing, never
guarantees: the scheduler binds each pod once, overcommits no node, and reports the pods that
do not fit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from tests.live.harness import Live, bound, gpus_by_node, node, pod, wait_for, write

LATENCY = 0.05  # seconds per request: a loaded control plane, not a failing one


def test_scheduler_keeps_its_guarantees_on_a_slow_api(live: Live, tmp_path: Path) -> None:
    server = live.serve(write(tmp_path / "cluster.yaml",
                              "".join(node(f"n{i}", 3) for i in range(3))))
    server.cluster.latency = LATENCY
    ctl = live.scheduler()
    live.kubectl("apply", "-f", str(write(tmp_path / "pods.yaml",
                                          "".join(pod(f"p{i}", 1, "1") for i in range(10)))))
    wait_for(lambda: len(bound(live)) == 9, "nine pods to bind on the slow API", timeout=60)
    wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 1,
             "the tenth judged unschedulable")
    assert gpus_by_node(live) == {"n0": 3, "n1": 3, "n2": 3}
    wait_for(lambda: not ctl.binding, "the bindings to finish")
    binds = [d.pod for d in ctl.decisions if d.action == "bind"]
    assert sorted(binds) == sorted(bound(live)), "a pod bound twice or a binding lost"
    pending = next(p for k, p in live.pods().items() if k not in bound(live))
    wait_for(lambda: any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in live.pods()[f"default/{pending['metadata']['name']}"]["status"].get(
            "conditions", [])), "the PodScheduled=False condition on the pending pod")
    # Latency removed: a freed GPU is used at once, by the pod that waited.
    server.cluster.latency = 0.0
    live.kubectl("delete", "pod", "p0", "--wait=false")
    wait_for(lambda: len(bound(live)) == 9 and "default/p0" not in bound(live),
             "the waiting pod to take the freed GPU")
    assert max(gpus_by_node(live).values()) == 3


def test_the_injected_latency_delays_api_requests_only(live: Live, tmp_path: Path) -> None:
    server = live.serve(write(tmp_path / "cluster.yaml", node("n0", 1)), audit=True)
    server.cluster.latency = 1.0
    with httpx.Client(base_url=server.url) as http:
        start = time.monotonic()
        assert http.get("/api/v1/nodes").status_code == 200
        assert time.monotonic() - start >= 1.0
    # While an API request sits in its delay, /healthz answers: ordering, not a stopwatch.
    server.cluster.latency = 5.0
    done = threading.Event()

    def slow_request() -> None:
        with httpx.Client(base_url=server.url, timeout=60,
                          headers={"User-Agent": "slow-probe"}) as http:
            assert http.get("/api/v1/nodes").status_code == 200
        done.set()

    thread = threading.Thread(target=slow_request, daemon=True)
    thread.start()
    audit = server.cluster.audit
    assert audit is not None
    wait_for(lambda: "slow-probe" in audit.identities(), "the slow request to arrive")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.get("/healthz").status_code == 200
    assert not done.is_set(), "/healthz waited for the API request's delay"
    thread.join(timeout=60)
    assert done.is_set()
    server.cluster.latency = 0.0
