"""Go durations, as upstream flags and configs write them, and plain seconds."""

from __future__ import annotations

import pytest

from kubeberth.api.durations import parse_duration
from kubeberth.api.errors import InputError


@pytest.mark.parametrize(("text", "seconds"), [
    ("5m", 300.0), ("30s", 30.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5h", 5400.0),
    ("2h45m30.5s", 9930.5), ("250us", 250e-6), ("250µs", 250e-6), ("10ns", 1e-8),
    ("0", 0.0), ("+5m", 300.0), (".5s", 0.5), ("15", 15.0), ("2.5", 2.5), (" 7s ", 7.0),
])
def test_go_durations_and_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text, "--flag") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "5 m", "m", "1h-5m", "5mm", "", "1d", "s5"])
def test_malformed_input_names_the_flag_and_the_expected_form(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_duration(text, "--leader-elect-lease-duration")
    err = info.value
    assert err.field == "--leader-elect-lease-duration"
    assert "is not a duration" in err.message
    assert err.expected is not None and "Go duration such as 30s, 5m" in err.expected
    assert "number of seconds" in err.expected
    assert str(err).startswith("field --leader-elect-lease-duration: ")


def test_negative_durations_are_refused_unless_asked_for() -> None:
    for text in ("-5m", "-3"):
        with pytest.raises(InputError, match="is negative") as info:
            parse_duration(text, "--descheduling-interval")
        assert info.value.field == "--descheduling-interval"
    assert parse_duration("-1h30m", "--offset", negative=True) == -5400.0


@pytest.mark.parametrize("text", ["inf", "nan", "1e999"])
def test_infinite_numbers_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="duration"):
        parse_duration(text, "--flag")
