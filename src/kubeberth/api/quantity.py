"""Kubernetes resource quantities, parsed as apimachinery's ``resource.Quantity`` and bounded.

Cluster state keeps every resource as int64 milli-units so one integer type serves cpu
(millicores), memory (milli-bytes), pods and extended resources alike. Upstream reads cpu with
``MilliValue()`` and everything else with ``Value()`` (both round up); :func:`to_milli` reproduces
that rounding so integer score formulas give the same results as kube-scheduler.

The grammar is upstream's (sign, digits, optional fraction, then a binary suffix Ki..Ei, a
decimal one n u m "" k M G T P E, or ``e``/``E`` with an int64 exponent), with its error
messages. Past upstream, a value whose milli-units do not fit an int64 is an input error (the
state and the score kernels are int64), and so are non-finite numbers. Every step costs linear
time in the text: the magnitude is bounded from the digit count and exponent before any number is
built, and digits far below a nano-unit are folded into one sticky digit, which keeps the
rounding exact. Numbers that readers already hold in milli-units (the openb CSV's) travel as
:class:`Milli` and are never formatted or parsed.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from kubeberth.api.errors import InputError

INT64_MAX = 2**63 - 1
MAX_MILLI = INT64_MAX
# Upstream's parse errors, word for word (apimachinery resource.ErrFormatWrong and friends).
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"
EXPECTED_QUANTITY = (
    "a Kubernetes quantity such as 100m, 1.5, 16Gi, 500Mi or 1e3 "
    "(a number with an optional suffix n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent)"
)
EXPECTED_RANGE = (
    f"a quantity whose milli-units fit a signed 64-bit integer: at most {MAX_MILLI}m "
    "(about 9.2e15, or 8Pi) in magnitude"
)

# Resources that upstream reads in milli-units (MilliValue); all others are read in whole units.
MILLI_NATIVE = frozenset({"cpu"})

# Upstream's scanner, as one linear regular expression: number, suffix letters, signed digits.
_SPLIT = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*)([-+]?[0-9]*)")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {0: "", **{v // 10: k for k, v in _BINARY.items()}}
_EXPONENT = re.compile(r"[-+]?0*([0-9]{1,19})")
# Fraction digits kept below the unit. A ceiling at milli-units of a number times 2**60 needs at
# most 63 places; the digits beyond are folded into one sticky digit.
_KEEP_PLACES = 80
# A number's milli-units are at least 10**19 > MAX_MILLI once its leading digit sits here.
_TOO_LARGE_ORDER = 19 - 3
_CACHED_TEXT = 64


class Milli(int):
    """A quantity already in milli-units, as a reader that holds numbers builds it (the openb
    CSV): :func:`to_milli` takes the number as it is. It must not leave the process as an
    integer (it would read as whole units): :func:`enc_hook` writes it as ``<n>m``."""

    __slots__ = ()


def enc_hook(obj: object) -> object:
    """msgspec encoder hook for objects that hold :class:`Milli` quantities."""
    if isinstance(obj, Milli):
        return f"{int(obj)}m"
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 48 else text[:40] + "…" + text[-4:]


def _error(value: object, problem: str, expected: str = EXPECTED_QUANTITY) -> InputError:
    return InputError(f"{_shown(value)} is not a quantity: {problem}", expected=expected)


def _out_of_range(value: object) -> InputError:
    return InputError(f"{_shown(value)} is out of range for a quantity", expected=EXPECTED_RANGE)


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity as written in a manifest (string, int or float) into an exact number.

    Floats are what YAML and JSON readers make of unquoted numbers; upstream would read the same
    digits from the JSON text, which ``repr`` gives back for every finite float."""
    if isinstance(value, Milli):
        return Fraction(int(value), 1000)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _error(value, "not a number or a string")
    if isinstance(value, int):
        if abs(value).bit_length() > 63 or abs(value) * 1000 > MAX_MILLI:
            raise _out_of_range(value)
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _error(value, "not a finite number (or too large for a float)")
        return _parse_text(value, repr(value))
    return _parse_text(value, value.strip())


