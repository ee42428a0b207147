"""Out-of-tree plugins, loaded the same way for every policy family.

Each family (scheduling plugins, descheduler plugins, Kueue admission checks) keeps a
:class:`PluginRegistry` of its own kind of entry, filled from its in-tree modules, from
``--plugin module:attr`` and from its entry-point group of installed distributions. The family
says what a loadable target looks like (``adapt``); everything else, duplicate names, import
errors and entry-point names that disagree with the plugin's, is decided here once, with the same
error wording everywhere.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, Self, TypeVar

from kubeberth.api.errors import InputError

T = TypeVar("T")
# Turns a loaded module or attribute into (registered name, entry); raises InputError when the
# target is not this family's kind of plugin.
Adapt = Callable[[Any, str], tuple[str, T]]


class PluginRegistry(Generic[T]):
    """Name → entry for one family; ``kind`` words its errors (e.g. "descheduler plugin")."""

    def __init__(self, kind: str, group: str, adapt: Adapt[T],
                 entries: Mapping[str, T] | None = None) -> None:
        self.kind = kind
        self.group = group
        self.adapt = adapt
        self._entries: dict[str, T] = dict(entries or {})

    def register(self, name: str, entry: T) -> None:
        if name in self._entries:
            raise InputError(f"a {self.kind} named {name!r} is already registered",
                             expected=f"unique {self.kind} names")
        self._entries[name] = entry

    def merge(self, other: PluginRegistry[T]) -> Self:
        """A copy of this registry with ``other``'s entries added (a shared name is an error)."""
        merged = self.copy()
        for name, entry in other._entries.items():
            merged.register(name, entry)
        return merged

    def get(self, name: str) -> T | None:
        return self._entries.get(name)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._entries.items())

    def fits(self, target: Any, spec: str) -> InputError | None:
        """None when ``target`` is this family's kind of plugin, else why not."""
        try:
            self.adapt(target, spec)
        except InputError as err:
            return err
        return None

    def load_entry_points(self) -> list[str]:
        """Register every plugin that installed distributions declare in this family's group."""
        names = []
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            name, entry = self.adapt(ep.load(), ep.value)
            if name != ep.name:
                raise InputError(f"entry point {ep.name!r} of group {self.group!r} loads a "
                                 f"{self.kind} named {name!r}",
                                 expected="the entry point name to equal the plugin name")
            self.register(name, entry)
            names.append(name)
        return names

    def with_out_of_tree(self, specs: list[str] | None) -> Self:
        """A copy of this registry plus the installed entry points and each ``--plugin``."""
        (out,) = load_out_of_tree(specs, self)
        return out

    def copy(self) -> Self:
        out = copy.copy(self)
        out._entries = dict(self._entries)
        return out


# Any family's registry: load_out_of_tree hands each back with its own type.
R = TypeVar("R", bound=PluginRegistry[Any])


def import_target(spec: str) -> Any:
    """The module or attribute ``--plugin module:attr`` names."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except (ImportError, ValueError, TypeError) as err:  # "", ".x" and ":x" are not modules
        raise InputError(f"cannot import out-of-tree plugin module {module_name!r}: {err}",
                         field="--plugin",
                         expected="an importable module path such as mypkg.myplugin:MyPlugin"
                         ) from None
    try:
        return getattr(module, attr) if attr else module
    except AttributeError:
        raise InputError(f"module {module_name!r} has no attribute {attr!r}",
                         field="--plugin", expected="module:attr naming a plugin") from None


def load_out_of_tree(specs: list[str] | None, *registries: R) -> list[R]:
    """Copies of ``registries`` with their families' entry points, and each ``--plugin`` in
    the family whose kind of plugin it is: one ``--plugin`` flag serves every family a command
    runs (a scheduling plugin and a descheduler plugin on ``kubeberth simulate``)."""
    out = [r.copy() for r in registries]
    for registry in out:
        registry.load_entry_points()
    for spec in specs or []:
        target = import_target(spec)
        refusals = [(r, r.fits(target, spec)) for r in out]
        fitting = [r for r, why in refusals if why is None]
        if not fitting:
            errors = [why for _, why in refusals if why is not None]
            if len(errors) == 1:  # one family: its own words for what it loads
                raise errors[0]
            kinds = " or ".join(r.kind for r in out)
            raise InputError(f"{spec!r} is not a {kinds}", field="--plugin",
                             expected="; or ".join(why.expected or "" for why in errors))
        if len(fitting) > 1:
            raise InputError(f"{spec!r} is a plugin of several kinds: "
                             + ", ".join(r.kind for r in fitting), field="--plugin",
                             expected="module:attr naming one plugin")
        fitting[0].register(*fitting[0].adapt(target, spec))
    return out
