"""Plugin registry: name → factory, for in-tree and out-of-tree plugins alike.

An out-of-tree plugin is registered the same way as an in-tree one, either by import path
(``package.module:factory`` given to ``--plugin``) or through the ``kubeberth.plugins`` entry
point group of an installed distribution. A factory takes the plugin's raw args mapping (or None)
and the framework handle and returns the plugin; it raises InputError for invalid args.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.framework.handle import Handle
from kubeberth.framework.interface import Plugin

PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Plugin]
ENTRY_POINT_GROUP = "kubeberth.plugins"


class Registry:
    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise InputError(f"a plugin named {name!r} is already registered",
                             expected="unique plugin names")
        self._factories[name] = factory

    def merge(self, other: Registry) -> Registry:
        merged = Registry(self._factories)
        for name, factory in other._factories.items():
            merged.register(name, factory)
        return merged

    def get(self, name: str) -> PluginFactory | None:
        return self._factories.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._factories))

    def load_import_path(self, spec: str) -> str:
        """Register ``module:attr``; attr is a plugin class with ``name`` and ``new`` or a module
        exposing ``NAME`` and ``new``. Returns the registered name."""
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise InputError(f"cannot import out-of-tree plugin module {module_name!r}: {err}",
                             expected="an importable module path such as mypkg.myplugin:MyPlugin"
                             ) from None
        target: Any = getattr(module, attr) if attr else module
        name, factory = _factory_of(target, spec)
        self.register(name, factory)
        return name

    def load_entry_points(self) -> list[str]:
        names = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            name, factory = _factory_of(ep.load(), ep.value)
            if name != ep.name:
                raise InputError(f"entry point {ep.name!r} loads plugin named {name!r}",
                                 expected="the entry point name to equal the plugin name")
            self.register(name, factory)
            names.append(name)
        return names


def _factory_of(target: Any, spec: str) -> tuple[str, PluginFactory]:
    name = getattr(target, "NAME", None) or getattr(target, "name", None)
    factory = getattr(target, "new", None)
    if not isinstance(name, str) or not callable(factory):
        raise InputError(f"{spec!r} is not a kubeberth plugin",
                         expected="a module or class with a NAME (or name) string and a "
                         "new(args, handle) factory")
    return name, factory
