"""What every live controller is, whatever its policy: :class:`Controller`.

The four controllers (scheduler, admission, descheduler, spill) differ only in what they do
with the cluster; how they watch it, elect a leader, report health and metrics, turn their
loop and stop must be one thing, so that one Deployment template and one runbook fit all.

The loop: informers decode the API's objects on their threads and only queue events; the
control loop applies them (:meth:`Controller.apply_event`), so the policy always reads a view no
other thread changes. Until every informer has delivered its first list the loop only applies
events; then, while this candidate leads (or without an election), it calls
:meth:`Controller.work` after waiting at most :meth:`Controller.wait_time` for events; standing
by, it keeps its caches warm and calls :meth:`Controller.standby`. ``/healthz`` says the loop
turns (it answers 503 once the loop has not turned for :data:`STALE_AFTER` seconds, or has
stopped); ``/readyz`` says the caches are synced and nothing has failed. A lost Lease stops the
controller.

Poison objects are skipped, never fatal: one the informer cannot decode into the typed model
(reason ``FailedToDecode``), or whose event makes the controller raise an ``InputError``
(reason ``InvalidObject``: a policy cannot judge it), is left out with one log line, a
Warning Event on the object and a count in ``kubeberth_objects_refused_total``; the loop goes
on. Any other exception on any of the controller's threads (the loop, an informer, a
binding worker, the election, the event recorder) is a bug: it is kept in
:attr:`Controller.error`, ``/readyz`` fails, and the controller stops after the same teardown
(the Lease is released, so a standby takes over at once); the command exits 1. A restarted
controller lists everything afresh.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from lightkube.models.core_v1 import ObjectReference

from kubeberth.api.errors import InputError
from kubeberth.live.informer import SYNC, Decode, Events, Informer, describe, drain
from kubeberth.live.metrics import ControllerMetrics, HealthServer

if TYPE_CHECKING:
    import ssl

    from lightkube import Client
    from lightkube.core.resource import Resource

    from kubeberth.live.events import EventRecorder
    from kubeberth.live.leader import LeaderElector

log = logging.getLogger("kubeberth.controller")

STALE_AFTER = 30.0  # seconds without a turn of the loop before /healthz fails
SYNC_POLL = 0.05  # how often the loop looks at the informers before they have synced
FAILED_TO_DECODE = "FailedToDecode"  # the informer could not read the object
INVALID_OBJECT = "InvalidObject"  # read, but the controller's policy cannot judge it


M = TypeVar("M", bound=ControllerMetrics)


def stop_on_signals(stop: threading.Event | None = None) -> threading.Event:
    """``stop`` (a new event by default), set by SIGINT or SIGTERM; call from the main
    thread."""
    event = threading.Event() if stop is None else stop

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        event.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return event


class Controller(Generic[M]):
    """Informers, leader election, health, metrics and the control loop of one controller.

    Subclasses create their informers with :meth:`watch` and implement :meth:`apply_event` and
    :meth:`work`; :meth:`wait_time`, :meth:`on_synced`, :meth:`standby` and :meth:`close`
    have defaults."""

    name = "controller"
    component = "kubeberth"  # the reporting component of the Warning Events on poison objects
    max_wait = 1.0  # the loop wakes at least this often to check deadlines and stop

    def __init__(self, client: Client, metrics: M, *, clock: Callable[[], float] = time.monotonic,
                 elector: LeaderElector | None = None, recorder: EventRecorder | None = None,
                 watch_timeout: int = 300) -> None:
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.stop = threading.Event()
        self.elector = elector
        self.recorder = recorder
        self.watch_timeout = watch_timeout
        self.events: Events = queue.Queue()
        self.informers: list[Informer] = []
        self.started = False  # the first lists are applied
        self.lost_leadership = False
        self.error: BaseException | None = None
        self.alive_at = clock()
        self.health: HealthServer | None = None
        self.thread: threading.Thread | None = None
        # (kind, key) -> (uid, reason, message) of the last refusal told.
        self._refused: dict[tuple[str, str], tuple[str | None, str, str]] = {}

    def watch(self, kind: str, resource: type[Resource], *, decode: Decode | None = None,
              labels: dict[str, Any] | None = None) -> Informer:
        """A new informer of ``resource`` whose events reach :meth:`apply_event` as ``kind``."""
        inf = Informer(self.client, kind, resource, self.enqueue, stop=self.stop,
                       decode=decode, labels=labels, watch_timeout=self.watch_timeout,
                       refuse=self.refuse, on_fail=self.abort)
        self.informers.append(inf)
        return inf

    def enqueue(self, kind: str, type_: str, data: Any) -> None:
        """Hand an event to the control loop (informer and worker threads call this)."""
        self.events.put((kind, type_, data))

    # ---- what a controller implements ------------------------------------------------------
    def apply_event(self, kind: str, type_: str, data: Any) -> None:
        """Apply one queued event, on the control loop. An ``InputError`` raised for a watch
        event refuses that object (raise it before changing anything); one from a ``SYNC``
        list is only logged, so a subclass refuses a list's objects one by one itself."""
        raise NotImplementedError

    def work(self) -> bool:
        """One turn while leading; True when the controller is done (a single pass)."""
        raise NotImplementedError

    def wait_time(self) -> float:
        """How long the loop may wait for events before the next :meth:`work`."""
        return self.max_wait

    def on_synced(self) -> None:
        """Called once, when every first list has been applied."""
        log.info("%s: caches synced", self.name)

    def standby(self) -> None:
        """Called every turn while another candidate leads."""

    def close(self) -> None:
        """Release what the controller holds besides informers, election and recorder."""

    # ---- state -----------------------------------------------------------------------------
    def synced(self) -> bool:
        """Every informer has delivered its first list."""
        return all(inf.synced.is_set() for inf in self.informers)

    def ready(self) -> bool:
        """Every informer has delivered its first list, the loop has applied them, and
        nothing has failed."""
        return self.started and self.synced() and self.error is None

    def healthy(self) -> bool:
        return not self.stop.is_set() and self.clock() - self.alive_at < STALE_AFTER

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    def broken(self) -> list[str]:
        """Kinds whose stream is down now (last list or watch failed, not yet re-listed)."""
        return [inf.kind for inf in self.informers if inf.error is not None]

    def drain(self, timeout: float) -> None:
        drain(self.events, timeout, self._apply_event)

    def _apply_event(self, kind: str, type_: str, data: Any) -> None:
        try:
            self.apply_event(kind, type_, data)
        except InputError as err:
            if type_ == SYNC or not isinstance(data, tuple) or data[1] is None:
                log.warning("%s: ignoring part of the %s list: %s", self.name, kind, err)
                return
            self.refuse(kind, data[0], data[1], err, INVALID_OBJECT)

    # ---- poison and failures ---------------------------------------------------------------
    def refuse(self, kind: str, key: str, obj: Any, err: Exception | str,
               reason: str = FAILED_TO_DECODE) -> None:
        """Skip a poison object: one log line, a Warning Event on it (unless a dry run, which
        writes nothing), a count; once per object and fault (a re-list or an update that
        leaves it as bad says nothing new). ``obj`` is the API's dict or a typed object."""
        message = (err if isinstance(err, str) else describe(err))[:1000]
        ref = reference(kind, key, obj)
        told = (ref.uid, reason, message)
        if self._refused.get((kind, key)) == told:
            return
        self._refused[(kind, key)] = told
        log.warning("%s: ignoring %s %s (%s): %s", self.name, kind, key, reason, message)
        self.metrics.refused.labels(kind=kind, reason=reason).inc()
        if self.recorder is not None:
            self.recorder.event(self.component, ref, "Warning", reason,
                                f"{self.name} ignores this {kind}: {message}")

    def abort(self, err: BaseException) -> None:
        """A thread of this controller failed unexpectedly: keep the first error and stop
        (``/readyz`` fails, the command exits 1). Any thread may call it."""
        if self.error is None:
            self.error = err
        log.error("%s: stopping after an unexpected failure: %r", self.name, err)
        self.stop.set()

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Start the informers (and the election) and turn the loop until :attr:`stop` is set
        or :meth:`work` says it is done; always tear down. An exception stops the controller
        and is kept in :attr:`error`, then raised."""
        for inf in self.informers:
            inf.start()
        if self.recorder is not None:
            self.recorder.on_fail = self.abort
        if self.elector is not None:
            self.elector.on_lost = self._leadership_lost
            self.elector.on_fail = self.abort
            self.elector.start()
        try:
            while not self.stop.is_set():
                synced = self.synced()
                self.drain(self._timeout())
                self.alive_at = self.clock()
                if not synced:
                    continue
                if not self.started:
                    self.drain(0.0)
                    self.started = True
                    self.on_synced()
                if not self.leading():
                    self.standby()
                elif self.work():
                    return
        except Exception as err:
            if self.error is None:
                self.error = err
            log.exception("%s: the control loop failed; stopping", self.name)
            raise
        finally:
            self.stop.set()
            self._teardown()

    def _timeout(self) -> float:
        if not self.started:
            return SYNC_POLL
        return self.wait_time() if self.leading() else self.max_wait

    def _leadership_lost(self) -> None:
        log.error("%s: leader election lost: stopping", self.name)
        self.lost_leadership = True
        self.stop.set()

    def _teardown(self) -> None:
        self.close()
        if self.recorder is not None:
            self.recorder.close()
        if self.elector is not None:
            self.elector.stop.set()
            self.elector.thread.join(timeout=5)
        for inf in self.informers:
            inf.thread.join(timeout=0.1)

    # ---- running it in a process -----------------------------------------------------------
    def serve(self, address: str, port: int, *, tls: ssl.SSLContext | None = None
              ) -> HealthServer:
        """Serve ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` (OSError if the
        address cannot be bound)."""
        self.health = HealthServer(address, port, healthy=self.healthy, ready=self.ready,
                                   metrics=self.metrics.exposition, tls=tls).start()
        return self.health

    def start(self) -> threading.Thread:
        """:meth:`run` on a daemon thread (its exception is in :attr:`error`)."""
        def run() -> None:
            try:
                self.run()
            except Exception:  # kept in self.error and logged by run
                return

        self.thread = threading.Thread(target=run, name=self.name, daemon=True)
        self.thread.start()
        return self.thread

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the loop, wait for its teardown, stop serving health and metrics."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=timeout)
        if self.health is not None:
            self.health.stop()

    def run_until_signalled(self) -> None:
        """Run until SIGINT or SIGTERM (or the loop ends), then shut down; call it from the
        main thread."""
        stop_on_signals(self.stop)
        worker = self.start()
        try:
            while worker.is_alive():
                worker.join(timeout=0.5)
        finally:
            self.shutdown()


def reference(kind: str, key: str, obj: Any) -> ObjectReference:
    """The involvedObject of an Event about ``obj`` (the API's dict or a typed object)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), meta.get("namespace")
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        api_version = obj.get("apiVersion")
    else:
        meta = getattr(obj, "metadata", None)
        name = getattr(meta, "name", "") or ""
        namespace = getattr(meta, "namespace", None)
        uid = getattr(meta, "uid", None)
        version = getattr(meta, "resource_version", None)
        api_version = getattr(obj, "api_version", None)
    if not name:
        namespace, _, name = key.rpartition("/")
    return ObjectReference(kind=kind, name=name, namespace=namespace or None, uid=uid or None,
                           apiVersion=api_version or None, resourceVersion=version or None)
