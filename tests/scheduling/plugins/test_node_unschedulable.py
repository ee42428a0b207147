"""NodeUnschedulable: cordoned nodes reject pods that do not tolerate the unschedulable taint."""

from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Toleration
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.status import Code
from kubeberth.scheduling.plugins import node_unschedulable
from kubeberth.scheduling.plugins.node_unschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
)

from .plugin_builders import cluster, handle, make_node, make_pod, run_filter

KEY = "node.kubernetes.io/unschedulable"


def plugin() -> NodeUnschedulable:
    return node_unschedulable.new(None, handle())


def test_cordoned_node_is_unresolvable() -> None:
    snap = cluster(make_node("open"), make_node("cordoned", unschedulable=True))
    verdicts = run_filter(plugin(), make_pod("p"), snap)
    assert verdicts["open"].ok
    assert verdicts["cordoned"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert verdicts["cordoned"].reasons == (ERR_REASON_UNSCHEDULABLE,)


@pytest.mark.parametrize(("toleration", "ok"), [
    (Toleration(key=KEY, operator="Exists", effect="NoSchedule"), True),
    (Toleration(key=KEY, operator="Exists"), True),
    (Toleration(operator="Exists"), True),
    (Toleration(key=KEY, operator="Exists", effect="NoExecute"), False),
    (Toleration(key=KEY, value="true"), False),
])
def test_tolerating_pods_pass(toleration: Toleration, ok: bool) -> None:
    snap = cluster(make_node("cordoned", unschedulable=True))
    pod = make_pod("p", tolerations=[toleration])
    assert run_filter(plugin(), pod, snap)["cordoned"].ok is ok


def test_uncordoning_lets_pods_in() -> None:
    snap = cluster(make_node("n", unschedulable=True))
    assert not run_filter(plugin(), make_pod("p"), snap)["n"].ok
    snap.update_node(make_node("n"))
    assert run_filter(plugin(), make_pod("p"), snap)["n"].ok


def test_no_cordoned_node_passes_all() -> None:
    snap = cluster(make_node("a"), make_node("b"))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids())
    assert res.codes.tolist() == [0, 0] and res.reasons == [()]


def test_cordoned_node_outside_the_candidates_does_not_matter() -> None:
    snap = cluster(make_node("cordoned", unschedulable=True), make_node("open"))
    res = plugin().filter(CycleState(), make_pod("p"), snap, snap.node_ids()[1:])
    assert res.codes.tolist() == [0]


def test_removed_cordoned_node_leaves_the_others_alone() -> None:
    snap = cluster(make_node("cordoned", unschedulable=True), make_node("open"))
    snap.remove_node("cordoned")
    verdicts = run_filter(plugin(), make_pod("p"), snap)
    assert list(verdicts) == ["open"] and verdicts["open"].ok


def test_no_args_and_events() -> None:
    with pytest.raises(InputError):
        node_unschedulable.new({"x": 1}, handle())
    events = {(e.resource, e.action) for e in plugin().events_to_register()}
    assert events == {("Node", "Add"), ("Node", "UpdateNodeTaint"),
                      ("Pod", "UpdatePodToleration")}
