"""The descheduler plugin registry: what it accepts as a plugin and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from kubeberth.api.errors import InputError
from kubeberth.descheduling.framework import PluginSpec
from kubeberth.descheduling.plugins import pod_lifetime
from kubeberth.descheduling.registry import (
    ENTRY_POINT_GROUP,
    DeschedulerRegistry,
    descheduler_registry,
    in_tree_registry,
)


def _spec(name: str, points: tuple[str, ...]) -> PluginSpec:
    return PluginSpec(name, points, lambda raw: raw, lambda args, handle: None)


def reg_adapt(target: Any) -> tuple[str, PluginSpec]:
    return DeschedulerRegistry().adapt(target, "test:target")


def test_group_and_kind_words_errors_for_the_descheduler_family() -> None:
    reg = DeschedulerRegistry()
    assert (reg.group, reg.kind) == (ENTRY_POINT_GROUP, "descheduler plugin")
    assert ENTRY_POINT_GROUP == "kubeberth.descheduler_plugins"


def test_a_spec_or_a_module_holding_spec_is_a_plugin() -> None:
    assert reg_adapt(pod_lifetime.SPEC) == ("PodLifeTime", pod_lifetime.SPEC)
    assert reg_adapt(pod_lifetime) == ("PodLifeTime", pod_lifetime.SPEC)


@pytest.mark.parametrize(("target", "needle"), [
    (pod_lifetime.parse_args, "is not a descheduler plugin"),
    (_spec("Nowhere", ()), "names extension points []"),
    (_spec("Sorter", ("deschedule", "reorder")), "names extension points ['deschedule', "
                                                 "'reorder']"),
])
def test_what_is_not_a_plugin_is_refused(target: Any, needle: str) -> None:
    with pytest.raises(InputError) as err:
        reg_adapt(target)
    assert needle in str(err.value)


def test_in_tree_names_are_unique_and_out_of_tree_ones_are_added() -> None:
    extra = "kubeberth.descheduling.plugins.pod_lifetime"
    assert len(in_tree_registry()) == 11
    with pytest.raises(InputError, match="'PodLifeTime' is already registered"):
        descheduler_registry([extra])
    assert list(descheduler_registry(None)) == list(in_tree_registry())
