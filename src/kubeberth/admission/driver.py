"""Run Kueue admission until it settles: the one loop ``kubeberth admit``, the simulator and
the live controller share.

Kueue's scheduler runs a cycle whenever something may have changed; at one instant that means
"cycle again until a cycle changes nothing". What a host does between two cycles differs (the
CLI treats every eviction as observed at once, the simulator stops pods, the live controller
writes to the API), so the host passes ``after``: it sees each cycle's result and returns the
state the next cycle starts from. The loop itself, its stop condition and its limit are here
once, so the three hosts cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kubeberth.admission.cycle import AdmissionState, CycleResult, run_cycle

MAX_CYCLES = 1000


@dataclass(slots=True)
class Cycle:
    """One cycle as the host saw it: the cycle's decisions and how long the cycle took
    (for Kueue's admission-attempt metrics)."""

    result: CycleResult
    seconds: float


@dataclass(slots=True)
class Settled:
    """The state after the last cycle (and the host's reaction to it) and every cycle run."""

    state: AdmissionState
    cycles: list[Cycle]

    def requeue_at(self, now: float) -> float | None:
        """The earliest future requeue time of a queued workload: when to run again."""
        times = [e.wl.requeue_at for e, _active in self.state.queues.pending()
                 if e.wl.requeue_at is not None and e.wl.requeue_at > now]
        return min(times, default=None)


# The host's reaction to a cycle: (result, whether no further cycle may run) -> next state.
After = Callable[[CycleResult, bool], AdmissionState]


def signature(state: AdmissionState) -> tuple[object, ...]:
    """What a cycle may change: who holds quota, who is being evicted, and which workloads are
    queued active or parked. Equal before and after a cycle means the cycle changed nothing."""
    return (tuple(sorted(state.admitted)), tuple(sorted(state.evicting)),
            tuple((e.key, active) for e, active in state.queues.pending()))


def settle(state: AdmissionState, now: float, *, max_cycles: int = MAX_CYCLES,
           after: After | None = None) -> Settled:
    """Cycles at ``now`` until one changes nothing or ``max_cycles`` ran. ``state`` is not
    modified; ``after`` (default: carry on with the cycle's state) applies the host's side."""
    cycles: list[Cycle] = []
    while len(cycles) < max_cycles:
        before = signature(state)
        start = time.perf_counter()
        result = run_cycle(state, now)
        cycles.append(Cycle(result, time.perf_counter() - start))
        state = after(result, len(cycles) == max_cycles) if after is not None else result.state
        if signature(state) == before:
            break
    return Settled(state, cycles)
