"""Kubernetes resource quantities, parsed exactly as apimachinery's ``resource.Quantity``.

Cluster state keeps every resource as int64 milli-units so one integer type serves cpu
(millicores), memory (milli-bytes), pods and extended resources alike. Upstream reads cpu with
``MilliValue()`` and everything else with ``Value()`` (both round up); :func:`to_milli` reproduces
that rounding so integer score formulas give the same results as kube-scheduler.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from kubeberth.api.errors import InputError

_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
EXPECTED_QUANTITY = (
    "a Kubernetes quantity such as 100m, 1.5, 16Gi, 500Mi or 1e3 "
    "(a number with an optional suffix n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent)"
)

# Resources that upstream reads in milli-units (MilliValue); all others are read in whole units.
MILLI_NATIVE = frozenset({"cpu"})


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity as written in a manifest (string, int or float) into an exact number."""
    if isinstance(value, bool):
        raise InputError(f"{value!r} is not a quantity", expected=EXPECTED_QUANTITY)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise InputError(f"{value!r} is not a quantity", expected=EXPECTED_QUANTITY)
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise InputError(f"{value!r} is not a quantity", expected=EXPECTED_QUANTITY)
    number = Fraction(m["num"])
    if m["bin"]:
        return number * _BINARY[m["bin"]]
    if m["exp"]:
        return number * Fraction(10) ** int(m["exp"][1:])
    return number * _DECIMAL[m["dec"] or ""]


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def to_milli(resource: str, value: object) -> int:
    """Quantity in int milli-units, rounded up as upstream's MilliValue()/Value() do."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return _to_milli_cached(resource, value)
    return _to_milli(resource, value)


@lru_cache(maxsize=65536)
def _to_milli_cached(resource: str, value: str | int) -> int:
    # Traces repeat the same few hundred quantities thousands of times; parsing is exact but slow.
    return _to_milli(resource, value)


def _to_milli(resource: str, value: object) -> int:
    q = parse_quantity(value)
    if resource in MILLI_NATIVE:
        return _ceil(q * 1000)
    return _ceil(q) * 1000


def format_milli(resource: str, milli: int) -> str:
    """Render milli-units back as a compact quantity string (for reports and explain output)."""
    if resource in MILLI_NATIVE:
        return f"{milli}m" if milli % 1000 else str(milli // 1000)
    whole = milli // 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole and whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)
