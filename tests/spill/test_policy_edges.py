"""Edges of the spill controller's step that the behavioural tests pass by: the stale-signal
boundary and message, which part of a sample the window trims on, and a value equal to the
threshold. (Written against the surviving mutants of tools/mutation.py's ``spill`` target.)"""

from __future__ import annotations

from kubeberth.spill.config import Controller
from kubeberth.spill.policy import REMOVE, ControllerState, step
from kubeberth.spill.signal import Reading


def controller(**kw: float) -> Controller:
    base = {"interval_seconds": 10.0, "threshold": 4.0, "window_seconds": 10.0,
            "stabilization_seconds": 20.0, "max_signal_age_seconds": 30.0}
    return Controller(**{**base, **kw})  # type: ignore[arg-type]


def test_a_sample_exactly_max_age_old_is_still_fresh() -> None:
    a = controller()
    fresh = step(a, ControllerState(), Reading(9.0, 70.0), 100.0)  # 30 s old: allowed
    assert (fresh.fault, fresh.average) == ("", 9.0)
    stale = step(a, ControllerState(), Reading(9.0, 69.5), 100.0)  # 30.5 s old: refused
    assert stale.fault == ("signal is stale: the sample is 30.5s old, more than "
                           "maxSignalAgeSeconds 30")
    assert stale.average is None


def test_the_window_trims_by_sample_time_not_value() -> None:
    # A sample of value 500 taken at t=0 is outside the 10 s window at t=100 (horizon 90):
    # only the new sample counts, although 500 > 90.
    a = controller()
    state = ControllerState(samples=((0.0, 500.0),))
    d = step(a, state, Reading(2.0, 100.0), 100.0)
    assert d.average == 2.0 and d.state.samples == ((100.0, 2.0),)
    # And a sample inside the window stays, whatever its value (1 < horizon 90).
    d = step(a, ControllerState(samples=((95.0, 1.0),)), Reading(3.0, 100.0), 100.0)
    assert d.average == 2.0


def test_a_value_equal_to_the_threshold_ends_both_streaks() -> None:
    # Tainted; the average sits exactly at the threshold for far longer than the duration:
    # neither streak runs, so the taint is never removed.
    a = controller(stabilization_seconds=0.0)
    state = ControllerState(tainted=True)
    for t in range(0, 200, 10):
        d = step(a, state, Reading(4.0, float(t)), float(t))
        assert d.flip is None and d.state.above_since is None and d.state.below_since is None
        state = d.state
    # Just below it, the removal comes at once (stabilization 0).
    assert step(a, state, Reading(0.0, 200.0), 200.0).flip == REMOVE


def test_removal_waits_the_duration_from_when_the_streak_began() -> None:
    # Tainted, the signal drops below the threshold at t=1000: the taint goes at t=1060 (the
    # 60 s duration), not earlier however late in the run the streak began.
    a = controller(stabilization_seconds=60.0, window_seconds=5.0)
    state = ControllerState(tainted=True)
    got = []
    for t in range(1000, 1080, 10):
        d = step(a, state, Reading(0.0, float(t)), float(t))
        state = d.state
        got.append((t, d.flip))
    assert [t for t, flip in got if flip is not None] == [1060]
