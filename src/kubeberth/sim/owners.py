"""The workload controllers of a simulated cluster: ReplicaSets (and the Deployments above them),
StatefulSets, DaemonSets and Jobs keep their pods as upstream's controllers do.

An eviction deletes a pod; whether the work comes back depends on its owner. A ReplicaSet creates a
replacement at once under a new name (``<rs>-<5 chars>``, arriving at the eviction time) and, when
scaled down, deletes pods in upstream's order (unassigned before assigned, pending before running,
not ready before ready, the most recently ready first, the newest first). A StatefulSet keeps one
pod per ordinal and replaces a deleted pod under the same name; with the OrderedReady policy it
creates pod i+1 only once pods 0..i are Running and Ready (the host calls
:meth:`OwnerRuntime.pod_ready` when one becomes so) and scales down only then, highest ordinal
first; with Parallel it creates and deletes all at once. A DaemonSet keeps one pod on each node that
its controller finds eligible (``Owner.daemon_should_run``), created for that node and placed there
by the scheduler; the host calls :meth:`OwnerRuntime.nodes_changed` when a node joins or changes,
and a pod whose node no longer lets it continue is deleted. A Job keeps ``min(parallelism,
completions − succeeded)`` pods active, counts a deleted pod as failed and gives up after
``backoffLimit`` failures; a Job without ``completions`` stops creating pods after its first
success. A Job may be suspended (Kueue holds a queue-labelled Job suspended until its Workload is
admitted, and suspends it again when the Workload is evicted): a suspended Job has no active pods
(its running pods are deleted without counting as failures, as upstream's Job controller does) and
creates none; resuming it may set a pod template change (the admitted flavor's node labels and
tolerations) and a lower parallelism (partial admission). A bare pod has no owner: once evicted it
is gone. The host (the simulator) owns the pods; this module only asks it to create and delete them
through :class:`OwnerHost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kubeberth.api.objects import Node, Pod
from kubeberth.config.workloads import Owner


class OwnerHost(Protocol):
    """What a controller needs from the cluster it runs in."""

    def create_owned_pod(self, pod: Pod, duration: float | None) -> str:
        """Create ``pod`` now; returns its key."""
        ...

    def delete_owned_pod(self, key: str) -> bool:
        """Delete a pod now (no PDB check: a controller's own scale-down); False if it cannot
        be deleted at this instant (mid-binding)."""
        ...

    def daemon_nodes(self) -> list[Node]:
        """The nodes in the cluster now, in order: where DaemonSets keep their pods."""
        ...

    def pod_rank(self, key: str) -> tuple[int, int, int, float, float]:
        """Upstream scale-down rank inputs: (assigned, phase rank, ready, ready-since, created);
        lower tuples are deleted first once turned into the ranking key."""
        ...


@dataclass(slots=True)
class OwnerRun:
    """One owner's live state in a run."""

    spec: Owner
    desired: int
    live: dict[str, None] = field(default_factory=dict)  # pod keys, creation order
    succeeded: int = 0
    failed: int = 0
    deleted: bool = False
    finished: str = ""  # Job: "Complete" or "Failed"
    # Job only: spec.suspend, and what the one who resumed it changed in its pods.
    suspended: bool = False
    transform: Callable[[Pod], Pod] | None = None
    parallelism: int | None = None
    # DaemonSet only: the node each live pod is for.
    node_of: dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.spec.kind


class OwnerRuntime:
    """Every owner in the run, and which owner each pod belongs to."""

    def __init__(self, host: OwnerHost, owners: Iterable[Owner] = ()) -> None:
        self.host = host
        self.runs: dict[str, OwnerRun] = {}
        self.pod_owner: dict[str, OwnerRun] = {}
        self.replacements = 0
        for owner in owners:
            self.runs[f"{owner.kind}/{owner.key}"] = OwnerRun(owner, owner.replicas)

    def run_of(self, owner: Owner) -> OwnerRun:
        return self.runs[f"{owner.kind}/{owner.key}"]

    def owner_of(self, pod_key: str) -> OwnerRun | None:
        return self.pod_owner.get(pod_key)

    def scale_of(self, kind: str, namespace: str, name: str) -> int | None:
        """A controller's scale for PDB arithmetic (None: no such controller, or no scale)."""
        for run in self.runs.values():
            spec = run.spec
            if spec.namespace == namespace and spec.controller_kind == kind \
                    and spec.controller_name == name:
                # A DaemonSet has no scale subresource, as a Job has none.
                return None if kind in ("Job", "DaemonSet") else run.desired
        return None

    # ---- events ------------------------------------------------------------------------------
    def start(self, owner: Owner) -> None:
        self.reconcile(self.run_of(owner))

    def scale(self, owner: Owner, replicas: int) -> None:
        run = self.run_of(owner)
        if run.deleted:
            return
        run.desired = replicas
        self.reconcile(run)

    def delete(self, owner: Owner) -> None:
        """The owner is deleted; its pods go with it (garbage collection, not eviction)."""
        run = self.run_of(owner)
        run.deleted = True
        for key in list(run.live):
            if self.host.delete_owned_pod(key):
                self._forget(run, key)

    def suspend(self, run: OwnerRun) -> None:
        """Suspend a Job: its active pods are deleted (not failures) and no pod is created
        until it is resumed; the template and parallelism go back to the Job's own."""
        run.suspended = True
        run.transform = None
        run.parallelism = None
        self.reconcile(run)

    def resume(self, run: OwnerRun, transform: Callable[[Pod], Pod] | None = None,
               parallelism: int | None = None) -> None:
        """Resume a suspended Job; its new pods pass through ``transform`` and at most
        ``parallelism`` of them are active (None: the Job's own)."""
        run.suspended = False
        run.transform = transform
        run.parallelism = parallelism
        self.reconcile(run)

    def pod_gone(self, key: str, succeeded: bool) -> None:
        """A pod of some owner ended (completed, evicted, preempted); the owner reacts."""
        run = self.pod_owner.get(key)
        if run is None:
            return
        self._forget(run, key)
        if run.kind == "Job":
            if succeeded:
                run.succeeded += 1
            else:
                run.failed += 1
        if not succeeded:
            self.replacements += 1
        self.reconcile(run)

    # ---- reconciliation ----------------------------------------------------------------------
    def reconcile(self, run: OwnerRun) -> None:
        if run.deleted or run.finished:
            return
        if run.kind == "Job":
            self._reconcile_job(run)
            return
        if run.kind == "StatefulSet":
            self._reconcile_stateful_set(run)
            return
        if run.kind == "DaemonSet":
            self._reconcile_daemon_set(run)
            return
        diff = run.desired - len(run.live)
        if diff > 0:
            self._create(run, diff)
        elif diff < 0:
            ranked = sorted(run.live, key=self._deletion_key)
            for key in ranked[:-diff]:
                if self.host.delete_owned_pod(key):
                    self._forget(run, key)

    def _deletion_key(self, key: str) -> tuple[int, int, int, float, float, str]:
        assigned, phase, ready, ready_since, created = self.host.pod_rank(key)
        # Upstream ActivePods ordering, delete-first first: unassigned, pending, not ready,
        # ready for the shortest time (latest ready_since), newest (latest creation).
        return (assigned, phase, ready, -ready_since, -created, key)

    def _reconcile_job(self, run: OwnerRun) -> None:
        spec = run.spec
        if run.suspended:
            for key in list(run.live):
                if self.host.delete_owned_pod(key):
                    self._forget(run, key)
            return
        parallelism = spec.parallelism if run.parallelism is None else run.parallelism
        if run.failed > spec.backoff_limit:
            run.finished = "Failed"
            for key in list(run.live):
                if self.host.delete_owned_pod(key):
                    self._forget(run, key)
            return
        active = len(run.live)
        if spec.completions is None:
            if run.succeeded > 0:
                if active == 0:
                    run.finished = "Complete"
                return
            want = parallelism
        else:
            if run.succeeded >= spec.completions:
                run.finished = "Complete"
                return
            want = min(spec.completions - run.succeeded, parallelism)
        if want > active:
            self._create(run, want - active)

    def nodes_changed(self) -> None:
        """A node joined or changed: every DaemonSet looks at the nodes again."""
        for run in self.runs.values():
            if run.kind == "DaemonSet":
                self.reconcile(run)

    def adopt(self, run: OwnerRun, pod: Pod) -> None:
        """``pod``, already in the cluster, is one of ``run``'s."""
        run.live[pod.key] = None
        self.pod_owner[pod.key] = run
        if run.kind == "DaemonSet":
            run.node_of[pod.key] = run.spec.daemon_node_of(pod)

    def _reconcile_daemon_set(self, run: OwnerRun) -> None:
        """Upstream's podsShouldBeOnNode for every node: create the missing pod where the
        DaemonSet should run, keep only the oldest where it may continue, delete the pods
        where it may not."""
        spec = run.spec
        on: dict[str, list[str]] = {}
        for key in run.live:
            on.setdefault(run.node_of[key], []).append(key)
        for node in self.host.daemon_nodes():
            should_run, may_continue = spec.daemon_should_run(node)
            name = node.metadata.name
            pods = on.get(name, [])
            if should_run and not pods:
                run.node_of[self._add(run, spec.daemon_pod(name), None)] = name
            doomed = pods[1:] if may_continue else pods
            for key in doomed:
                if self.host.delete_owned_pod(key):
                    self._forget(run, key)

    def pod_ready(self, key: str) -> None:
        """A pod became Running and Ready: an OrderedReady StatefulSet may go on."""
        run = self.pod_owner.get(key)
        if run is not None and run.kind == "StatefulSet" and run.spec.ordered:
            self.reconcile(run)

    def _reconcile_stateful_set(self, run: OwnerRun) -> None:
        """Upstream's StatefulSet sync: each ordinal in range, lowest first, is created if
        missing; OrderedReady stops at the first pod it created or that is not Running and
        Ready. Then the condemned pods (ordinals out of range) go, highest first."""
        spec = run.spec
        by_ordinal: dict[int, str] = {}
        for key in run.live:
            ordinal = spec.ordinal_of(key.rpartition("/")[2])
            if ordinal is not None:
                by_ordinal[ordinal] = key
        ready = {o: self._running_and_ready(key) for o, key in by_ordinal.items()}
        create, settled = spec.stateful_sync(run.desired, ready)
        for ordinal in create:
            self._add(run, spec.new_pod(ordinal), None)
        if not settled:
            return
        end = spec.start_ordinal + run.desired
        for ordinal in sorted((o for o in by_ordinal if not spec.start_ordinal <= o < end),
                              reverse=True):
            key = by_ordinal[ordinal]
            if self.host.delete_owned_pod(key):
                self._forget(run, key)

    def _running_and_ready(self, key: str) -> bool:
        _, phase, ready, _, _ = self.host.pod_rank(key)
        return phase == 2 and ready == 1

    def _create(self, run: OwnerRun, count: int) -> None:
        duration = run.spec.pod_duration if run.kind == "Job" else None
        for _ in range(count):
            self._add(run, run.spec.new_pod(), duration)

    def _add(self, run: OwnerRun, pod: Pod, duration: float | None) -> str:
        if run.transform is not None:
            pod = run.transform(pod)
        key = self.host.create_owned_pod(pod, duration)
        run.live[key] = None
        self.pod_owner[key] = run
        return key

    def _forget(self, run: OwnerRun, key: str) -> None:
        run.live.pop(key, None)
        run.node_of.pop(key, None)
        self.pod_owner.pop(key, None)


__all__ = ["OwnerHost", "OwnerRun", "OwnerRuntime"]
