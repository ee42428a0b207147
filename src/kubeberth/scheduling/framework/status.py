"""Status codes that carry verdicts between extension points, as kube-scheduler defines them.

"This node does not fit" is a verdict, not an error, so plugins return codes; exceptions are
reserved for bugs and bad input. Vectorised Filter plugins return one code per candidate node
(:class:`FilterResult`) with reasons kept as indices into a small table, so no reason string is
formatted for a node nobody reports on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """The name upstream prints (``Success``, ``UnschedulableAndUnresolvable``, ...)."""
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(slots=True, frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                             Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin or not plugin:
            return self
        if self is SUCCESS:
            # Every successful Bind names its plugin: one immutable status per plugin name.
            named = _SUCCESS_BY_PLUGIN.get(plugin)
            if named is None:
                named = _SUCCESS_BY_PLUGIN[plugin] = Status(Code.SUCCESS, (), plugin)
            return named
        return Status(self.code, self.reasons, plugin)


class StatusError(Exception):
    """A non-success status raised by a plugin method that returns values rather than a Status
    (the vectorised Score), where upstream's method returns that status; the runtime turns it
    back into the status (Score: the pod's cycle fails with an Error)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


SUCCESS = Status()
_SUCCESS_BY_PLUGIN: dict[str, Status] = {}
# The verdict of a PreFilter or PreScore with nothing to do for a pod (statuses are immutable,
# so one instance serves every cycle).
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str, resolvable: bool = True) -> Status:
    code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, reasons)


CodeArray = npt.NDArray[np.int8]
IdArray = npt.NDArray[np.int32]


class FilterResult:
    """One Filter plugin's verdict on a batch of candidate nodes.

    ``codes[i]`` is the :class:`Code` for candidate ``i``; ``reason_ids[i]`` indexes
    ``reasons``, the table of reason tuples this plugin produced in this call (entry 0 is the
    empty tuple used by passing nodes). A plugin may instead hand over ``explain``, which builds
    the ids and the table when someone first asks: most cycles only need the codes, and the
    reasons are read only when a pod fits nowhere, for preemption or for ``explain``.
    """

    __slots__ = ("_explain", "_ids", "_reasons", "codes", "passes_all")

    def __init__(self, codes: CodeArray, reason_ids: IdArray | None = None,
                 reasons: list[tuple[str, ...]] | None = None, *,
                 explain: Callable[[], tuple[IdArray, list[tuple[str, ...]]]] | None = None
                 ) -> None:
        if reason_ids is None and explain is None:
            raise ValueError("FilterResult needs reason_ids or explain")
        self.codes = codes
        # Set by :meth:`passing`: the runtime then skips looking for failures.
        self.passes_all = False
        self._ids = reason_ids
        self._reasons: list[tuple[str, ...]] = reasons if reasons is not None else [()]
        self._explain = explain

    def _build(self) -> IdArray:
        assert self._explain is not None
        self._ids, self._reasons = self._explain()
        self._explain = None
        return self._ids

    @property
    def reason_ids(self) -> IdArray:
        return self._ids if self._ids is not None else self._build()

    @property
    def reasons(self) -> list[tuple[str, ...]]:
        if self._ids is None:
            self._build()
        return self._reasons

    @classmethod
    def error(cls, n: int, message: str) -> FilterResult:
        """An Error on all ``n`` candidates: what upstream's Filter returns when the state its
        PreFilter writes is absent (a profile that disables that PreFilter); the first such
        verdict on a judged node fails the pod's cycle."""
        return cls(np.full(n, int(Code.ERROR), dtype=np.int8), np.ones(n, dtype=np.int32),
                   [(), (message,)])

    @classmethod
    def passing(cls, n: int) -> FilterResult:
        """A verdict that passes all ``n`` candidates. Most filters pass every node most of
        the time, so one result per batch size is shared between calls: nothing in it changes
        (its zero arrays are read-only, so a caller that tried to write into them fails
        loudly, and its reasons are given, never built)."""
        result = _PASSING.get(n)
        if result is None:
            if len(_PASSING) >= _PASS_CACHE_LIMIT:
                _PASSING.clear()
            codes = np.zeros(n, dtype=np.int8)
            ids = np.zeros(n, dtype=np.int32)
            codes.flags.writeable = False
            ids.flags.writeable = False
            result = _PASSING[n] = cls(codes, ids)
            result.passes_all = True
        return result

    @classmethod
    def from_mask(cls, fail: npt.NDArray[np.bool_], code: Code,
                  reasons: Sequence[str]) -> FilterResult:
        """All failing nodes share one code and one reason tuple."""
        codes = np.where(fail, np.int8(code), np.int8(0))
        ids = fail.astype(np.int32)
        return cls(codes, ids, [(), tuple(reasons)])

    def status(self, i: int, plugin: str) -> Status:
        return Status(Code(int(self.codes[i])), self.reasons[int(self.reason_ids[i])], plugin)


_PASSING: dict[int, FilterResult] = {}
_PASS_CACHE_LIMIT = 64
