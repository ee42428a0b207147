"""Plugin registry: name → factory, for in-tree and out-of-tree plugins alike.

An out-of-tree plugin is registered the same way as an in-tree one, either by import path
(``package.module:factory`` given to ``--plugin``) or through the ``kubeberth.plugins`` entry
point group of an installed distribution. A factory takes the plugin's raw args mapping (or None)
and the framework handle and returns the plugin; it raises InputError for invalid args.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.config.plugins import PluginRegistry
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import Plugin

PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Plugin]
ENTRY_POINT_GROUP = "kubeberth.plugins"


class Registry(PluginRegistry[PluginFactory]):
    """Scheduling plugins by name: the in-tree set, entry points and ``--plugin`` alike."""

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        super().__init__("scheduling plugin", ENTRY_POINT_GROUP, _factory_of, factories)


def _factory_of(target: Any, spec: str) -> tuple[str, PluginFactory]:
    name = getattr(target, "NAME", None) or getattr(target, "name", None)
    factory = getattr(target, "new", None)
    if not isinstance(target, ModuleType | type) or not isinstance(name, str) \
            or not callable(factory):
        raise InputError(f"{spec!r} is not a kubeberth plugin",
                         expected="a module or class with a NAME (or name) string and a "
                         "new(args, handle) factory")
    return name, factory
