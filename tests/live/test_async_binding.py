"""The live scheduler's binding round trips on worker threads: a failed binding is unreserved
and requeued, concurrent bindings never bind a pod twice or overcommit a node, a binding that
loses to the watch is not requeued, and the decisions are those of binding in the loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import Client
from tests.live.harness import GPU, Live, bound, gpus_by_node, node, pod, wait_for, write

from kubeberth.api.errors import InputError
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import PluginRef, PluginSet
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import ReservePlugin
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.state.cluster import ClusterState, PodInfo


class Ledger(ReservePlugin):
    """Records every Reserve and Unreserve, by pod and node."""

    name = "Ledger"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        self.calls.append(("reserve", pod.key, node))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  node: int) -> None:
        self.calls.append(("unreserve", pod.key, node))


def _with_ledger() -> tuple[Registry, Any, Ledger]:
    ledger = Ledger()
    reg = in_tree_registry()

    def new(_args: Mapping[str, Any] | None, _handle: Handle) -> Ledger:
        return ledger

    reg.register("Ledger", new)
    cfg = load_scheduler_config(None)
    cfg.profiles[0].plugins["reserve"] = PluginSet(enabled=[PluginRef("Ledger")])
    return reg, cfg, ledger


class BindingClient(Client):
    """Counts binding posts per pod and the most in flight at once; ``fail_first`` fails the
    first post with a transport error, ``delay`` holds each post that long first."""

    def __init__(self, live: Live, *, fail_first: bool = False, delay: float = 0.0) -> None:
        super().__init__(config=live.client().config)
        self.fail_first = fail_first
        self.delay = delay
        self.posts: dict[str, int] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def create(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj).__name__ != "PodBinding":
            return super().create(obj, *args, **kwargs)
        name = obj.metadata.name
        with self._lock:
            first = not self.posts
            self.posts[name] = self.posts.get(name, 0) + 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            if first and self.fail_first:
                raise httpx2.ConnectError("connection refused (injected)")
            return super().create(obj, *args, **kwargs)
        finally:
            with self._lock:
                self.in_flight -= 1


def _start(live: Live, ctl: LiveScheduler) -> LiveScheduler:
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    live.controllers.append((ctl, thread, []))
    wait_for(ctl.ready, "the scheduler's caches")
    return ctl


def test_a_failed_binding_is_unreserved_and_requeued(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 4)))
    reg, cfg, ledger = _with_ledger()
    client = BindingClient(live, fail_first=True)
    ctl = _start(live, LiveScheduler(cfg, reg, client, bind_workers=4))
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("p", 2))))
    wait_for(lambda: bound(live) == {"default/p": "n1"}, "the retry to bind")
    # Reserved, unreserved when the binding failed, reserved again after the backoff.
    assert [c[0] for c in ledger.calls] == ["reserve", "unreserve", "reserve"]
    assert client.posts == {"p": 2}
    wait_for(lambda: not ctl.binding, "the binding to finish")
    live.stop_controller(ctl)
    text = ctl.metrics.exposition().decode()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 1.0' \
        in text
    assert [d.action for d in ctl.decisions] == ["bind"]
    # Accounted once, where the API says.
    assert int(ctl.snap.requested[ctl.snap.node_index["n1"], ctl.snap.col(GPU)]) == 2000


def test_concurrent_bindings_never_double_bind_or_overcommit(live: Live,
                                                             tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", "".join(node(f"n{i}", 2) for i in range(3))))
    client = BindingClient(live, delay=0.3)
    ctl = _start(live, LiveScheduler(load_scheduler_config(None), in_tree_registry(), client,
                                     bind_workers=4))
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml",
                                          "".join(pod(f"p{i}", 1, "1") for i in range(8)))))
    wait_for(lambda: len(bound(live)) == 6, "six pods to bind")
    wait_for(lambda: ctl.sched.queue.pending_pods()["unschedulable"] == 2,
             "the other two judged unschedulable on the assumed state")
    # The round trips overlapped, within the pool's bound, and no pod was posted twice.
    assert 1 < client.most_in_flight <= 4
    assert sorted(client.posts.values()) == [1] * 6
    assert gpus_by_node(live) == {"n0": 2, "n1": 2, "n2": 2}
    wait_for(lambda: not ctl.binding, "the bindings to finish")
    assert sorted(d.pod for d in ctl.decisions if d.action == "bind") == sorted(bound(live))


class LateClient(Client):
    """Another scheduler binds the pod to the other node and the watch shows it before this
    client's binding is posted (and refused with 409)."""

    def __init__(self, live: Live) -> None:
        super().__init__(config=live.client().config)
        self.live = live
        self.ctl: LiveScheduler | None = None
        self.targets: list[str] = []

    def create(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj).__name__ == "PodBinding":
            name, ns = obj.metadata.name, obj.metadata.namespace
            self.targets.append(obj.target.name)
            other = "b" if obj.target.name == "a" else "a"
            srv = self.live.server
            assert srv is not None and self.ctl is not None
            srv.call(lambda: srv.api.bind(ns, name, {"target": {"kind": "Node",
                                                                "name": other}}))
            ctl = self.ctl
            key = f"{ns}/{name}"
            wait_for(lambda: key in ctl.pods and ctl.pods[key] is not ctl.binding[key].pod,
                     "the watch to show the pod bound elsewhere")
        return super().create(obj, *args, **kwargs)


