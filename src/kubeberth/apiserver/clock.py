"""Time for the embedded cluster: the wall clock, or a manual one tests advance.

Timestamps, ages in tables and the fake kubelet's pod completions all read one clock, so a test
can run a pod "for an hour" by advancing a :class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Seconds since the Unix epoch; ``manual`` clocks move only when advanced."""

    manual: bool

    def now(self) -> float: ...


class SystemClock:
    """The wall clock."""

    manual = False

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when :meth:`advance` is called (use through the server's
    ``advance`` so the fake kubelet sees the new time)."""

    manual = True

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds


def rfc3339(ts: float) -> str:
    """A Kubernetes timestamp (metav1.Time: whole seconds, UTC)."""
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")



def rfc3339_micro(ts: float) -> str:
    """A Kubernetes MicroTime (lease renew times)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float | None:
    """Seconds since the epoch from an RFC 3339 timestamp, None if unparsable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
