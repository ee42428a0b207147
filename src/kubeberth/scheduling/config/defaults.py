"""kube-scheduler's default plugin set and how a profile's plugins are merged into it.

A KubeSchedulerConfiguration lists only what differs from the defaults, so the effective plugin
list is the result of upstream's ``mergePlugins`` (pkg/scheduler/apis/config/v1/
default_plugins.go); getting its ordering rules wrong silently changes which plugin reports a
filter failure and how scores add up. This module reproduces that merge and the newest upstream
default list with default feature gates (DynamicResourceAllocation is GA and on, so
DynamicResources sits before DefaultPreemption). It does not expand multiPoint into extension
points; the framework does that, knowing which interfaces each plugin implements.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubeberth.scheduling.config.types import (
    EXTENSION_POINTS,
    MULTI_POINT,
    PLACEMENT_POINTS,
    PluginRef,
    PluginSet,
)

# (name, weight) in upstream order; weight 0 means "not set" (only score plugins carry one).
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
    # On by default since 1.36 (the NodeDeclaredFeatures gate went beta); unmodelled.
    ("NodeDeclaredFeatures", 0),
    # The native gang and topology-aware workload scheduling of Kubernetes 1.37 (KEP-4671,
    # KEP-5732); they act only on pods that join a scheduling.k8s.io PodGroup (docs/gangs.md).
    ("GangScheduling", 0),
    ("TopologyPlacementGenerator", 0),
    ("PodGroupPodsCount", 1),
]

# Every key of a merged profile's ``plugins``: multiPoint first, then the extension points.
PLUGIN_SET_KEYS = (MULTI_POINT, *EXTENSION_POINTS, *PLACEMENT_POINTS)


def default_plugins() -> dict[str, PluginSet]:
    """The default plugin sets: everything enabled through multiPoint, nothing elsewhere."""
    sets = {key: PluginSet() for key in PLUGIN_SET_KEYS}
    sets[MULTI_POINT] = PluginSet(enabled=[PluginRef(name, weight)
                                           for name, weight in DEFAULT_PLUGINS])
    return sets


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream ``mergePluginSet``.

    Disabled names (custom then default) are kept so the framework can skip them when it
    expands multiPoint. Unless ``'*'`` is disabled, each default plugin that is not disabled stays
    in its place, replaced by the custom entry of the same name if there is one (the last such
    entry, which keeps the default's position and takes the custom weight). The custom plugins
    that replaced nothing follow in their order, duplicates included (the framework rejects
    those).
    """
    disabled = [*custom.disabled, *default.disabled]
    disabled_set = set(disabled)
    custom_index = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_set:
        for ref in default.enabled:
            if ref.name in disabled_set:
                continue
            i = custom_index.get(ref.name)
            if i is not None:
                ref = custom.enabled[i]
                replaced.add(i)
            enabled.append(PluginRef(ref.name, ref.weight))
    enabled.extend(PluginRef(ref.name, ref.weight)
                   for i, ref in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(default: Mapping[str, PluginSet],
                  custom: Mapping[str, PluginSet] | None) -> dict[str, PluginSet]:
    """Upstream ``mergePlugins``: each extension point's set merged on its own."""
    empty = PluginSet()
    if custom is None:
        return {key: PluginSet(list(default.get(key, empty).enabled),
                               list(default.get(key, empty).disabled))
                for key in PLUGIN_SET_KEYS}
    return {key: merge_plugin_set(default.get(key, empty), custom.get(key, empty))
            for key in PLUGIN_SET_KEYS}
