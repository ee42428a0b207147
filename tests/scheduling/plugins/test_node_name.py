"""NodeName: PreFilter narrowing to ``spec.nodeName`` and the filter on every other node."""

from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import node_name
from kubeberth.scheduling.plugins.node_name import ERR_REASON, NodeName

from .plugin_builders import cluster, handle, make_node, make_pod, run_filter


def plugin() -> NodeName:
    return node_name.new(None, handle())


def test_pod_without_node_name_does_not_narrow_and_passes_every_node() -> None:
    """Upstream v1.37's PreFilter succeeds (no Skip), so Filter runs and passes every node."""
    snap = cluster(make_node("a"), make_node("b"))
    result, st_ = plugin().pre_filter(CycleState(), make_pod("p"), snap)
    assert result is None and st_.code == Code.SUCCESS
    assert all(v.ok for v in run_filter(plugin(), make_pod("p"), snap).values())


def test_filter_alone_passes_a_pod_without_node_name() -> None:
    # A profile may enable NodeName at filter only; then Filter runs without PreFilter.
    snap = cluster(make_node("a"), make_node("b"))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids())
    assert res.codes.tolist() == [0, 0]


def test_pre_filter_narrows_to_the_named_node() -> None:
    snap = cluster(make_node("a"), make_node("b"))
    result, st_ = plugin().pre_filter(CycleState(), make_pod("p", node_name="b"), snap)
    assert st_.ok and result is not None and result.node_names == {"b"}


def test_other_nodes_are_unresolvable() -> None:
    snap = cluster(make_node("a"), make_node("b"), make_node("c"))
    pod = make_pod("p", node_name="b")
    res = plugin().filter(CycleState(), pod, snap, snap.node_ids())
    assert res.codes.tolist() == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 0,
                                  Code.UNSCHEDULABLE_AND_UNRESOLVABLE]
    assert res.status(0, "NodeName").reasons == (ERR_REASON,)


def test_unknown_node_name_matches_nothing() -> None:
    snap = cluster(make_node("a"))
    pod = make_pod("p", node_name="gone")
    res = plugin().filter(CycleState(), pod, snap, snap.node_ids())
    assert res.codes.tolist() == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE]


def test_no_args_and_events() -> None:
    with pytest.raises(InputError):
        node_name.new({"nodeName": "a"}, handle())
    assert [(e.resource, e.action) for e in plugin().events_to_register()] == [("Node", "Add")]
