"""The descheduler plugins by name: the in-tree set, entry points and ``--plugin`` alike.

Each module declares ``NAME``, the extension points it serves (``POINTS``), an ``Args`` type
with ``parse_args`` (defaults and validation) and a factory taking ``(args, handle)``, collected
in ``SPEC``, a :class:`~kubeberth.descheduling.framework.PluginSpec`. An out-of-tree plugin is
the same: ``--plugin module:attr`` names its ``PluginSpec`` (or a module holding ``SPEC``), or an
installed distribution declares it in the ``kubeberth.descheduler_plugins`` entry-point group,
loaded as the scheduling family loads its plugins (:mod:`kubeberth.config.plugins`).
:func:`build_descheduler` turns a loaded DeschedulerPolicy into a
:class:`~kubeberth.descheduling.framework.Descheduler` whose ``run_pass(snapshot)`` is one
descheduling cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.config.plugins import PluginRegistry
from kubeberth.descheduling.framework import Descheduler, PassResult, PluginSpec, Snapshot
from kubeberth.descheduling.policy import EXTENSION_POINTS, DeschedulerPolicy

ENTRY_POINT_GROUP = "kubeberth.descheduler_plugins"
MODULES = (
    "default_evictor",
    "node_taints",
    "low_node_utilization",
    "high_node_utilization",
    "remove_duplicates",
    "topology_spread",
    "node_affinity",
    "inter_pod_anti_affinity",
    "pod_lifetime",
    "failed_pods",
    "too_many_restarts",
)
_EXPECTED = ("module:attr naming a kubeberth.descheduling.framework.PluginSpec, or a module "
             "with SPEC = PluginSpec(NAME, POINTS, parse_args, new)")


class DeschedulerRegistry(PluginRegistry[PluginSpec]):
    """Descheduler plugins by name; a policy may enable any of them."""

    def __init__(self, specs: Mapping[str, PluginSpec] | None = None) -> None:
        super().__init__("descheduler plugin", ENTRY_POINT_GROUP, _spec_of, specs)


def _spec_of(target: Any, spec: str) -> tuple[str, PluginSpec]:
    found = target if isinstance(target, PluginSpec) else getattr(target, "SPEC", None)
    if not isinstance(found, PluginSpec):
        raise InputError(f"{spec!r} is not a descheduler plugin", expected=_EXPECTED)
    unknown = [p for p in found.points if p not in EXTENSION_POINTS]
    if not found.points or unknown:
        raise InputError(f"descheduler plugin {found.name!r} ({spec}) names extension points "
                         f"{list(found.points)}",
                         expected="one or more of " + ", ".join(EXTENSION_POINTS))
    return found.name, found


def in_tree_registry() -> DeschedulerRegistry:
    """The upstream plugins; modules are imported when the registry is built."""
    registry = DeschedulerRegistry()
    for name in MODULES:
        spec: PluginSpec = import_module(f"kubeberth.descheduling.plugins.{name}").SPEC
        registry.register(spec.name, spec)
    return registry


def descheduler_registry(plugins: list[str] | None = None) -> DeschedulerRegistry:
    """The in-tree plugins, those installed as entry points, and each ``--plugin module:attr``:
    what ``deschedule``, ``simulate --deschedule-policy`` and ``descheduler`` all build."""
    return in_tree_registry().with_out_of_tree(plugins)


def build_descheduler(policy: DeschedulerPolicy,
                      registry: DeschedulerRegistry | None = None) -> Descheduler:
    """Validate every profile's plugins and args; errors name the policy's file, line, field."""
    return Descheduler(policy, registry if registry is not None else in_tree_registry())


__all__ = ["ENTRY_POINT_GROUP", "MODULES", "Descheduler", "DeschedulerRegistry", "PassResult",
           "Snapshot", "build_descheduler", "descheduler_registry", "in_tree_registry"]
