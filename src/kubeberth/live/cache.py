"""API objects as kubeberth's typed objects, and the store the periodic controllers judge from.

:func:`decode` is what an informer of a typed kind decodes with: the manifest loader's own
validation, so the policy code reads live objects exactly as it reads files. :func:`document`
hands an API object (a Kueue or owner kind kept as a dict) to the loaders that take documents.

The scheduler reacts to every change; the descheduler and the spill controller instead judge
the whole cluster at intervals, from one consistent copy of a few resources. :class:`Store`
keeps the latest object of each kind by ``namespace/name`` from informer events, applied on
the control loop (a re-list replaces a kind wholesale, so deletions missed while the stream was
down are dropped too); nothing changes it while a pass reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import gpu_demand
from kubeberth.api.objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
from kubeberth.api.resources import node_allocatable, pod_requests
from kubeberth.config.manifests import decode_object
from kubeberth.config.yamlsrc import Document, Source
from kubeberth.live.informer import SYNC, key_of

Obj = dict[str, Any]
Typed = Node | Pod | PriorityClass | Namespace | PodDisruptionBudget
# msgspec builds a type's decoding tables on first use, and several informer threads doing
# that at the same moment crashed the process (SIGSEGV): they are built here, at import, once.
for _typed in (Node, Pod, PriorityClass, Namespace, PodDisruptionBudget):
    msgspec.json.Decoder(_typed)
# The kinds :func:`decode` types (every other kind stays the API's JSON dict).
TYPED_KINDS = frozenset(("Node", "Pod", "PriorityClass", "Namespace", "PodDisruptionBudget"))
INT64_MAX = 2**63 - 1


def document(obj: Obj) -> Document:
    """An API object as a manifest document: errors name the object, and at line 1, as the
    API's one-line JSON would place every field."""
    source = Source(f"{obj.get('kind', '?')} {key_of(obj) or '?'}", "", is_json=True)
    return Document(data=obj, source=source, index=0, line=1)


def decode(obj: Obj) -> Typed:
    """The typed object, validated as manifests are, and as the cluster state will read it
    (quantities that fit its int64 milli-units, a GPU demand it can model); InputError when
    it cannot be."""
    typed = decode_object(document(obj))
    if typed is None:
        raise InputError(f"{obj.get('kind')!r} has no typed model", field="kind",
                         expected=" or ".join(sorted(TYPED_KINDS)))
    if isinstance(typed, Node):
        _fits(f"node {typed.metadata.name}", node_allocatable(typed), "status.allocatable")
    elif isinstance(typed, Pod):
        requests = pod_requests(typed)
        _fits(f"pod {typed.key}", requests, "spec.containers[*].resources.requests")
        gpu_demand(typed, requests)
    return typed


def _fits(what: str, values: dict[str, int], field: str) -> None:
    """The state keeps every quantity as int64 milli-units (upstream's Quantity is an int64
    too): a larger one cannot be accounted."""
    for name, milli in values.items():
        if not -INT64_MAX <= milli <= INT64_MAX:
            raise InputError(f"{what}: its {name} does not fit int64 milli-units",
                             field=f"{field}.{name}",
                             expected=f"at most {INT64_MAX} milli-units of {name}")


class Store:
    """Latest objects per kind, changed only by :meth:`apply` on the control loop."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.objects: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}

    def apply(self, kind: str, type_: str, data: Any) -> None:
        """One informer event (see :class:`~kubeberth.live.informer.Informer`)."""
        if type_ == SYNC:
            self.objects[kind] = dict(data)
            return
        key, obj = data
        if type_ == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj

    def snapshot(self) -> dict[str, list[Any]]:
        """Every kind's objects, sorted by namespace and name (the order the API lists them
        in)."""
        return {kind: [objs[k] for k in sorted(objs)] for kind, objs in self.objects.items()}

    def get(self, kind: str, key: str) -> Any:
        return self.objects[kind].get(key)
