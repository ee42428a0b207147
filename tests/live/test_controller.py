"""The controller base on its own: readiness follows the informers, the loop's health, a
failing loop stops with the same teardown, SIGTERM stops a controller run by a command, and the
health/metrics server speaks HTTPS with --tls-cert-file."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node
from tests.live.harness import wait_for

from kubeberth.live.controller import Controller
from kubeberth.live.metrics import ControllerMetrics, server_tls


def _client() -> Client:
    """A client of nothing (port 9): informers built on it never sync by themselves."""
    return Client(config=KubeConfig.from_dict({
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x"}))


class Probe(Controller[ControllerMetrics]):
    """Counts what the base calls; ``fail`` makes :meth:`work` raise."""

    name = "probe"
    max_wait = 0.02

    def __init__(self, *, fail: bool = False, watch: bool = False) -> None:
        super().__init__(_client(), ControllerMetrics())
        self.fail = fail
        self.turns = 0
        self.synced_calls = 0
        self.closed = 0
        self.applied: list[tuple[str, str, Any]] = []
        if watch:
            self.watch("Node", Node)

    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        self.applied.append((kind, type_, data))

    def on_synced(self) -> None:
        self.synced_calls += 1

    def work(self) -> bool:
        self.turns += 1
        if self.fail:
            raise RuntimeError("policy bug")
        return False

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def running() -> Iterator[list[Probe]]:
    started: list[Probe] = []
    yield started
    for ctl in started:
        ctl.shutdown()


def test_ready_once_the_informers_synced_and_the_loop_applied_their_lists(
        running: list[Probe]) -> None:
    ctl = Probe(watch=True)
    running.append(ctl)
    ctl.start()
    wait_for(lambda: ctl.alive_at > 0 and ctl.healthy(), "the loop to turn")
    assert not ctl.ready() and ctl.turns == 0  # nothing synced: no work, but healthy
    ctl.enqueue("Node", "SYNC", {})
    ctl.informers[0].synced.set()
    wait_for(ctl.ready, "readiness")
    wait_for(lambda: ctl.turns > 0, "work")
    assert ctl.synced_calls == 1 and ctl.applied == [("Node", "SYNC", {})]
    ctl.shutdown()
    assert not ctl.healthy() and ctl.closed == 1 and ctl.error is None


def test_a_failing_loop_stops_tears_down_and_keeps_the_error() -> None:
    ctl = Probe(fail=True)
    with pytest.raises(RuntimeError, match="policy bug"):
        ctl.run()
    assert isinstance(ctl.error, RuntimeError)
    assert ctl.stop.is_set() and not ctl.healthy() and ctl.closed == 1
    # Started on a thread, the error is kept and the thread ends.
    again = Probe(fail=True)
    thread = again.start()
    thread.join(timeout=5)
    assert not thread.is_alive() and isinstance(again.error, RuntimeError)


def test_health_goes_stale_when_the_loop_stops_turning() -> None:
    now = [0.0]
    ctl = Probe()
    ctl.clock = lambda: now[0]
    ctl.alive_at = 0.0
    assert ctl.healthy()
    now[0] = 29.9
    assert ctl.healthy()
    now[0] = 30.0
    assert not ctl.healthy()


def test_sigterm_stops_a_controller_run_until_signalled() -> None:
    ctl = Probe()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        ctl.run_until_signalled()
        timer.join()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert ctl.stop.is_set() and ctl.turns > 0 and ctl.closed == 1 and ctl.error is None


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True, timeout=60)
    return cert, key


def test_health_and_metrics_over_https(certificate: tuple[Path, Path],
                                       running: list[Probe]) -> None:
    ctl = Probe()
    running.append(ctl)
    health = ctl.serve("127.0.0.1", 0, tls=server_tls(*certificate))
    ctl.start()
    assert health.url.startswith("https://127.0.0.1:")
    wait_for(ctl.ready, "readiness")
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    assert httpx.get(f"{health.url}/readyz", verify=trust).text == "ok"
    assert httpx.get(f"{health.url}/metrics", verify=trust).status_code == 200
