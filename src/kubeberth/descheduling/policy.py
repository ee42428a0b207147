"""DeschedulerPolicy (descheduler/v1alpha2): strict decoding, defaulting and validation.

Users bring the policy they run with the Descheduler, so it is read the way the descheduler reads
it: strict decoding (an unknown or misspelt field is an error, as with the descheduler's strict
codec), profiles with ``pluginConfig`` and ``plugins`` per extension point, and the top-level
eviction limits and node selector. Defaulting follows upstream's ``setDefaultEvictor``: every
profile gets ``DefaultEvictor`` at the filter and preEvictionFilter extension points and a
``DefaultEvictor`` pluginConfig when it has none. Plugin args stay raw mappings here: each plugin
module in :mod:`kubeberth.descheduling.registry` owns its args' defaults and validation, and errors
found there are located through :meth:`DeschedulerPolicy.locate` (file, line and field path).

Metrics settings (``metricsCollector``, ``metricsProviders``, ``prometheus``) and
``gracePeriodSeconds``/``evictionFailureEventNotification`` are decoded and checked but decide
nothing in kubeberth: utilization is computed from requests, evictions are decisions, not API
calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.config.fields import FieldReader, child, describe, load_one
from kubeberth.config.yamlsrc import Document

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"
DEFAULT_EVICTOR = "DefaultEvictor"

# Extension points as upstream names them in v1alpha2 (presort/sort exist in the API but no
# in-tree plugin implements them and the descheduler never runs them).
EXTENSION_POINTS = ("presort", "sort", "deschedule", "balance", "filter", "preEvictionFilter")
_PLUGIN_KEYS = (*EXTENSION_POINTS, "preSort")
_TOP_FIELDS = (
    "apiVersion", "kind", "profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal", "evictionFailureEventNotification",
    "gracePeriodSeconds", "metricsCollector", "metricsProviders", "prometheus",
)
_METRICS_SOURCES = ("KubernetesMetrics", "Prometheus")
_UINT_MAX = 2**32 - 1


@dataclass(slots=True)
class DeschedulerProfile:
    name: str
    # Extension point (one of EXTENSION_POINTS) -> enabled plugin names, in order.
    plugins: dict[str, list[str]] = field(default_factory=dict)
    # Extension point -> disabled plugin names (accepted; upstream does not act on them either).
    disabled: dict[str, list[str]] = field(default_factory=dict)
    # Plugin name -> raw args (apiVersion/kind removed), in pluginConfig order.
    plugin_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Plugin name -> field path of its args ("profiles[0].pluginConfig[1].args"), for errors.
    plugin_config_path: dict[str, str] = field(default_factory=dict)
    index: int = 0


def _no_location(_path: str) -> int | None:
    return None


@dataclass(slots=True)
class DeschedulerPolicy:
    profiles: list[DeschedulerProfile] = field(default_factory=list)
    node_selector: str | None = None
    max_pods_to_evict_per_node: int | None = None
    max_pods_to_evict_per_namespace: int | None = None
    max_pods_to_evict_total: int | None = None
    eviction_failure_event_notification: bool = False
    grace_period_seconds: int | None = None
    source: str | None = None
    # Field path ("profiles[0].plugins.balance.enabled[1]") -> 1-based line in ``source``.
    locate_line: Callable[[str], int | None] = _no_location

    def locate(self, err: InputError) -> InputError:
        """``err`` (with a field path relative to the policy) placed in the policy's file."""
        if err.source is not None:
            return err
        line = self.locate_line(err.field) if err.field else None
        return err.at(source=self.source, line=line)


def load_descheduler_policy(path: str | Path) -> DeschedulerPolicy:
    """The DeschedulerPolicy in ``path`` (``-`` for stdin); the file may hold other documents."""
    return parse_descheduler_policy(load_one(path, KIND, API_VERSION))


def parse_descheduler_policy(doc: Document) -> DeschedulerPolicy:
    """Decode, default and validate one DeschedulerPolicy document."""
    return _Decoder(doc).policy()


