"""OwnerRuntime against a fake host: ReplicaSet and Job reconciliation, scale-down order."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeberth.api.objects import ObjectMeta, Pod, PodSpec
from kubeberth.api.workloads import PodTemplateSpec
from kubeberth.config.workloads import Owner
from kubeberth.sim.owners import OwnerRuntime


@dataclass
class FakeHost:
    """Records creations and deletions; ranks come from a table set by the test."""

    created: list[tuple[str, float | None]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    ranks: dict[str, tuple[int, int, int, float, float]] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)

    def create_owned_pod(self, pod: Pod, duration: float | None) -> str:
        self.created.append((pod.key, duration))
        return pod.key

    def delete_owned_pod(self, key: str) -> bool:
        if key in self.refuse:
            return False
        self.deleted.append(key)
        return True

    def pod_rank(self, key: str) -> tuple[int, int, int, float, float]:
        return self.ranks.get(key, (1, 2, 1, 0.0, 0.0))


def owner(kind: str = "ReplicaSet", replicas: int = 2, **kw: object) -> Owner:
    template = PodTemplateSpec(metadata=ObjectMeta(labels={"app": "x"}),
                               spec=PodSpec(restart_policy="Never" if kind == "Job"
                                            else "Always"))
    o = Owner(kind=kind, name="x", namespace="default", uid=f"uid-{kind}", template=template,
              replicas=replicas, arrival=0.0)
    for k, v in kw.items():
        setattr(o, k, v)
    if kind == "Deployment":
        o.replica_set = "x-abcdefghij"
    return o


def runtime(o: Owner) -> tuple[OwnerRuntime, FakeHost]:
    host = FakeHost()
    return OwnerRuntime(host, [o]), host


def test_replicaset_creates_to_desired_and_replaces_failures() -> None:
    o = owner(replicas=3)
    rt, host = runtime(o)
    rt.start(o)
    keys = [k for k, _ in host.created]
    assert len(keys) == 3 and len(set(keys)) == 3 and all(d is None for _, d in host.created)
    rt.pod_gone(keys[0], succeeded=False)
    assert len(host.created) == 4 and rt.replacements == 1
    assert rt.owner_of(keys[0]) is None and rt.owner_of(host.created[-1][0]) is not None


def test_scale_down_follows_the_ranking() -> None:
    o = owner(replicas=4)
    rt, host = runtime(o)
    rt.start(o)
    a, b, c, d = (k for k, _ in host.created)
    host.ranks = {
        a: (1, 2, 1, 10.0, 0.0),   # ready since 10
        b: (1, 2, 1, 50.0, 0.0),   # ready since 50: more recently ready, goes first
        c: (0, 0, 0, 0.0, 5.0),    # unassigned: goes before any assigned pod
        d: (1, 0, 0, 0.0, 9.0),    # assigned but pending
    }
    rt.scale(o, 1)
    assert host.deleted == [c, d, b]
    assert list(rt.run_of(o).live) == [a]


def test_ties_delete_the_newest_first() -> None:
    o = owner(replicas=3)
    rt, host = runtime(o)
    rt.start(o)
    keys = [k for k, _ in host.created]
    host.ranks = {k: (1, 2, 1, 5.0, float(i)) for i, k in enumerate(keys)}
    rt.scale(o, 1)
    assert host.deleted == [keys[2], keys[1]]


def test_a_pod_that_cannot_be_deleted_now_stays_counted() -> None:
    o = owner(replicas=2)
    rt, host = runtime(o)
    rt.start(o)
    first = host.created[0][0]
    host.ranks = {first: (0, 0, 0, 0.0, 0.0)}
    host.refuse = {first}
    rt.scale(o, 1)
    assert host.deleted == [] and len(rt.run_of(o).live) == 2
    rt.scale(o, 1)  # a later reconcile retries
    host.refuse.clear()
    rt.reconcile(rt.run_of(o))
    assert host.deleted == [first]


def test_deleted_owner_stops_replacing() -> None:
    o = owner(replicas=2)
    rt, host = runtime(o)
    rt.start(o)
    rt.delete(o)
    assert len(host.deleted) == 2 and not rt.run_of(o).live
    rt.scale(o, 5)
    assert len(host.created) == 2


def test_job_without_completions_stops_after_first_success() -> None:
    o = owner("Job", replicas=0, completions=None, parallelism=3, pod_duration=10.0)
    rt, host = runtime(o)
    rt.start(o)
    keys = [k for k, _ in host.created]
    assert len(keys) == 3 and all(d == 10.0 for _, d in host.created)
    rt.pod_gone(keys[0], succeeded=True)
    assert len(host.created) == 3 and rt.run_of(o).finished == ""
    rt.pod_gone(keys[1], succeeded=True)
    rt.pod_gone(keys[2], succeeded=True)
    assert rt.run_of(o).finished == "Complete"


def test_job_never_exceeds_remaining_completions() -> None:
    o = owner("Job", replicas=0, completions=3, parallelism=2)
    rt, host = runtime(o)
    rt.start(o)
    first, second = (k for k, _ in host.created)
    rt.pod_gone(first, succeeded=True)   # 1 done, 1 active: want min(2, 2) = 2 -> create one
    assert len(host.created) == 3
    rt.pod_gone(second, succeeded=True)  # 2 done, 1 active: want 1 -> nothing new
    assert len(host.created) == 3
    rt.pod_gone(host.created[2][0], succeeded=True)
    assert rt.run_of(o).finished == "Complete" and rt.run_of(o).succeeded == 3


def test_job_with_parallelism_zero_creates_nothing() -> None:
    o = owner("Job", replicas=0, completions=2, parallelism=0)
    rt, host = runtime(o)
    rt.start(o)
    assert host.created == []


def test_job_fails_after_backoff_limit_and_deletes_active_pods() -> None:
    o = owner("Job", replicas=0, completions=5, parallelism=2, backoff_limit=1)
    rt, host = runtime(o)
    rt.start(o)
    a, b = (k for k, _ in host.created)
    rt.pod_gone(a, succeeded=False)      # 1 failure: within the limit, replaced
    assert len(host.created) == 3
    rt.pod_gone(b, succeeded=False)      # 2 failures > 1: the Job fails
    run = rt.run_of(o)
    assert run.finished == "Failed" and host.deleted == [host.created[2][0]]
    assert not run.live


def test_scale_lookup_for_pdbs() -> None:
    d = owner("Deployment", replicas=4)
    rt, _ = runtime(d)
    assert rt.scale_of("ReplicaSet", "default", "x-abcdefghij") == 4
    assert rt.scale_of("Deployment", "default", "x") is None  # pods name their ReplicaSet
    assert rt.scale_of("ReplicaSet", "other", "x-abcdefghij") is None
    j = owner("Job", replicas=0)
    rt2, _ = runtime(j)
    assert rt2.scale_of("Job", "default", "x") is None


def test_unknown_pod_gone_is_ignored() -> None:
    o = owner(replicas=1)
    rt, host = runtime(o)
    rt.pod_gone("default/stranger", succeeded=False)
    assert host.created == [] and rt.replacements == 0


def test_suspended_job_creates_nothing_until_resumed() -> None:
    o = owner("Job", completions=4, parallelism=2, pod_duration=10.0)
    rt, host = runtime(o)
    run = rt.run_of(o)
    run.suspended = True
    rt.start(o)
    assert host.created == []
    rt.resume(run)
    assert len(host.created) == 2 and not run.suspended


def test_suspension_deletes_active_pods_without_counting_failures() -> None:
    o = owner("Job", completions=4, parallelism=2, pod_duration=10.0, backoff_limit=0)
    rt, host = runtime(o)
    rt.start(o)
    run = rt.run_of(o)
    first = [k for k, _ in host.created]
    rt.pod_gone(first[0], succeeded=True)  # one completion, one replacement created
    active = list(run.live)
    rt.suspend(run)
    assert host.deleted == active and not run.live
    assert run.failed == 0 and run.succeeded == 1 and not run.finished
    rt.resume(run)
    # Three completions remain, two at a time.
    assert len(run.live) == 2 and run.failed == 0


def test_suspended_job_deletes_a_pod_it_could_not_delete_before() -> None:
    o = owner("Job", completions=2, parallelism=2, pod_duration=10.0)
    rt, host = runtime(o)
    rt.start(o)
    run = rt.run_of(o)
    stuck = next(iter(run.live))
    host.refuse.add(stuck)  # mid-binding at the moment of the suspension
    rt.suspend(run)
    assert list(run.live) == [stuck]
    host.refuse.clear()
    rt.reconcile(run)  # what the admission driver does once the pod is bound
    assert not run.live and stuck in host.deleted
    assert len(host.created) == 2  # nothing was created while suspended


def test_resume_transforms_new_pods_and_caps_parallelism() -> None:
    o = owner("Job", completions=6, parallelism=4, pod_duration=10.0)
    rt, host = runtime(o)
    run = rt.run_of(o)
    run.suspended = True

    def pin(pod: Pod) -> Pod:
        pod.spec.node_selector = {"pool": "a"}
        return pod

    seen: list[Pod] = []
    original = host.create_owned_pod

    def record(pod: Pod, duration: float | None) -> str:
        seen.append(pod)
        return original(pod, duration)

    host.create_owned_pod = record  # type: ignore[method-assign]
    rt.resume(run, pin, parallelism=2)
    assert len(seen) == 2 and all(p.spec.node_selector == {"pool": "a"} for p in seen)
    rt.suspend(run)
    assert run.transform is None and run.parallelism is None
    rt.resume(run)
    assert len(seen) == 6 and all(p.spec.node_selector == {} for p in seen[2:])
