"""The scheduling queue: kube-scheduler's ``PriorityQueue`` on an injected clock.

Pods wait in one of three places, as upstream: ``activeQ`` (a heap in QueueSort order), the
backoff queue (heaps ordered by backoff expiry; pods that failed with an error wait in a separate
heap) and ``unschedulablePods`` (a map; pods gated by a PreEnqueue plugin live there too, marked
``gated``). Time is whatever the injected ``clock`` says, so a simulation drives the queue on its
virtual clock: nothing here sleeps, spawns threads or reads real time, and every tie is broken by
insertion order so the same calls give the same pops. The periodic flushes upstream runs in
goroutines are methods the host calls (:meth:`SchedulingQueue.next_backoff_expiry` says when).

Behaviour follows newest upstream with ``SchedulerPopFromBackoffQ`` on (its default): backoff
expiries are aligned to whole seconds, PreEnqueue runs when a pod enters the backoff queue, and
``pop`` takes the head of the backoff queue when ``activeQ`` is empty. Backoff counts a pod's
unschedulable attempts, or its consecutive errors while it keeps failing with errors.
Deliberately not done here: QueueingHint functions (a pod moves when an event that one of its
rejecting plugins registered arrives, as before hints existed), in-flight event replay (the older
``moveRequestCycle`` rule stands in for it), pod groups, and nominated pods (see
:class:`~kubeberth.scheduling.framework.handle.Nominator`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod, PodStatus
from kubeberth.scheduling.framework.interface import ClusterEvent, QueuedPodInfo
from kubeberth.scheduling.framework.status import Status
from kubeberth.state.cluster import PodInfo

# Upstream ``PriorityQueue.Run`` periods, for hosts that mimic the flush goroutines.
FLUSH_BACKOFF_PERIOD = 1.0
FLUSH_UNSCHEDULABLE_PERIOD = 30.0
# The event the leftover flush raises; any event on resource "*" is a wildcard.
WILDCARD_EVENT = ClusterEvent("*", "*")

# Where a queued pod is. Heaps: _ACTIVE, _BACKOFF, _ERROR; maps: _UNSCHED, _GATED.
_ACTIVE = "active"
_BACKOFF = "backoff"
_ERROR = "error"
_UNSCHED = "unschedulable"
_GATED = "gated"
_NOWHERE = ""

_Entry = tuple[Any, ...]  # heap entry; always ends with (entry id, pod key)


class _Strategy(IntEnum):
    """Upstream's queueingStrategy for a pod an event moves (pods it skips stay put)."""

    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


@dataclass(slots=True, eq=False)
class _Record:
    """Bookkeeping the queue keeps per pod that :class:`QueuedPodInfo` has no field for."""

    qpi: QueuedPodInfo
    where: str = _NOWHERE
    entry: int = 0  # id of the live heap entry; older entries of this pod are stale
    order: int = 0  # activeQ tie-break: when the pod last entered activeQ
    ready: float = -math.inf  # in a backoff heap: first clock time the flush moves it
    unschedulable_count: int = 0
    error_count: int = 0
    # While in flight: a newer version of the pod, whether it must be retried, deleted.
    latest: PodInfo | None = None
    requeue: bool = False
    deleted: bool = False


def _strip(pod: Pod) -> Pod:
    meta = msgspec.structs.replace(pod.metadata, resource_version="", generation=0,
                                   finalizers=[])
    return msgspec.structs.replace(pod, metadata=meta, status=PodStatus())


def backoff_duration(count: int, initial: float, maximum: float) -> float:
    """Upstream ``calculateBackoffDuration`` in seconds: ``initial × 2^(count-1)`` capped at
    ``maximum``, computed on integer nanoseconds as upstream does; 0 before the first failure."""
    if count <= 0:
        return 0.0
    initial_ns = round(initial * 1e9)
    max_ns = round(maximum * 1e9)
    shift = count - 1
    if initial_ns > max_ns >> shift:
        return max_ns / 1e9
    return (initial_ns << shift) / 1e9


def pod_updated(old: Pod, new: Pod) -> bool:
    """Upstream ``isPodUpdated``: anything but status, resourceVersion, generation and
    finalizers changed, so the update may have made the pod schedulable."""
    return _strip(old) != _strip(new)


