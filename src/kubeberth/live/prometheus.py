"""Reading the free-GPU signal from a Prometheus-compatible HTTP API (the live path).

One instant query (``GET /api/v1/query?query=...``) per controller tick. Every way it can go
wrong becomes a fault on the reading, never an exception and never a number: the endpoint is
down or times out, answers with an HTTP error or ``"status": "error"``, returns an empty vector
(the series are missing or stale: Prometheus drops samples older than its lookback delta),
returns several series, or a value that is not a finite number. The controller holds its
state on a fault and reports it. Works with Prometheus, Thanos, Mimir and VictoriaMetrics,
which share the API. The snapshot argument is ignored: the cluster is the real one.

A sample's age (wall time of the request minus the sample's timestamp; instant queries stamp
samples with the evaluation time, so it is near 0 unless a cache or a proxy answered) is carried
into the reading's time, so the controller's ``maxSignalAgeSeconds`` catches answers that are
old.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kubeberth.spill.config import SpillConfig
from kubeberth.spill.promql import configured_query
from kubeberth.spill.signal import ClusterSignal, Reading, SignalSource
from kubeberth.state.cluster import ClusterState


def spill_signal(cfg: SpillConfig) -> SignalSource:
    """The configured source for a simulated run: a Prometheus query over HTTP, or the signal
    computed from the simulated cluster."""
    c = cfg.controller
    if c.signal.source == "prometheus":
        return PrometheusSignal(c.signal.url, configured_query(cfg), c.signal.timeout_seconds)
    return ClusterSignal.for_config(cfg)


class PrometheusSignal:
    def __init__(self, url: str, query: str, timeout: float = 5.0) -> None:
        self.endpoint = url.rstrip("/") + "/api/v1/query"
        self.query = query
        self.timeout = timeout

    def read(self, snapshot: ClusterState, now: float) -> Reading:
        asked = time.time()
        value, fault, stamp = self._query()
        age = max(0.0, asked - stamp) if stamp is not None else 0.0
        return Reading(value, now - age, fault)

    def query_once(self) -> tuple[float | None, str]:
        """(value, "") or (None, what went wrong)."""
        value, fault, _ = self._query()
        return value, fault

    def _query(self) -> tuple[float | None, str, float | None]:
        """(value, fault, the sample's Unix timestamp when there is one)."""
        data = urllib.parse.urlencode({"query": self.query}).encode()
        request = urllib.request.Request(
            self.endpoint, data=data, method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            detail = _error_detail(err.read())
            return (None, f"prometheus answered HTTP {err.code}"
                    + (f": {detail}" if detail else ""), None)
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            return None, f"prometheus unreachable at {self.endpoint}: {reason}", None
        try:
            payload = json.loads(body)
        except ValueError:
            return None, "prometheus answered with a body that is not JSON", None
        value, fault = parse_query_response(payload)
        return value, fault, _sample_time(payload) if not fault else None


def _error_detail(body: bytes) -> str:
    try:
        payload = json.loads(body)
    except ValueError:
        return ""
    if isinstance(payload, dict):
        return f"{payload.get('errorType', '')}: {payload.get('error', '')}".strip(": ")
    return ""


def _sample_time(payload: dict[str, Any]) -> float | None:
    """The timestamp of the (already validated) single sample."""
    result = payload["data"]["result"]
    sample = result if payload["data"]["resultType"] == "scalar" else result[0]["value"]
    try:
        return float(sample[0])
    except (TypeError, ValueError):
        return None


def parse_query_response(payload: Any) -> tuple[float | None, str]:
    """The single value of an instant-query response, or the fault it represents."""
    if not isinstance(payload, dict):
        return None, "prometheus response is not a JSON object"
    if payload.get("status") != "success":
        detail = f"{payload.get('errorType', '')}: {payload.get('error', '')}".strip(": ")
        return None, "prometheus query failed" + (f": {detail}" if detail else "")
    data = payload.get("data")
    if not isinstance(data, dict):
        return None, "prometheus response has no data"
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        sample = result
    elif kind == "vector" and isinstance(result, list):
        if not result:
            return None, "prometheus returned an empty vector (series missing or stale)"
        if len(result) > 1:
            return None, f"prometheus returned {len(result)} series, expected one"
        sample = result[0].get("value") if isinstance(result[0], dict) else None
    else:
        return None, f"prometheus returned a {kind!r} result, expected a vector"
    if not isinstance(sample, list) or len(sample) != 2:
        return None, "prometheus sample is not [timestamp, value]"
    try:
        value = float(sample[1])
    except (TypeError, ValueError):
        return None, f"prometheus value {sample[1]!r} is not a number"
    if not math.isfinite(value):
        return None, f"prometheus value {sample[1]} is not finite"
    return value, ""
