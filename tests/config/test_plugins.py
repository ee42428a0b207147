"""The one out-of-tree loader every family shares."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.plugins import PluginRegistry, load_out_of_tree


def _adapt(attr: str) -> Any:
    def adapt(target: Any, spec: str) -> tuple[str, str]:
        if not hasattr(target, attr):
            raise InputError(f"{spec!r} has no {attr}", expected=f"something with {attr}")
        return str(target.NAME), spec
    return adapt


def _registries() -> tuple[PluginRegistry[str], PluginRegistry[str]]:
    return (PluginRegistry("red plugin", "test.no.red", _adapt("red")),
            PluginRegistry("blue plugin", "test.no.blue", _adapt("blue")))


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    mod = types.ModuleType("kb_test_plugins")
    for name, attrs in (("Red", ("red",)), ("Blue", ("blue",)), ("Both", ("red", "blue")),
                        ("Neither", ())):
        setattr(mod, name, type(name, (), {"NAME": name.lower(), **{a: 1 for a in attrs}}))
    sys.modules[mod.__name__] = mod
    yield mod
    del sys.modules[mod.__name__]


def test_each_plugin_lands_in_its_family(module: types.ModuleType) -> None:
    red, blue = load_out_of_tree(["kb_test_plugins:Red", "kb_test_plugins:Blue"], *_registries())
    assert list(red) == ["red"] and list(blue) == ["blue"]


@pytest.mark.parametrize(("target", "words"), [
    ("kb_test_plugins:Neither", ["is not a red plugin or blue plugin", "something with red",
                                 "something with blue"]),
    ("kb_test_plugins:Both", ["is a plugin of several kinds: red plugin, blue plugin"]),
    ("kb_test_plugins:Missing", ["has no attribute 'Missing'"]),
    (":Red", ["cannot import out-of-tree plugin module ''"]),
])
def test_refusals_name_the_flag(module: types.ModuleType, target: str, words: list[str]) -> None:
    with pytest.raises(InputError) as err:
        load_out_of_tree([target], *_registries())
    assert err.value.field == "--plugin"
    text = f"{err.value.message} {err.value.expected}"
    for word in words:
        assert word in text


def test_a_name_taken_twice_is_refused(module: types.ModuleType) -> None:
    with pytest.raises(InputError, match="already registered"):
        load_out_of_tree(["kb_test_plugins:Red", "kb_test_plugins:Red"], *_registries())