class SchedulingQueue:
    """activeQ, backoff queue and unschedulable pods of one scheduler (all profiles share one
    QueueSort, as upstream requires)."""

    def __init__(
        self,
        sort_key: Callable[[QueuedPodInfo], tuple[Any, ...]],
        *,
        clock: Callable[[], float],
        pod_initial_backoff: float = 1.0,
        pod_max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        pre_enqueue: Callable[[PodInfo], Status] | None = None,
        events_by_plugin: Mapping[str, list[ClusterEvent]] | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        if not pod_initial_backoff >= 0 or math.isinf(pod_initial_backoff):
            raise InputError(f"pod initial backoff is {pod_initial_backoff}",
                             field="podInitialBackoffSeconds",
                             expected="a finite number of seconds, 0 or more")
        if not pod_max_backoff >= pod_initial_backoff or math.isinf(pod_max_backoff):
            raise InputError(f"pod max backoff is {pod_max_backoff}",
                             field="podMaxBackoffSeconds",
                             expected="a finite number of seconds, at least "
                             "podInitialBackoffSeconds")
        if not max_in_unschedulable > 0:
            raise InputError(f"max time in unschedulable pods is {max_in_unschedulable}",
                             field="podMaxInUnschedulablePodsDuration",
                             expected="a positive number of seconds")
        self._sort_key = sort_key
        self._clock = clock
        self._initial_backoff = pod_initial_backoff
        self._max_backoff = pod_max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._pre_enqueue = pre_enqueue
        self._events = events_by_plugin
        self._pop_from_backoff = pop_from_backoff
        self._queued: dict[str, _Record] = {}
        self._in_flight: dict[str, _Record] = {}
        self._active: list[_Entry] = []
        self._backoff: list[_Entry] = []
        self._errors: list[_Entry] = []
        # Insertion-ordered; non-gated pods enter _unsched with timestamp = now, so the map is
        # sorted by timestamp on a monotonic clock.
        self._unsched: dict[str, _Record] = {}
        self._gated: dict[str, _Record] = {}
        self._sizes = {_ACTIVE: 0, _BACKOFF: 0, _ERROR: 0, _UNSCHED: 0, _GATED: 0}
        self._seq = 0
        self._cycle = 0
        self._move_request_cycle = -1
        self._interest: dict[ClusterEvent, bool] = {}

    # ---- public API ------------------------------------------------------------------------
    @property
    def scheduling_cycle(self) -> int:
        """Pods popped so far; a failed pod passes the value read right after its pop to
        :meth:`add_unschedulable_if_not_present`."""
        return self._cycle

    def backoff_duration(self, count: int) -> float:
        """Backoff after ``count`` failures with this queue's initial and maximum backoff."""
        return backoff_duration(count, self._initial_backoff, self._max_backoff)

    def add(self, pi: PodInfo) -> None:
        """A new pending pod: PreEnqueue decides between activeQ and the gated pods. A pod
        already queued under the same key is replaced, as upstream's keyed heap would."""
        old = self._queued.pop(pi.key, None)
        if old is not None:
            self._leave(old)
        rec = _Record(QueuedPodInfo(pi, timestamp=self._clock()))
        self._queued[pi.key] = rec
        self._move_to_active(rec, from_backoff=False)

    def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ (or, when that is empty, of the backoff queue); None when there
        is nothing to schedule. The pod is in flight until ``done`` or a requeue."""
        # activeQ's head, inline: the common case of every cycle. Stale entries are dropped.
        heap = self._active
        queued = self._queued
        rec: _Record | None = None
        while heap:
            entry = heapq.heappop(heap)
            live = queued.get(entry[-1])
            if live is not None and live.where == _ACTIVE and live.entry == entry[-2]:
                rec = live
                break
        if rec is None and self._pop_from_backoff:
            rec = self._pop_heap(self._backoff, _BACKOFF)
        if rec is None:
            return None
        qpi = rec.qpi
        key = qpi.info.key
        del queued[key]
        if rec.where == _ACTIVE:
            self._sizes[_ACTIVE] -= 1
            rec.where = _NOWHERE
        else:
            self._leave(rec)
        self._in_flight[key] = rec
        qpi.attempts += 1
        qpi.unschedulable_plugins.clear()
        qpi.pending_plugins.clear()
        self._cycle += 1
        return qpi

    def take(self, key: str) -> QueuedPodInfo | None:
        """Pop a queued pod wherever it waits (activeQ, backoff, unschedulable or gated), as
        the pod-group cycle takes a popped pod's siblings with it: the group is one entry."""
        rec = self._queued.pop(key, None)
        if rec is None:
            return None
        self._leave(rec)
        self._in_flight[key] = rec
        qpi = rec.qpi
        qpi.attempts += 1
        qpi.unschedulable_plugins.clear()
        qpi.pending_plugins.clear()
        qpi.gated = False
        return qpi

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo,
                                         pod_scheduling_cycle: int) -> bool:
        """Requeue a pod whose attempt failed. It goes to the backoff queue (activeQ once its
        backoff is over) when it failed with an error (no rejecting plugin), when a move
        request came at or after its cycle, or when it was updated or activated in flight;
        otherwise to unschedulable pods. Returns False, changing nothing, when the pod is
        already queued (upstream returns an error) or was deleted while in flight."""
        key = qpi.info.key
        rec = self._in_flight.pop(key, None)
        if key in self._queued or (rec is not None and rec.deleted):
            return False
        requeue = False
        if rec is None:
            rec = _Record(qpi)
        else:
            rec.qpi = qpi
            if rec.latest is not None:
                qpi.info = rec.latest
            requeue = rec.requeue
            rec.latest = None
            rec.requeue = False
        self._queued[key] = rec
        rejected = bool(qpi.unschedulable_plugins or qpi.pending_plugins)
        if rejected:
            rec.unschedulable_count += 1
            rec.error_count = 0
        else:
            rec.error_count += 1
        qpi.timestamp = self._clock()
        if not rejected or requeue or self._move_request_cycle >= pod_scheduling_cycle:
            self._requeue(rec, _Strategy.AFTER_BACKOFF)
        else:
            self._place(rec, _GATED if qpi.gated else _UNSCHED)
        return True

    def move_all_to_active_or_backoff(self, event: ClusterEvent) -> int:
        """A cluster event: unschedulable pods that a rejecting plugin of theirs registered
        the event for move to activeQ (plugin in ``pending_plugins``) or the backoff queue.
        Returns how many left unschedulable pods."""
        if not self._of_interest(event):
            return 0
        return self._move([*self._unsched.values(), *self._gated.values()], event)

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff is over to activeQ; returns how many arrived there."""
        now = self._clock()
        moved = 0
        for heap, where in ((self._backoff, _BACKOFF), (self._errors, _ERROR)):
            while True:
                rec = self._head(heap, where)
                if rec is None or now < rec.ready:
                    break
                heapq.heappop(heap)
                moved += self._move_to_active(rec, from_backoff=True)
        return moved

    def flush_unschedulable_left_over(self) -> int:
        """Pods unschedulable for longer than ``max_in_unschedulable`` get a wildcard event
        (upstream runs this every 30 s). Returns how many left unschedulable pods."""
        now = self._clock()
        limit = self.max_in_unschedulable
        due: list[_Record] = []
        for rec in self._unsched.values():
            if now - rec.qpi.timestamp <= limit:
                break
            due.append(rec)
        due.extend(rec for rec in self._gated.values() if now - rec.qpi.timestamp > limit)
        if not due:
            return 0
        return self._move(due, WILDCARD_EVENT)

    def next_backoff_expiry(self) -> float | None:
        """The earliest clock time at which :meth:`flush_backoff_completed` moves a pod."""
        times = [rec.ready for rec in (self._head(self._backoff, _BACKOFF),
                                       self._head(self._errors, _ERROR)) if rec is not None]
        return min(times) if times else None

    def oldest_unschedulable_timestamp(self) -> float | None:
        """Timestamp of the longest-waiting non-gated unschedulable pod (gated pods are
        never attempted, so they say nothing about when a retry is due)."""
        rec = next(iter(self._unsched.values()), None)
        return None if rec is None else rec.qpi.timestamp

    def update(self, old: PodInfo, new: PodInfo) -> None:
        """A pending pod changed. Queued in activeQ or backoff: updated in place. Unschedulable
        or gated: retried (backoff permitting) if the change may matter. In flight: retried
        when it comes back. Unknown: added."""
        key = new.key
        rec = self._queued.get(key)
        if rec is None:
            flight = self._in_flight.get(key)
            if flight is None:
                self.add(new)
                return
            flight.latest = new
            flight.requeue = flight.requeue or pod_updated(old.pod, new.pod)
            return
        rec.qpi.info = new
        if rec.where in (_ACTIVE, _BACKOFF, _ERROR):
            self._place(rec, rec.where)
        elif pod_updated(old.pod, new.pod):
            self._requeue(rec, _Strategy.AFTER_BACKOFF)

    def delete(self, key: str) -> None:
        """The pod is gone: drop it; if it is in flight, it will not be requeued."""
        rec = self._queued.pop(key, None)
        if rec is not None:
            self._leave(rec)
        flight = self._in_flight.get(key)
        if flight is not None:
            flight.deleted = True

    def activate(self, keys: Iterable[str]) -> int:
        """Move unschedulable, gated (if PreEnqueue now passes) or backing-off pods straight
        to activeQ; an in-flight pod is retried when it comes back. Returns how many moved."""
        moved = 0
        for key in keys:
            rec = self._queued.get(key)
            if rec is None:
                flight = self._in_flight.get(key)
                if flight is not None:
                    flight.requeue = True
            elif rec.where in (_UNSCHED, _GATED):
                moved += self._move_to_active(rec, from_backoff=False)
            elif rec.where in (_BACKOFF, _ERROR):
                moved += self._move_to_active(rec, from_backoff=True)
        return moved

    def done(self, key: str) -> None:
        """The pod's attempt is over (bound, or given up on); stop tracking it."""
        self._in_flight.pop(key, None)

    def get(self, key: str) -> QueuedPodInfo | None:
        """The queued (not in-flight) pod with this key."""
        rec = self._queued.get(key)
        return None if rec is None else rec.qpi

    def gated_pods(self) -> list[QueuedPodInfo]:
        return [rec.qpi for rec in self._gated.values()]

    def pending_pods(self) -> dict[str, int]:
        """Counts per ``scheduler_pending_pods`` queue label."""
        s = self._sizes
        return {"active": s[_ACTIVE], "backoff": s[_BACKOFF] + s[_ERROR],
                "unschedulable": s[_UNSCHED], "gated": s[_GATED]}

    def pending_counts(self) -> tuple[int, int, int]:
        """(activeQ, backoff queue, unschedulable pods including gated ones)."""
        s = self._sizes
        return s[_ACTIVE], s[_BACKOFF] + s[_ERROR], s[_UNSCHED] + s[_GATED]

    def __len__(self) -> int:
        return sum(self._sizes.values())

    # ---- moves -----------------------------------------------------------------------------
    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        if self._pre_enqueue is None:
            return
        st = self._pre_enqueue(qpi.info)
        qpi.gated = not st.ok
        qpi.gating_plugin = "" if st.ok else st.plugin
        if qpi.gating_plugin:
            qpi.unschedulable_plugins.add(qpi.gating_plugin)

    def _move_to_active(self, rec: _Record, *, from_backoff: bool) -> bool:
        """Upstream moveToActiveQ; a pod leaving the backoff queue already passed PreEnqueue
        on its way in when pods may be popped from there."""
        qpi = rec.qpi
        if not (from_backoff and self._pop_from_backoff):
            self._run_pre_enqueue(qpi)
        if qpi.gated:
            self._place(rec, _GATED)
            return False
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock()
        self._place(rec, _ACTIVE)
        return True

    def _move_to_backoff(self, rec: _Record) -> None:
        qpi = rec.qpi
        if self._pop_from_backoff:
            self._run_pre_enqueue(qpi)
            if qpi.gated:
                self._place(rec, _GATED)
                return
        rejected = qpi.unschedulable_plugins or qpi.pending_plugins
        self._place(rec, _BACKOFF if rejected else _ERROR)

    def _requeue(self, rec: _Record, strategy: _Strategy) -> None:
        if strategy == _Strategy.AFTER_BACKOFF and self._clock() < self._ready_time(rec):
            self._move_to_backoff(rec)
        else:
            self._move_to_active(rec, from_backoff=False)

    def _move(self, recs: list[_Record], event: ClusterEvent) -> int:
        """Upstream movePodsToActiveOrBackoffQueue for the given unschedulable pods."""
        if not self._of_interest(event):
            return 0
        wildcard = event.resource == "*"
        hits: dict[str, bool] = {}

        def hit(plugin: str) -> bool:
            found = hits.get(plugin)
            if found is None:
                found = hits[plugin] = self._registered(plugin, event)
            return found

        moved = 0
        for rec in recs:
            qpi = rec.qpi
            if qpi.gated and not wildcard and not hit(qpi.gating_plugin):
                continue
            if wildcard or not (qpi.unschedulable_plugins or qpi.pending_plugins):
                strategy = _Strategy.AFTER_BACKOFF
            elif any(hit(p) for p in qpi.pending_plugins):
                strategy = _Strategy.IMMEDIATELY
            elif any(hit(p) for p in qpi.unschedulable_plugins):
                strategy = _Strategy.AFTER_BACKOFF
            else:
                continue
            self._requeue(rec, strategy)
            moved += rec.where not in (_UNSCHED, _GATED)
        self._move_request_cycle = self._cycle
        return moved

    def _registered(self, plugin: str, event: ClusterEvent) -> bool:
        """A plugin missing from ``events_by_plugin`` counts as registered for every event, as
        upstream registers plugins that do not implement EnqueueExtensions."""
        registered = None if self._events is None else self._events.get(plugin)
        return registered is None or any(ev.matches(event) for ev in registered)

    def _of_interest(self, event: ClusterEvent) -> bool:
        """Upstream isEventOfInterest: a wildcard, or an event some plugin registered."""
        found = self._interest.get(event)
        if found is None:
            found = (self._events is None or event.resource == "*"
                     or any(ev.matches(event) for evs in self._events.values() for ev in evs))
            self._interest[event] = found
        return found

    # ---- backoff ---------------------------------------------------------------------------
    def _ready_time(self, rec: _Record) -> float:
        """When the pod's backoff is over (-inf: no backoff). With pops from the backoff queue
        the expiry is truncated to a whole second and the pod stays backing off through that
        second, as upstream's ordering windows do."""
        count = rec.error_count or rec.unschedulable_count
        if self._max_backoff == 0 or count == 0:
            return -math.inf
        expiry = rec.qpi.timestamp + self.backoff_duration(count)
        if self._pop_from_backoff:
            return math.floor(expiry) + 1.0
        return expiry

    # ---- placement -------------------------------------------------------------------------
    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _leave(self, rec: _Record) -> None:
        """Take the pod out of where it is (heap entries go stale and are skipped later)."""
        where = rec.where
        if where == _NOWHERE:
            return
        self._sizes[where] -= 1
        key = rec.qpi.info.key
        if where == _UNSCHED:
            del self._unsched[key]
        elif where == _GATED:
            del self._gated[key]
        rec.where = _NOWHERE

    def _place(self, rec: _Record, where: str) -> None:
        """Put the pod in ``where``. Re-placing it in its own heap re-keys it (an update); a pod
        stays where it was in the insertion order of its own map."""
        old = rec.where
        if old == where and where in (_UNSCHED, _GATED):
            return
        self._leave(rec)
        rec.where = where
        self._sizes[where] += 1
        qpi = rec.qpi
        key = qpi.info.key
        if where == _UNSCHED:
            self._unsched[key] = rec
        elif where == _GATED:
            self._gated[key] = rec
        elif where == _ACTIVE:
            if old != _ACTIVE:
                rec.order = self._next()
            rec.entry = self._next()
            self._push(self._active, _ACTIVE,
                       (self._sort_key(qpi), rec.order, rec.entry, key))
        else:
            rec.ready = self._ready_time(rec)
            rec.entry = self._next()
            if where == _BACKOFF:
                self._push(self._backoff, _BACKOFF,
                           (rec.ready, self._sort_key(qpi), rec.entry, key))
            else:
                self._push(self._errors, _ERROR, (rec.ready, rec.entry, key))

    def _live(self, entry: _Entry, where: str) -> _Record | None:
        rec = self._queued.get(entry[-1])
        if rec is None or rec.where != where or rec.entry != entry[-2]:
            return None
        return rec

    def _push(self, heap: list[_Entry], where: str, entry: _Entry) -> None:
        heapq.heappush(heap, entry)
        if len(heap) > 64 and len(heap) > 2 * self._sizes[where]:
            heap[:] = [e for e in heap if self._live(e, where) is not None]
            heapq.heapify(heap)

    def _head(self, heap: list[_Entry], where: str) -> _Record | None:
        while heap:
            rec = self._live(heap[0], where)
            if rec is not None:
                return rec
            heapq.heappop(heap)
        return None

    def _pop_heap(self, heap: list[_Entry], where: str) -> _Record | None:
        rec = self._head(heap, where)
        if rec is not None:
            heapq.heappop(heap)
        return rec


__all__ = [
    "FLUSH_BACKOFF_PERIOD",
    "FLUSH_UNSCHEDULABLE_PERIOD",
    "WILDCARD_EVENT",
    "SchedulingQueue",
    "backoff_duration",
    "pod_updated",
]
