"""CEL device selectors, evaluated with cel-python (``celpy``) in upstream's device environment.

A selector sees one variable, ``device``: ``driver``, ``attributes`` and ``capacity`` (maps from
a domain to maps from an attribute or capacity name to its value; an unqualified name belongs
to the driver's domain, and an unknown domain reads as an empty map, as upstream's environment
does) and ``allowMultipleAllocations``. Quantities and versions are typed values with
Kubernetes' CEL library functions: ``quantity()``, ``isQuantity()``, ``compareTo``,
``isGreaterThan``, ``isLessThan``, ``add``, ``sub``, ``asInteger``, ``isInteger``, ``sign``,
``asApproximateFloat``; ``semver()``, ``isSemver()``, ``major``, ``minor``, ``patch``.
Compiled programs are cached per expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import parse_quantity

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-.]+)?$")


class CelError(Exception):
    """A selector failed while it was evaluated (upstream: a CEL runtime error)."""


@total_ordering
@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact Kubernetes quantity inside CEL."""

    value: Fraction

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value


@total_ordering
@dataclass(frozen=True, slots=True)
class Semver:
    """A semantic version inside CEL, ordered by the semver 2.0 precedence rules."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...]

    def _key(self) -> tuple[Any, ...]:
        # A release sorts after its prereleases; numeric identifiers sort before others.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key() < other._key()


def parse_semver(text: str) -> Semver | None:
    m = _SEMVER.match(text)
    if m is None:
        return None
    pre = tuple(m[4].split(".")) if m[4] else ()
    return Semver(int(m[1]), int(m[2]), int(m[3]), pre)


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except InputError as err:
        raise CelError(f"quantity({str(text)!r}): {err.message}") from None


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except InputError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver(text: Any) -> Semver:
    v = parse_semver(str(text))
    if v is None:
        raise CelError(f"semver({str(text)!r}): not a semantic version")
    return v


def _compare(a: Any, b: Any) -> celtypes.IntType:
    if type(a) is not type(b) or not isinstance(a, Quantity | Semver):
        raise CelError("compareTo needs two quantities or two versions")
    return celtypes.IntType(0 if a == b else (-1 if a < b else 1))


def _q(a: Any) -> Quantity:
    if not isinstance(a, Quantity):
        raise CelError("expected a quantity")
    return a


def _v(a: Any) -> Semver:
    if not isinstance(a, Semver):
        raise CelError("expected a semantic version")
    return a


def _as_integer(a: Any) -> celtypes.IntType:
    v = _q(a).value
    if v.denominator != 1 or not -(2**63) <= v.numerator < 2**63:
        raise CelError("asInteger: the quantity is not an int64")
    return celtypes.IntType(v.numerator)


def _plus(a: Any, b: Any) -> Quantity:
    return Quantity(_q(a).value + (b.value if isinstance(b, Quantity) else Fraction(int(b))))


def _minus(a: Any, b: Any) -> Quantity:
    return Quantity(_q(a).value - (b.value if isinstance(b, Quantity) else Fraction(int(b))))


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": lambda s: celtypes.BoolType(parse_semver(str(s)) is not None),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "add": _plus,
    "sub": _minus,
    "sign": lambda a: celtypes.IntType((_q(a).value > 0) - (_q(a).value < 0)),
    "isInteger": lambda a: celtypes.BoolType(_q(a).value.denominator == 1),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a).value)),
    "major": lambda a: celtypes.IntType(_v(a).major),
    "minor": lambda a: celtypes.IntType(_v(a).minor),
    "patch": lambda a: celtypes.IntType(_v(a).patch),
}

_ENV = celpy.Environment()


class _DomainMap(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


@dataclass(frozen=True, slots=True)
class Selector:
    """One compiled selector expression."""

    expression: str
    program: Any

    def matches(self, device: celtypes.MapType) -> bool:
        """Whether ``device`` (from :func:`device_value`) is selected; raises CelError."""
        try:
            result = self.program.evaluate({"device": device})
        except CelError:
            raise
        except Exception as err:  # celpy reports every evaluation failure as its own types
            raise CelError(_message(err)) from None
        if isinstance(result, CELEvalError):
            raise CelError(_message(result))
        if not isinstance(result, celtypes.BoolType):
            raise CelError(f"the expression gave {type(result).__name__}, not a bool")
        return bool(result)


def _message(err: BaseException) -> str:
    if err.args and isinstance(err.args[0], str):
        detail = err.args[0]
        if len(err.args) > 2 and isinstance(err.args[2], tuple) and err.args[2]:
            detail += ": " + ", ".join(str(a) for a in err.args[2])
        return detail
    return str(err)


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compile ``expression`` once; an InputError (no field: the caller locates it) if it does
    not parse."""
    if not expression.strip():
        raise InputError("the CEL expression is empty",
                         expected='a CEL expression such as device.driver == "gpu.example.com"')
    try:
        ast = _ENV.compile(expression)
        program = _ENV.program(ast, functions=FUNCTIONS)
    except CELParseError as err:
        lines = str(err).splitlines()
        column = lines[1].index("^") + 1 if len(lines) > 1 and "^" in lines[1] else None
        where = f" at column {column}" if column else ""
        raise InputError(f"the CEL expression {expression!r} does not compile (syntax error"
                         f"{where})",
                         expected="a CEL expression over device.driver, device.attributes, "
                         "device.capacity and device.allowMultipleAllocations") from None
    return Selector(expression, program)


def attribute_value(attr: Any) -> Any:
    """A DeviceAttribute as a CEL value (versions as Semver; an unparsable version as text)."""
    if attr.int_ is not None:
        return celtypes.IntType(attr.int_)
    if attr.bool_ is not None:
        return celtypes.BoolType(attr.bool_)
    if attr.string is not None:
        return celtypes.StringType(attr.string)
    return parse_semver(attr.version or "") or celtypes.StringType(attr.version or "")


def split_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name; an unqualified name is the driver's."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def device_value(driver: str, attributes: dict[str, Any], capacity: dict[str, Fraction],
                 allow_multiple: bool) -> celtypes.MapType:
    """The ``device`` variable for one device (attributes already as CEL values)."""
    attrs: dict[str, dict[Any, Any]] = {}
    for name, value in attributes.items():
        domain, ident = split_name(name, driver)
        attrs.setdefault(domain, {})[celtypes.StringType(ident)] = value
    caps: dict[str, dict[Any, Any]] = {}
    for name, amount in capacity.items():
        domain, ident = split_name(name, driver)
        caps.setdefault(domain, {})[celtypes.StringType(ident)] = Quantity(amount)
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("attributes"): _DomainMap(
            {celtypes.StringType(d): celtypes.MapType(v) for d, v in attrs.items()}),
        celtypes.StringType("capacity"): _DomainMap(
            {celtypes.StringType(d): celtypes.MapType(v) for d, v in caps.items()}),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(allow_multiple),
    })


__all__ = ["CelError", "Quantity", "Selector", "Semver", "attribute_value", "compile_selector",
           "device_value", "parse_semver", "split_name"]
