"""The shared plugin helpers: Go integer division, DefaultNormalizeScore, the broken-linear
function, factorised label columns, reason tables, resource-name rules and args readers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.errors import InputError
from kubeberth.scheduling.plugins.helper import (
    all_pass,
    args_int,
    args_list,
    args_mapping,
    args_str,
    default_normalize_score,
    is_scalar_resource,
    label_codes,
    label_mask,
    parse_resource_specs,
    reason_table,
    reason_table_from_bits,
    reject_unknown,
    trunc_div,
    validate_qualified_name,
)

from .plugin_builders import cluster, make_node, ratio_score


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ---- integer arithmetic ------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(-10**12, 10**12),
                          st.integers(-10**6, 10**6).filter(lambda b: b != 0)), min_size=1))
def test_trunc_div_truncates_toward_zero_like_go(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    assert trunc_div(a, b).tolist() == [_go_div(x, y) for x, y in pairs]


def test_trunc_div_on_negative_quotients() -> None:
    assert trunc_div(np.array([-7, 7, -6, -1]), 2).tolist() == [-3, 3, -3, 0]


def test_default_normalize_score_scales_to_max() -> None:
    scores = np.array([2, 11, 4], dtype=np.int64)
    assert default_normalize_score(scores, reverse=False).tolist() == [18, 100, 36]


def test_default_normalize_score_reverse() -> None:
    scores = np.array([0, 1, 2], dtype=np.int64)
    assert default_normalize_score(scores, reverse=True).tolist() == [100, 50, 0]


def test_default_normalize_score_all_zero() -> None:
    zeros = np.zeros(3, dtype=np.int64)
    assert default_normalize_score(zeros, reverse=False).tolist() == [0, 0, 0]
    assert default_normalize_score(zeros, reverse=True).tolist() == [100, 100, 100]


def test_default_normalize_score_empty() -> None:
    assert default_normalize_score(np.zeros(0, dtype=np.int64), reverse=True).size == 0


# ---- broken linear function (RequestedToCapacityRatio's kernel) -------------------------------
def test_broken_linear_matches_upstream_table() -> None:
    shape = [(0, 2), (40, 10), (100, 0)]
    got = {p: ratio_score(shape, p) for p in (-10, 0, 20, 30, 40, 70, 100, 110)}
    assert got == {-10: 2, 0: 2, 20: 6, 30: 8, 40: 10, 70: 5, 100: 0, 110: 0}


def test_broken_linear_truncates_negative_slopes_toward_zero() -> None:
    # 10 + (-10 * 1) / 3 = 10 - 3 (Go) rather than 10 - 4 (floor).
    assert ratio_score([(0, 10), (3, 0)], 1) == 7
    assert ratio_score([(0, 10), (3, 0)], 2) == 4


def test_broken_linear_single_point_is_constant() -> None:
    assert [ratio_score([(50, 7)], p) for p in (0, 50, 100)] == [7, 7, 7]


@given(st.lists(st.integers(0, 100), min_size=1, max_size=30))
def test_broken_linear_matches_the_go_formula(points: list[int]) -> None:
    shape = [(0, 0), (30, 10), (60, 3), (100, 10)]
    expected = []
    for p in points:
        value = shape[-1][1]
        for i, (u, s) in enumerate(shape):
            if p <= u:
                value = s if i == 0 else shape[i - 1][1] + _go_div(
                    (s - shape[i - 1][1]) * (p - shape[i - 1][0]), u - shape[i - 1][0])
                break
        expected.append(value)
    assert [ratio_score(shape, p) for p in points] == expected


# ---- label columns -----------------------------------------------------------------------------
def test_label_codes_factorise_values() -> None:
    snap = cluster(make_node("a", labels={"zone": "z1"}), make_node("b"),
                   make_node("c", labels={"zone": "z1"}))
    codes, values = label_codes(snap, "zone")
    assert [values[int(c)] for c in codes] == ["z1", None, "z1"]
    assert len(values) == 2


def test_label_codes_follow_node_updates() -> None:
    snap = cluster(make_node("a", labels={"zone": "z1"}), make_node("b"))
    nodes = snap.node_ids()
    assert label_mask(snap, "zone", nodes, lambda v: v == "z2").tolist() == [False, False]
    snap.update_node(make_node("b", labels={"zone": "z2"}))
    assert label_mask(snap, "zone", nodes, lambda v: v == "z2").tolist() == [False, True]


def test_label_mask_evaluates_each_distinct_value_once() -> None:
    snap = cluster(*(make_node(f"n{i}", labels={"k": str(i % 3)}) for i in range(30)))
    seen: list[str | None] = []

    def pred(v: str | None) -> bool:
        seen.append(v)
        return v == "1"

    mask = label_mask(snap, "k", snap.node_ids()[::-1], pred)
    assert sorted(seen, key=str) == ["0", "1", "2"]
    assert mask.tolist() == [i % 3 == 1 for i in reversed(range(30))]


# ---- reason tables -----------------------------------------------------------------------------
def test_reason_table_groups_combinations() -> None:
    fail = np.array([[False, False], [True, False], [True, True], [True, False]])
    ids, table = reason_table(fail, ["a", "b"])
    assert table[0] == ()
    assert [table[int(i)] for i in ids] == [(), ("a",), ("a", "b"), ("a",)]
    assert len(table) == 3


def test_reason_table_wider_than_a_bitmask() -> None:
    rng = np.random.default_rng(7)
    fail = rng.random((200, 70)) < 0.05
    fail[0] = False
    labels = [f"r{j}" for j in range(70)]
    ids, table = reason_table(fail, labels)
    for i in range(200):
        assert table[int(ids[i])] == tuple(lbl for lbl, f in zip(labels, fail[i], strict=True)
                                           if f)
    assert ids[0] == 0


def test_reason_table_all_pass() -> None:
    ids, table = reason_table(np.zeros((4, 3), dtype=bool), ["a", "b", "c"])
    assert ids.tolist() == [0, 0, 0, 0]
    assert table == [()]


@pytest.mark.parametrize("width", [3, 20])
def test_reason_table_from_bits_orders_patterns_ascending(width: int) -> None:
    labels = [f"r{j}" for j in range(width)]
    bits = np.array([0, 6, 1, 6, 0, 5, 1], dtype=np.int64)
    ids, table = reason_table_from_bits(bits, labels)
    assert table == [(), ("r0",), ("r0", "r2"), ("r1", "r2")]
    assert ids.tolist() == [0, 3, 1, 3, 0, 2, 1]


@pytest.mark.parametrize("width", [3, 20])
def test_reason_table_from_bits_without_passing_nodes(width: int) -> None:
    labels = [f"r{j}" for j in range(width)]
    ids, table = reason_table_from_bits(np.array([4, 4, 2], dtype=np.int64), labels)
    assert table == [(), ("r1",), ("r2",)]
    assert ids.tolist() == [2, 2, 1]


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=30))
def test_reason_table_from_bits_agrees_with_reason_table(rows: list[list[bool]]) -> None:
    fail = np.array(rows, dtype=np.bool_)
    labels = ["a", "b", "c", "d", "e"]
    bits = fail.astype(np.int64) @ (1 << np.arange(5, dtype=np.int64))
    ids, table = reason_table_from_bits(bits, labels)
    want_ids, want_table = reason_table(fail, labels)
    assert table == want_table
    assert ids.tolist() == want_ids.tolist()


# ---- filter results ----------------------------------------------------------------------------
def test_all_pass_shares_read_only_zeros() -> None:
    a, b = all_pass(5), all_pass(5)
    assert a.codes.tolist() == [0] * 5 and a.reason_ids.tolist() == [0] * 5
    assert a.reasons == [()] and a.passes_all
    assert a is b and all_pass(6) is not a  # one shared verdict per batch size
    with pytest.raises(ValueError):
        a.codes[0] = 1
    assert len(all_pass(0).codes) == 0


# ---- resources and args ------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "scalar"), [
    ("cpu", False), ("memory", False), ("ephemeral-storage", False), ("pods", False),
    ("nvidia.com/gpu", True), ("kubernetes.io/something", True), ("hugepages-2Mi", True),
    ("attachable-volumes-aws-ebs", True), ("foo", False),
])
def test_is_scalar_resource(name: str, scalar: bool) -> None:
    assert is_scalar_resource(name) is scalar


def test_parse_resource_specs_defaults() -> None:
    assert [(r.name, r.weight) for r in parse_resource_specs([], "resources")] == \
        [("cpu", 1), ("memory", 1)]
    specs = parse_resource_specs([{"name": "nvidia.com/gpu"}, {"name": "cpu", "weight": 0}],
                                 "resources")
    assert [(r.name, r.weight) for r in specs] == [("nvidia.com/gpu", 1), ("cpu", 1)]


def test_parse_resource_specs_errors_name_the_field() -> None:
    with pytest.raises(InputError) as err:
        parse_resource_specs([{"name": "cpu"}, {"weight": 2}], "scoringStrategy.resources")
    assert err.value.field == "scoringStrategy.resources[1].name"
    with pytest.raises(InputError) as err:
        parse_resource_specs([{"name": "cpu", "wieght": 2}], "resources")
    assert err.value.field == "resources[0].wieght"
    with pytest.raises(InputError) as err:
        parse_resource_specs([{"name": "cpu", "weight": "2"}], "resources")
    assert err.value.field == "resources[0].weight"


def test_args_readers_reject_wrong_types() -> None:
    assert args_mapping(None) == {}
    with pytest.raises(InputError):
        args_mapping([1], "x")
    raw = {"i": True, "s": 3, "l": "x"}
    with pytest.raises(InputError) as err:
        args_int(raw, "i", "top")
    assert err.value.field == "top.i"
    with pytest.raises(InputError):
        args_str(raw, "s", None)
    with pytest.raises(InputError):
        args_list(raw, "l", None)
    assert args_int({}, "i", None, 7) == 7
    with pytest.raises(InputError) as err:
        reject_unknown({"bogus": 1}, ("a", "b"), None)
    assert err.value.field == "bogus"
    assert "one of a, b" in str(err.value)


@pytest.mark.parametrize("name", ["example.com/gpu", "gpu", "a.b-c_d", "x" * 63])
def test_validate_qualified_name_accepts(name: str) -> None:
    """Valid names pass without an error (the function returns nothing; a bad name raises)."""
    assert validate_qualified_name(name, "ignoredResources[0]") is None  # type: ignore[func-returns-value]
    # The same name one character past a limit, or with a bad first character, is refused.
    longer = name + "x" if "/" not in name else name.replace("/", "/" + "x" * 63)
    if len(longer.rpartition("/")[2]) > 63:
        with pytest.raises(InputError):
            validate_qualified_name(longer, "ignoredResources[0]")
    with pytest.raises(InputError):
        validate_qualified_name("-" + name.rpartition("/")[2], "ignoredResources[0]")


@pytest.mark.parametrize("name", ["", "/gpu", "Example.com/gpu", "example.com/", "-a",
                                  "x" * 64, "a/b/c"])
def test_validate_qualified_name_rejects(name: str) -> None:
    with pytest.raises(InputError) as err:
        validate_qualified_name(name, "ignoredResources[2]")
    assert err.value.field == "ignoredResources[2]"
