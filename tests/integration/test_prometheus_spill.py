"""Prometheus for real (issue #6, item 6): Debian's ``prometheus`` binary scrapes the embedded
API server's kube-state-metrics endpoint every second, and the spill controller runs the
production PromQL query against it over HTTP. The taint flips only after the stabilization
duration, and is held when Prometheus goes away.

CI installs the binary (``.ci/run``); with ``CI=1`` a missing binary fails this test, elsewhere
it is skipped with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lightkube import Client, KubeConfig
from tests.live.harness import wait_for, write
from tests.live.spillenv import LOW, VK, bound_pod, gpu_node, spill_config, vk_node

from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.config.manifests import load_manifests
from kubeberth.live.spill import LiveSpillController
from kubeberth.spill.promql import free_gpu_query

STABILIZATION = 4.0
LISTENING = re.compile(r'msg="Listening on" address=\S*:(\d+)')


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus"
                                           if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        reason = "the prometheus binary is not installed (apt-get install -y prometheus)"
        if os.environ.get("CI") in ("1", "true"):
            pytest.fail(f"CI=1: {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    cluster = write(tmp_path / "cluster.yaml", gpu_node("gpu-1", 4) + vk_node() + "".join(
        bound_pod(f"busy-{i}", "gpu-1") for i in range(4)))
    srv = EmbeddedServer(manifests=load_manifests([cluster]), clock=ManualClock())
    srv.start()
    srv.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def prometheus(tmp_path: Path, server: EmbeddedServer) -> Iterator[tuple[subprocess.Popen[str],
                                                                          str]]:
    binary = prometheus_binary()
    target = server.url.removeprefix("http://").rstrip("/")
    config = write(tmp_path / "prometheus.yml", f"""\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
- job_name: kube-state-metrics
  metrics_path: /metrics
  static_configs: [{{targets: ["{target}"]}}]
""")
    log_file = tmp_path / "prometheus.log"
    log = log_file.open("w")
    # Port 0: Prometheus binds a free port itself and logs it (no check-then-use race).
    proc = subprocess.Popen([binary, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             "--web.listen-address=127.0.0.1:0"],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        def listening() -> bool:
            assert proc.poll() is None, log_file.read_text()
            return LISTENING.search(log_file.read_text()) is not None

        wait_for(listening, "prometheus to bind its port", timeout=60)
        found = LISTENING.search(log_file.read_text())
        assert found is not None
        url = f"http://127.0.0.1:{found[1]}"

        def ready() -> bool:
            assert proc.poll() is None, log_file.read_text()
            try:
                return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, "prometheus to be ready", timeout=60)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


def _query(url: str, query: str) -> list[object]:
    answer = httpx.post(f"{url}/api/v1/query", data={"query": query}, timeout=5).json()
    assert answer["status"] == "success", answer
    result: list[object] = answer["data"]["result"]
    return result


def test_taint_flips_after_stabilization_on_real_prometheus(
        tmp_path: Path, server: EmbeddedServer,
        prometheus: tuple[subprocess.Popen[str], str]) -> None:
    proc, url = prometheus
    cfg = spill_config(tmp_path, threshold=2, window=1.0, stabilization=STABILIZATION,
                       interval=0.5)
    query = free_gpu_query([VK], cfg.controller.exclude_pods)
    # Prometheus has scraped the kube-state-metrics series: the production query answers 0.
    wait_for(lambda: _query(url, query) != [], "the first scrape", timeout=30)
    assert float(_query(url, query)[0]["value"][1]) == 0.0  # type: ignore[index]
    client = Client(config=KubeConfig.from_file(str(tmp_path / "kubeconfig")))
    ctl = LiveSpillController(cfg, client, prometheus=url)
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(ctl.ticks) >= 4, "four ticks")
        assert all(t.value == 0.0 and not t.fault for t in ctl.ticks)
        # Three GPUs free up; Prometheus sees it at its next scrape.
        for i in range(3):
            server.call(lambda i=i: server.api.delete(server.api.pods, "default", f"busy-{i}",
                                                      {"gracePeriodSeconds": 0}))
        freed = time.time()

        def tainted() -> bool:
            node = server.call(lambda: server.api.store.must_get(server.api.nodes, "", VK))
            return any(t["key"] == LOW for t in node["spec"].get("taints") or [])

        wait_for(tainted, "the taint", timeout=60)
        flip = next(t for t in ctl.ticks if t.flip == "add")
        assert flip.value == 3.0
        above = [t for t in ctl.ticks if t.at <= flip.at and t.average is not None
                 and t.average > 2]
        assert flip.at - above[0].at >= STABILIZATION
        assert flip.at - freed >= STABILIZATION
        assert all(t.average is None or t.average <= 2 or t.at >= above[0].at
                   for t in ctl.ticks if t.at <= flip.at)
        # Prometheus goes away: faults, the taint is held.
        proc.terminate()
        proc.wait(timeout=20)
        n = len(ctl.ticks)
        wait_for(lambda: len(ctl.ticks) >= n + 4, "ticks without Prometheus")
        assert all(t.fault and t.tainted for t in ctl.ticks[n + 1:])
        assert tainted()
        assert [d for _, d in ctl.flips] == ["add"]
    finally:
        ctl.stop.set()
        thread.join(timeout=10)
