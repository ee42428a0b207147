"""Each controller's RBAC rules in ``kubeberth manifests`` cover exactly the verbs it uses.

The controller runs against the embedded API server over HTTP with its own bearer token,
through a scenario that takes every path that talks to the API; the server's request audit
records each ``(verb, apiGroup, resource, subresource)`` as the real API server's authorizer
would see it. Used ⊆ granted (the controller would not be refused anything on a real cluster)
and granted ⊆ used (it is granted nothing it does not need).

To add a controller: write its scenario (start it with ``live.client(token)``, drive it until
every API path it has was taken, stop it cleanly) and add one entry to ``SCENARIOS``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from tests.live.harness import Live, bound, node, pod, wait_for, write

from kubeberth.apiserver.audit import Access
from kubeberth.config.scheduler import load_scheduler_config
from kubeberth.live.deploy import RBAC
from kubeberth.live.leader import LeaderElector
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.plugins.scheduling import in_tree_registry

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


def run_scheduler(live: Live, tmp_path: Path, token: str) -> None:
    """Leader election (create, renew, release), a binding that loses a 409 race (read back),
    a preemption (victim deleted, preemptor nominated), an unschedulable pod (PodScheduled
    condition, FailedScheduling event) and Scheduled events."""
    live.serve(write(tmp_path / "cluster.yaml", node("big", 4) + node("small", 2)
                     + PRIORITIES), audit=True)
    client = RacingClient(live, token, "small")
    elector = LeaderElector(client, "kubeberth-scheduler", "kube-system", "rbac",
                            lease_duration=1.0, renew_deadline=0.6, retry_period=0.05)
    ctl = LiveScheduler(load_scheduler_config(None), in_tree_registry(), client,
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
    actions = {d.action for d in ctl.decisions}
    assert {"conflict", "bind", "preempt", "nominate"} <= actions
    live.stop_controller(ctl)  # flushes the events and releases the Lease
    assert ctl.recorder is not None and ctl.recorder.posted >= 3


Scenario = Callable[[Live, Path, str], None]
# One entry per controller that exists; the lead adds descheduler, spill-controller and
# admission here as they land.
SCENARIOS: dict[str, Scenario] = {
    "scheduler": run_scheduler,
}


def granted(controller: str) -> set[Access]:
    out = set()
    for group, resource, verbs in RBAC[controller]:
        res, _, sub = resource.partition("/")
        out |= {Access(verb, group, res, sub) for verb in verbs}
    return out


def _show(accesses: set[Access]) -> list[str]:
    return [f"{a.verb} {a.api_group or 'core'}/{a.rbac_resource}" for a in sorted(accesses)]


@pytest.mark.parametrize("controller", list(SCENARIOS))
def test_rbac_rules_cover_exactly_the_verbs_used(controller: str, live: Live,
                                                 tmp_path: Path) -> None:
    token = f"{controller}-token"
    SCENARIOS[controller](live, tmp_path, token)
    srv = live.server
    assert srv is not None and srv.cluster.audit is not None
    used = srv.cluster.audit.accesses(token)
    allowed = granted(controller)
    assert not used - allowed, f"used but not granted: {_show(used - allowed)}"
    assert not allowed - used, f"granted but never used: {_show(allowed - used)}"

