"""Admission-check controllers as pure policies, and their registry.

In Kueue an AdmissionCheck names a controller (``spec.controllerName``); Kueue reserves quota,
then waits for that controller to set the check's state on the Workload (Pending, Ready, Retry,
Rejected) and admits only once every check is Ready. kubeberth models such a controller as a
plugin: given the AdmissionCheck's parameters (parsed once, by the plugin's own parser) and one
workload's reservation, it returns the check's state, a message and when to look again. What
Kueue itself does with those states (admit, evict and requeue, deactivate) is
:mod:`kubeberth.admission.check_states`, the same for every plugin.

A plugin is a module or class with ``NAME`` (the controllerName it models),
``parse_args(parameters)`` (the referenced parameters object or None -> typed args; raises
InputError, which makes the AdmissionCheck inactive as a controller reports bad parameters)
and ``evaluate(args, request) -> Verdict``. Out-of-tree plugins load through ``--plugin
module:attr`` or the ``kubeberth.admission_checks`` entry-point group. A controllerName no
plugin models is read and not modelled: its checks keep the state the input gives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kubeberth.admission.model import (
    CHECK_PENDING,
    CHECK_RETRY,
    AdmissionCheck,
    AdmissionCheckState,
    KueueObjects,
    Workload,
)
from kubeberth.api.errors import InputError
from kubeberth.config.plugins import PluginRegistry

ENTRY_POINT_GROUP = "kubeberth.admission_checks"


@dataclass(slots=True, frozen=True)
class CheckRequest:
    """What a check controller sees: the workload holding quota (``status.admission`` set),
    the check's current state on it, when the quota was reserved, and the time."""

    check: AdmissionCheck
    workload: Workload
    current: AdmissionCheckState
    reserved_at: float
    now: float


@dataclass(slots=True, frozen=True)
class Verdict:
    """The state the controller writes. ``requeue_after_seconds`` goes with Retry (Kueue
    requeues the workload no earlier than that after the transition); ``recheck_at`` is when
    the answer may change (None: only when something else changes)."""

    state: str = CHECK_PENDING
    message: str = ""
    requeue_after_seconds: int | None = None
    recheck_at: float | None = None


class CheckPlugin(Protocol):
    NAME: str

    def parse_args(self, parameters: Mapping[str, Any] | None) -> Any: ...

    def evaluate(self, args: Any, request: CheckRequest) -> Verdict: ...


@dataclass(slots=True, frozen=True)
class BoundCheck:
    """An AdmissionCheck with the plugin that models its controller and the parsed args;
    ``plugin`` None: the controller is read and not modelled."""

    check: AdmissionCheck
    plugin: CheckPlugin | None = None
    args: Any = None


class CheckRegistry(PluginRegistry[CheckPlugin]):
    """Admission-check plugins by controllerName: in-tree, entry points and ``--plugin``."""

    def __init__(self, plugins: Mapping[str, CheckPlugin] | None = None) -> None:
        super().__init__("admission check plugin", ENTRY_POINT_GROUP, _plugin_of, plugins)


def _plugin_of(target: Any, spec: str) -> tuple[str, CheckPlugin]:
    name = getattr(target, "NAME", None)
    if not isinstance(name, str) or not callable(getattr(target, "parse_args", None)) or \
            not callable(getattr(target, "evaluate", None)):
        raise InputError(f"{spec!r} is not a kubeberth admission check plugin",
                         expected="a module or class with NAME (the controllerName it models), "
                                  "parse_args(parameters) and evaluate(args, request)")
    plugin: CheckPlugin = target
    return name, plugin


def in_tree() -> CheckRegistry:
    """The checks kubeberth ships: none yet (a controllerName is modelled only when a plugin
    follows its upstream controller faithfully)."""
    return CheckRegistry()


def bind(objs: KueueObjects, registry: CheckRegistry) -> tuple[KueueObjects, dict[str, BoundCheck]]:
    """Each AdmissionCheck with its plugin. A modelled controller decides whether its check is
    Active (its parameters parse); the returned objects carry that decision."""
    bound: dict[str, BoundCheck] = {}
    checks: dict[str, AdmissionCheck] = {}
    for name, ac in sorted(objs.admission_checks.items()):
        plugin = registry.get(ac.controller_name)
        if plugin is None:
            checks[name] = ac
            bound[name] = BoundCheck(ac)
            continue
        try:
            args = plugin.parse_args(ac.parameters_object)
        except InputError as err:
            ac = AdmissionCheck(ac.name, ac.controller_name, ac.parameters, ac.parameters_object,
                                False, str(err))
            args = None
        else:
            ac = AdmissionCheck(ac.name, ac.controller_name, ac.parameters, ac.parameters_object,
                                True)
        checks[name] = ac
        bound[name] = BoundCheck(ac, plugin, args)
    return replace(objs, admission_checks=checks), bound


def reset_on_eviction(states: tuple[AdmissionCheckState, ...],
                      now: float) -> tuple[AdmissionCheckState, ...]:
    """Every evicted workload's checks go back to Pending; a Retry counts one more retry
    (pkg/workload/evict/evict.go resetChecksOnEviction)."""
    return tuple(
        s if s.state == CHECK_PENDING else AdmissionCheckState(
            s.name, CHECK_PENDING, f"Reset to Pending after eviction. Previously: {s.state}",
            now, s.requeue_after_seconds, s.retry_count + 1 if s.state == CHECK_RETRY else 0)
        for s in states)


def unmodelled(bound: Mapping[str, BoundCheck]) -> list[AdmissionCheck]:
    """The AdmissionChecks whose controller no plugin models."""
    return [b.check for _, b in sorted(bound.items()) if b.plugin is None]
