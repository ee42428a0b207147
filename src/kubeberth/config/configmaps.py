"""ConfigMaps in manifests: configuration that policies read from the cluster, over time.

Some policies take live data from the cluster rather than from their plugin args (the
NetworkCapacity plugin's per-node network slots). The manifest loader keeps ConfigMaps raw; this
module checks one as the API server would (``data`` maps string keys to string values) and reads
the simulator's extension: a ConfigMap annotated ``kubeberth.io/arrival-seconds: "T"`` is the
same object changed at virtual time T, so a run replays capacity updates as events. Without the
annotation (or with T = 0) a ConfigMap is part of the initial cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kubeberth.config.manifests import ANNOTATION_ARRIVAL, DEFAULT_NAMESPACE, Manifests
from kubeberth.config.yamlsrc import Document

__all__ = ["ConfigMapVersion", "config_map_data", "initial_config_maps", "load_config_maps"]


@dataclass(frozen=True, slots=True)
class ConfigMapVersion:
    """One ConfigMap's data as of ``at`` seconds (0: the initial cluster)."""

    key: str  # namespace/name
    data: dict[str, str]
    at: float


def config_map_data(doc: Document) -> tuple[str, dict[str, str]]:
    """``namespace/name`` and the string data of a ConfigMap document; errors name the field."""
    meta = doc.data.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise doc.error("the ConfigMap has no name", field="metadata.name",
                        expected="a non-empty metadata.name")
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
    raw: Any = doc.data.get("data") or {}
    if not isinstance(raw, dict):
        raise doc.error("data is not a mapping", field="data",
                        expected='a mapping of keys to string values, such as {gpu-a: "4"}')
    data: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise doc.error(f"data.{k} is {v!r}, not a string", field=f"data.{k}",
                            expected=f'a string value (quote it: {k}: "{v}")')
        data[str(k)] = v
    return f"{namespace}/{meta['name']}", data


def _arrival(doc: Document) -> float:
    meta = doc.data.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(ANNOTATION_ARRIVAL)
    if raw is None:
        return 0.0
    field = f"metadata.annotations.{ANNOTATION_ARRIVAL}"
    expected = 'a non-negative number of seconds as a string, such as "0" or "600"'
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise doc.error(f"{raw!r} is not a number of seconds", field=field,
                        expected=expected) from None
    if not math.isfinite(value) or value < 0:
        raise doc.error(f"{raw!r} is not a non-negative finite number of seconds",
                        field=field, expected=expected)
    return value


def load_config_maps(manifests: Manifests) -> list[ConfigMapVersion]:
    """Every ConfigMap version in the manifests, by time then input order. Two versions of the
    same ConfigMap at the same time are an error."""
    seen: dict[tuple[str, float], Document] = {}
    out: list[ConfigMapVersion] = []
    for doc in manifests.of_kind("ConfigMap"):
        key, data = config_map_data(doc)
        at = _arrival(doc)
        first = seen.get((key, at))
        if first is not None:
            where = first.source.name
            line = first.line if first.line is not None else first.line_of("")
            if line is not None:
                where += f":{line}"
            raise doc.error(f"ConfigMap {key} is defined twice for time {at:g}",
                            field="metadata.name",
                            expected=f"one version per time (the first is at {where}); "
                            f"later versions carry {ANNOTATION_ARRIVAL}")
        seen[(key, at)] = doc
        out.append(ConfigMapVersion(key, data, at))
    out.sort(key=lambda v: v.at)
    return out


def initial_config_maps(versions: list[ConfigMapVersion]) -> dict[str, dict[str, str]]:
    """The ConfigMaps of the initial cluster (time 0), by ``namespace/name``."""
    return {v.key: v.data for v in versions if v.at == 0}
