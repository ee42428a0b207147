"""Strict field readers shared by the configuration loaders (KubeSchedulerConfiguration,
DeschedulerPolicy).

Upstream decodes these files with Go's strict JSON decoder: a wrong type or an unknown field is
an error naming the field. Both loaders need the same readers and the same "exactly one document
of this kind" rule; they live here once. Each loader subclasses :class:`FieldReader` with the
readers only its format has.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.config.yamlsrc import Document, load_documents


def load_one(path: str | Path, kind: str, api_version: str) -> Document:
    """The one ``kind`` document in ``path`` (``-`` for stdin); the file may hold others."""
    found = [doc for doc in load_documents(path) if doc.kind == kind]
    if not found:
        raise InputError(f"no {kind} document found", source=str(path),
                         expected=f"a document with apiVersion: {api_version} and kind: {kind}")
    if len(found) > 1:
        raise found[1].error(f"a second {kind} document", field="kind",
                             expected=f"exactly one {kind} per file")
    return found[0]


def child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def describe(value: Any) -> str:
    """How an error message names a decoded YAML value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {value!r}".lower()
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class FieldReader:
    """Typed reads of one document's fields; every error is located in the document."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc

    def fail(self, message: str, path: str, expected: str) -> InputError:
        return self.doc.error(message, field=path or None, expected=expected)

    def mapping(self, value: Any, path: str, allowed: Collection[str] | None) -> dict[str, Any]:
        """A mapping whose keys are all in ``allowed`` (None: free-form, as plugin args)."""
        if not isinstance(value, dict):
            raise self.fail(f"got {describe(value)}", path, "a mapping")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(f"unknown field {key!r}", child(path, str(key)),
                                    "one of the fields " + ", ".join(allowed))
        return value

    def sequence(self, value: Any, path: str) -> list[Any]:
        """A list; null reads as empty."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"got {describe(value)}", path, "a list")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"got {describe(value)}", path, "a string")
        return value
