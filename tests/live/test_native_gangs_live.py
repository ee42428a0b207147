"""Kubernetes 1.37's native Workload and PodGroup (scheduling.k8s.io/v1beta1) live: served by
``kubeberth serve --runtime-config scheduling.k8s.io/v1beta1=true``, applied with kubectl, and
scheduled by the live scheduler all-or-nothing, with the PodGroupInitiallyScheduled condition
kubectl's Status column reads."""

from __future__ import annotations

import json

from tests.live.harness import Live, bound, wait_for
from tests.paths import ROOT

from kubeberth.config.workload_api import NativeGroup
from kubeberth.live.scheduler import NATIVE, group_condition
from kubeberth.scheduling.pod_group_cycle import GroupOutcome

EXAMPLE = ROOT / "examples" / "native-gangs"
API = "scheduling.k8s.io/v1beta1=true"


def _podgroups(live: Live) -> dict[str, str]:
    """kubectl get podgroups' Name -> Status, as its table shows them."""
    out = live.kubectl("get", "podgroups.scheduling.k8s.io", "--no-headers",
                       "-o", "custom-columns=N:.metadata.name")
    names = out.split()
    table = live.kubectl("get", "podgroups.scheduling.k8s.io")
    header, *rows = table.splitlines()
    assert header.split() == ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"]
    cells = {r.split()[0]: r.split() for r in rows}
    assert sorted(cells) == sorted(names)
    return {name: cells[name][3] for name in names}


def test_kubectl_applied_gang_binds_all_or_nothing(live: Live) -> None:
    live.serve(EXAMPLE / "cluster.yaml", runtime_config=API)
    ctl = live.scheduler(EXAMPLE / "scheduler-config.yaml")
    live.kubectl("apply", "-f", str(EXAMPLE / "workload.yaml"))
    wait_for(lambda: len(bound(live)) == 4, "the rack group's three workers")
    placed = bound(live)
    # The rack-constrained group lands in rack-b (the fuller rack), all three at once; the
    # group short of its minCount binds nothing.
    assert {placed[f"default/worker-{i}"] for i in range(3)} <= {"b1", "b2"}
    assert "default/short-0" not in placed
    # The short group waits at PreEnqueue (GangScheduling: fewer pods than minCount), so no
    # group cycle ran and no condition is written: Pending, as upstream shows it.
    wait_for(lambda: _podgroups(live) == {"training-workers-0": "Scheduled", "short": "Pending"},
             "the groups' conditions")
    group = json.loads(live.kubectl("get", "podgroups.scheduling.k8s.io", "training-workers-0",
                                    "-o", "json"))
    (cond,) = group["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled", "True", "Scheduled")
    assert ctl.native_groups and NATIVE in ctl.resources()
    table = live.kubectl("get", "podgroups.scheduling.k8s.io", "training-workers-0")
    assert "Gang" in table and "training" in table


def test_kueue_workloads_keep_their_name_until_the_api_is_turned_on(live: Live) -> None:
    live.serve()
    resources = live.kubectl("api-resources", "--api-group", "scheduling.k8s.io", "-o", "name")
    assert resources.split() == ["priorityclasses.scheduling.k8s.io"]
    assert live.server is not None
    live.server.stop()
    live.serve(runtime_config=API)
    resources = live.kubectl("api-resources", "--api-group", "scheduling.k8s.io", "-o", "name")
    assert sorted(resources.split()) == ["podgroups.scheduling.k8s.io",
                                         "priorityclasses.scheduling.k8s.io",
                                         "workloads.scheduling.k8s.io"]


def _outcome(result: str, message: str = "") -> GroupOutcome:
    group = NativeGroup("default", "g", True, 2)
    return GroupOutcome(group, "default-scheduler", [], [], result=result, message=message)


def test_condition_follows_upstreams_update_rules() -> None:
    first = group_condition(_outcome("Unschedulable", "0/4 nodes"), [], 1, "t1")
    assert first == [{"type": "PodGroupInitiallyScheduled", "status": "False",
                      "reason": "Unschedulable", "message": "0/4 nodes",
                      "observedGeneration": 1, "lastTransitionTime": "t1"}]
    # The same verdict again writes nothing; a new message keeps the transition time.
    assert group_condition(_outcome("Unschedulable", "0/4 nodes"), first, 1, "t2") is None
    again = group_condition(_outcome("Unschedulable", "0/5 nodes"), first, 1, "t2")
    assert again is not None and again[0]["lastTransitionTime"] == "t1"
    done = group_condition(_outcome("Scheduled"), again, 1, "t3")
    assert done is not None and (done[0]["status"], done[0]["reason"],
                                 done[0]["lastTransitionTime"]) == ("True", "Scheduled", "t3")
    # Once True it never goes back (a later cycle for extra pods fails: nothing written).
    assert group_condition(_outcome("Unschedulable"), done, 1, "t4") is None
    error = group_condition(_outcome("Error", "boom"), [], 2, "t5")
    assert error is not None and error[0]["reason"] == "SchedulerError"
    # Other condition types are kept.
    other = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    kept = group_condition(_outcome("Scheduled"), [other], 1, "t6")
    assert kept is not None and kept[0] == other


def test_a_bad_runtime_config_is_a_clear_error() -> None:
    from typer.testing import CliRunner

    from kubeberth.cli.main import app

    for value, said in (("apps/v1=true", "'apps/v1' cannot be turned on or off"),
                        ("scheduling.k8s.io/v1beta1=yes", "scheduling.k8s.io/v1beta1=true or")):
        res = CliRunner().invoke(app, ["serve", "--no-auth", "--port", "0",
                                       "--runtime-config", value])
        assert res.exit_code == 2, res.output
        assert said in res.output and "--runtime-config" in res.output
        assert "Traceback" not in res.output
