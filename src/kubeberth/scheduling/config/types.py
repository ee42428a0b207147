"""Typed form of KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) after defaulting.

The loader (:mod:`kubeberth.scheduling.config.loader`) fills these from YAML and merges each
profile's
plugins with the upstream default plugin set, so the framework sees the effective configuration.
Plugin args stay as raw mappings here: each plugin module owns its Args type, defaults and
validation (as kube-scheduler's plugin folders do), and the framework reports their errors with
the ``profiles[i].pluginConfig[j].args`` path that :attr:`SchedulerConfiguration.locate` turns
into a line number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EXTENSION_POINTS = (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind",
)
# The pod-group extension points (KEP-4671, KEP-5732), run by the pod-group cycle.
PLACEMENT_POINTS = ("placementGenerate", "placementFeasible", "placementScore",
                    "podGroupPostFilter")
MULTI_POINT = "multiPoint"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclass(slots=True)
class PluginRef:
    name: str
    weight: int = 0


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    # Keyed by "multiPoint" and the names in EXTENSION_POINTS and PLACEMENT_POINTS; already
    # merged with the defaults.
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    # Plugin name -> raw args mapping (apiVersion/kind keys removed).
    plugin_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Plugin name -> field path of its args ("profiles[0].pluginConfig[1].args"), for errors.
    plugin_config_path: dict[str, str] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None
    # The profile's percentageOfPlacementsToScore, else the configuration's (None: adaptive).
    percentage_of_placements_to_score: int | None = None
    index: int = 0


@dataclass(slots=True)
class ExtenderTLS:
    """An extender's ``tlsConfig``; the ``*Data`` fields are PEM bytes (base64 in YAML)."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


@dataclass(slots=True)
class Extender:
    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 1
    enable_https: bool = False
    http_timeout_seconds: float = 5.0
    node_cache_capable: bool = False
    managed_resources: list[str] = field(default_factory=list)
    ignorable: bool = False
    tls: ExtenderTLS | None = None


def _no_location(_path: str) -> int | None:
    return None


@dataclass(slots=True)
class SchedulerConfiguration:
    profiles: list[Profile] = field(default_factory=lambda: [Profile()])
    percentage_of_nodes_to_score: int | None = None
    percentage_of_placements_to_score: int | None = None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    parallelism: int = 16
    extenders: list[Extender] = field(default_factory=list)
    source: str | None = None
    # Field path ("profiles[0].plugins.score.enabled[1]") -> 1-based line in ``source``.
    locate: Callable[[str], int | None] = _no_location
