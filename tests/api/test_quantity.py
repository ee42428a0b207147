import re
from fractions import Fraction

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import Milli, format_milli, parse_quantity, to_milli


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("500Mi", Fraction(500 * 2**20)),
        ("2k", Fraction(2000)),
        ("1E2", Fraction(100)),
        ("1e-3", Fraction(1, 1000)),
        ("+5", Fraction(5)),
        ("-5", Fraction(-5)),
        (".5", Fraction(1, 2)),
        ("10n", Fraction(10, 10**9)),
        ("3u", Fraction(3, 10**6)),
        (7, Fraction(7)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity_exact(raw: object, expected: Fraction) -> None:
    assert parse_quantity(raw) == expected


@pytest.mark.parametrize("raw", ["", "abc", "1.2.3", "5 Gi", "1Zi", "Mi", True, None, [1]])
def test_parse_quantity_rejects(raw: object) -> None:
    with pytest.raises(InputError) as err:
        parse_quantity(raw)
    assert "quantity" in str(err.value)
    assert "Expected" in str(err.value)


def test_cpu_is_read_in_millis_rounding_up() -> None:
    assert to_milli("cpu", "100m") == 100
    assert to_milli("cpu", "1.5m") == 2  # MilliValue rounds up
    assert to_milli("cpu", 2) == 2000


def test_other_resources_are_whole_units_rounded_up_then_milli() -> None:
    assert to_milli("memory", "1.5") == 2000  # Value() rounds up to 2 bytes
    assert to_milli("memory", "1Ki") == 1024 * 1000
    assert to_milli("nvidia.com/gpu", 1) == 1000


def test_format_round_trip() -> None:
    assert format_milli("cpu", 1500) == "1500m"
    assert format_milli("cpu", 2000) == "2"
    assert format_milli("memory", 16 * 2**30 * 1000) == "16Gi"
    assert format_milli("nvidia.com/gpu", 8000) == "8"


@pytest.mark.parametrize(("raw", "said"), [
    ("1.2.3", "quantities must match the regular expression "
              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("1Ki3", "unable to parse quantity's suffix"),
    ("1e", "unable to parse quantity's suffix"),
    ("1e9223372036854775808", "unable to parse quantity's suffix"),
    (".", "unable to parse numeric part of quantity"),
    (float("nan"), "not a finite number"),
    (float("-inf"), "not a finite number"),
    ("1e999999999", "out of range"),
    ("1e400", "out of range"),
    ("9Pi", "out of range"),
    (18446744073709551616, "out of range"),
    ("1" * 100_000, "out of range"),
])
def test_upstream_messages_and_int64_milli_limit(raw: object, said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        to_milli("memory", raw)


def test_limits_are_exact_and_tiny_values_round_up() -> None:
    assert to_milli("cpu", "9223372036854775807m") == 2**63 - 1
    with pytest.raises(InputError):
        to_milli("cpu", "9223372036854775808m")
    assert to_milli("memory", "8Pi") == 2**53 * 1000
    assert to_milli("cpu", "1e-999999999") == 1  # rounds up to a millicore, as upstream
    assert to_milli("cpu", "-1e-999999999") == 0
    assert to_milli("cpu", "0." + "0" * 100_000 + "1") == 1
    assert to_milli("cpu", "1e-9223372036854775808") == 1


def test_milli_is_a_number_in_milli_units() -> None:
    assert to_milli("cpu", Milli(1500)) == 1500
    assert to_milli("memory", Milli(7)) == 7  # taken as is, whatever the resource
    assert parse_quantity(Milli(1500)) == Fraction(3, 2)
