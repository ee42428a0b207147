"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): decoding, defaulting, validation.

Users bring the scheduler configuration they run in production, so it is read as kube-scheduler
reads it: strict decoding (unknown or duplicate fields are errors), v1 defaulting (one
``default-scheduler`` profile, each profile's plugins merged with the default set by
:mod:`kubeberth.scheduling.config.defaults`, backoff 1s/10s, parallelism 16) and the checks
of upstream's
``ValidateKubeSchedulerConfiguration``. Every error names the file, line and field path. Plugin
args stay raw mappings: each plugin module owns its args' defaults and validation, and the
framework reports their errors through :attr:`SchedulerConfiguration.locate`. Leader election,
client connection and profiling settings are accepted and ignored, as they have nothing to
decide in kubeberth.
"""

from __future__ import annotations

import base64
import difflib
import re
from pathlib import Path
from typing import Any

from kubeberth.api.resources import is_extended_resource
from kubeberth.config.fields import FieldReader, child, describe, load_one
from kubeberth.config.yamlsrc import Document
from kubeberth.scheduling.config.defaults import (
    DEFAULT_PLUGINS,
    PLUGIN_SET_KEYS,
    default_plugins,
    merge_plugins,
)
from kubeberth.scheduling.config.types import (
    DEFAULT_SCHEDULER_NAME,
    Extender,
    ExtenderTLS,
    PluginRef,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_PLUGINS",
    "KIND",
    "load_scheduler_config",
    "parse_scheduler_config",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_PARALLELISM = 16
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10
DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

_TOP_FIELDS = (
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
    "enableContentionProfiling", "percentageOfNodesToScore", "percentageOfPlacementsToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders",
    "delayCacheUntilActive",
)
_LEADER_ELECTION_FIELDS = (
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
    "resourceName", "resourceNamespace",
)
_CLIENT_CONNECTION_FIELDS = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")
_PROFILE_FIELDS = (
    "schedulerName", "percentageOfNodesToScore", "percentageOfPlacementsToScore", "plugins",
    "pluginConfig",
)
_EXTENDER_FIELDS = (
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
)
_TLS_FIELDS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData",
               "caData")
# Plugins removed from kube-scheduler that v1 configurations may no longer name.
REMOVED_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
# In-tree plugins with a registered Args kind; for these, args.kind must be <Name>Args.
_IN_TREE_ARGS = (
    "DefaultPreemption", "DynamicResources", "InterPodAffinity", "NodeAffinity",
    "NodeResourcesBalancedAllocation", "NodeResourcesFit", "PodTopologySpread", "VolumeBinding",
)
_DURATION = re.compile(r"(?:(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}
_QUALIFIED_NAME = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def load_scheduler_config(path: str | Path | None) -> SchedulerConfiguration:
    """The effective configuration from ``path`` (``-`` for stdin), or upstream's defaults.

    The file may hold other documents too (a manifest bundle); exactly one must be a
    KubeSchedulerConfiguration.
    """
    if path is None:
        return SchedulerConfiguration(profiles=[Profile(plugins=merge_plugins(default_plugins(),
                                                                              None))])
    return parse_scheduler_config(load_one(path, KIND, API_VERSION))


def parse_scheduler_config(doc: Document) -> SchedulerConfiguration:
    """Decode, default and validate one KubeSchedulerConfiguration document."""
    return _Decoder(doc).configuration()


class _Decoder(FieldReader):
    """Strict decoding of one document; every error is located in it."""

    # ---- typed field readers (Go's strict JSON decoding) ---------------------------------------
    def integer(self, value: Any, path: str, bounds: tuple[int, int] = _INT32) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"got {describe(value)}", path, "an integer")
        if not bounds[0] <= value <= bounds[1]:
            raise self.fail(f"{value} does not fit in a {_bits(bounds)}-bit integer", path,
                            f"an integer between {bounds[0]} and {bounds[1]}")
        return value

    def name(self, value: Any, path: str) -> str:
        name = self.string(value, path)
        if not name:
            raise self.fail("the name is empty", path, "a plugin name")
        return name

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(f"got {describe(value)}", path, "true or false")
        return value

    def optional_int(self, data: dict[str, Any], key: str, path: str) -> int | None:
        value = data.get(key)
        return None if value is None else self.integer(value, child(path, key))

    def duration(self, value: Any, path: str) -> float:
        """A Go duration string (``30s``, ``1m30s``, ``500ms``) in seconds."""
        expected = "a duration such as \"30s\", \"1m30s\" or \"500ms\""
        if not isinstance(value, str):
            raise self.fail(f"got {describe(value)}", path, expected)
        sign = -1.0 if value.startswith("-") else 1.0
        unsigned = value[1:] if value[:1] in "+-" else value
        if unsigned == "0":
            return 0.0
        if _DURATION.fullmatch(unsigned) is None:
            raise self.fail(f"{value!r} is not a duration", path, expected)
        return sign * sum(float(num) * _DURATION_UNITS[unit]
                          for num, unit in _DURATION_PART.findall(unsigned))

    # ---- the document ----------------------------------------------------------------------------
    def configuration(self) -> SchedulerConfiguration:
        data = self.mapping(self.doc.data, "", _TOP_FIELDS)
        if data.get("apiVersion") != API_VERSION:
            raise self.fail(f"{KIND} has apiVersion {data.get('apiVersion')!r}", "apiVersion",
                            f"apiVersion: {API_VERSION} (older versions are no longer served)")
        for key, fields in (("leaderElection", _LEADER_ELECTION_FIELDS),
                            ("clientConnection", _CLIENT_CONNECTION_FIELDS)):
            if data.get(key) is not None:
                self.mapping(data[key], key, fields)
        for key in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
            if data.get(key) is not None:
                self.boolean(data[key], key)
        parallelism = self.optional_int(data, "parallelism", "")
        percentage = self.optional_int(data, "percentageOfNodesToScore", "")
        placements = self.optional_int(data, "percentageOfPlacementsToScore", "")
        initial = data.get("podInitialBackoffSeconds")
        initial = DEFAULT_POD_INITIAL_BACKOFF_SECONDS if initial is None \
            else self.integer(initial, "podInitialBackoffSeconds", _INT64)
        maximum = data.get("podMaxBackoffSeconds")
        maximum = DEFAULT_POD_MAX_BACKOFF_SECONDS if maximum is None \
            else self.integer(maximum, "podMaxBackoffSeconds", _INT64)
        raw_profiles = self.sequence(data.get("profiles"), "profiles")
        profiles = [self.profile(p, i) for i, p in enumerate(raw_profiles or [{}])]
        if len(profiles) == 1 and "schedulerName" not in (raw_profiles or [{}])[0]:
            # Upstream names the profile only when it is the only one.
            profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
        extenders = [self.extender(e, i) for i, e in
                     enumerate(self.sequence(data.get("extenders"), "extenders"))]

        # Upstream ValidateKubeSchedulerConfiguration, in its order.
        if parallelism is not None and parallelism <= 0:
            raise self.fail(f"parallelism is {parallelism}", "parallelism",
                            "an integer greater than zero")
        seen: dict[str, int] = {}
        for profile in profiles:
            i = profile.index
            if not profile.scheduler_name:
                raise self.fail("the profile has no schedulerName", f"profiles[{i}].schedulerName",
                                "a non-empty schedulerName (required when there are several "
                                "profiles)")
            self.percentage(profile.percentage_of_nodes_to_score,
                            f"profiles[{i}].percentageOfNodesToScore")
            if profile.scheduler_name in seen:
                raise self.fail(f"schedulerName {profile.scheduler_name!r} is used twice",
                                f"profiles[{i}].schedulerName",
                                f"a name different from profiles[{seen[profile.scheduler_name]}]"
                                ".schedulerName")
            seen[profile.scheduler_name] = i
        self.common_queue_sort(profiles)
        self.percentage(percentage, "percentageOfNodesToScore")
        self.percentage(placements, "percentageOfPlacementsToScore")
        for profile in profiles:
            if profile.percentage_of_placements_to_score is None:
                profile.percentage_of_placements_to_score = placements
        if initial <= 0:
            raise self.fail(f"podInitialBackoffSeconds is {initial}", "podInitialBackoffSeconds",
                            "a number of seconds greater than 0")
        if maximum < initial:
            raise self.fail(f"podMaxBackoffSeconds ({maximum}) is less than "
                            f"podInitialBackoffSeconds ({initial})", "podMaxBackoffSeconds",
                            "a number of seconds greater than or equal to "
                            "podInitialBackoffSeconds")
        self.validate_extenders(extenders)
        self.ignore_extender_resources(profiles, data.get("extenders") or [])

        doc = self.doc
        return SchedulerConfiguration(
            profiles=profiles,
            percentage_of_nodes_to_score=percentage,
            percentage_of_placements_to_score=placements,
            pod_initial_backoff_seconds=float(initial),
            pod_max_backoff_seconds=float(maximum),
            parallelism=DEFAULT_PARALLELISM if parallelism is None else parallelism,
            extenders=extenders,
            source=doc.source.name,
            locate=doc.line_of,
        )

    def percentage(self, value: int | None, path: str) -> None:
        if value is not None and not 0 <= value <= 100:
            raise self.fail(f"{value} is not a percentage", path, "an integer from 0 to 100")

    # ---- profiles --------------------------------------------------------------------------------
    def profile(self, value: Any, i: int) -> Profile:
        path = f"profiles[{i}]"
        data = self.mapping(value, path, _PROFILE_FIELDS)
        name = data.get("schedulerName")
        placements = self.optional_int(data, "percentageOfPlacementsToScore", path)
        self.percentage(placements, f"{path}.percentageOfPlacementsToScore")
        custom = None
        if data.get("plugins") is not None:
            custom = self.plugins(data["plugins"], f"{path}.plugins")
        profile = Profile(
            scheduler_name="" if name is None else self.string(name, f"{path}.schedulerName"),
            plugins=merge_plugins(default_plugins(), custom),
            percentage_of_nodes_to_score=self.optional_int(data, "percentageOfNodesToScore",
                                                           path),
            percentage_of_placements_to_score=placements,
            index=i,
        )
        for j, entry in enumerate(self.sequence(data.get("pluginConfig"), f"{path}.pluginConfig")):
            self.plugin_config(profile, entry, f"{path}.pluginConfig[{j}]")
        for j, name in enumerate(profile.plugin_config):
            self.configured_plugin_enabled(profile, name, f"{path}.pluginConfig[{j}].name")
        return profile

    def configured_plugin_enabled(self, profile: Profile, name: str, path: str) -> None:
        """Args for a plugin the profile does not run are an error (upstream ignores them, so a
        misspelt name silently drops the user's tuning; docs/scheduler.md says so)."""
        enabled = sorted({ref.name for point in profile.plugins.values() for ref in point.enabled})
        if name in enabled:
            return
        close = difflib.get_close_matches(name, enabled, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = profile.scheduler_name or DEFAULT_SCHEDULER_NAME
        raise self.fail(f"profile {shown!r} has pluginConfig for plugin {name!r}, which it does "
                        f"not enable{hint}", path,
                        "args only for a plugin the profile enables: " + ", ".join(enabled))

    def plugins(self, value: Any, path: str) -> dict[str, PluginSet]:
        data = self.mapping(value, path, PLUGIN_SET_KEYS)
        return {key: self.plugin_set(data[key], child(path, key))
                for key in PLUGIN_SET_KEYS if data.get(key) is not None}

    def plugin_set(self, value: Any, path: str) -> PluginSet:
        data = self.mapping(value, path, ("enabled", "disabled"))
        enabled: list[PluginRef] = []
        for k, entry in enumerate(self.sequence(data.get("enabled"), f"{path}.enabled")):
            where = f"{path}.enabled[{k}]"
            item = self.mapping(entry, where, ("name", "weight"))
            name = self.name(item.get("name"), f"{where}.name")
            if name in REMOVED_PLUGINS:
                raise self.fail(f"plugin {name!r} was removed from kube-scheduler", f"{where}.name",
                                f"a plugin that exists in {API_VERSION} (NodeVolumeLimits covers "
                                "the volume limits the removed in-tree plugins enforced)")
            weight = self.optional_int(item, "weight", where)
            if weight is not None and weight < 0:
                raise self.fail(f"plugin {name!r} has weight {weight}", f"{where}.weight",
                                "a non-negative weight")
            enabled.append(PluginRef(name, weight or 0))
        disabled: list[str] = []
        for k, entry in enumerate(self.sequence(data.get("disabled"), f"{path}.disabled")):
            where = f"{path}.disabled[{k}]"
            item = self.mapping(entry, where, ("name", "weight"))
            disabled.append(self.name(item.get("name"), f"{where}.name"))
        return PluginSet(enabled=enabled, disabled=disabled)

    def plugin_config(self, profile: Profile, value: Any, path: str) -> None:
        data = self.mapping(value, path, ("name", "args"))
        name = self.name(data.get("name"), f"{path}.name")
        if name in profile.plugin_config:
            raise self.fail(f"plugin {name!r} is configured twice", path,
                            "one pluginConfig entry per plugin")
        if name in REMOVED_PLUGINS:
            raise self.fail(f"plugin {name!r} was removed from kube-scheduler", f"{path}.name",
                            f"a plugin that exists in {API_VERSION}")
        args = data.get("args")
        args = {} if args is None else self.mapping(args, f"{path}.args", None)
        kind = args.get("kind")
        if name in _IN_TREE_ARGS and kind is not None and kind != f"{name}Args":
            raise self.fail(f"args for plugin {name} have kind {kind!r}", f"{path}.args.kind",
                            f"kind: {name}Args (or no kind)")
        api = args.get("apiVersion")
        if name in _IN_TREE_ARGS and api is not None and api != API_VERSION:
            raise self.fail(f"args for plugin {name} have apiVersion {api!r}",
                            f"{path}.args.apiVersion", f"apiVersion: {API_VERSION} (or none)")
        profile.plugin_config[name] = {k: v for k, v in args.items()
                                       if k not in ("apiVersion", "kind")}
        profile.plugin_config_path[name] = f"{path}.args"

    def common_queue_sort(self, profiles: list[Profile]) -> None:
        """Upstream validateCommonQueueSort: every profile's queueSort set (and the args of the
        queueSort plugin that the first profile names) must equal the first profile's."""
        first = profiles[0].plugins["queueSort"]
        if len(first.enabled) > 1:
            raise self.fail(f"{len(first.enabled)} queueSort plugins are enabled",
                            "profiles[0].plugins.queueSort.enabled",
                            "only one queueSort plugin")
        name = first.enabled[0].name if first.enabled else ""
        args = profiles[0].plugin_config.get(name)
        for profile in profiles[1:]:
            current = profile.plugins["queueSort"]
            if current != first:
                raise self.fail("queueSort differs from the first profile's",
                                f"profiles[{profile.index}].plugins.queueSort",
                                "the same queueSort plugins in every profile")
            if name and name in profile.plugin_config and profile.plugin_config[name] != args:
                raise self.fail(f"the args of queueSort plugin {name} differ from the first "
                                "profile's", profile.plugin_config_path[name],
                                "the same queueSort args in every profile")

    # ---- extenders -------------------------------------------------------------------------------
    def extender(self, value: Any, i: int) -> Extender:
        path = f"extenders[{i}]"
        data = self.mapping(value, path, _EXTENDER_FIELDS)

        def text(key: str) -> str:
            raw = data.get(key)
            return "" if raw is None else self.string(raw, f"{path}.{key}")

        def flag(key: str) -> bool:
            raw = data.get(key)
            return False if raw is None else self.boolean(raw, f"{path}.{key}")

        tls = None if data.get("tlsConfig") is None else self.tls(data["tlsConfig"],
                                                                   f"{path}.tlsConfig")
        weight = data.get("weight")
        timeout = data.get("httpTimeout")
        seconds = 0.0 if timeout is None else self.duration(timeout, f"{path}.httpTimeout")
        if seconds < 0:
            raise self.fail(f"httpTimeout {timeout!r} is negative", f"{path}.httpTimeout",
                            "a non-negative duration")
        managed: list[str] = []
        for j, entry in enumerate(self.sequence(data.get("managedResources"),
                                                f"{path}.managedResources")):
            where = f"{path}.managedResources[{j}]"
            item = self.mapping(entry, where, ("name", "ignoredByScheduler"))
            managed.append(self.string(item.get("name"), f"{where}.name"))
            if item.get("ignoredByScheduler") is not None:
                self.boolean(item["ignoredByScheduler"], f"{where}.ignoredByScheduler")
        return Extender(
            url_prefix=text("urlPrefix"),
            filter_verb=text("filterVerb"),
            preempt_verb=text("preemptVerb"),
            prioritize_verb=text("prioritizeVerb"),
            bind_verb=text("bindVerb"),
            weight=0 if weight is None else self.integer(weight, f"{path}.weight", _INT64),
            enable_https=flag("enableHTTPS"),
            http_timeout_seconds=seconds or DEFAULT_EXTENDER_TIMEOUT_SECONDS,
            node_cache_capable=flag("nodeCacheCapable"),
            managed_resources=managed,
            ignorable=flag("ignorable"),
            tls=tls,
        )

    def tls(self, value: Any, path: str) -> ExtenderTLS:
        data = self.mapping(value, path, _TLS_FIELDS)

        def text(key: str) -> str:
            raw = data.get(key)
            return "" if raw is None else self.string(raw, f"{path}.{key}")

        def pem(key: str) -> bytes:
            raw = text(key)
            try:
                return base64.b64decode(raw, validate=True)
            except ValueError:
                raise self.fail(f"{key} is not base64", f"{path}.{key}",
                                "PEM bytes encoded as base64, as Go encodes []byte") from None

        insecure = data.get("insecure")
        return ExtenderTLS(
            insecure=False if insecure is None else self.boolean(insecure, f"{path}.insecure"),
            server_name=text("serverName"), cert_file=text("certFile"),
            key_file=text("keyFile"), ca_file=text("caFile"), cert_data=pem("certData"),
            key_data=pem("keyData"), ca_data=pem("caData"))

    def validate_extenders(self, extenders: list[Extender]) -> None:
        """Upstream validateExtenders, plus a required urlPrefix."""
        binders: list[int] = []
        managed: set[str] = set()
        for i, ext in enumerate(extenders):
            path = f"extenders[{i}]"
            if not ext.url_prefix:
                raise self.fail("the extender has no urlPrefix", f"{path}.urlPrefix",
                                "the extender's URL, such as http://127.0.0.1:8888/scheduler")
            if ext.prioritize_verb and ext.weight <= 0:
                raise self.fail(f"weight is {ext.weight}", f"{path}.weight",
                                "a positive weight for an extender with a prioritizeVerb")
            if ext.bind_verb:
                binders.append(i)
            for j, name in enumerate(ext.managed_resources):
                where = f"{path}.managedResources[{j}].name"
                if _QUALIFIED_NAME.fullmatch(name) is None or len(name.rsplit("/", 1)[-1]) > 63:
                    raise self.fail(f"{name!r} is not a qualified resource name", where,
                                    "a name such as example.com/foo")
                if not is_extended_resource(name):
                    raise self.fail(f"{name!r} is not an extended resource name", where,
                                    "a resource name with a domain outside kubernetes.io, "
                                    "such as example.com/foo")
                if name in managed:
                    raise self.fail(f"managed resource {name!r} is listed twice", where,
                                    "each managed resource at most once across extenders")
                managed.add(name)
        if len(binders) > 1:
            raise self.fail(f"{len(binders)} extenders implement bind", f"extenders[{binders[1]}]"
                            ".bindVerb", "at most one extender with a bindVerb")

    def ignore_extender_resources(self, profiles: list[Profile], raw: list[Any]) -> None:
        """Upstream hands resources that extenders manage with ignoredByScheduler to every
        profile's NodeResourcesFit as its ignoredResources (replacing what was there)."""
        ignored = [item["name"] for ext in raw for item in ext.get("managedResources") or []
                   if item.get("ignoredByScheduler")]
        if not ignored:
            return
        for profile in profiles:
            args = profile.plugin_config.setdefault("NodeResourcesFit", {})
            args["ignoredResources"] = list(ignored)
            profile.plugin_config_path.setdefault(
                "NodeResourcesFit", f"profiles[{profile.index}].pluginConfig")


def _bits(bounds: tuple[int, int]) -> int:
    return 32 if bounds == _INT32 else 64
