"""Kubernetes timestamps: RFC 3339 in UTC, as metav1.Time and metav1.MicroTime write them.

One reader and one writer for every loader, the API server and the controllers, so a timestamp
is refused with the same words everywhere.
"""

from __future__ import annotations

import datetime as dt

from kubeberth.api.errors import InputError

EXPECTED = "an RFC 3339 timestamp such as 2024-05-01T12:00:00Z"


def parse_time(value: object, field: str = "timestamp") -> float:
    """Seconds since the epoch; a time without an offset is read as UTC."""
    when = _parse(value)
    if when is None:
        raise InputError(f"{value!r} is not an RFC 3339 timestamp", field=field,
                         expected=EXPECTED)
    return when


def parse_time_or_none(value: object) -> float | None:
    """Seconds since the epoch, or None where the text is not a timestamp (lenient readers of
    objects that other clients wrote)."""
    return _parse(value)


def format_time(seconds: float) -> str:
    """metav1.Time: whole seconds, UTC."""
    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(seconds: float) -> str:
    """metav1.MicroTime (lease renew times): microseconds, UTC."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()
