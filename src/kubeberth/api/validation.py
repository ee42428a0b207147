"""The API server's validation rules for the objects kubeberth reads, in its words.

A manifest the API server would refuse must be refused offline too, with the same message and
field path, so that ``kubeberth explain`` and ``kubectl apply`` agree. The rules live here once:
the manifest loader (config/manifests.py) and the embedded API server both call them. Each check
raises :class:`InputError` whose ``field`` is the path upstream reports and whose message is
upstream's ("Invalid value: ...", "Unsupported value: ...", "Required value").

Covered today: object shape (metadata, spec and status are mappings), names (RFC 1123
subdomain), namespaces (RFC 1123 label), labels (qualified keys, 63-character values), node
taints and pod tolerations (keys, operators, effects), int32 priorities, and container
resources (extended resources whole and equal in requests and limits, requests at most limits).
Quantities are parsed where they are read (:mod:`kubeberth.api.quantity`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    Node,
    ObjectMeta,
    Pod,
    PodSpec,
    PriorityClass,
    ResourceRequirements,
    Taint,
    Toleration,
)
from kubeberth.api.quantity import canonical, parse_quantity
from kubeberth.api.resources import is_extended_resource

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")

# RFC 1123 subdomain and label (match with fullmatch); the DRA loader names its fields with them.
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_SHAPED = ("metadata", "spec", "status")


def _quoted(value: object) -> str:
    text = json.dumps(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:72] + "…" + text[-4:]


def _invalid(field: str, value: object, rule: str) -> InputError:
    return InputError(f"Invalid value: {_quoted(value)}: {rule}", field=field)


def _unsupported(field: str, value: object, supported: Iterable[str]) -> InputError:
    shown = ", ".join(json.dumps(s) for s in supported)
    return InputError(f"Unsupported value: {_quoted(value)}: supported values: {shown}",
                      field=field)


def _got(value: object) -> str:
    return "got a list" if isinstance(value, list) else "got a mapping" \
        if isinstance(value, dict) else f"got the value {_quoted(value)}"


def check_shape(data: Mapping[str, Any]) -> None:
    """The parts every object shares have their shape (metadata, spec and status are mappings;
    names are strings; labels and annotations map strings to strings), so that layers reading
    raw documents of any kind may rely on it."""
    for key in _SHAPED:
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise InputError(_got(value), field=key, expected="a mapping (an object)")
    meta = data.get("metadata") or {}
    for key in ("name", "namespace", "generateName"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError(_got(value), field=f"metadata.{key}", expected="a string")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(_got(value), field=f"metadata.{key}",
                             expected="a mapping of strings to strings")
        for k, v in value.items():
            if not isinstance(v, str) and v is not None:
                raise InputError(_got(v), field=f"metadata.{key}.{k}", expected="a string")


def check_subdomain(value: str, field: str, *, fold_case: bool = False) -> None:
    """``fold_case`` lets upper-case letters pass (see :func:`check_metadata`)."""
    if len(value) > 253:
        raise _invalid(field, value, "must be no more than 253 characters")
    if SUBDOMAIN.fullmatch(value.lower() if fold_case else value) is None:
        raise _invalid(field, value, SUBDOMAIN_RULE)


def check_label(value: str, field: str, *, fold_case: bool = False) -> None:
    if len(value) > 63:
        raise _invalid(field, value, "must be no more than 63 characters")
    if LABEL.fullmatch(value.lower() if fold_case else value) is None:
        raise _invalid(field, value, LABEL_RULE)


def check_qualified_name(value: str, field: str) -> None:
    """A label or taint key: an optional DNS subdomain prefix and '/', then a name."""
    prefix, _, name = value.rpartition("/")
    if "/" in value and not prefix:
        raise _invalid(field, value, "prefix part must be non-empty")
    if prefix:
        check_subdomain(prefix, field)
    if not name:
        raise _invalid(field, value, "name part must be non-empty")
    if len(name) > 63:
        raise _invalid(field, value, "name part must be no more than 63 characters")
    if _QUALIFIED.fullmatch(name) is None:
        raise _invalid(field, value, QUALIFIED_RULE)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def check_labels(labels: Mapping[str, str], field: str) -> None:
    """Label keys are qualified names; values at most 63 characters of upstream's alphabet."""
    for key, value in labels.items():
        check_qualified_name(key, field)
        if len(value) > 63:
            raise _invalid(f"{field}.{key}", value, "must be no more than 63 characters")
        if _LABEL_VALUE.fullmatch(value) is None:
            raise _invalid(f"{field}.{key}", value, LABEL_VALUE_RULE)


def check_int32(value: int, field: str) -> None:
    if not INT32_MIN <= value <= INT32_MAX:
        raise _invalid(field, value, f"must be a 32-bit integer ({INT32_MIN} to {INT32_MAX})")


