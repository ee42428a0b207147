"""Request bodies decoded within bounds: size, nesting depth, YAML alias expansion, numbers.

A body is the one input every client controls, so nothing in it may cost more than its length:
the server refuses a body over upstream's 3 MiB limit (413, as kube-apiserver), a document
nested deeper than :data:`MAX_DEPTH`, a YAML document whose aliases expand past the size limit
(the "billion laughs" bomb; the expansion is measured from the parser's events before anything
is built), and numbers JSON cannot carry (``NaN``, ``Infinity``, ``1e400``, integers past 64
bits). YAML is turned into the JSON data model (string keys, timestamps as strings) so every
later step sees what a JSON client would have sent. Each refusal is a 400 ``Status``.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
from typing import Any

import yaml

from kubeberth.apiserver import errors

# kube-apiserver's DefaultMaxRequestSizeBytes (3 MiB) for every request body.
MAX_BODY_BYTES = 3 * 1024 * 1024
# Deeper than any Kubernetes object; shallow enough that the recursive steps after decoding
# (copies, encoders, patches) stay far from Python's recursion limit.
MAX_DEPTH = 100
_INT64 = (-(2**63), 2**64 - 1)  # int64 and uint64 fields both exist in the API
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def too_large(limit: int = MAX_BODY_BYTES) -> errors.ApiError:
    """413 as kube-apiserver returns it for an oversize body."""
    return errors.ApiError(413, "RequestEntityTooLarge",
                           f"Request entity too large: limit is {limit}")


def decode_json(raw: bytes, what: str = "the body") -> Any:
    """JSON within the depth limit, finite numbers only (400 otherwise)."""
    def no_constant(name: str) -> Any:
        raise errors.bad_request(f"{what} is not valid JSON: invalid character {name[0]!r} "
                                 "looking for beginning of value (NaN and Infinity are not "
                                 "JSON)")

    try:
        data = json.loads(raw, parse_constant=no_constant)
    except RecursionError:
        raise _too_deep(what) from None
    except ValueError as err:  # UnicodeDecodeError and JSONDecodeError included
        raise errors.bad_request(f"{what} is not valid JSON: {err}") from None
    check_json_data(data, what)
    return data


def decode_yaml(raw: bytes, what: str = "the body") -> Any:
    """One YAML document as JSON data, refused before it is built if it nests deeper than
    :data:`MAX_DEPTH` or its aliases expand it past :data:`MAX_BODY_BYTES`."""
    try:
        _check_yaml_events(raw, what)
        data = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as err:
        raise errors.bad_request(f"{what} is not valid YAML: {err}") from None
    return _yaml_to_json(data, what)


def check_json_data(data: Any, what: str = "the body") -> None:
    """The decoded data nests at most :data:`MAX_DEPTH` deep and has JSON's numbers only."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            _check_number(value, what)
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(what)
        stack.extend((child, depth + 1) for child in children)


def _check_number(value: Any, what: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise errors.bad_request(f"{what} has a number JSON cannot carry ({value}): numbers "
                                 "must be finite")
    if isinstance(value, int) and not isinstance(value, bool) and \
            not _INT64[0] <= value <= _INT64[1]:
        raise errors.bad_request(f"{what} has the integer {value} outside the 64-bit range "
                                 "Kubernetes fields hold")


def _too_deep(what: str) -> errors.ApiError:
    return errors.bad_request(f"{what} nests deeper than {MAX_DEPTH} levels (exceeded max "
                              "depth)")


def _check_yaml_events(raw: bytes, what: str) -> None:
    """Walk the parser's events (no objects built): nesting depth, and the size the document
    would have with every alias expanded (scalars by length, collections 2 each)."""
    stack: list[list[Any]] = []  # [anchor, expanded size so far]
    anchored: dict[str, int] = {}
    total = 0

    def add(size: int) -> None:
        nonlocal total
        if stack:
            stack[-1][1] += size
            grown = stack[-1][1]
        else:
            total += size
            grown = total
        if grown > MAX_BODY_BYTES:
            raise errors.bad_request(f"{what} is a YAML document that expands (through its "
                                     f"aliases) past the limit of {MAX_BODY_BYTES} bytes")

    for event in yaml.parse(raw, Loader=_Loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([event.anchor, 2])
            if len(stack) > MAX_DEPTH:
                raise _too_deep(what)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = stack.pop()
            if anchor is not None:
                anchored[anchor] = size
            add(size)
        elif isinstance(event, yaml.ScalarEvent):
            size = len(event.value) + 2
            if event.anchor is not None:
                anchored[event.anchor] = size
            add(size)
        elif isinstance(event, yaml.AliasEvent):
            add(anchored.get(event.anchor or "", 2))


def _yaml_to_json(data: Any, what: str) -> Any:
    """A copy of the loaded YAML in the JSON data model, as Kubernetes' YAML-to-JSON step
    makes it: keys become strings, timestamps RFC 3339 strings, binary base64; aliases are
    expanded (the events check bounded that)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(data, root, 0, 1)]
    while stack:
        value, parent, slot, depth = stack.pop()
        if isinstance(value, dict):
            out: Any = {}
            for key, child in value.items():
                name = _yaml_key(key, what)
                out[name] = None
                stack.append((child, out, name, depth + 1))
        elif isinstance(value, list):
            out = [None] * len(value)
            stack.extend((child, out, i, depth + 1) for i, child in enumerate(value))
        elif isinstance(value, datetime.datetime):
            out = value.isoformat().replace("+00:00", "Z")
        elif isinstance(value, datetime.date):
            out = value.isoformat()
        elif isinstance(value, bytes):
            out = base64.b64encode(value).decode()
        elif value is None or isinstance(value, (str, int, float)):
            _check_number(value, what)
            out = value
        else:
            raise errors.bad_request(f"{what} has a YAML value JSON cannot carry "
                                     f"({type(value).__name__})")
        if depth > MAX_DEPTH + 1:
            raise _too_deep(what)
        parent[slot] = out
    return root[0]


def _yaml_key(key: Any, what: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, (int, float)) and not (isinstance(key, float) and
                                               not math.isfinite(key)):
        return str(key)
    if key is None:
        return "null"
    raise errors.bad_request(f"{what} has a YAML mapping key JSON cannot carry ({key!r})")
