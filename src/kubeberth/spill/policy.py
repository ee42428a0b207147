"""The spill taint controller's policy: when to add or remove ``vk.node.com/low-gpu-usage``.

Free GPUs jump with every pod that starts or ends; flipping the taint on each jump would send
work to the provider and back over and over. So the decision reads a moving average of the
signal over ``windowSeconds`` and acts only after the average has stayed on one side of the
threshold for ``stabilizationSeconds``: above it (the cluster has room) → add the taint, which
no pod tolerates, so nothing new spills and the Descheduler may bring VK pods back; below it
→ remove the taint so work may spill again. "Stayed" means every tick since the streak began
agreed; a value equal to the threshold ends both streaks.

A missing or stale reading (older than ``maxSignalAgeSeconds``) is a fault: the taint stays
as it is, the fault is reported, and the streak is broken (the signal must again stay above or
below for the full duration once it is back). ``step`` is pure: state in, state and at most one
flip out; the host applies the flip to the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubeberth.spill.config import Controller
from kubeberth.spill.signal import Reading

ADD = "add"
REMOVE = "remove"


@dataclass(slots=True, frozen=True)
class ControllerState:
    tainted: bool = False
    samples: tuple[tuple[float, float], ...] = ()  # (time, value) within the window
    above_since: float | None = None
    below_since: float | None = None


@dataclass(slots=True, frozen=True)
class StepResult:
    """One tick's outcome: the next state, the taint change to apply (if any), the average."""

    state: ControllerState
    flip: str | None  # ADD, REMOVE or None
    average: float | None  # None when the window holds no sample
    fault: str = ""


def step(args: Controller, state: ControllerState, reading: Reading, now: float) -> StepResult:
    """One controller tick at ``now`` with the reading just taken."""
    fault = reading.fault
    if not fault and reading.value is None:
        fault = "no value"
    if not fault and now - reading.at > args.max_signal_age_seconds:
        fault = (f"signal is stale: the sample is {now - reading.at:g}s old, more than "
                 f"maxSignalAgeSeconds {args.max_signal_age_seconds:g}")
    horizon = now - args.window_seconds
    samples = tuple(s for s in state.samples if s[0] > horizon)
    if fault:
        held = ControllerState(state.tainted, samples, None, None)
        return StepResult(held, None, _mean(samples), fault)
    assert reading.value is not None
    samples = (*samples, (now, reading.value))
    average = _mean(samples)
    assert average is not None
    above_since = below_since = None
    if average > args.threshold:
        above_since = state.above_since if state.above_since is not None else now
    elif average < args.threshold:
        below_since = state.below_since if state.below_since is not None else now
    flip: str | None = None
    tainted = state.tainted
    if not tainted and above_since is not None \
            and now - above_since >= args.stabilization_seconds:
        flip, tainted = ADD, True
    elif tainted and below_since is not None \
            and now - below_since >= args.stabilization_seconds:
        flip, tainted = REMOVE, False
    return StepResult(ControllerState(tainted, samples, above_since, below_since), flip, average)


def _mean(samples: tuple[tuple[float, float], ...]) -> float | None:
    if not samples:
        return None
    return sum(v for _, v in samples) / len(samples)
