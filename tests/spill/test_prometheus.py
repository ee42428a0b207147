"""The Prometheus signal source against a real HTTP server on loopback, and the controller's
behaviour on its faults (down endpoint, error responses, empty vector)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from kubeberth.live.prometheus import PrometheusSignal, parse_query_response
from kubeberth.spill.config import Controller
from kubeberth.spill.policy import ADD, ControllerState, step
from kubeberth.state.cluster import ClusterState


def vector(*values: str, stamp: float | None = None) -> dict[str, object]:
    """An instant-query answer stamped now (as Prometheus stamps them) unless told."""
    at = time.time() if stamp is None else stamp
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [at, v]} for v in values]}}


class FakePrometheus:
    """Serves one scripted answer per request: (HTTP status, JSON body or raw bytes)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, object]] = []
        self.queries: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                fake.queries.append(form.get("query", [""])[0])
                self._answer()

            def do_GET(self) -> None:
                self._answer()

            def _answer(self) -> None:
                code, body = fake.answers.pop(0) if fake.answers else (200, vector("0"))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    yield fake
    fake.close()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound by this test and never listened on: connections are refused, and
    no other process can take the port while the test runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def test_reads_the_single_sample_and_sends_the_query(prom: FakePrometheus) -> None:
    before = time.time()
    prom.answers.append((200, vector("7")))
    reading = PrometheusSignal(prom.url, "my_query").read(ClusterState(), 42.0)
    waited = time.time() - before
    assert (reading.value, reading.fault) == (7.0, "")
    # Stamped when the answer was made: its age is at most the time this exchange took.
    assert 42.0 - waited <= reading.at <= 42.0
    assert prom.queries == ["my_query"]


def test_scalar_result_is_accepted(prom: FakePrometheus) -> None:
    prom.answers.append((200, {"status": "success",
                               "data": {"resultType": "scalar", "result": [1.0, "3.5"]}}))
    assert PrometheusSignal(prom.url, "q").query_once() == (3.5, "")


@pytest.mark.parametrize(("code", "body", "fault"), [
    (200, vector(), "empty vector"),
    (200, vector("1", "2"), "2 series"),
    (200, vector("NaN"), "not finite"),
    (200, vector("lots"), "not a number"),
    (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"},
     "HTTP 400: bad_data: parse error at char 3"),
    (503, b"overloaded", "HTTP 503"),
    (200, {"status": "error", "errorType": "timeout", "error": "query timed out"},
     "query failed: timeout: query timed out"),
    (200, b"<html>", "not JSON"),
    (200, {"status": "success", "data": {"resultType": "matrix", "result": []}},
     "'matrix' result"),
])
def test_bad_answers_become_faults(prom: FakePrometheus, code: int, body: object,
                                   fault: str) -> None:
    prom.answers.append((code, body))
    value, got = PrometheusSignal(prom.url, "q").query_once()
    assert value is None and fault in got


def test_down_endpoint_is_a_fault(closed_port: int) -> None:
    value, fault = PrometheusSignal(f"http://127.0.0.1:{closed_port}", "q",
                                    timeout=2.0).query_once()
    assert value is None and fault.startswith("prometheus unreachable")


def test_parse_rejects_non_objects() -> None:
    assert parse_query_response([1, 2])[1] == "prometheus response is not a JSON object"


def test_controller_holds_through_prometheus_faults(prom: FakePrometheus) -> None:
    """Above the threshold for long enough, but every other answer is broken: the taint is
    added only once the signal has stayed above for the full duration without a fault."""
    args = Controller(interval_seconds=10, threshold=4, window_seconds=10,
                      stabilization_seconds=20, max_signal_age_seconds=20)
    source = PrometheusSignal(prom.url, "q")
    prom.answers.extend([
        (200, vector("9")), (200, vector()), (200, vector("9")), (500, {"status": "error"}),
        (200, vector("9")), (200, vector("9")), (200, vector("9")),
    ])
    state = ControllerState()
    log: list[tuple[str | None, str]] = []
    for i in range(7):
        d = step(args, state, source.read(ClusterState(), i * 10.0), i * 10.0)
        state = d.state
        log.append((d.flip, d.fault))
    assert [f for f, _ in log] == [None, None, None, None, None, None, ADD]
    assert "empty vector" in log[1][1] and "HTTP 500" in log[3][1]
    assert sum(1 for _, fault in log if fault) == 2


def test_controller_with_endpoint_down_keeps_taint(closed_port: int) -> None:
    args = Controller(interval_seconds=10, threshold=4, window_seconds=10,
                      stabilization_seconds=0, max_signal_age_seconds=20)
    source = PrometheusSignal(f"http://127.0.0.1:{closed_port}", "q", timeout=2.0)
    state = ControllerState(tainted=True)
    for i in range(3):
        d = step(args, state, source.read(ClusterState(), i * 10.0), i * 10.0)
        state = d.state
        assert d.flip is None and d.fault.startswith("prometheus unreachable")
    assert state.tainted


def test_old_sample_is_stale_for_the_controller(prom: FakePrometheus) -> None:
    """A cached answer five minutes old: the reading carries its age and the controller
    refuses it (maxSignalAgeSeconds 120)."""
    prom.answers.append((200, vector("9", stamp=time.time() - 300.0)))
    reading = PrometheusSignal(prom.url, "q").read(ClusterState(), 1000.0)
    assert reading.value == 9.0 and 1000.0 - reading.at >= 299.0
    args = Controller(interval_seconds=10, threshold=4, window_seconds=10,
                      stabilization_seconds=0, max_signal_age_seconds=120)
    d = step(args, ControllerState(), reading, 1000.0)
    assert d.flip is None and d.fault.startswith("signal is stale")


def test_fresh_sample_is_not_stale(prom: FakePrometheus) -> None:
    prom.answers.append((200, vector("9")))
    reading = PrometheusSignal(prom.url, "q").read(ClusterState(), 1000.0)
    assert 1000.0 - reading.at < 5.0
