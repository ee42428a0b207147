"""The spill taint controller's policy: averaging, stabilization, faults."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.spill.config import Controller
from kubeberth.spill.policy import ADD, REMOVE, ControllerState, StepResult, step
from kubeberth.spill.signal import Reading


def args(**kw: float) -> Controller:
    base = Controller(interval_seconds=10, threshold=4, window_seconds=30,
                      stabilization_seconds=60, max_signal_age_seconds=20)
    return msgspec.structs.replace(base, **kw)


def drive(a: Controller, values: Iterable[float | str | None], *, start: float = 0.0,
          state: ControllerState | None = None) -> list[StepResult]:
    """Tick every interval; a str is a fault, None a missing value."""
    st = state or ControllerState()
    out: list[StepResult] = []
    t = start
    for v in values:
        reading = Reading(None, t, v) if isinstance(v, str) else Reading(v, t)
        d = step(a, st, reading, t)
        st = d.state
        out.append(d)
        t += a.interval_seconds
    return out


def flips(ds: list[StepResult]) -> list[tuple[int, str]]:
    return [(i, d.flip) for i, d in enumerate(ds) if d.flip is not None]


def test_moving_average_over_the_window() -> None:
    ds = drive(args(), [0, 6, 12, 0])
    # Window 30 s with 10 s ticks: the last three samples (the one 30 s old has left).
    assert [d.average for d in ds] == [0, 3, 6, 6]


def test_no_flip_on_a_short_spike() -> None:
    # Free GPUs jump to 20 for two ticks; the average crosses 4 but not for 60 s.
    ds = drive(args(), [0, 0, 20, 20, 0, 0, 0, 0, 0, 0, 0])
    assert flips(ds) == []
    assert not ds[-1].state.tainted


def test_flip_after_the_stabilization_duration() -> None:
    ds = drive(args(), [10] * 8)
    # Above from t=0; 60 s later (tick 6) the taint is added, once.
    assert flips(ds) == [(6, ADD)]
    assert all(d.state.tainted for d in ds[6:])


def test_zero_stabilization_flips_on_the_first_tick_above() -> None:
    assert flips(drive(args(stabilization_seconds=0), [10])) == [(0, ADD)]


def test_removal_after_staying_below() -> None:
    tainted = ControllerState(tainted=True)
    ds = drive(args(window_seconds=10), [0] * 8, state=tainted)
    assert flips(ds) == [(6, REMOVE)]


def test_value_at_threshold_breaks_both_streaks() -> None:
    ds = drive(args(window_seconds=10), [10, 10, 10, 4, 10, 10, 10, 10, 10, 10, 10])
    # The streak restarts at tick 4, so the flip is at tick 10, not 6.
    assert flips(ds) == [(10, ADD)]


def test_fault_holds_state_and_is_reported() -> None:
    a = args()
    ds = drive(a, [10, 10, 10, 10, 10, "prometheus unreachable", 10, 10])
    assert ds[5].fault == "prometheus unreachable" and ds[5].flip is None
    assert not ds[5].state.tainted and ds[5].state.above_since is None
    # The streak restarted at tick 6: no flip yet despite 7 ticks of 10s above.
    assert flips(ds) == []
    more = drive(a, [10] * 7, start=80.0, state=ds[-1].state)
    assert flips(more) == [(4, ADD)]  # t=120 is 60 s after the streak restarted at t=60


def test_fault_never_removes_the_taint() -> None:
    tainted = ControllerState(tainted=True)
    ds = drive(args(), ["empty vector"] * 20, state=tainted)
    assert flips(ds) == [] and all(d.state.tainted for d in ds)
    assert all(d.fault == "empty vector" for d in ds)


def test_missing_value_is_a_fault() -> None:
    ds = drive(args(), [None])
    assert ds[0].fault == "no value" and ds[0].average is None


def test_stale_reading_is_a_fault() -> None:
    a = args()
    d = step(a, ControllerState(), Reading(100.0, 0.0), 25.0)
    assert d.fault.startswith("signal is stale") and d.flip is None
    assert d.state.samples == ()


def test_average_reported_during_a_fault_from_the_window() -> None:
    ds = drive(args(), [6, "down"])
    assert ds[1].average == 6 and ds[1].fault == "down"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 12).map(float), st.just("fault")), max_size=60),
       st.sampled_from([0.0, 20.0, 60.0]), st.sampled_from([10.0, 30.0, 100.0]))
def test_every_flip_is_justified(values: list[float | str], stab: float, window: float) -> None:
    """A flip at tick i means: no fault and the average on the flip's side of the threshold at
    every tick of the last ``stabilization`` seconds; and flips alternate."""
    a = args(stabilization_seconds=stab, window_seconds=window)
    ds = drive(a, values)
    last: str | None = None
    for i, d in enumerate(ds):
        if d.flip is None:
            continue
        assert d.flip != last
        last = d.flip
        span = int(stab // a.interval_seconds)
        for j in range(i - span, i + 1):
            assert j >= 0 and not ds[j].fault
            avg = ds[j].average
            assert avg is not None
            assert avg > a.threshold if d.flip == ADD else avg < a.threshold
    for d in ds:
        if d.fault:
            assert d.flip is None
