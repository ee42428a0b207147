"""The in-tree scheduling plugins, registered under their upstream names.

``in_tree_registry()`` is what every scheduler starts from; out-of-tree plugins are merged into it
(see :mod:`kubeberth.scheduling.framework.registry`). The default profile itself — which
plugins run at which
extension point with which weights — is upstream's default plugin set, applied by the config
loader (:data:`kubeberth.scheduling.config.loader.DEFAULT_PLUGINS`). Modules are imported when the
registry is built, so importing one plugin module does not import them all.
"""

from __future__ import annotations

from importlib import import_module

from kubeberth.scheduling.framework.registry import Registry

MODULES = (
    "scheduling_gates",
    "priority_sort",
    "node_unschedulable",
    "node_name",
    "taint_toleration",
    "node_affinity",
    "node_resources_fit",
    "pod_topology_spread",
    "inter_pod_affinity",
    "workload_preemption",  # DefaultPreemption, with its PodGroupPostFilter
    "balanced_allocation",
    "default_binder",
    "coscheduling",
    "capacity_scheduling",
    "volcano_drf",
    "volcano_proportion",
    "gpu_devices",
    "random_score",
    "dot_product_score",
    "gpu_clustering_score",
    "gpu_packing_score",
    "best_fit_score",
    "fgd_score",
    "network_capacity",
    "gang_scheduling",
    "topology_placement",
    "pod_group_pods_count",
    "dynamic_resources",
)


def in_tree_registry() -> Registry:
    factories = {}
    for name in MODULES:
        module = import_module(f"kubeberth.scheduling.plugins.{name}")
        factories[module.NAME] = module.new
    return Registry(factories)


__all__ = ["MODULES", "in_tree_registry"]
