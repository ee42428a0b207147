"""A real ``kubeberth serve`` process for hostile-request tests: its URL, a client with its
token (from the generated kubeconfig), and its resident memory read from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml


class Served:
    """One ``kubeberth serve`` subprocess, secure by default as a user starts it."""

    def __init__(self, proc: subprocess.Popen[str], kubeconfig: Path) -> None:
        self.proc = proc
        config = yaml.safe_load(kubeconfig.read_text())
        self.url: str = config["clusters"][0]["cluster"]["server"]
        self.token: str = config["users"][0]["user"]["token"]

    def client(self, timeout: float = 30) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=False, timeout=timeout,
                            headers={"Authorization": f"Bearer {self.token}"})

    def rss_bytes(self) -> int:
        """Resident set size of the server process (VmRSS in /proc/<pid>/status)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")

    def alive(self) -> bool:
        return self.proc.poll() is None


@contextmanager
def serve(cluster_file: Path, tmp: Path) -> Iterator[Served]:
    """Start ``kubeberth serve`` (output to files, so a full pipe never blocks it)."""
    kubeconfig, log = tmp / "kubeconfig", tmp / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubeberth", "serve", "-f",
                                 str(cluster_file), "--port", "0", "--kubeconfig-out",
                                 str(kubeconfig)], stdout=out, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, "HOME": str(tmp)})
    try:
        wait_for(lambda: "kubectl " in log.read_text() or proc.poll() is not None,
                 "kubeberth serve to start", timeout=60)
        assert proc.poll() is None, log.read_text()
        yield Served(proc, kubeconfig)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
