"""Label selectors, node selector terms and tolerations, with upstream matching rules.

These are the small predicates every scheduling, admission and descheduling plugin shares. They
are compiled once (selectors become closures over sets) because the same selector is evaluated
against many pods or nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

Labels = Mapping[str, str]
LabelPredicate = Callable[[Labels], bool]

_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _requirement(key: str, op: str, values: list[str], ops: tuple[str, ...],
                 field: str) -> LabelPredicate:
    if op not in ops:
        raise InputError(f"unknown operator {op!r}", field=field, expected=" | ".join(ops))
    vals = frozenset(values)
    if op == "In":
        return lambda labels: labels.get(key) in vals
    if op == "NotIn":
        return lambda labels: labels.get(key) not in vals
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    if len(values) != 1:
        raise InputError(f"operator {op} takes exactly one value", field=field,
                         expected="values: [<integer>]")
    bound = int64(values[0])
    if bound is None:
        raise InputError(f"operator {op} needs an integer value, got {values[0][:40]!r}",
                         field=field, expected="a 64-bit integer")

    greater = op == "Gt"
    return lambda labels: compare_integer(labels.get(key), bound, greater)


def compare_integer(raw: str | None, bound: int, greater: bool) -> bool:
    """Gt/Lt on a label value: false when the label is missing or not an integer."""
    num = None if raw is None else int64(raw)
    if num is None:
        return False
    return num > bound if greater else num < bound


_INT64 = re.compile(r"[-+]?[0-9]{1,19}")


def int64(text: str) -> int | None:
    """``text`` as upstream's strconv.ParseInt(text, 10, 64) reads it, or None."""
    if _INT64.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _equals(key: str, value: str) -> LabelPredicate:
    return lambda labels: labels.get(key) == value


def compile_label_selector(sel: LabelSelector | None, field: str = "labelSelector",
                           *, nil_matches: bool = False) -> LabelPredicate:
    """A metav1.LabelSelector as a predicate. An empty selector matches everything; a nil one
    matches nothing unless ``nil_matches`` (callers decide, as upstream call sites differ)."""
    if sel is None:
        return (lambda _l: True) if nil_matches else (lambda _l: False)
    preds: list[LabelPredicate] = []
    for k, v in sel.match_labels.items():
        preds.append(_equals(k, v))
    for i, req in enumerate(sel.match_expressions):
        preds.append(_requirement(req.key, req.operator, req.values, _LABEL_OPS,
                                  f"{field}.matchExpressions[{i}]"))
    if not preds:
        return lambda _l: True
    if len(preds) == 1:
        return preds[0]
    return lambda labels: all(p(labels) for p in preds)


def compile_node_requirements(reqs: list[NodeSelectorRequirement], field: str) -> LabelPredicate:
    preds = [_requirement(r.key, r.operator, r.values, _NODE_OPS, f"{field}[{i}]")
             for i, r in enumerate(reqs)]
    return lambda labels: all(p(labels) for p in preds)


def compile_node_selector_term(term: NodeSelectorTerm, field: str = "nodeSelectorTerm"
                               ) -> Callable[[Labels, str], bool]:
    """A term matches when all its expressions match the node's labels and all its fields match
    (only ``metadata.name`` is a supported field, as upstream). An empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return lambda _labels, _name: False
    exprs = compile_node_requirements(term.match_expressions, f"{field}.matchExpressions")
    for i, f in enumerate(term.match_fields):
        if f.key != "metadata.name":
            raise InputError(f"unsupported field selector key {f.key!r}",
                             field=f"{field}.matchFields[{i}].key", expected="metadata.name")
    fields = compile_node_requirements(term.match_fields, f"{field}.matchFields")
    return lambda labels, name: exprs(labels) and fields({"metadata.name": name})


def toleration_tolerates(tol: Toleration, taint: Taint) -> bool:
    """Upstream ``Toleration.ToleratesTaint``: effect must match unless empty; an empty key with
    Exists tolerates every taint; Equal compares values."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    if tol.operator in ("Equal", ""):
        return tol.value == taint.value
    return False


def tolerated(tolerations: list[Toleration], taint: Taint) -> bool:
    return any(toleration_tolerates(t, taint) for t in tolerations)
