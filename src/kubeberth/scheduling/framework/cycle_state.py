"""Per-cycle scratch space shared by one pod's extension points.

PreFilter and PreScore compute once per pod and store the result here under a plugin-scoped key;
Filter and Score read it. Preemption clones the state before trying what-if node states, so a
stored value that is mutated by ``add_pod``/``remove_pod`` extensions must implement ``clone``.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar


class StateData(Protocol):
    def clone(self) -> StateData: ...


T = TypeVar("T")

# Upstream's reserved CycleState key: pods a plugin wants moved to activeQ once the cycle ends.
PODS_TO_ACTIVATE_KEY = "kubernetes.io/pods-to-activate"


class PodsToActivate:
    """Keys of queued pods to activate; shared by clones, as upstream's is."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def clone(self) -> PodsToActivate:
        return self


class CycleState:
    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T:
        value = self._data.get(key)
        if value is None:
            raise KeyError(f"{key!r} not found in CycleState")
        if not isinstance(value, kind):
            raise TypeError(f"{key!r} in CycleState is {type(value).__name__}, not {kind.__name__}")
        return value

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def clone(self) -> CycleState:
        c = CycleState()
        for key, value in self._data.items():
            clone = getattr(value, "clone", None)
            c._data[key] = clone() if callable(clone) else value
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c