class _Decoder(FieldReader):
    """Strict decoding of one document; every error is located in it."""

    def uint(self, data: dict[str, Any], key: str, path: str) -> int | None:
        value = data.get(key)
        if value is None:
            return None
        where = child(path, key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"got {describe(value)}", where, "a non-negative integer")
        if not 0 <= value <= _UINT_MAX:
            raise self.fail(f"{value} is not a non-negative 32-bit integer", where,
                            f"an integer between 0 and {_UINT_MAX}")
        return value

    def policy(self) -> DeschedulerPolicy:
        # The version first: a v1alpha1 policy's "strategies" is not a misspelt field.
        api = self.doc.data.get("apiVersion") if isinstance(self.doc.data, dict) else None
        if api != API_VERSION:
            raise self.fail(f"kubeberth does not read {KIND} version {api!r}", "apiVersion",
                            f"apiVersion: {API_VERSION}, the version descheduler 0.36 reads "
                            "(v1alpha1 policies, with strategies, are no longer served; "
                            "descheduler's docs show their v1alpha2 form)")
        data = self.mapping(self.doc.data, "", _TOP_FIELDS)
        selector = data.get("nodeSelector")
        if selector is not None:
            selector = self.string(selector, "nodeSelector")
            with self.doc.located(under="nodeSelector"):
                parse_label_selector_string(selector)
        notify = data.get("evictionFailureEventNotification")
        if notify is not None and not isinstance(notify, bool):
            raise self.fail(f"got {describe(notify)}", "evictionFailureEventNotification",
                            "true or false")
        grace = data.get("gracePeriodSeconds")
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)
                                  or grace < 0):
            raise self.fail(f"got {describe(grace)}", "gracePeriodSeconds",
                            "a non-negative number of seconds")
        self.metrics(data)
        profiles = [self.profile(p, i)
                    for i, p in enumerate(self.sequence(data.get("profiles"), "profiles"))]
        seen: dict[str, int] = {}
        for p in profiles:
            if p.name in seen:
                raise self.fail(f"profile {p.name!r} is defined twice", f"profiles[{p.index}].name",
                                f"unique profile names (the first is profiles[{seen[p.name]}])")
            seen[p.name] = p.index
        return DeschedulerPolicy(
            profiles=profiles,
            node_selector=selector,
            max_pods_to_evict_per_node=self.uint(data, "maxNoOfPodsToEvictPerNode", ""),
            max_pods_to_evict_per_namespace=self.uint(data, "maxNoOfPodsToEvictPerNamespace", ""),
            max_pods_to_evict_total=self.uint(data, "maxNoOfPodsToEvictTotal", ""),
            eviction_failure_event_notification=bool(notify),
            grace_period_seconds=grace,
            source=self.doc.source.name,
            locate_line=self.doc.line_of,
        )

    def metrics(self, data: dict[str, Any]) -> None:
        """Upstream's checks of the metrics settings (which kubeberth does not consult)."""
        collector = data.get("metricsCollector")
        if collector is not None:
            self.mapping(collector, "metricsCollector", ("enabled",))
        sources: dict[str, int] = {}
        for i, raw in enumerate(self.sequence(data.get("metricsProviders"), "metricsProviders")):
            where = f"metricsProviders[{i}]"
            item = self.mapping(raw, where, ("source", "prometheus"))
            source = self.string(item.get("source", ""), f"{where}.source")
            if source not in _METRICS_SOURCES:
                raise self.fail(f"unknown metrics source {source!r}", f"{where}.source",
                                " or ".join(_METRICS_SOURCES))
            if source in sources:
                raise self.fail(f"metrics provider {source} is configured twice", where,
                                "at most one provider per source")
            sources[source] = i
        if "KubernetesMetrics" in sources and collector is not None \
                and collector.get("enabled") is True:
            raise self.fail("metrics are configured both in metricsCollector and "
                            "metricsProviders", "metricsCollector",
                            "only metricsProviders (metricsCollector is deprecated)")
        prometheus = data.get("prometheus")
        if prometheus is not None:
            self.mapping(prometheus, "prometheus", ("url", "authToken"))

    def profile(self, value: Any, i: int) -> DeschedulerProfile:
        path = f"profiles[{i}]"
        data = self.mapping(value, path, ("name", "pluginConfig", "plugins"))
        name = self.string(data.get("name", ""), f"{path}.name")
        if not name:
            raise self.fail("the profile has no name", f"{path}.name", "a non-empty profile name")
        profile = DeschedulerProfile(name=name, index=i)
        for j, entry in enumerate(self.sequence(data.get("pluginConfig"), f"{path}.pluginConfig")):
            self.plugin_config(profile, entry, f"{path}.pluginConfig[{j}]")
        plugins = data.get("plugins")
        if plugins is not None:
            self.plugins(profile, plugins, f"{path}.plugins")
        set_default_evictor(profile)
        return profile

    def plugins(self, profile: DeschedulerProfile, value: Any, path: str) -> None:
        data = self.mapping(value, path, _PLUGIN_KEYS)
        if "preSort" in data and "presort" in data:
            raise self.fail("presort is given twice", child(path, "preSort"),
                            "one of presort and preSort")
        for key, raw in data.items():
            point = "presort" if key == "preSort" else key
            where = child(path, key)
            item = self.mapping(raw, where, ("enabled", "disabled"))
            for list_key, into in (("enabled", profile.plugins), ("disabled", profile.disabled)):
                names: list[str] = []
                for k, entry in enumerate(self.sequence(item.get(list_key), f"{where}.{list_key}")):
                    name = self.string(entry, f"{where}.{list_key}[{k}]")
                    if not name:
                        raise self.fail("the plugin name is empty", f"{where}.{list_key}[{k}]",
                                        "a plugin name")
                    if name in names:
                        raise self.fail(f"plugin {name!r} is listed twice",
                                        f"{where}.{list_key}[{k}]", "each plugin once")
                    names.append(name)
                into[point] = names

    def plugin_config(self, profile: DeschedulerProfile, value: Any, path: str) -> None:
        data = self.mapping(value, path, ("name", "args"))
        name = self.string(data.get("name", ""), f"{path}.name")
        if not name:
            raise self.fail("the plugin name is empty", f"{path}.name", "a plugin name")
        if name in profile.plugin_config:
            raise self.fail(f"plugin {name!r} is configured twice", path,
                            "one pluginConfig entry per plugin")
        args = data.get("args")
        args = {} if args is None else self.mapping(args, f"{path}.args", None)
        kind = args.get("kind")
        if kind is not None and kind != f"{name}Args":
            raise self.fail(f"args for plugin {name} have kind {kind!r}", f"{path}.args.kind",
                            f"kind: {name}Args (or no kind)")
        api = args.get("apiVersion")
        if api is not None and api != API_VERSION:
            raise self.fail(f"args for plugin {name} have apiVersion {api!r}",
                            f"{path}.args.apiVersion", f"apiVersion: {API_VERSION} (or none)")
        profile.plugin_config[name] = {k: v for k, v in args.items()
                                       if k not in ("apiVersion", "kind")}
        profile.plugin_config_path[name] = f"{path}.args"


