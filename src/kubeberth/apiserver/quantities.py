"""Every quantity field of the served kinds, checked before anything parses the object.

A quantity the server stores is read again by the metrics, the fake kubelet and every live
controller, so one poison value (``cpu: "1e400"``, ``nominalQuota: "1e999"``, ``NaN``) would
fail all of them for as long as it is stored. The server therefore checks each quantity of a
written object where the kinds put them (containers' requests and limits, pod overhead, node
capacity, Kueue quotas, the coscheduling and Volcano kinds' resource lists) and answers a bad
one with 422 naming the field, as kube-apiserver does. Each value is bounded in length and
exponent before :func:`~kubeberth.api.quantity.parse_quantity` sees it, so no value can make
the parser compute a huge power whatever its version, and must fit the int64 milli-units
cluster state keeps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import parse_quantity
from kubeberth.apiserver import errors
from kubeberth.apiserver.resources import ResourceType

_MAX_MILLI = 2**63 - 1
_MAX_CHARS = 100  # far past any real quantity; keeps the number's digits bounded
_EXPONENT = re.compile(r"[eE]([+-]?\d+)$")
_MAX_EXPONENT = 1000  # cheap to compute exactly; 1e16 already passes int64 milli-units
_LIST = "[*]"  # every element of a list, shown as [i]
_MAP = "{*}"  # every value of a map, shown as .key (the manifest loader's field paths)

_POD_SPEC: tuple[tuple[str, ...], ...] = (
    *((container, _LIST, "resources", kind, _MAP)
      for container in ("containers", "initContainers") for kind in ("requests", "limits")),
    ("overhead", _MAP), ("resources", "requests", _MAP), ("resources", "limits", _MAP))
_QUOTAS = tuple(("spec", "resourceGroups", _LIST, "flavors", _LIST, "resources", _LIST, field)
                for field in ("nominalQuota", "borrowingLimit", "lendingLimit"))


def _under(prefix: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple((*prefix, *path) for path in _POD_SPEC)


PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": _under(("spec",)),
    "Node": (("status", "capacity", _MAP), ("status", "allocatable", _MAP)),
    "Deployment": _under(("spec", "template", "spec")),
    "ReplicaSet": _under(("spec", "template", "spec")),
    "Job": _under(("spec", "template", "spec")),
    "Workload": _under(("spec", "podSets", _LIST, "template", "spec")),
    "ClusterQueue": _QUOTAS,
    "Cohort": _QUOTAS,
    "ElasticQuota": (("spec", "min", _MAP), ("spec", "max", _MAP)),
    "PodGroup": (("spec", "minResources", _MAP),),
    "Queue": (("spec", "capability", _MAP), ("spec", "deserved", _MAP),
              ("spec", "guarantee", "resource", _MAP)),
}


def check(rt: ResourceType, obj: dict[str, Any]) -> None:
    """422 Invalid for the first bad quantity of ``obj``, with upstream's field path."""
    for path, value in _values(obj, PATHS.get(rt.kind, ())):
        why = problem(value)
        if why is not None:
            name = str((obj.get("metadata") or {}).get("name") or "")
            shown = value if isinstance(value, str) else repr(value)
            raise errors.invalid(rt.kind, name, rt.group,
                                 [(path, f'Invalid value: "{shown}": {why}')])


def problem(value: Any) -> str | None:
    """Why ``value`` is not a quantity the server keeps, or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "must be a quantity (a string such as 100m, 16Gi or 1e3, or a number)"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if isinstance(value, str):
        text = value.strip()
        if len(text) > _MAX_CHARS:
            return f"is longer than {_MAX_CHARS} characters"
        exponent = _EXPONENT.search(text)
        if exponent is not None and abs(int(exponent[1])) > _MAX_EXPONENT:
            return _TOO_LARGE if int(exponent[1]) > 0 else \
                f"has an exponent below -{_MAX_EXPONENT}"
    try:
        parsed = parse_quantity(value)
    except InputError as err:
        return err.message.rstrip(".") + (f" (expected {err.expected})" if err.expected
                                          else "")
    except (ArithmeticError, ValueError):
        return _TOO_LARGE
    if abs(parsed) * 1000 > _MAX_MILLI:
        return _TOO_LARGE
    return None


def value_or_none(value: Any) -> Fraction | None:
    """The quantity's value, or None for anything :func:`problem` refuses (readers of
    stored objects skip such a value instead of failing)."""
    if problem(value) is not None:
        return None
    return parse_quantity(value)


_TOO_LARGE = ("is too large: a quantity must fit in int64 milli-units (at most "
              "9223372036854775807m)")


def _values(obj: Any, paths: tuple[tuple[str, ...], ...]) -> Iterator[tuple[str, Any]]:
    """(field path, value) for every value ``paths`` reach in ``obj``."""
    for path in paths:
        frontier: list[tuple[str, Any]] = [("", obj)]
        for step in path:
            nxt: list[tuple[str, Any]] = []
            for shown, node in frontier:
                if step == _LIST:
                    if isinstance(node, list):
                        nxt.extend((f"{shown}[{i}]", v) for i, v in enumerate(node))
                elif step == _MAP:
                    if isinstance(node, dict):
                        nxt.extend((f"{shown}.{k}", v) for k, v in node.items())
                elif isinstance(node, dict) and step in node:
                    nxt.append((f"{shown}.{step}" if shown else step, node[step]))
            frontier = nxt
        yield from frontier
