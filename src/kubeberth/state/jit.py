"""Compiled kernels for the per-node loops of a scheduling cycle.

A cycle over 1,523 nodes used to make about a hundred numpy calls, and each call costs a few
microseconds of dispatch whatever the array size: dispatch, not arithmetic, bounded decisions per
second. A kernel compiled by numba runs a plugin's whole per-node loop in one call.

Kernels are written as plain, typed Python over numpy arrays, so mypy checks them and the code
reads as the formula it implements. :func:`kernel` compiles one on its first call (nopython mode,
no fastmath, so integer results are exact and float results are IEEE-identical to numpy's) and
keeps the machine code in numba's on-disk cache; a process that never schedules never imports
numba. ``NUMBA_DISABLE_JIT=1`` runs the Python form instead (slow, for debugging).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

_LOCK = threading.Lock()


def kernel(fn: F) -> F:
    """``fn`` compiled with numba on its first call (under a lock: controller threads may reach
    a kernel at once), cached on disk."""
    compiled: list[Callable[..., Any]] = []

    def compile_once() -> Callable[..., Any]:
        with _LOCK:
            if not compiled:
                import numba

                compiled.append(numba.njit(cache=True, nogil=True)(fn))
        return compiled[0]

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        return (compiled[0] if compiled else compile_once())(*args)

    return cast(F, call)
