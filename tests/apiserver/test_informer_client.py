"""A controller written the way the live controllers will be (lightkube list + watch, re-list
on 410, bind through the subresource) runs against the embedded server end to end."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod

from kubeberth.apiserver import EmbeddedServer

PodBody = Callable[..., dict[str, Any]]
GPU = "nvidia.com/gpu"


def _gpus(pod: Pod) -> int:
    return sum(int((c.resources.requests or {}).get(GPU, 0)) for c in pod.spec.containers
               if c.resources is not None)


class FirstFitBinder:
    """Binds pending pods to the first node with enough free GPUs; an informer in miniature."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.pods: dict[str, Pod] = {}
        self.relists = 0
        self.bound: list[tuple[str, str]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            listing = self.client.list(Pod, namespace="default")
            self.pods = {p.metadata.name: p for p in listing}
            self.relists += 1
            self._schedule()
            try:
                for kind, pod in self.client.watch(Pod, namespace="default",
                                                   resource_version=listing.resourceVersion,
                                                   server_timeout=2):
                    if self.stop.is_set():
                        return
                    if kind == "DELETED":
                        self.pods.pop(pod.metadata.name, None)
                    else:
                        self.pods[pod.metadata.name] = pod
                    self._schedule()
            except ApiError as err:
                if err.status.code != 410:
                    raise  # 410 Gone: list again

    def _schedule(self) -> None:
        nodes = {n.metadata.name: int(n.status.allocatable.get(GPU, 0))
                 for n in self.client.list(Node)}
        for pod in self.pods.values():
            if pod.spec.nodeName and pod.status.phase not in ("Succeeded", "Failed"):
                nodes[pod.spec.nodeName] -= _gpus(pod)
        for pod in sorted(self.pods.values(), key=lambda p: p.metadata.name):
            if pod.spec.nodeName or pod.status.phase != "Pending":
                continue
            need = _gpus(pod)
            node = next((n for n, free in nodes.items() if free >= need and need), None)
            if node is None:
                continue
            try:
                with contextlib.suppress(msgspec.ValidationError):  # Status reply, see docs
                    self.client.create(Pod.Binding(
                        metadata=ObjectMeta(name=pod.metadata.name, namespace="default"),
                        target=ObjectReference(kind="Node", name=node)),
                        name=pod.metadata.name, namespace="default")
            except ApiError as err:
                if err.status.code != 409:
                    raise
                continue  # already bound by an earlier pass; the watch will tell us
            nodes[node] -= need
            pod.spec.nodeName = node
            self.bound.append((pod.metadata.name, node))


@pytest.fixture
def binder(kubeconfig: Path) -> Iterator[FirstFitBinder]:
    client = Client(config=KubeConfig.from_file(str(kubeconfig)))
    controller = FirstFitBinder(client)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            controller.run()
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield controller
    controller.stop.set()
    thread.join(timeout=10)
    assert not errors, errors


def _wait(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_binder_fills_nodes_then_waits_for_completions(binder: FirstFitBinder,
                                                       server: EmbeddedServer,
                                                       make_pod: PodBody) -> None:
    api = server.api

    def phases() -> dict[str, str]:
        return server.call(lambda: {p["metadata"]["name"]: p["status"]["phase"]
                                    for p in api.store.items(api.pods)})

    for i in range(6):
        server.call(lambda i=i: api.create(api.pods, "default",
                                           make_pod(f"job-{i}", gpus=3, duration=60)))
    # 8 GPUs (4 + 4): one 3-GPU pod per node fits at a time.
    _wait(lambda: list(phases().values()).count("Running") == 2, "two running pods")
    server.settle()
    assert sorted(phases().values()) == ["Pending"] * 4 + ["Running"] * 2
    relists = binder.relists

    def drop_history_and_streams() -> None:
        api.store.compact()
        api.store.close_watches()

    # A dropped stream whose version is gone: the binder's next watch gets 410 and re-lists.
    server.call(drop_history_and_streams)
    for round_ in range(1, 3):
        server.advance(60)
        _wait(lambda r=round_: list(phases().values()).count("Succeeded") == 2 * r,
              "completions")
        _wait(lambda r=round_: list(phases().values()).count("Running") == 2,
              "the next two pods to run")
    server.advance(60)
    _wait(lambda: set(phases().values()) == {"Succeeded"}, "every pod to finish")
    assert binder.relists > relists
    assert sorted(name for name, _ in binder.bound) == [f"job-{i}" for i in range(6)]
    assert len(binder.bound) == 6  # no pod bound twice
