"""Status codes that carry verdicts between extension points, as kube-scheduler defines them.

"This node does not fit" is a verdict, not an error, so plugins return codes; exceptions are
reserved for bugs and bad input. Vectorised Filter plugins return one code per candidate node
(:class:`FilterResult`) with reasons kept as indices into a small table, so no reason string is
formatted for a node nobody reports on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
        return Status(self.code, self.reasons, self.plugin or plugin)


SUCCESS = Status()


def unschedulable(*reasons: str, resolvable: bool = True) -> Status:
    code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, reasons)


CodeArray = npt.NDArray[np.int8]
IdArray = npt.NDArray[np.int32]


@dataclass(slots=True)
class FilterResult:
    """One Filter plugin's verdict on a batch of candidate nodes.

    ``codes[i]`` is the :class:`Code` for candidate ``i``; ``reason_ids[i]`` indexes
    ``reasons``, the table of reason tuples this plugin produced in this call (entry 0 is the
    empty tuple used by passing nodes).
    """

    codes: CodeArray
    reason_ids: IdArray
    reasons: list[tuple[str, ...]] = field(default_factory=lambda: [()])

    @classmethod
    def passing(cls, n: int) -> FilterResult:
        return cls(np.zeros(n, dtype=np.int8), np.zeros(n, dtype=np.int32))

    @classmethod
    def from_mask(cls, fail: npt.NDArray[np.bool_], code: Code,
                  reasons: Sequence[str]) -> FilterResult:
        """All failing nodes share one code and one reason tuple."""
        codes = np.where(fail, np.int8(code), np.int8(0)).astype(np.int8)
        ids = fail.astype(np.int32)
        return cls(codes, ids, [(), tuple(reasons)])

    def status(self, i: int, plugin: str) -> Status:
        return Status(Code(int(self.codes[i])), self.reasons[int(self.reason_ids[i])], plugin)
