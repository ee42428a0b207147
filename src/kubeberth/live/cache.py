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
from kubeberth.api.objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
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


def document(obj: Obj) -> Document:
    """An API object as a manifest document: errors name the object, and at line 1, as the
    API's one-line JSON would place every field."""
    source = Source(f"{obj.get('kind', '?')} {key_of(obj) or '?'}", "", is_json=True)
    return Document(data=obj, source=source, index=0, line=1)


def decode(obj: Obj) -> Typed:
    """The typed object, validated as manifests are; InputError when the loader refuses it."""
    typed = decode_object(document(obj))
    if typed is None:
        raise InputError(f"{obj.get('kind')!r} has no typed model", field="kind",
                         expected=" or ".join(sorted(TYPED_KINDS)))
    return typed


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