def set_default_evictor(profile: DeschedulerProfile) -> None:
    """Upstream ``setDefaultEvictor``: DefaultEvictor always filters and pre-eviction-filters
    (prepended when missing) and gets default args when the profile configures none."""
    for point in ("filter", "preEvictionFilter"):
        enabled = profile.plugins.setdefault(point, [])
        if DEFAULT_EVICTOR not in enabled:
            enabled.insert(0, DEFAULT_EVICTOR)
    if DEFAULT_EVICTOR not in profile.plugin_config:
        profile.plugin_config = {DEFAULT_EVICTOR: {}, **profile.plugin_config}


# ---- label selector strings (nodeSelector: "key=value,tier in (a,b),!legacy") ----------------
LabelRequirement = tuple[str, str, tuple[str, ...]]
_SELECTOR_EXPECTED = ("a label selector such as \"kubernetes.io/os=linux\", \"tier in (a,b)\", "
                      "\"gpu\" or \"!spot\" (requirements separated by commas)")
_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|>|<)\s*([^=!<>\s]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([^=!<>\s(),]+)\s*$")


def parse_label_selector_string(text: str) -> list[LabelRequirement]:
    """``labels.Parse``: requirements as (key, operator, values); operators are In, NotIn,
    Exists, DoesNotExist, Gt and Lt (``=``/``==`` become In, ``!=`` NotIn)."""
    out: list[LabelRequirement] = []
    for part in _split_requirements(text):
        m = _SET_RE.match(part)
        if m:
            values = tuple(v.strip() for v in m[3].split(",") if v.strip())
            out.append((m[1], "In" if m[2] == "in" else "NotIn", values))
            continue
        m = _CMP_RE.match(part)
        if m:
            op = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}[m[2]]
            if op in ("Gt", "Lt") and not re.fullmatch(r"-?[0-9]+", m[3]):
                raise InputError(f"{part.strip()!r} compares with a non-integer",
                                 expected=_SELECTOR_EXPECTED)
            out.append((m[1], op, (m[3],)))
            continue
        m = _KEY_RE.match(part)
        if m:
            out.append((m[2], "DoesNotExist" if m[1] else "Exists", ()))
            continue
        raise InputError(f"{part.strip()!r} is not a label requirement",
                         expected=_SELECTOR_EXPECTED)
    return out


def _split_requirements(text: str) -> list[str]:
    """Split at commas outside parentheses; an empty selector has no requirements."""
    if not text.strip():
        return []
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    if any(not p.strip() for p in parts):
        raise InputError(f"{text!r} has an empty requirement", expected=_SELECTOR_EXPECTED)
    return parts


def match_label_requirements(reqs: list[LabelRequirement], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        value = labels.get(key)
        if op == "In" and value not in values:
            return False
        if op == "NotIn" and value in values:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
        if op in ("Gt", "Lt"):
            if value is None or not re.fullmatch(r"-?[0-9]+", value):
                return False
            bound = int(values[0])
            if not (int(value) > bound if op == "Gt" else int(value) < bound):
                return False
    return True
