"""Time for the embedded cluster: the wall clock, or a manual one tests advance.

Timestamps, ages in tables and the fake kubelet's pod completions all read one clock, so a test
can run a pod "for an hour" by advancing a :class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import time
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
