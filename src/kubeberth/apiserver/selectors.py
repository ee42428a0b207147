"""Label and field selectors as they arrive in query strings (``?labelSelector=a=b,c in (x)``).

The API server parses these strings itself, with apimachinery's grammar, and rejects what a
real server rejects: a malformed selector or a field label the resource does not support is a
400 with the reason in the message. Field selectors only know the fields upstream registers
for each kind (``spec.nodeName`` on pods, ``involvedObject.name`` on events, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubeberth.api.selectors import compare_integer
from kubeberth.apiserver.errors import bad_request

ObjectPredicate = Callable[[Mapping[str, Any]], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|=|>|<)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")

_META_FIELDS = ("metadata.name", "metadata.namespace")
# Field labels each kind supports (upstream's registered field label conversion funcs).
FIELD_LABELS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
            "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion",
              "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
              "reportingComponent", "source", "type"),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
    "ReplicaSet": ("status.replicas",),
}


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A predicate over labels; an empty selector matches everything."""
    preds: list[Callable[[Mapping[str, str]], bool]] = []
    for part in _split(text):
        preds.append(_label_requirement(part))
    return lambda labels: all(p(labels) for p in preds)


def _label_requirement(part: str) -> Callable[[Mapping[str, str]], bool]:
    m = _SET.match(part)
    if m:
        key, op = m[1], m[3]
        values = frozenset(v.strip() for v in m[4].split(",") if v.strip())
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _CMP.match(part)
    if m:
        key, op, value = m[1], m[3], m[4]
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise bad_request(f"unable to parse requirement: for 'gt', 'lt' operators, the "
                              f"value must be an integer: {part.strip()!r}") from None
        return lambda labels: compare_integer(labels.get(key), bound, op == ">")
    m = _EXISTS.match(part)
    if m:
        negate, key = m[1] == "!", m[2]
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {part.strip()!r} is not a valid label "
                      "selector requirement (key, !key, key=value, key!=value, key in (a,b), "
                      "key notin (a,b))")


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """A field as a field selector compares it: a string, "" when unset."""
    if path == "source":
        path = "source.component"
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str, kind: str) -> ObjectPredicate:
    """A predicate over whole objects; only the kind's registered field labels are allowed."""
    allowed = _META_FIELDS + FIELD_LABELS.get(kind, ())
    preds: list[ObjectPredicate] = []
    for part in _split(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if m is None:
            raise bad_request(f"invalid selector: {part.strip()!r}; can't understand "
                              "(expected field=value, field==value or field!=value)")
        path, op, value = m[1], m[2], m[3]
        if path not in allowed:
            raise bad_request(f'field label not supported: {path} (a {kind} supports '
                              f'{", ".join(allowed)})')
        preds.append(_field_requirement(path, op != "!=", value))
    return lambda obj: all(p(obj) for p in preds)


def _field_requirement(path: str, equal: bool, value: str) -> ObjectPredicate:
    if equal:
        return lambda obj: field_value(obj, path) == value
    return lambda obj: field_value(obj, path) != value
