"""Run Kueue admission until it settles: the one loop ``kubeberth admit``, the simulator and
the live controller share.

Kueue's scheduler runs a cycle whenever something may have changed; at one instant that means
"cycle again until a cycle changes nothing". What a host does between two cycles differs (the
CLI treats every eviction as observed at once, the simulator stops pods, the live controller
writes to the API), so the host passes ``after``: it sees each cycle's result and returns the
state the next cycle starts from. After each scheduling cycle the admission checks of the
workloads holding quota are evaluated (:func:`~kubeberth.admission.check_states.evaluate_checks`),
as Kueue's check controllers and workload controller react to a reservation. The loop itself,
its stop condition and its limit are here once, so the three hosts cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kubeberth.admission.check_states import ChecksResult, evaluate_checks
from kubeberth.admission.cycle import AdmissionState, CycleResult, run_cycle

MAX_CYCLES = 1000


@dataclass(slots=True)
class Cycle:
    """One cycle as the host sees it: the scheduling cycle's decisions, the admission checks'
    outcome after it, and how long the cycle took (Kueue's admission-attempt metrics)."""

    result: CycleResult
    checks: ChecksResult
    seconds: float

    @property
    def state(self) -> AdmissionState:
        return self.checks.state

    def starts(self, key: str) -> bool:
        """Whether a workload this cycle reserved quota for is Admitted with it (no check)."""
        return key not in self.checks.checked or key in self.checks.admitted


@dataclass(slots=True)
class Settled:
    """The state after the last cycle (and the host's reaction to it) and every cycle run."""

    state: AdmissionState
    cycles: list[Cycle]

    def wake_at(self, now: float) -> float | None:
        """When to run again: the earliest future requeue time of a queued workload or
        time at which a check's verdict may change."""
        times = [e.wl.requeue_at for e, _active in self.state.queues.pending()
                 if e.wl.requeue_at is not None and e.wl.requeue_at > now]
        if self.cycles and self.cycles[-1].checks.recheck_at is not None:
            times.append(self.cycles[-1].checks.recheck_at)
        return min(times, default=None)


# The host's reaction to a cycle: (cycle, whether no further cycle may run) -> next state.
After = Callable[[Cycle, bool], AdmissionState]


def signature(state: AdmissionState) -> tuple[object, ...]:
    """What a cycle may change: who holds quota, who is being evicted, and which workloads are
    queued active or parked. Equal before and after a cycle means the cycle changed nothing."""
    return (tuple(sorted(state.admitted)), tuple(sorted(state.evicting)),
            tuple((e.key, active) for e, active in state.queues.pending()),
            tuple((k, wl.checks) for k, wl in sorted(state.admitted.items()) if wl.checks))


def settle(state: AdmissionState, now: float, *, max_cycles: int = MAX_CYCLES,
           after: After | None = None) -> Settled:
    """Cycles at ``now`` until one changes nothing or ``max_cycles`` ran. ``state`` is not
    modified; ``after`` (default: carry on with the cycle's state) applies the host's side."""
    cycles: list[Cycle] = []
    while len(cycles) < max_cycles:
        before = signature(state)
        start = time.perf_counter()
        result = run_cycle(state, now)
        outcome = evaluate_checks(result.state, now)
        cycle = Cycle(result, outcome, time.perf_counter() - start)
        cycles.append(cycle)
        state = after(cycle, len(cycles) == max_cycles) if after is not None else cycle.state
        if signature(state) == before:
            break
    return Settled(state, cycles)
