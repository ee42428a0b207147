"""Test harness for the live controllers: an embedded API server per test, controllers on
threads talking to it over HTTP through lightkube, and kubectl."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, KubeConfig

from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.apiserver.resources import runtime_config as runtime_config_apis
from kubeberth.config.manifests import load_manifests
from kubeberth.live.scheduler import LiveScheduler
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
GPU = "nvidia.com/gpu"


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Live:
    """One embedded server and the controllers started against it in a test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.server: EmbeddedServer | None = None
        self.kubeconfig = tmp_path / "kubeconfig"
        self.controllers: list[tuple[LiveScheduler, threading.Thread, list[BaseException]]] = []

    def serve(self, *paths: Path | str, history: int = 2000, audit: bool = False,
              runtime_config: str = "") -> EmbeddedServer:
        manifests = load_manifests([str(p) for p in paths]) if paths else None
        self.server = EmbeddedServer(manifests=manifests, clock=ManualClock(),
                                     bookmark_interval=0.2, history=history, audit=audit,
                                     apis=runtime_config_apis(runtime_config))
        self.server.start()
        self.server.write_kubeconfig(self.kubeconfig)
        return self.server

    def client(self, token: str | None = None) -> Client:
        """A client of the server; with ``token``, one that presents it as its bearer token
        (the server accepts any token unless started with one), so the request audit can
        tell it apart."""
        if token is None:
            return Client(config=KubeConfig.from_file(str(self.kubeconfig)))
        assert self.server is not None
        config = self.server.kubeconfig()
        config["users"][0]["user"] = {"token": token}
        return Client(config=KubeConfig.from_dict(config))

    def scheduler(self, config: Path | str | None = None, *, seed: int = 0,
                  dry_run: bool = False, wait_ready: bool = True,
                  watch_timeout: int = 300) -> LiveScheduler:
        cfg = load_scheduler_config(config)
        ctl = LiveScheduler(cfg, in_tree_registry(), self.client(), seed=seed,
                            dry_run=dry_run, watch_timeout=watch_timeout)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ctl.run()
            except BaseException as err:  # surfaced at teardown
                errors.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.controllers.append((ctl, thread, errors))
        if wait_ready:
            wait_for(ctl.ready, "the scheduler's caches to sync")
        return ctl

    def stop_controller(self, ctl: LiveScheduler) -> None:
        for c, thread, errors in self.controllers:
            if c is ctl:
                c.stop.set()
                thread.join(timeout=10)
                assert not thread.is_alive()
                assert not errors, errors

    def kubectl(self, *args: str, input: str | None = None) -> str:
        if not Path(KUBECTL).exists():
            pytest.skip("kubectl is not installed (expected at /usr/bin/kubectl)")
        env = {"HOME": str(self.tmp_path), "PATH": "/usr/bin:/bin",
               "KUBECACHEDIR": str(self.tmp_path / "cache")}
        proc = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
                              input=input, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def pods(self) -> dict[str, dict[str, Any]]:
        """Every pod in the server, ``namespace/name`` -> object."""
        srv = self.server
        assert srv is not None
        api = srv.api
        return srv.call(lambda: {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
                                 for p in api.store.items(api.pods)})

    def plant(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` in the server in-process, behind its validation: the way to give a
        controller an object no API would accept (the HTTP API refuses what it cannot read)."""
        srv = self.server
        assert srv is not None
        api = srv.api
        rt = next(r for r in api.registry.resources if r.plural == plural)
        return srv.call(lambda: api.store.insert(rt, obj))

    def events(self, reason: str = "") -> list[dict[str, Any]]:
        """Every core Event in the server (with ``reason``, those only)."""
        srv = self.server
        assert srv is not None
        api = srv.api
        rt = next(r for r in api.registry.resources if r.plural == "events" and r.group == "")
        return [e for e in srv.call(lambda: list(api.store.items(rt)))
                if not reason or e.get("reason") == reason]

    def placement(self) -> dict[str, str]:
        return {k: p["spec"].get("nodeName", "") for k, p in self.pods().items()}

    def close(self) -> None:
        for ctl, thread, _ in self.controllers:
            ctl.stop.set()
            thread.join(timeout=10)
        if self.server is not None:
            self.server.stop()
        for _, _, errors in self.controllers:
            assert not errors, errors


def node(name: str, gpus: int, cpu: int = 32, labels: str = "{}") -> str:
    return f"""apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
status:
  allocatable: {{cpu: "{cpu}", memory: 256Gi, nvidia.com/gpu: "{gpus}", pods: "110"}}
---
"""


def pod(name: str, gpus: int, cpu: str = "2", priority_class: str = "",
        labels: str = "{}") -> str:
    pc = f"\n  priorityClassName: {priority_class}" if priority_class else ""
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {labels}}}
spec:{pc}
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: "{cpu}", memory: 4Gi, nvidia.com/gpu: "{gpus}"}}
      limits: {{nvidia.com/gpu: "{gpus}"}}
---
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def bound(live: Live) -> dict[str, str]:
    return {k: n for k, n in live.placement().items() if n}


def gpus_by_node(live: Live) -> dict[str, int]:
    used: dict[str, int] = {}
    for p in live.pods().values():
        node_name = p["spec"].get("nodeName")
        if node_name and p["status"].get("phase") not in ("Succeeded", "Failed"):
            for c in p["spec"]["containers"]:
                used[node_name] = used.get(node_name, 0) + int(
                    c.get("resources", {}).get("requests", {}).get(GPU, 0))
    return used
