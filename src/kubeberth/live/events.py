"""Kubernetes Events for a live controller's decisions, posted off the control loop.

kube-scheduler records ``Scheduled`` ("Successfully assigned ns/pod to node"), ``FailedScheduling``
(the FitError message) and ``Preempted`` events through an asynchronous broadcaster, so a slow
API never delays a scheduling cycle. This recorder does the same with one background thread and
a queue: events are best effort, and one the API refuses is dropped, never retried. A failure
that is not the API's answer is a bug: it is handed to ``on_fail`` (the controller stops).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
from lightkube import ApiError, Client
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

log = logging.getLogger("kubeberth.events")


class EventRecorder:
    """Queue core/v1 Events about pods and post them from a daemon thread."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.posted = 0
        self.on_fail: Callable[[BaseException], None] | None = None
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def pod_event(self, component: str, namespace: str, name: str, uid: str, kind: str,
                  reason: str, message: str) -> None:
        """Record ``reason`` (type ``kind``: Normal or Warning) about a pod, reported by
        ``component`` (the profile's schedulerName, as upstream)."""
        self.event(component, ObjectReference(kind="Pod", namespace=namespace, name=name,
                                              uid=uid or None, apiVersion="v1"),
                   kind, reason, message)

    def event(self, component: str, involved: ObjectReference, kind: str, reason: str,
              message: str) -> None:
        """Record ``reason`` about any object; one of a cluster-scoped object (a Node) goes in
        ``default``, as upstream's recorder puts it."""
        now = dt.datetime.now(dt.UTC)
        # Upstream names core events <object>.<unix nanoseconds in hex>.
        suffix = f"{time.time_ns():x}{next(self._ids):x}"
        self._queue.put(Event(
            metadata=ObjectMeta(name=f"{involved.name}.{suffix}",
                                namespace=involved.namespace or "default"),
            involvedObject=involved, reason=reason, message=message[:1024], type=kind,
            count=1, firstTimestamp=now, lastTimestamp=now,
            source=EventSource(component=component), reportingComponent=component))

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                self.client.create(event)
                self.posted += 1
            except (ApiError, httpx.HTTPError) as err:
                log.debug("event dropped: %s", err)
            except Exception as err:
                log.exception("posting events failed")
                if self.on_fail is not None:
                    self.on_fail(err)
                return

    def close(self, timeout: float = 5.0) -> None:
        """Post what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout=timeout)
