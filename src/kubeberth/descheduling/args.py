"""Strict readers for descheduler plugin args, so every plugin reports bad args alike.

The descheduler decodes args strictly (an unknown field is an error) into Go types: ``uint``
fields reject negatives, ``*metav1.Duration`` takes Go duration strings, label selectors must be
valid. Each reader names the field path relative to the plugin's ``args``; the framework prefixes
``profiles[i].pluginConfig[j].args`` and the policy loader turns that into a file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.objects import LabelSelector
from kubeberth.config.fields import describe

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_UINT_MAX = 2**32 - 1


@dataclass(frozen=True, slots=True)
class Namespaces:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


ALL_NAMESPACES = Namespaces()


@dataclass(frozen=True, slots=True)
class PodScope:
    """The ``namespaces`` and ``labelSelector`` args most plugins take: the pods they judge."""

    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


EVERY_POD = PodScope()
SCOPE_FIELDS = ("namespaces", "labelSelector")


def reject_unknown(raw: Mapping[str, Any], allowed: Sequence[str], where: str = "") -> None:
    for key in raw:
        if key not in allowed:
            raise InputError(f"unknown field {key!r}", field=join(where, str(key)),
                             expected="one of the fields " + ", ".join(allowed))


def join(where: str, child: str) -> str:
    return f"{where}.{child}" if where else child


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked(raw: Mapping[str, Any], key: str, ok: Callable[[Any], bool],
             expected: str) -> Any:
    """``raw[key]`` when it passes ``ok``, None when absent; else an error naming the field."""
    value = raw.get(key)
    if value is not None and not ok(value):
        raise InputError(f"got {describe(value)}", field=key, expected=expected)
    return value


def _listed(raw: Mapping[str, Any], key: str, ok: Callable[[Any], bool],
            expected_item: str, expected: str) -> tuple[Any, ...] | None:
    """A list whose items all pass ``ok``; None when absent."""
    value = _checked(raw, key, lambda v: isinstance(v, list), expected)
    if value is None:
        return None
    for i, item in enumerate(value):
        if not ok(item):
            raise InputError(f"got {describe(item)}", field=f"{key}[{i}]",
                             expected=expected_item)
    return tuple(value)


def _mapping(raw: Mapping[str, Any], key: str, expected: str) -> Mapping[str, Any] | None:
    value: Mapping[str, Any] | None = _checked(raw, key, lambda v: isinstance(v, Mapping),
                                               expected)
    return value


def boolean(raw: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = _checked(raw, key, lambda v: isinstance(v, bool), "true or false")
    return default if value is None else bool(value)


def uint(raw: Mapping[str, Any], key: str) -> int | None:
    value: int | None = _checked(raw, key, _is_int, "a non-negative integer")
    if value is not None and not 0 <= value <= _UINT_MAX:
        raise InputError(f"{value} is not a non-negative 32-bit integer", field=key,
                         expected=f"an integer between 0 and {_UINT_MAX}")
    return value


def integer(raw: Mapping[str, Any], key: str, default: int = 0) -> int:
    value: int | None = _checked(raw, key, _is_int, "an integer")
    return default if value is None else value


def string(raw: Mapping[str, Any], key: str, default: str = "") -> str:
    value: str | None = _checked(raw, key, lambda v: isinstance(v, str), "a string")
    return default if value is None else value


def strings(raw: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """A list of strings; None when the field is absent (upstream distinguishes nil)."""
    return _listed(raw, key, lambda v: isinstance(v, str), "a string", "a list of strings")


def choices(raw: Mapping[str, Any], key: str, allowed: Sequence[str], invalid: str,
            expected: str) -> tuple[str, ...] | None:
    """A list of strings, each one of ``allowed``; ``invalid`` words a bad one (``{!r}``)."""
    values = strings(raw, key)
    for i, value in enumerate(values or ()):
        if value not in allowed:
            raise InputError(invalid.format(value), field=f"{key}[{i}]", expected=expected)
    return values


def integers(raw: Mapping[str, Any], key: str) -> tuple[int, ...]:
    return _listed(raw, key, _is_int, "an integer", "a list of integers") or ()


def duration(raw: Mapping[str, Any], key: str) -> float | None:
    """A Go ``metav1.Duration`` (``"10m"``, ``"1h30m"``, ``"90s"``) in seconds."""
    value = raw.get(key)
    if value is None:
        return None
    expected = "a duration such as \"10m\", \"1h30m\" or \"90s\""
    if not isinstance(value, str):
        raise InputError(f"got {describe(value)}", field=key, expected=expected)
    sign = -1.0 if value.startswith("-") else 1.0
    body = value[1:] if value[:1] in "+-" else value
    if body == "0":
        return 0.0
    if not body or _DURATION.sub("", body):
        raise InputError(f"{value!r} is not a duration", field=key, expected=expected)
    return sign * sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(body))


def namespaces(raw: Mapping[str, Any], key: str = "namespaces") -> Namespaces:
    """``api.Namespaces``; at most one of include and exclude may be set."""
    value = _mapping(raw, key, "a mapping with include or exclude")
    if value is None:
        return Namespaces()
    reject_unknown(value, ("include", "exclude"), key)
    inc = _prefixed(key, lambda: strings(value, "include")) or ()
    exc = _prefixed(key, lambda: strings(value, "exclude")) or ()
    if inc and exc:
        raise InputError("only one of Include/Exclude namespaces can be set", field=key,
                         expected="either namespaces.include or namespaces.exclude")
    return Namespaces(inc, exc)


def scope(raw: Mapping[str, Any]) -> PodScope:
    """``namespaces`` and ``labelSelector`` (the fields of :data:`SCOPE_FIELDS`)."""
    return PodScope(namespaces(raw), label_selector(raw))


def _prefixed(key: str, read: Callable[[], tuple[str, ...] | None]) -> tuple[str, ...] | None:
    try:
        return read()
    except InputError as err:
        raise err.at(field=key) from None


_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(raw: Mapping[str, Any], key: str = "labelSelector") -> LabelSelector | None:
    """A ``metav1.LabelSelector`` checked as ``LabelSelectorAsSelector`` checks it."""
    value = _mapping(raw, key, "a label selector (matchLabels, matchExpressions)")
    if value is None:
        return None
    reject_unknown(value, ("matchLabels", "matchExpressions"), key)
    try:
        sel = msgspec.convert(value, LabelSelector, strict=True)
    except msgspec.ValidationError as err:
        raise InputError(f"invalid label selector: {err}", field=key,
                         expected="matchLabels of strings and matchExpressions with key, "
                         "operator and values") from None
    for i, req in enumerate(sel.match_expressions):
        where = f"{key}.matchExpressions[{i}]"
        if not req.key:
            raise InputError("the key is empty", field=f"{where}.key", expected="a label key")
        if req.operator not in _SELECTOR_OPS:
            raise InputError(f"unknown operator {req.operator!r}", field=f"{where}.operator",
                             expected=" | ".join(_SELECTOR_OPS))
        if req.operator in ("In", "NotIn") and not req.values:
            raise InputError(f"operator {req.operator} needs values", field=f"{where}.values",
                             expected="a non-empty list of values")
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            raise InputError(f"operator {req.operator} takes no values",
                             field=f"{where}.values", expected="no values")
    return sel


def percentages(raw: Mapping[str, Any], key: str) -> dict[str, float] | None:
    """``api.ResourceThresholds``: resource name -> percentage (a number)."""
    value = _mapping(raw, key, "a mapping of resource name to percentage, such as cpu: 20")
    if value is None:
        return None
    out: dict[str, float] = {}
    for name, pct in value.items():
        if isinstance(pct, bool) or not isinstance(pct, int | float):
            raise InputError(f"got {describe(pct)}", field=f"{key}.{name}",
                             expected="a percentage between 0 and 100")
        out[str(name)] = float(pct)
    return out
