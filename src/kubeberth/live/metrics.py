"""Prometheus metrics and the health endpoints of a live controller.

Series carry kube-scheduler's names and labels so existing dashboards work:
``scheduler_pending_pods{queue}``, ``scheduler_schedule_attempts_total{result,profile}``,
``scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`` and
``scheduler_pod_scheduling_sli_duration_seconds{attempts}``. Every controller has its own
registry (nothing global), so two controllers in one process, as in the tests, never share a
series. Extension points are timed by wrapping the framework's ``run_*`` methods on each
Framework instance: the framework itself stays unaware of metrics.
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.runtime import Framework
from kubeberth.scheduling.framework.status import Status

# Framework method -> upstream extension point label.
EXTENSION_POINTS = {
    "run_pre_filter": "PreFilter",
    "run_filters": "Filter",
    "run_post_filter": "PostFilter",
    "run_pre_score": "PreScore",
    "run_score": "Score",
    "run_reserve": "Reserve",
    "run_permit": "Permit",
    "run_pre_bind": "PreBind",
    "run_bind": "Bind",
    "run_post_bind": "PostBind",
}
# Upstream's buckets: exponential from 0.1 ms (extension points) and 10 ms (SLI).
_POINT_BUCKETS = tuple(0.0001 * 2 ** i for i in range(12))
_SLI_BUCKETS = tuple(0.01 * 2 ** i for i in range(20))


def _status_label(ret: Any) -> str:
    """Upstream labels a point by the Status code it returned; outcomes without one succeed."""
    candidates = ret if isinstance(ret, tuple) else (ret,)
    for item in candidates:
        if isinstance(item, Status):
            return "Success" if item.ok else item.code.name.title().replace("_", "")
    return "Success"


class ControllerMetrics:
    """A controller's own registry and its exposition for ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.refused = Counter("kubeberth_objects_refused", "Objects the controller skipped "
                               "because it cannot read or judge them, by kind and reason "
                               "(FailedToDecode, InvalidObject).", ["kind", "reason"],
                               registry=self.registry)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class SchedulerMetrics(ControllerMetrics):
    def __init__(self) -> None:
        super().__init__()
        self.pending = Gauge("scheduler_pending_pods", "Number of pending pods, by the queue "
                             "type.", ["queue"], registry=self.registry)
        self.attempts = Counter("scheduler_schedule_attempts", "Number of attempts to schedule "
                                "pods, by the result.", ["result", "profile"],
                                registry=self.registry)
        self.points = Histogram("scheduler_framework_extension_point_duration_seconds",
                                "Latency for running all plugins of a specific extension "
                                "point.", ["extension_point", "status", "profile"],
                                buckets=_POINT_BUCKETS, registry=self.registry)
        self.sli = Histogram("scheduler_pod_scheduling_sli_duration_seconds",
                             "E2e latency for a pod being scheduled, from the time the pod "
                             "enters the scheduling queue.", ["attempts"],
                             buckets=_SLI_BUCKETS, registry=self.registry)

    def set_pending(self, counts: dict[str, int]) -> None:
        for queue, n in counts.items():
            self.pending.labels(queue=queue).set(n)

    def instrument(self, fw: Framework) -> None:
        """Time every extension point of ``fw`` (wraps the bound methods on the instance)."""
        for method, point in EXTENSION_POINTS.items():
            original = getattr(fw, method)
            setattr(fw, method, self._timed(original, point, fw.profile_name))

    def _timed(self, fn: Callable[..., Any], point: str, profile: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            ret = fn(*args, **kwargs)
            self.points.labels(extension_point=point, status=_status_label(ret),
                               profile=profile).observe(time.perf_counter() - start)
            return ret
        return wrapper


def server_tls(cert: Path, key: Path | None) -> ssl.SSLContext:
    """The TLS context of a server with this PEM certificate and key (``key`` None: the key
    is in the certificate file), as ``--tls-cert-file``/``--tls-private-key-file`` give them."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise InputError(f"cannot load the certificate {cert} and its key: {err}",
                         field="--tls-cert-file",
                         expected="a PEM certificate, with --tls-private-key-file its PEM "
                                  "private key") from None
    return ctx


class HealthServer:
    """``/healthz`` (the control loop is alive), ``/readyz`` (caches synced) and ``/metrics``
    on a small threaded HTTP server (HTTPS with ``tls``)."""

    def __init__(self, host: str, port: int, *, healthy: Callable[[], bool],
                 ready: Callable[[], bool], metrics: Callable[[], bytes],
                 tls: ssl.SSLContext | None = None) -> None:
        checks = {"/healthz": healthy, "/livez": healthy, "/readyz": ready}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, metrics(), CONTENT_TYPE_LATEST)
                elif path in checks:
                    ok = checks[path]()
                    self._send(200 if ok else 503, b"ok" if ok else b"not ready",
                               "text/plain; charset=utf-8")
                else:
                    self._send(404, b"404 page not found", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.scheme = "http" if tls is None else "https"
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                       name="health")

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def start(self) -> HealthServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