def test_a_binding_the_watch_overtook_is_not_requeued(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("a", 4) + node("b", 4)))
    reg, cfg, ledger = _with_ledger()
    client = LateClient(live)
    ctl = LiveScheduler(cfg, reg, client, bind_workers=2)
    client.ctl = ctl
    _start(live, ctl)
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", pod("p", 2))))
    wait_for(lambda: ctl.conflicts == 1, "the refused binding")
    wait_for(lambda: not ctl.binding, "the binding cycle to end")
    [mine] = client.targets
    other = "b" if mine == "a" else "a"
    assert bound(live) == {"default/p": other}
    pi = ctl.pods["default/p"]
    assert ctl.snap.node_names[pi.node] == other
    # Accounted once, on the node the API says; the assumption on the other is gone.
    assert int(ctl.snap.requested[ctl.snap.node_index[mine], ctl.snap.col(GPU)]) == 0
    assert int(ctl.snap.requested[ctl.snap.node_index[other], ctl.snap.col(GPU)]) == 2000
    node_idx = ctl.snap.node_index[mine]
    assert ledger.calls == [("reserve", "default/p", node_idx),
                            ("unreserve", "default/p", node_idx)]
    assert sum(ctl.sched.queue.pending_pods().values()) == 0
    assert [d.action for d in ctl.decisions] == ["conflict"]


CLUSTER = "".join(node(f"n{i}", g) for i, g in enumerate([2, 8, 4, 4]))
PODS = "".join(pod(f"p{i:02d}", g, c) for i, (g, c) in enumerate(
    [(1, "2"), (4, "8"), (2, "4"), (1, "1"), (3, "6"), (2, "2"), (1, "4"), (2, "8")]))


def test_same_placements_with_and_without_binding_workers(live: Live, tmp_path: Path) -> None:
    placements = []
    for workers in (0, 8):
        live.serve(write(tmp_path / "cluster.yaml", CLUSTER))
        live.kubectl("apply", "-f", str(write(tmp_path / "pods.yaml", PODS)))
        ctl = _start(live, LiveScheduler(load_scheduler_config(None), in_tree_registry(),
                                         live.client(), seed=5, bind_workers=workers))
        wait_for(lambda: len(bound(live)) == 8, "every pod to be bound")
        placements.append(bound(live))
        live.stop_controller(ctl)
        live.controllers.clear()
        assert live.server is not None
        live.server.stop()
    assert placements[0] == placements[1]


def test_negative_worker_count_is_bad_input(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 1)))
    with pytest.raises(InputError, match="bind_workers"):
        LiveScheduler(load_scheduler_config(None), in_tree_registry(), live.client(),
                      bind_workers=-1)
