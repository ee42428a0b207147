"""Leader election through a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection.

Candidates race to write their identity into one Lease with optimistic concurrency (a stale
``resourceVersion`` is a 409, so exactly one write wins). The holder renews ``renewTime`` every
``retry_period``; the others take over only once they have seen the same Lease record unchanged
for ``lease_duration`` on their own clock (client-go judges expiry by local observation, not by
comparing the holder's timestamps with its own clock). A leader that cannot renew within
``renew_deadline`` stops leading, and its controller stops, as kube-scheduler exits then.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx  # lightkube 1.x speaks through httpx2, the httpx fork
import msgspec
from lightkube import ApiError, Client
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger("kubeberth.leader")

# msgspec builds a type's decoding tables on first use; several electors doing that at the
# same moment (``kubeberth up`` runs four) crashed the process. Built here, at import, once.
msgspec.json.Decoder(Lease)


def _micro_time(now: float) -> dt.datetime:
    """metav1.MicroTime (lightkube sends it as RFC 3339 with microseconds)."""
    return dt.datetime.fromtimestamp(now, dt.UTC)


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """The election's durations in seconds (upstream's defaults: 15s, 10s, 2s)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    """Acquire and keep one Lease; :attr:`leading` is set while this candidate holds it."""

    def __init__(self, client: Client, name: str, namespace: str, identity: str, *,
                 timing: LeaseTiming = LeaseTiming(),
                 clock: Callable[[], float] = time.monotonic,
                 on_lost: Callable[[], None] | None = None) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.leading = threading.Event()
        self.stop = threading.Event()
        self.timing = timing
        self.clock = clock
        self.on_lost = on_lost
        # Told of an unexpected failure of the election thread (leadership is dropped first:
        # a dead elector must never leave a candidate believing it leads).
        self.on_fail: Callable[[BaseException], None] | None = None
        self.transitions = 0
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self.thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> LeaderElector:
        self.thread.start()
        return self

    def holder(self) -> str:
        """The identity holding the Lease now (empty if none or unreadable)."""
        try:
            lease = self.client.get(Lease, self.name, namespace=self.namespace)
        except (ApiError, httpx.HTTPError):
            return ""
        return (lease.spec.holderIdentity or "") if lease.spec else ""

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as err:
            self.leading.clear()
            log.exception("leader election failed")
            if self.on_fail is not None:
                self.on_fail(err)

    def _loop(self) -> None:
        while not self.stop.is_set():
            ok = self._try_acquire_or_renew()
            now = self.clock()
            if ok:
                self._renewed_at = now
                self.leading.set()
            elif self.leading.is_set() and now - self._renewed_at > self.timing.renew_deadline:
                self.leading.clear()
                if self.on_lost is not None:
                    self.on_lost()
                return
            self.stop.wait(self.timing.retry_period)
        if self.leading.is_set():
            self._release()

    def _try_acquire_or_renew(self) -> bool:
        now_wall = time.time()
        try:
            try:
                lease = self.client.get(Lease, self.name, namespace=self.namespace)
            except ApiError as err:
                if err.status.code != 404:
                    return False
                self.client.create(Lease(
                    metadata=ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=self._spec(now_wall, acquire=True, transitions=0)))
                self.transitions = 0
                return True
            spec = lease.spec or LeaseSpec()
            record = (spec.holderIdentity, spec.renewTime, spec.leaseTransitions)
            if record != self._observed:
                self._observed = record
                self._observed_at = self.clock()
            held_by_me = spec.holderIdentity == self.identity
            expired = self._observed_at + float(spec.leaseDurationSeconds or
                                                self.timing.lease_duration) <= self.clock()
            if spec.holderIdentity and not held_by_me and not expired:
                return False
            transitions = (spec.leaseTransitions or 0) + (0 if held_by_me else 1)
            lease.spec = self._spec(now_wall, acquire=not held_by_me, transitions=transitions,
                                    previous=spec)
            # Optimistic concurrency: the resourceVersion we read travels with the update.
            self.client.replace(lease)
            self.transitions = transitions
            return True
        except (ApiError, httpx.HTTPError):
            return False

    def _spec(self, now: float, *, acquire: bool, transitions: int,
              previous: LeaseSpec | None = None) -> LeaseSpec:
        stamp = _micro_time(now)
        return LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.timing.lease_duration),
            acquireTime=stamp if acquire or previous is None else previous.acquireTime,
            renewTime=stamp,
            leaseTransitions=transitions,
        )

    def _release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over at once."""
        try:
            lease = self.client.get(Lease, self.name, namespace=self.namespace)
            if lease.spec and lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = None
                lease.spec.leaseDurationSeconds = 1
                self.client.replace(lease)
        except (ApiError, httpx.HTTPError):
            pass
        self.leading.clear()
