"""What Kueue does with admission check states, whichever controller sets them.

Kueue reserves quota first; its workload controller then lists on the Workload the checks the
ClusterQueue asks for (those whose ``onFlavors`` meet the assigned flavors; new ones Pending),
and acts on their states: every check Ready makes the workload Admitted; a Rejected check
deactivates it (evicted, quota released, never requeued while inactive); otherwise a Retry check
evicts it (quota released, checks reset to Pending, requeued no earlier than the Retry's
``requeueAfterSeconds``). Read from kubernetes-sigs/kueue v0.19.2:
pkg/controller/core/workload_controller.go (reconcileSyncAdmissionChecks,
reconcileCheckBasedEviction, buildAdmissionChecksMessage), pkg/workload/admissionchecks.go
(HasAllChecksReady, GetMaxRetryTime), pkg/workload/workload.go (AdmissionChecksForWorkload) and
pkg/workload/evict/evict.go (resetChecksOnEviction). :func:`evaluate_checks` is one pass of that
over every workload holding quota, after asking each modelled controller for its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kubeberth.admission.checks import CheckRequest, Verdict, reset_on_eviction
from kubeberth.admission.cycle import AdmissionState, cohort_cluster_queues
from kubeberth.admission.model import (
    CHECK_PENDING,
    CHECK_READY,
    CHECK_REJECTED,
    CHECK_RETRY,
    CHECK_STATES,
    Admission,
    AdmissionCheckState,
    ClusterQueue,
)
from kubeberth.api.errors import InputError

EVICTED_BY_CHECK = "AdmissionCheck"  # the Evicted condition's reason after a Retry
DEACTIVATED_BY_CHECK = "DeactivatedDueToAdmissionCheck"  # ... after a Rejected check


@dataclass(slots=True)
class ChecksResult:
    """One pass over the checks. ``checked``: workloads holding quota whose ClusterQueue asks
    checks of them (they are not Admitted until ``admitted`` lists them); ``evicted`` and
    ``deactivated``: (workload, message), their quota already released; ``changed``: workloads
    whose check states changed; ``recheck_at``: the earliest time a verdict may change."""

    state: AdmissionState
    checked: frozenset[str] = frozenset()
    admitted: list[str] = field(default_factory=list)
    evicted: list[tuple[str, str]] = field(default_factory=list)
    deactivated: list[tuple[str, str]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    recheck_at: float | None = None


def required_checks(cq: ClusterQueue | None, admission: Admission) -> list[str]:
    """The checks the ClusterQueue asks of this reservation: a check with ``onFlavors`` only
    when one of them is assigned, any other always."""
    if cq is None:
        return []
    assigned = {f for psa in admission.podset_assignments for f in psa.flavors.values()}
    out = []
    for name in sorted(set(cq.admission_checks)):
        on = cq.check_flavors.get(name)
        if on is None or assigned.intersection(on):
            out.append(name)
    return out


def is_admitted(states: tuple[AdmissionCheckState, ...]) -> bool:
    return all(s.state == CHECK_READY for s in states)


def _sync(states: tuple[AdmissionCheckState, ...], required: list[str],
          now: float) -> list[AdmissionCheckState]:
    have = {s.name: s for s in states}
    return [have.get(n) or AdmissionCheckState(n, CHECK_PENDING, last_transition=now)
            for n in required]


def _apply(current: AdmissionCheckState, v: Verdict, now: float) -> AdmissionCheckState:
    changed = v.state != current.state
    return AdmissionCheckState(
        current.name, v.state, v.message,
        now if changed or current.last_transition is None else current.last_transition,
        v.requeue_after_seconds if v.state == CHECK_RETRY else current.requeue_after_seconds,
        current.retry_count)


def _message(states: list[AdmissionCheckState], state: str) -> str:
    parts = [f'"{s.name}" ({s.message})' if s.message else f'"{s.name}"'
             for s in sorted(states, key=lambda s: s.name)]
    noun = "AdmissionChecks" if len(states) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def _retry_at(states: list[AdmissionCheckState]) -> float | None:
    """GetMaxRetryTime: the latest transition + requeueAfterSeconds of the Retry checks."""
    times = [s.last_transition + s.requeue_after_seconds for s in states
             if s.requeue_after_seconds is not None and s.last_transition is not None]
    return max(times, default=None)


def evaluate_checks(state: AdmissionState, now: float) -> ChecksResult:
    """Ask every modelled controller about every workload holding quota and apply Kueue's
    reaction to the states. ``state`` is not modified."""
    objs = state.objs
    if not any(cq.admission_checks for cq in objs.cluster_queues.values()) and \
            not any(wl.checks for wl in state.admitted.values()):
        return ChecksResult(state)
    nxt = state.clone()
    out = ChecksResult(nxt)
    checked: set[str] = set()
    touched: set[str] = set()
    for key, wl in sorted(state.admitted.items()):
        if wl.admission is None or key in state.evicting:
            continue
        cq_name = wl.admission.cluster_queue
        required = required_checks(objs.cluster_queues.get(cq_name), wl.admission)
        if not required and not wl.checks:
            continue
        if required:
            checked.add(key)
        was_admitted = bool(wl.checks) and is_admitted(wl.checks) and \
            [s.name for s in wl.checks] == required
        states = _sync(wl.checks, required, now)
        reserved_at = now if wl.quota_reserved_time is None else wl.quota_reserved_time
        for i, current in enumerate(states):
            bound = state.checks.get(current.name)
            if bound is None or bound.plugin is None or not bound.check.active:
                continue
            verdict = bound.plugin.evaluate(
                bound.args, CheckRequest(bound.check, wl, current, reserved_at, now))
            if verdict.state not in CHECK_STATES:
                raise InputError(f"admission check plugin {bound.check.controller_name!r} "
                                 f"returned state {verdict.state!r}",
                                 expected=" or ".join(CHECK_STATES))
            if verdict.recheck_at is not None and verdict.recheck_at > now:
                out.recheck_at = min(out.recheck_at or verdict.recheck_at, verdict.recheck_at)
            states[i] = _apply(current, verdict, now)
        new = tuple(states)
        if new != wl.checks:
            out.changed.append(key)
        rejected = [s for s in new if s.state == CHECK_REJECTED]
        retry = [s for s in new if s.state == CHECK_RETRY]
        if rejected:
            message = f"The workload is deactivated due to {_message(rejected, CHECK_REJECTED)}"
            del nxt.admitted[key]
            nxt.queues.unqueued[key] = (
                replace(wl, admission=None, quota_reserved_time=None, evicted=True,
                        active=False, checks=reset_on_eviction(new, now)),
                DEACTIVATED_BY_CHECK, message)
            out.deactivated.append((key, message))
            touched.add(cq_name)
        elif retry:
            at = _retry_at(retry)
            if at is not None and wl.requeue_at is not None:
                at = max(at, wl.requeue_at)
            message = f"Evicted due to {_message(retry, CHECK_RETRY)}"
            del nxt.admitted[key]
            nxt.queues.add(replace(wl, admission=None, quota_reserved_time=None, evicted=True,
                                   checks=reset_on_eviction(new, now), check_evicted_at=now,
                                   requeue_at=at if at is not None and at > now
                                   else wl.requeue_at), objs)
            out.evicted.append((key, message))
            touched.add(cq_name)
        else:
            nxt.admitted[key] = replace(wl, checks=new) if new != wl.checks else wl
            if required and is_admitted(new) and not was_admitted:
                out.admitted.append(key)
    for cq in sorted(touched):
        nxt.queues.requeue_inadmissible(cohort_cluster_queues(nxt, cq))
    out.checked = frozenset(checked)
    return out
