"""Invariants of the quota tree under random quotas, limits and usage (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.admission.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueObjects,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from kubeberth.admission.quota import (
    Snapshot,
    available,
    potential_available,
    quantities_fit_in_quota,
)

FR = ("f", "cpu")

limits = st.one_of(st.none(), st.integers(0, 20).map(lambda v: v * 1000))


@st.composite
def trees(draw: st.DrawFn) -> tuple[Snapshot, list[int]]:
    """Two cohorts (a child under a root) and up to four ClusterQueues under either."""
    n = draw(st.integers(1, 4))
    objs = KueueObjects(flavors={"f": ResourceFlavor("f")})
    objs.cohorts["root"] = Cohort("root", "", _groups(draw(st.integers(0, 10)) * 1000, None,
                                                       None))
    objs.cohorts["child"] = Cohort("child", "root", _groups(0, draw(limits), draw(limits)))
    usage = []
    for i in range(n):
        nominal = draw(st.integers(0, 10)) * 1000
        lend = draw(limits)
        if lend is not None:
            lend = min(lend, nominal)
        objs.cluster_queues[f"cq{i}"] = ClusterQueue(
            f"cq{i}", cohort=draw(st.sampled_from(["root", "child"])),
            resource_groups=_groups(nominal, draw(limits), lend).copy())
        usage.append(draw(st.integers(0, 12)) * 1000)
    return Snapshot(objs), usage


def _groups(nominal: int, borrow: int | None, lend: int | None) -> list[ResourceGroup]:
    return [ResourceGroup(["cpu"], [FlavorQuotas("f", {"cpu": ResourceQuota(nominal, borrow,
                                                                             lend)})])]


def _usages(snap: Snapshot) -> dict[str, int]:
    nodes = {**snap.cluster_queues, **snap.cohorts}
    return {name: node.usage.get(FR, 0) for name, node in nodes.items()}


@settings(max_examples=150, deadline=None)
@given(trees())
def test_add_then_remove_restores_every_node(tree: tuple[Snapshot, list[int]]) -> None:
    snap, usage = tree
    before = _usages(snap)
    for i, u in enumerate(usage):
        snap.cluster_queues[f"cq{i}"].add_usage({FR: u})
    for i, u in reversed(list(enumerate(usage))):
        snap.cluster_queues[f"cq{i}"].remove_usage({FR: u})
    assert _usages(snap) == before


@settings(max_examples=150, deadline=None)
@given(trees())
def test_cohort_usage_is_what_children_spill(tree: tuple[Snapshot, list[int]]) -> None:
    snap, usage = tree
    for i, u in enumerate(usage):
        snap.cluster_queues[f"cq{i}"].add_usage({FR: u})
    for co in snap.cohorts.values():
        children = [*co.children_cqs, *co.children_cohorts]
        spill = sum(max(0, c.usage.get(FR, 0) - c.local_quota(FR)) for c in children)
        assert co.usage.get(FR, 0) == spill


@settings(max_examples=150, deadline=None)
@given(trees())
def test_available_never_exceeds_potential(tree: tuple[Snapshot, list[int]]) -> None:
    snap, usage = tree
    empty = {name: cq.available(FR) for name, cq in snap.cluster_queues.items()}
    for name, cq in snap.cluster_queues.items():
        # With no usage anywhere, what is available is all that could ever be.
        assert empty[name] == potential_available(cq, FR)
    for i, u in enumerate(usage):
        snap.cluster_queues[f"cq{i}"].add_usage({FR: u})
    for cq in snap.cluster_queues.values():
        assert available(cq, FR) <= potential_available(cq, FR)
        assert 0 <= cq.available(FR) <= potential_available(cq, FR)


@settings(max_examples=150, deadline=None)
@given(trees(), st.integers(0, 30))
def test_fitting_request_leaves_non_negative_availability(tree: tuple[Snapshot, list[int]],
                                                         request: int) -> None:
    snap, _ = tree
    cq = snap.cluster_queues["cq0"]
    req = request * 1000
    fits = req <= cq.available(FR)
    cq.add_usage({FR: req})
    if fits:
        # Admitting what fits never overcommits the tree: intermediate cohorts may borrow from
        # their parent, the root has nobody to borrow from.
        assert available(cq, FR) >= 0
        root = cq.root()
        assert root.usage.get(FR, 0) <= root.subtree_quota.get(FR, 0)


@settings(max_examples=100, deadline=None)
@given(trees())
def test_fit_in_own_quota_needs_nothing_from_parent(tree: tuple[Snapshot, list[int]]) -> None:
    snap, _ = tree
    cq = snap.cluster_queues["cq0"]
    nominal = cq.quota_for(FR).nominal
    fits, remaining = quantities_fit_in_quota(cq, {FR: nominal})
    assert fits
    assert remaining[FR] == max(0, nominal - cq.local_quota(FR))
