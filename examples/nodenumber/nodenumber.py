"""NodeNumber: the kube-scheduler-simulator's example Score plugin, as a kubeberth out-of-tree
plugin.

It favours nodes whose name ends in the same digit as the pod's name (``pod3`` → ``node3``), or,
with ``reverse: true``, nodes whose digit differs. It exists to show the shape of an out-of-tree
plugin: a NAME, an args type with defaults and validation, PreScore state in the CycleState, a
vectorised Score, and a factory ``new(args, handle)`` that the registry loads by import path
(``--plugin nodenumber:NodeNumber``) or through the ``kubeberth.plugins`` entry point declared in
this folder's pyproject.toml. Like the original it only reads single-digit suffixes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    PreScorePlugin,
    ScorePlugin,
)
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo

NAME = "NodeNumber"
_STATE_KEY = "PreScore" + NAME
MATCH_SCORE = 10


@dataclass(slots=True, frozen=True)
class NodeNumberArgs:
    reverse: bool = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NodeNumberArgs:
        raw = dict(raw or {})
        reverse = raw.pop("reverse", False)
        if raw:
            raise InputError(f"unknown field(s) {sorted(raw)}", field=sorted(raw)[0],
                             expected="only 'reverse'")
        if not isinstance(reverse, bool):
            raise InputError(f"{reverse!r} is not a boolean", field="reverse",
                             expected="true or false")
        return cls(reverse=reverse)


def _suffix_digit(name: str) -> int:
    last = name[-1:] if name else ""
    return int(last) if last.isdigit() else -1


class NodeNumber(PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name: ClassVar[str] = NAME
    NAME: ClassVar[str] = NAME

    def __init__(self, args: NodeNumberArgs) -> None:
        self.args = args
        self._node_digits: np.ndarray[Any, np.dtype[np.int64]] | None = None
        self._digits_generation = -1

    def pre_score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                  nodes: IntArray) -> Status:
        digit = _suffix_digit(pod.name)
        if digit >= 0:
            state.write(_STATE_KEY, digit)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, snap: ClusterState,
              nodes: IntArray) -> IntArray:
        digit = state.get(_STATE_KEY)
        if digit is None:
            return np.zeros(len(nodes), dtype=np.int64)
        if self._node_digits is None or len(self._node_digits) != snap.num_nodes:
            self._node_digits = np.array([_suffix_digit(n) for n in snap.node_names],
                                         dtype=np.int64)
        node_digits = self._node_digits[nodes]
        match = node_digits == digit
        if self.args.reverse:
            match = (node_digits >= 0) & ~match
        return np.where(match, MATCH_SCORE, 0).astype(np.int64)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add")]

    @classmethod
    def new(cls, args: Mapping[str, Any] | None, handle: Handle) -> NodeNumber:
        return cls(NodeNumberArgs.parse(args))


new = NodeNumber.new
