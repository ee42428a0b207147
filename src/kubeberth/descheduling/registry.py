"""The in-tree descheduler plugins, registered under their upstream names.

Each module declares ``NAME``, the extension points it serves (``POINTS``), an ``Args`` dataclass
with ``parse_args`` (defaults and validation) and a factory ``new(args, handle)``, collected in
``SPEC``. :func:`in_tree_registry` maps names to those specs; :func:`build_descheduler` turns a
loaded DeschedulerPolicy into a :class:`~kubeberth.descheduling.framework.Descheduler`
whose ``run_pass(snapshot)`` is one descheduling cycle. Modules are imported when the registry is
built.
"""

from __future__ import annotations

from importlib import import_module

from kubeberth.descheduling.framework import (
    Descheduler,
    PassResult,
    PluginSpec,
    Snapshot,
    check_registry,
)
from kubeberth.descheduling.policy import DeschedulerPolicy

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


def in_tree_registry() -> dict[str, PluginSpec]:
    specs: list[PluginSpec] = []
    for name in MODULES:
        module = import_module(f"kubeberth.descheduling.plugins.{name}")
        specs.append(module.SPEC)
    return check_registry(specs)


def build_descheduler(policy: DeschedulerPolicy,
                      registry: dict[str, PluginSpec] | None = None) -> Descheduler:
    """Validate every profile's plugins and args; errors name the policy's file, line, field."""
    return Descheduler(policy, registry if registry is not None else in_tree_registry())


__all__ = ["MODULES", "Descheduler", "PassResult", "Snapshot", "build_descheduler",
           "in_tree_registry"]
