"""Writes do their CPU-heavy work off the API server's event loop, and keep upstream's
concurrency semantics while they do.

Each test holds chosen writes inside admission validation (the costliest step of a big write)
with a gate, so what the server does meanwhile is shown by order of events, not by timing: a
write whose preparation ran on the event loop would hold the loop at the gate, and the
``/healthz`` probe or the concurrent write the test sends would then never be answered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from tests.apiserver.conftest import pod_body

from kubeberth.apiserver import EmbeddedServer, admission
from kubeberth.apiserver.limits import MAX_BODY_BYTES

PODS = "/api/v1/namespaces/default/pods"
Obj = dict[str, Any]
HOLD = "test.kubeberth.io/hold"  # writes whose object carries this annotation wait at the gate
MERGE = {"Content-Type": "application/merge-patch+json"}
GATE_SECONDS = 60.0  # only reached when the server is broken (the gate is never released)


@dataclass
class Gate:
    """Validation of held objects waits here until :meth:`open`; ``entered`` counts arrivals."""

    entered: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    opened: threading.Event = field(default_factory=threading.Event)

    def wait_for_arrivals(self, count: int) -> None:
        for _ in range(count):
            assert self.entered.acquire(timeout=GATE_SECONDS), \
                "a held write never reached validation"

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    validate = admission.validate

    def gated(rt: Any, obj: dict[str, Any]) -> None:
        if HOLD in (obj["metadata"].get("annotations") or {}):
            held.entered.release()
            held.opened.wait(GATE_SECONDS)
        validate(rt, obj)

    monkeypatch.setattr(admission, "validate", gated)
    yield held
    held.open()  # never leave a server thread waiting


def big_annotations(size: int) -> dict[str, str]:
    """Annotations of about ``size`` bytes of JSON, in many keys (as big real objects are)."""
    return {HOLD: "yes", **{f"note-{i}": "x" * 90 for i in range(size // 100)}}


def in_background(send: Callable[[], httpx.Response], results: list[httpx.Response]
                  ) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.append(send()))
    thread.start()
    return thread


def test_healthz_answers_while_big_creates_updates_and_patches_are_prepared(
        gate: Gate) -> None:
    """Multi-MB create, update and patch bodies sent at once: while they are inside
    validation, a /healthz probe completes; then every write completes as it would have."""
    size = 2_500_000
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        for name in ("updated", "patched"):
            assert http.post(PODS, json=pod_body(name)).status_code == 201
        created = pod_body("created")
        created["metadata"]["annotations"] = big_annotations(size)
        updated = http.get(f"{PODS}/updated").json()
        updated["metadata"]["annotations"] = big_annotations(size)
        patch = {"metadata": {"annotations": big_annotations(size)}}
        bodies = [created, updated, patch]
        assert all(size < len(httpx.Request("POST", "/", json=b).content) < MAX_BODY_BYTES
                   for b in bodies)
        results: list[httpx.Response] = []
        writers = [
            in_background(lambda: http.post(PODS, json=created), results),
            in_background(lambda: http.put(f"{PODS}/updated", json=updated), results),
            in_background(lambda: http.patch(f"{PODS}/patched", json=patch, headers=MERGE),
                          results),
        ]
        try:
            # Two writes are inside validation (the server has two worker threads) and the
            # third is queued behind them: all three are being processed.
            gate.wait_for_arrivals(2)
            with httpx.Client(base_url=srv.url, timeout=GATE_SECONDS) as probe:
                assert probe.get("/healthz").text == "ok"
            assert results == []  # the probe completed before any big write finished
        finally:
            gate.open()
            for writer in writers:
                writer.join()
        assert sorted(r.status_code for r in results) == [200, 200, 201], \
            [r.text[:300] for r in results]
        for name in ("created", "updated", "patched"):
            stored = http.get(f"{PODS}/{name}").json()
            assert stored["metadata"]["annotations"] == big_annotations(size)
            assert stored["status"]["phase"] == "Pending"


def held_while_labelled(gate: Gate, http: httpx.Client,
                        send: Callable[[], httpx.Response]) -> tuple[httpx.Response, Obj]:
    """Send a held write to pod ``p``; while it waits at the gate, label ``p`` (which the free
    loop serves); then let it go. Returns its response and the labelled object."""
    results: list[httpx.Response] = []
    writer = in_background(send, results)
    try:
        gate.wait_for_arrivals(1)
        label = http.patch(f"{PODS}/p", headers=MERGE,
                           json={"metadata": {"labels": {"meanwhile": "yes"}}})
        assert label.status_code == 200, label.text
    finally:
        gate.open()
        writer.join()
    (held,) = results
    labelled: Obj = label.json()
    return held, labelled


def test_a_patch_prepared_on_an_object_changed_meanwhile_is_applied_again(
        gate: Gate) -> None:
    """Upstream's GuaranteedUpdate: a patch whose object changed while it was being prepared
    is applied again to the newer object, so neither write is lost."""
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        assert http.post(PODS, json=pod_body("p")).status_code == 201
        patched, labelled = held_while_labelled(gate, http, lambda: http.patch(
            f"{PODS}/p", headers=MERGE, json={"metadata": {"annotations": {HOLD: "yes"}}}))
        assert patched.status_code == 200, patched.text
        meta = patched.json()["metadata"]
        assert meta["labels"] == {"meanwhile": "yes"}
        assert meta["annotations"] == {HOLD: "yes"}
        assert int(meta["resourceVersion"]) > int(labelled["metadata"]["resourceVersion"])


def test_an_update_with_a_resource_version_overtaken_meanwhile_is_a_conflict(
        gate: Gate) -> None:
    """The same retry checks the update's resourceVersion against the newer object: 409, as
    upstream answers a write based on a version that is no longer the latest."""
    with EmbeddedServer() as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        assert http.post(PODS, json=pod_body("p")).status_code == 201
        body = http.get(f"{PODS}/p").json()
        body["metadata"]["annotations"] = {HOLD: "yes"}
        updated, _ = held_while_labelled(gate, http, lambda: http.put(f"{PODS}/p", json=body))
        assert updated.status_code == 409, updated.text
        status = updated.json()
        assert (status["kind"], status["reason"]) == ("Status", "Conflict")
        assert status["message"] == (
            'Operation cannot be fulfilled on pods "p": the object has been modified; please '
            "apply your changes to the latest version and try again")
        stored = http.get(f"{PODS}/p").json()["metadata"]
        assert stored["labels"] == {"meanwhile": "yes"} and "annotations" not in stored