def _parse_text(value: object, text: str) -> Fraction:
    m = _SPLIT.fullmatch(text)
    if m is None or not text:
        raise _error(value, ERR_FORMAT)
    sign, num, frac, letters, tail = m.groups()
    frac = frac or ""
    if not num and not frac:
        raise _error(value, ERR_NUMERIC if m[3] is not None else ERR_FORMAT)
    exp10, exp2 = _suffix(value, letters, tail)
    digits = (num + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    exp10 -= len(frac)
    # Lower bound of the decimal order of magnitude (log10(2) > 0.301).
    if len(digits) - 1 + exp10 + exp2 * 301 // 1000 >= _TOO_LARGE_ORDER:
        raise _out_of_range(value)
    if exp10 < -_KEEP_PLACES:
        drop = -_KEEP_PLACES - exp10
        kept, dropped = digits[:-drop] if drop < len(digits) else "", digits[-drop:]
        exp10 = -_KEEP_PLACES
        if dropped.strip("0"):
            kept += "1"  # the sticky digit: something non-zero lies below
            exp10 -= 1
        digits = kept or "0"
    numerator = int(digits) << exp2
    q = Fraction(numerator * 10**exp10) if exp10 >= 0 else Fraction(numerator, 10**-exp10)
    if abs(q) * 1000 > MAX_MILLI:
        raise _out_of_range(value)
    return -q if sign == "-" else q


def _suffix(value: object, letters: str, tail: str) -> tuple[int, int]:
    """(decimal exponent, binary exponent) of a suffix, as upstream's suffixer reads it."""
    if not tail:
        if letters in _DECIMAL:
            return _DECIMAL[letters], 0
        if letters in _BINARY:
            return 0, _BINARY[letters]
    elif letters in ("e", "E"):
        m = _EXPONENT.fullmatch(tail)
        if m is not None:
            exponent = int(m[1])
            if exponent <= INT64_MAX + (tail[0] == "-"):  # upstream's ParseInt(..., 64)
                return (-exponent if tail[0] == "-" else exponent), 0
    raise _error(value, ERR_SUFFIX)


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def to_milli(resource: str, value: object) -> int:
    """Quantity in int milli-units, rounded up as upstream's MilliValue()/Value() do."""
    if type(value) is Milli:
        return int(value)
    if type(value) is int or (type(value) is str and len(value) <= _CACHED_TEXT):
        return _to_milli_cached(resource, value)
    return _to_milli(resource, value)


@lru_cache(maxsize=65536)
def _to_milli_cached(resource: str, value: object) -> int:
    # Manifests repeat the same few hundred quantities thousands of times; parsing is exact but
    # slow. Long texts are not cached: hostile input must not fill the cache.
    return _to_milli(resource, value)


def _to_milli(resource: str, value: object) -> int:
    q = parse_quantity(value)
    milli = _ceil(q * 1000) if resource in MILLI_NATIVE else _ceil(q) * 1000
    if abs(milli) > MAX_MILLI:
        raise _out_of_range(value)
    return milli


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


def canonical(value: object) -> str:
    """A quantity as the API server writes it back (``Quantity.String()``): "1.5" is "1500m",
    "1000" is "1k", "1.5Gi" is "1536Mi"; validation messages quote quantities so."""
    q = parse_quantity(value)
    nano = abs(q) * 10**9
    q = Fraction(math.ceil(nano), 10**9) * (1 if q >= 0 else -1)  # upstream keeps nano-units
    if q == 0:
        return "0"
    text = repr(value) if isinstance(value, float) else str(value).strip()
    m = _SPLIT.fullmatch(text)
    letters, tail = (m[4], m[5]) if m is not None else ("", "")
    if letters in _BINARY and abs(q) >= 1024 and q.denominator == 1:
        number, exponent = q.numerator, 0
        while number % 1024 == 0:
            number, exponent = number // 1024, exponent + 1
        return f"{number}{_BINARY_SUFFIX[exponent]}"
    exponent = -9
    number = q.numerator * 10**9 // q.denominator
    while number % 10 == 0:
        number, exponent = number // 10, exponent + 1
    while exponent % 3:
        number, exponent = number * 10, exponent - 1
    if letters in ("e", "E") and tail:
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_DECIMAL_SUFFIX[exponent]}"
