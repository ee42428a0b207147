"""Admission checks: Kueue's reaction to each check state, the ClusterQueue's activeness,
onFlavors, unmodelled controllers and the one driver all hosts share.

Upstream semantics (kubernetes-sigs/kueue v0.19.2) each test follows are cited next to it:
workload_controller.go is pkg/controller/core/workload_controller.go, admissionchecks.go is
pkg/workload/admissionchecks.go, evict.go is pkg/workload/evict/evict.go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubeberth.admission import AdmissionState, finish_evictions
from kubeberth.admission import driver as driver_module
from kubeberth.admission.checks import CheckRegistry, CheckRequest, Verdict
from kubeberth.admission.cycle import CycleResult
from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.api.times import parse_time
from kubeberth.cli.admit import AdmitRun, admit, contract
from kubeberth.sim.admission import AdmissionDriver

from .builders import (
    KUEUE,
    at,
    cluster_queue,
    flavor,
    group,
    load,
    local_queue,
    quota,
    states,
    workload,
)

CPU = "cpu"
NOW = parse_time(at(600), "now")
CONTROLLER = "test.example/approval"


@dataclass(frozen=True)
class Args:
    state: str
    delay: int
    requeue_after: int | None


class Approval:
    """A test controller: the configured state, once ``delay`` seconds passed since the
    reservation (Pending before); Retry carries ``requeueAfter``."""

    NAME = CONTROLLER

    @staticmethod
    def parse_args(parameters: Mapping[str, Any] | None) -> Args:
        if parameters is None:
            raise InputError("no parameters")
        data = parameters["data"]
        after = data.get("requeueAfter")
        return Args(data["state"], int(data.get("delay", "0")),
                    None if after is None else int(after))

    @staticmethod
    def evaluate(args: Args, request: CheckRequest) -> Verdict:
        if request.now < request.reserved_at + args.delay:
            return Verdict("Pending", "not yet", recheck_at=request.reserved_at + args.delay)
        if args.state == "Retry" and request.current.retry_count >= 1:
            return Verdict("Ready", "second time lucky")
        return Verdict(args.state, f"said {args.state}",
                       requeue_after_seconds=args.requeue_after)


def _registry() -> CheckRegistry:
    return CheckRegistry({CONTROLLER: Approval()})


def _check(name: str, controller: str = CONTROLLER, params: str | None = "params",
           active: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": controller}
    if params is not None:
        spec["parameters"] = {"apiGroup": "", "kind": "ConfigMap", "name": params}
    doc: dict[str, Any] = {"apiVersion": KUEUE, "kind": "AdmissionCheck",
                           "metadata": {"name": name}, "spec": spec}
    if active is not None:
        doc["status"] = {"conditions": [{"type": "Active", "status": str(active),
                                         "reason": "Active", "message": "",
                                         "lastTransitionTime": at(0)}]}
    return doc


def _params(state: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "params", "namespace": "kueue-system"},
            "data": {"state": state, **data}}


def _docs(*checks: dict[str, Any], rules: list[dict[str, Any]] | None = None,
          extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    strategy = {"admissionChecks": rules or [{"name": c["metadata"]["name"]} for c in checks]}
    return [flavor("default"), flavor("spot"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, "4")]),
                                       ("spot", [quota(CPU, "4")]))],
                          extra={"admissionChecksStrategy": strategy}),
            local_queue("cq"), *checks, *(extra or []),
            workload("w", "cq", {CPU: "3"}, created=10)]


def _run(tmp_path: Path, docs: list[dict[str, Any]], now: float = NOW) -> dict[str, Any]:
    return contract(admit(load(tmp_path, docs), now, None, _registry()))


def _row(data: dict[str, Any], name: str = "default/w") -> dict[str, Any]:
    return next(w for w in data["workloads"] if w["name"] == name)


def test_ready_check_admits(tmp_path: Path) -> None:
    # HasAllChecksReady + SyncAdmittedCondition (admissionchecks.go): quota reserved and every
    # check Ready is Admitted.
    data = _run(tmp_path, _docs(_check("ok"), extra=[_params("Ready")]))
    assert states(data)["default/w"] == ("Admitted", "Admitted")
    assert _row(data)["admissionChecks"] == [
        {"name": "ok", "state": "Ready", "message": "said Ready"}]


def test_pending_check_keeps_quota_reserved(tmp_path: Path) -> None:
    # A check that is not Ready leaves the workload QuotaReserved, holding its quota
    # (SyncAdmittedCondition: reason UnsatisfiedChecks).
    docs = _docs(_check("slow"), extra=[_params("Ready", delay="60")])
    data = _run(tmp_path, docs)
    assert states(data)["default/w"] == ("QuotaReserved", "QuotaReserved")
    assert _row(data)["admissionChecks"][0]["state"] == "Pending"


def test_pending_check_turns_ready_when_time_passes(tmp_path: Path) -> None:
    objs = load(tmp_path, _docs(_check("slow"), extra=[_params("Ready", delay="60")]))
    first = driver_module.settle(AdmissionState.from_objects(objs, _registry()), NOW)
    assert first.wake_at(NOW) == NOW + 60
    later = driver_module.settle(first.state, NOW + 60)
    assert later.cycles[0].checks.admitted == ["default/w"]


def test_retry_releases_quota_and_requeues_after_the_backoff(tmp_path: Path) -> None:
    # reconcileCheckBasedEviction (workload_controller.go): a Retry check evicts the workload
    # (reason AdmissionCheck, message "Evicted due to AdmissionCheck in Retry state: ...");
    # resetChecksOnEviction (evict.go) sets it back to Pending and counts the retry;
    # GetMaxRetryTime (admissionchecks.go): requeued at lastTransitionTime + requeueAfterSeconds.
    docs = _docs(_check("flaky"), extra=[_params("Retry", requeueAfter="30")])
    run = admit(load(tmp_path, docs), NOW, None, _registry())
    data = contract(run)
    assert states(data)["default/w"] == ("Pending", "AdmissionCheck")
    assert run.reasons["default/w"][1] == \
        'Evicted due to AdmissionCheck in Retry state: "flaky" (said Retry)'
    assert _row(data)["admissionChecks"] == [
        {"name": "flaky", "state": "Pending",
         "message": "Reset to Pending after eviction. Previously: Retry", "retryCount": 1}]
    assert run.state.admitted == {}
    (entry, _active), = run.state.queues.pending()
    assert entry.wl.requeue_at == NOW + 30
    assert entry.wl.queue_time == NOW  # GetQueueOrderTimestamp: the eviction's time
    # Not before the backoff is over; then it reserves again and the controller says Ready.
    assert driver_module.settle(run.state, NOW + 29).state.admitted == {}
    settled = driver_module.settle(run.state, NOW + 30)
    assert states(contract(AdmitRun(settled.state)))["default/w"] == ("Admitted", "Admitted")


def test_rejected_check_deactivates(tmp_path: Path) -> None:
    # Rejected: SetDeactivationTarget, then evicted with DeactivatedDueToAdmissionCheck and not
    # requeued while spec.active is false (workload_controller.go).
    run = admit(load(tmp_path, _docs(_check("no"), extra=[_params("Rejected")])), NOW, None,
                _registry())
    data = contract(run)
    assert states(data)["default/w"] == ("Inadmissible", "DeactivatedDueToAdmissionCheck")
    wl, _reason, message = run.state.queues.unqueued["default/w"]
    assert not wl.active and wl.admission is None
    assert message == ('The workload is deactivated due to AdmissionCheck in Rejected state: '
                       '"no" (said Rejected)')


def test_rejected_wins_over_retry(tmp_path: Path) -> None:
    docs = _docs(_check("no"), _check("flaky", params="retry"),
                 extra=[_params("Rejected"), {**_params("Retry"), "metadata": {
                     "name": "retry", "namespace": "kueue-system"}}])
    assert states(_run(tmp_path, docs))["default/w"][1] == "DeactivatedDueToAdmissionCheck"


def test_on_flavors_limits_the_checks(tmp_path: Path) -> None:
    # AdmissionChecksForWorkload (pkg/workload/workload.go): a check with onFlavors applies only
    # when one of them is assigned; "w" gets flavor default, so the spot-only check is skipped.
    docs = _docs(_check("spot-only", params="never"),
                 rules=[{"name": "spot-only", "onFlavors": ["spot"]}],
                 extra=[{**_params("Rejected"), "metadata": {
                     "name": "never", "namespace": "kueue-system"}}])
    data = _run(tmp_path, docs)
    assert states(data)["default/w"] == ("Admitted", "Admitted")
    assert "admissionChecks" not in _row(data)


def test_missing_admission_check_makes_the_queue_inactive(tmp_path: Path) -> None:
    # updateWithAdmissionChecks (pkg/cache/scheduler/clusterqueue.go): AdmissionCheckNotFound.
    docs = [d for d in _docs(_check("ghost")) if d["kind"] != "AdmissionCheck"]
    run = admit(load(tmp_path, docs), NOW, None, _registry())
    assert states(contract(run))["default/w"] == ("Inadmissible", "Inadmissible")
    assert run.state.inactive["cq"] == \
        "ClusterQueue cq is inactive: references missing AdmissionCheck(s): ghost"


def test_bad_parameters_make_the_check_inactive(tmp_path: Path) -> None:
    # The provisioning controller's AdmissionCheck reconciler sets Active=False
    # (BadParametersRef) when its parameters cannot be read; so does a plugin's parser.
    run = admit(load(tmp_path, _docs(_check("ok", params="absent"))), NOW, None, _registry())
    assert run.state.inactive["cq"] == \
        "ClusterQueue cq is inactive: references inactive AdmissionCheck(s): ok"


def test_unmodelled_controller_is_reported_and_never_ready(tmp_path: Path) -> None:
    docs = _docs(_check("prov", controller="kueue.x-k8s.io/provisioning-request",
                        params=None, active=True))
    data = _run(tmp_path, docs)
    assert states(data)["default/w"] == ("QuotaReserved", "QuotaReserved")
    assert data["unmodelledAdmissionChecks"] == [
        {"name": "prov", "controllerName": "kueue.x-k8s.io/provisioning-request"}]
    # Without an Active condition (its controller never ran) the ClusterQueue is inactive.
    run = admit(load(tmp_path, _docs(_check("prov", controller="x/y", params=None))), NOW,
                None, _registry())
    assert "cq" in run.state.inactive


def test_input_check_states_of_an_unmodelled_controller_are_honoured(tmp_path: Path) -> None:
    docs = _docs(_check("prov", controller="x/y", params=None, active=True))
    wl = workload("w", "cq", {CPU: "3"}, created=10, admitted=("cq", {CPU: "default"}),
                  reserved_at=20)
    wl["status"]["admissionChecks"] = [{"name": "prov", "state": "Ready", "message": "done",
                                        "lastTransitionTime": at(30)}]
    data = _run(tmp_path, [*docs[:-1], wl])
    assert states(data)["default/w"] == ("Admitted", "Admitted")


def test_plugin_registry_loads_by_import_path() -> None:
    registry = CheckRegistry().with_out_of_tree(["tests.admission.test_checks:Approval"])
    assert list(registry) == [CONTROLLER]
    with pytest.raises(InputError, match="is not a kubeberth admission check plugin"):
        CheckRegistry().with_out_of_tree(["tests.admission.test_checks:Args"])


class _Host:
    def ungate_pod(self, key: str, pod: Pod) -> None:
        raise AssertionError("Workload objects have no pods")

    def evict_pod(self, key: str, recreated: Pod) -> None:
        raise AssertionError("Workload objects have no pods")

    def wake_at(self, when: float) -> None:
        pass

    def call_at(self, when: float, fn: Any, *, counts: bool = False) -> None:
        fn()


def test_admit_and_the_simulator_run_the_same_cycles(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Both hosts go through driver.settle: recorded cycle by cycle, their decisions agree."""
    docs = [flavor("default"),
            cluster_queue("cq", [group([CPU], ("default", [quota(CPU, "4")]))],
                          within="LowerPriority"),
            local_queue("cq"),
            workload("low", "cq", {CPU: "3"}, priority=1, admitted=("cq", {CPU: "default"}),
                     reserved_at=0),
            workload("high", "cq", {CPU: "3"}, priority=10, created=5),
            workload("next", "cq", {CPU: "1"}, created=6)]
    seen: list[list[tuple[object, ...]]] = []
    real = driver_module.run_cycle

    def recording(state: AdmissionState, now: float) -> CycleResult:
        result = real(state, now)
        seen[-1].append((sorted(a.workload.key for a in result.admitted),
                         [(p.workload, p.by, p.reason) for p in result.preempted],
                         sorted((n.workload, n.reason) for n in result.not_admitted)))
        return result

    monkeypatch.setattr(driver_module, "run_cycle", recording)
    seen.append([])
    admit(load(tmp_path, docs), 0.0, None)
    seen.append([])
    sim = AdmissionDriver(load(tmp_path, docs), _Host())
    sim.start()
    sim.step(0.0)
    assert seen[0] == seen[1]
    assert seen[0][0][1] == [("default/low", "default/high", "InClusterQueue")]
    assert len(seen[0]) >= 2
    # and the pure loop, given the CLI's reaction, gives the same too
    seen.append([])
    driver_module.settle(AdmissionState.from_objects(load(tmp_path, docs)), 0.0,
                         after=lambda c, _f: finish_evictions(c.state, sorted(c.state.evicting),
                                                              0.0))
    assert seen[2] == seen[0]
