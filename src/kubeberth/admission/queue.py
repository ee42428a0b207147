"""Kueue's queue manager: one queue per ClusterQueue, StrictFIFO or BestEffortFIFO.

Each ClusterQueue keeps an active heap (higher priority first, then older queue timestamp) and,
for BestEffortFIFO, a set of inadmissible workloads that are parked until something in their
cohort changes (a workload finishes or is evicted), so one head that cannot fit does not block
the queue. StrictFIFO never parks: its head stays at the front. A scheduling cycle pops one head
per ClusterQueue. Workloads with a requeue time in the future (waitForPodsReady backoff) are not
heads until then. Workloads whose LocalQueue or ClusterQueue is missing are held aside with the
reason Kueue writes on their QuotaReserved condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeberth.admission.model import KueueObjects, Workload

# Requeue reasons that send a BestEffortFIFO workload straight back to the active heap.
IMMEDIATE_REQUEUE = frozenset({"FailedAfterNomination", "PendingPreemption"})


@dataclass(slots=True)
class Entry:
    """A pending workload in its ClusterQueue, with the flavor scan progress kept between
    attempts (FlavorFungibility) and the last reason it was not admitted."""

    wl: Workload
    cluster_queue: str
    last_tried: dict[tuple[str, str], int] = field(default_factory=dict)
    reason: str = ""
    message: str = ""

    @property
    def key(self) -> str:
        return self.wl.key

    def copy(self) -> Entry:
        return Entry(self.wl, self.cluster_queue, dict(self.last_tried), self.reason,
                     self.message)


def order_key(e: Entry) -> tuple[int, float, str]:
    return (-e.wl.priority, e.wl.queue_time, e.key)


@dataclass(slots=True)
class ClusterQueueQueue:
    name: str
    strategy: str
    active: list[Entry] = field(default_factory=list)
    inadmissible: dict[str, Entry] = field(default_factory=dict)


@dataclass(slots=True)
class QueueManager:
    queues: dict[str, ClusterQueueQueue] = field(default_factory=dict)
    # Workloads that cannot be queued: key -> (entry or workload, reason, message).
    unqueued: dict[str, tuple[Workload, str, str]] = field(default_factory=dict)

    @classmethod
    def build(cls, objs: KueueObjects) -> QueueManager:
        qm = cls()
        for name, cq in sorted(objs.cluster_queues.items()):
            qm.queues[name] = ClusterQueueQueue(name, cq.queueing_strategy)
        return qm

    def clone(self) -> QueueManager:
        """A copy whose entries can be changed without touching this one."""
        return QueueManager(
            {n: ClusterQueueQueue(q.name, q.strategy, [e.copy() for e in q.active],
                                  {k: e.copy() for k, e in q.inadmissible.items()})
             for n, q in self.queues.items()},
            dict(self.unqueued))

    def add(self, wl: Workload, objs: KueueObjects) -> None:
        """Queue a pending workload through its LocalQueue (as the workload controller does)."""
        lq = objs.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        if not wl.queue_name or lq is None:
            self.unqueued[wl.key] = (wl, "Inadmissible",
                                     f"LocalQueue {wl.queue_name} doesn't exist")
            return
        if lq.cluster_queue not in self.queues:
            self.unqueued[wl.key] = (wl, "Inadmissible",
                                     f"ClusterQueue {lq.cluster_queue} doesn't exist")
            return
        if not wl.active:
            self.unqueued[wl.key] = (wl, "Inadmissible", "The workload is deactivated")
            return
        self.push(Entry(wl, lq.cluster_queue))

    def push(self, e: Entry) -> None:
        q = self.queues[e.cluster_queue]
        q.inadmissible.pop(e.key, None)
        q.active = [x for x in q.active if x.key != e.key]
        q.active.append(e)
        q.active.sort(key=order_key)

    def heads(self, now: float, inactive: frozenset[str] = frozenset()) -> list[Entry]:
        """Pop the head of every active ClusterQueue whose head may be tried now."""
        out = []
        for name in sorted(self.queues):
            if name in inactive:
                continue
            q = self.queues[name]
            for i, e in enumerate(q.active):
                if e.wl.requeue_at is not None and e.wl.requeue_at > now:
                    continue
                out.append(q.active.pop(i))
                break
        return out

    def requeue(self, e: Entry, reason: str) -> None:
        """Return a head that was not admitted: StrictFIFO keeps it at the front, BestEffortFIFO
        parks it unless the reason calls for an immediate retry."""
        q = self.queues[e.cluster_queue]
        if q.strategy == "StrictFIFO" or reason in IMMEDIATE_REQUEUE:
            self.push(e)
        else:
            q.inadmissible[e.key] = e

    def requeue_inadmissible(self, cluster_queues: list[str]) -> bool:
        """Move parked workloads of these ClusterQueues back to their active heaps."""
        moved = False
        for name in cluster_queues:
            q = self.queues.get(name)
            if q is None or not q.inadmissible:
                continue
            for e in sorted(q.inadmissible.values(), key=order_key):
                q.active.append(e)
            q.inadmissible.clear()
            q.active.sort(key=order_key)
            moved = True
        return moved

    def remove(self, key: str) -> None:
        for q in self.queues.values():
            q.inadmissible.pop(key, None)
            q.active = [e for e in q.active if e.key != key]
        self.unqueued.pop(key, None)

    def pending(self) -> list[tuple[Entry, bool]]:
        """Every queued entry and whether it is active (True) or parked (False)."""
        out: list[tuple[Entry, bool]] = []
        for name in sorted(self.queues):
            q = self.queues[name]
            out.extend((e, True) for e in q.active)
            out.extend((e, False) for e in sorted(q.inadmissible.values(), key=order_key))
        return out
