from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.times import format_micro_time, format_time, parse_time, parse_time_or_none


@pytest.mark.parametrize("text,want", [
    ("1970-01-01T00:00:00Z", 0.0),
    ("1970-01-01T00:00:01z", 1.0),
    ("1970-01-01T01:00:00+01:00", 0.0),
    ("1970-01-01T00:00:02", 2.0),  # no offset: UTC
    (" 1970-01-01T00:00:03.5Z ", 3.5),
])
def test_parse_time_reads_rfc3339(text: str, want: float) -> None:
    assert parse_time(text) == want
    assert parse_time_or_none(text) == want


@pytest.mark.parametrize("value", ["yesterday", "", None, 12, "2024-13-01T00:00:00Z"])
def test_parse_time_names_the_field(value: object) -> None:
    with pytest.raises(InputError) as err:
        parse_time(value, "metadata.creationTimestamp")
    assert err.value.field == "metadata.creationTimestamp"
    assert "RFC 3339" in str(err.value)
    assert parse_time_or_none(value) is None


def test_format_round_trips_whole_and_micro_seconds() -> None:
    assert format_time(1e9 + 0.9) == "2001-09-09T01:46:40Z"
    assert format_micro_time(1e9 + 0.25) == "2001-09-09T01:46:40.250000Z"
    assert parse_time(format_time(1e9)) == 1e9
