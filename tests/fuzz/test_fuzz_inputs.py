"""Fuzzing every input reader: quantities, YAML/JSON loaders and the openb CSV readers.

Property: a reader returns, or raises the project's InputError; never another exception, and
never a hang (a hang stalls the suite, which is how it shows; no test here has a wall-clock
bound). Under CI the runs are derandomised, so a CI failure reproduces. The whole module takes
about a minute; ``bench/fuzz.py`` runs the same harness for longer.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fuzz.harness import (
    NODE_HEADER,
    OPS,
    POD_HEADER,
    TOKENS,
    Edit,
    load_everything,
    mutate,
    read_csvs,
    seeds,
)

from kubeberth.api.errors import InputError
from kubeberth.api.quantity import MAX_MILLI, Milli, parse_quantity, to_milli

CI = bool(os.environ.get("CI"))


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=CI,
                    database=None if CI else settings.default.database,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


RESOURCES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "kubeberth.io/gpu-milli"])


def _milli_or_error(resource: str, value: object) -> int | None:
    try:
        milli = to_milli(resource, value)
    except InputError:
        return None
    assert isinstance(milli, int) and abs(milli) <= MAX_MILLI
    return milli


# ---- quantities --------------------------------------------------------------------------------

@fuzz(600)
@given(RESOURCES, st.text(alphabet="0123456789.+-eEinumkKMGTP xZ\t", max_size=40))
def test_any_text_is_a_quantity_or_an_input_error(resource: str, text: str) -> None:
    _milli_or_error(resource, text)


@fuzz(300)
@given(RESOURCES, st.one_of(st.integers(), st.floats(), st.booleans(), st.none(),
                            st.lists(st.integers(), max_size=2)))
def test_any_json_value_is_a_quantity_or_an_input_error(resource: str, value: object) -> None:
    milli = _milli_or_error(resource, value)
    if isinstance(value, float) and not math.isfinite(value):
        assert milli is None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) * 1000 <= MAX_MILLI:
        assert milli == value * 1000


def _reference(resource: str, sign: str, num: str, frac: str, suffix: str) -> int | None:
    """Exact milli-units by plain Fraction arithmetic (for small exponents only)."""
    q = Fraction(f"{num or '0'}.{frac or '0'}")
    if suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        q *= 2 ** (10 * ("KMGTPE".index(suffix[0]) + 1))
    elif suffix.startswith(("e", "E")) and len(suffix) > 1:
        q *= Fraction(10) ** int(suffix[1:])
    else:
        q *= Fraction(10) ** {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9,
                              "T": 12, "P": 15, "E": 18}[suffix]
    q = -q if sign == "-" else q
    milli = -((-q * 1000).__floor__()) if resource == "cpu" else -((-q).__floor__()) * 1000
    if abs(q) * 1000 > MAX_MILLI or abs(milli) > MAX_MILLI:
        return None
    return int(milli)


@fuzz(600)
@given(RESOURCES, st.sampled_from(["", "+", "-"]), st.text("0123456789", max_size=25),
       st.text("0123456789", max_size=25),
       st.one_of(st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi",
                                  "Gi", "Ti", "Pi", "Ei"]),
                 st.builds(lambda e, x: f"{e}{x:+d}" if x < 0 else f"{e}{x}",
                           st.sampled_from("eE"), st.integers(-40, 40))))
def test_grammar_matches_exact_arithmetic(resource: str, sign: str, num: str, frac: str,
                                          suffix: str) -> None:
    if not num and not frac:
        return
    text = f"{sign}{num}.{frac}{suffix}" if frac else f"{sign}{num}{suffix}"
    assert _milli_or_error(resource, text) == _reference(resource, sign, num, frac, suffix)


@fuzz(200)
@given(st.integers(-(10**30), 10**30), st.text("0123456789", min_size=1, max_size=3000))
def test_huge_exponents_and_long_digit_runs_answer(exponent: int, digits: str) -> None:
    for text in (f"{digits}e{exponent}", f"0.{digits}e{exponent}", f"{digits}.{digits}Ei"):
        _milli_or_error("cpu", text)
        _milli_or_error("memory", text)


@fuzz(200)
@given(st.integers(0, MAX_MILLI))
def test_milli_is_taken_as_is_and_agrees_with_its_text(milli: int) -> None:
    assert to_milli("memory", Milli(milli)) == milli
    assert parse_quantity(Milli(milli)) == parse_quantity(f"{milli}m")


# ---- YAML and JSON loaders ---------------------------------------------------------------------

EDITS = st.lists(st.builds(Edit, st.sampled_from(OPS), st.integers(0, 1_000_000),
                           st.sampled_from(TOKENS)), min_size=1, max_size=4)


@pytest.fixture(scope="module")
def seed_texts() -> tuple[tuple[str, str], ...]:
    return seeds()


@fuzz(250)
@given(data=st.data())
def test_mutated_manifests_load_or_fail_with_an_input_error(
        data: st.DataObject, seed_texts: tuple[tuple[str, str], ...], tmp_path: Path) -> None:
    suffix, text = data.draw(st.sampled_from(seed_texts))
    path = tmp_path / f"input{suffix}"
    path.write_text(mutate(text, data.draw(EDITS)))
    load_everything(path)


# ---- CSV readers -------------------------------------------------------------------------------

FIELD = st.one_of(st.integers(0, 10**7).map(str), st.sampled_from(TOKENS),
                  st.text("0123456789.e+- \"", max_size=30))


def _csv(header: str, rows: list[list[str]]) -> str:
    width = header.count(",") + 1
    return header + "\n" + "".join(
        ",".join(f.replace(",", ";").replace("\n", " ") for f in row[:width]) + "\n"
        for row in rows)


@fuzz(300)
@given(st.lists(st.lists(FIELD, min_size=5, max_size=6), max_size=4),
       st.lists(st.lists(FIELD, min_size=11, max_size=12), max_size=4))
def test_csv_rows_read_or_fail_with_an_input_error(nodes: list[list[str]],
                                                   pods: list[list[str]]) -> None:
    read_csvs(_csv(NODE_HEADER, [[f"n{i}", *r[1:]] for i, r in enumerate(nodes)]),
              _csv(POD_HEADER, [[f"p{i}", *r[1:]] for i, r in enumerate(pods)]))