def check_metadata(meta: ObjectMeta, *, namespaced: bool, fold_case: bool = False) -> None:
    """Names are RFC 1123 subdomains, namespaces RFC 1123 labels.

    ``fold_case`` is for manifests read offline: upstream's own scheduler, Kueue and
    descheduler tests (our conformance cases) name objects ``nodeA`` or ``CPU-consumer-1``,
    which their unit tests never send through an API server; upper case is let through there,
    every other character the API server refuses is not. The API server checks strictly."""
    if meta.name:
        check_subdomain(meta.name, "metadata.name", fold_case=fold_case)
    if namespaced and meta.namespace:
        check_label(meta.namespace, "metadata.namespace", fold_case=fold_case)
    check_labels(meta.labels, "metadata.labels")


def check_taints(taints: Iterable[Taint], field: str) -> None:
    for i, taint in enumerate(taints):
        where = f"{field}[{i}]"
        if not taint.key:
            raise InputError("Required value", field=f"{where}.key")
        check_qualified_name(taint.key, f"{where}.key")
        if taint.effect not in TAINT_EFFECTS:
            raise _unsupported(f"{where}.effect", taint.effect, TAINT_EFFECTS)


def check_tolerations(tolerations: Iterable[Toleration], field: str) -> None:
    for i, tol in enumerate(tolerations):
        where = f"{field}[{i}]"
        if tol.key:
            check_qualified_name(tol.key, f"{where}.key")
        if tol.operator not in TOLERATION_OPERATORS:
            raise _unsupported(f"{where}.operator", tol.operator, TOLERATION_OPERATORS)
        if tol.operator == "Exists" and tol.value:
            raise _invalid(f"{where}.operator", tol.value,
                           "value must be empty when `operator` is 'Exists'")
        if tol.effect and tol.effect not in TAINT_EFFECTS:
            raise _unsupported(f"{where}.effect", tol.effect, TAINT_EFFECTS)


def _overcommit_allowed(name: str) -> bool:
    """Upstream IsOvercommitAllowed: resources in the kubernetes.io domain but hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _quantity(value: object, field: str) -> tuple[Fraction, str]:
    """The value and its canonical text; a parse error names ``field`` (dotted, as the
    loaders' quantity errors do)."""
    try:
        return parse_quantity(value), canonical(value)
    except InputError as err:
        raise err.at(field=field) from None


def check_resources(resources: ResourceRequirements, field: str) -> None:
    """Upstream validateResourceRequirements: extended resources whole numbers, requests at
    most limits, and equal to them for resources that cannot be overcommitted (extended
    resources, hugepages).

    One deviation: a non-overcommittable resource given in requests only is read as if its limit
    were the same, where the API server answers "Limit must be set for non overcommitable
    resources" (upstream's own scheduler tests and kubeberth's examples write GPUs so; the
    placement is the same). docs/inputs.md lists it."""
    limits: dict[str, tuple[Fraction, str]] = {}
    for part, values in (("limits", resources.limits), ("requests", resources.requests)):
        for name, raw in values.items():
            where = f"{field}.{part}[{name}]"
            value, shown = _quantity(raw, f"{field}.{part}.{name}")
            if value < 0:
                return  # the loaders' quantity reader says what a quantity must be
            if is_extended_resource(name) and math.ceil(value * 1000) % 1000:
                raise _invalid(where, shown, "must be an integer")
            if part == "limits":
                limits[name] = (value, shown)
    for name, raw in resources.requests.items():
        if name not in limits:
            continue
        value, shown = _quantity(raw, f"{field}.requests.{name}")
        limit, limit_shown = limits[name]
        if value != limit and not _overcommit_allowed(name):
            raise _invalid(f"{field}.requests", shown,
                           f"must be equal to {name} limit of {limit_shown}")
        if value > limit:
            raise _invalid(f"{field}.requests", shown,
                           f"must be less than or equal to {name} limit of {limit_shown}")


def validate_node(node: Node, *, fold_case: bool = False) -> None:
    check_metadata(node.metadata, namespaced=False, fold_case=fold_case)
    check_taints(node.spec.taints, "spec.taints")


def validate_pod(pod: Pod, *, fold_case: bool = False) -> None:
    check_metadata(pod.metadata, namespaced=True, fold_case=fold_case)
    validate_pod_spec(pod.spec)


def validate_pod_spec(spec: PodSpec) -> None:
    """A pod's spec, or a workload's pod template's (the errors' paths start at ``spec``)."""
    if spec.priority is not None:
        check_int32(spec.priority, "spec.priority")
    check_tolerations(spec.tolerations, "spec.tolerations")
    for kind, containers in (("containers", spec.containers),
                             ("initContainers", spec.init_containers)):
        for i, container in enumerate(containers):
            check_resources(container.resources, f"spec.{kind}[{i}].resources")


def validate_priority_class(pc: PriorityClass, *, fold_case: bool = False) -> None:
    check_metadata(pc.metadata, namespaced=False, fold_case=fold_case)
    check_int32(pc.value, "value")
