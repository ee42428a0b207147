"""The Volcano scheduler against Volcano's documented behaviour: DRF's job order re-read after
every placement, gang all-or-nothing, proportion's deserved shares and capability, enqueue,
priority, binpack and backfill."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduling.volcano.helpers import group, node, placed, queue, run, vcjob

from kubeberth.api.errors import InputError
from kubeberth.scheduling.plugins.volcano_proportion import QueueAttr, water_fill
from kubeberth.scheduling.volcano.conf import PluginOption
from kubeberth.scheduling.volcano.plugins import PLUGINS, Binpack

A = {"cpu": "2", "nvidia.com/gpu": "1"}
B = {"cpu": "1", "nvidia.com/gpu": "2"}


def two_tenants(tmp_path: Path, n: int) -> dict[str, object]:
    return run(tmp_path, [node("n1", "100", "100"), vcjob("tenant-a", n, A),
                          vcjob("tenant-b", n, B)])


def test_drf_alternates_and_both_tenants_end_at_33(tmp_path: Path) -> None:
    data = two_tenants(tmp_path, 50)
    assert placed(data, "default/tenant-a-") == 33
    assert placed(data, "default/tenant-b-") == 33
    assert group(data, "tenant-a")["dominantShare"] == 0.66
    assert group(data, "tenant-b")["dominantShare"] == 0.66
    util = data["volcano"]["cluster"]["utilisation"]  # type: ignore[index]
    assert util["cpu"] == 0.99 and util["nvidia.com/gpu"] == 0.99
    # Placement order alternates A, B, A, B, ... because the job order is asked again after
    # every placement.
    order = sorted((p["volcano"]["order"], p["pod"]) for p in data["pods"]  # type: ignore[attr-defined]
                   if p["result"] == "Scheduled")
    tenants = [pod.split("/")[1][:8] for _, pod in order]
    assert tenants[:6] == ["tenant-a", "tenant-b"] * 3


def test_without_drf_the_first_job_takes_what_it_can(tmp_path: Path) -> None:
    """No drf: jobs go by creation order, except that gang puts a job that is not ready yet
    first, so tenant B gets one task once A is ready; A then takes 48 more (98 CPUs), and B
    the last CPU."""
    data = run(tmp_path, [node("n1", "100", "100"), vcjob("tenant-a", 50, A),
                          vcjob("tenant-b", 50, B)],
               'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
               "  - name: predicates\n  - name: proportion\n")
    assert placed(data, "default/tenant-a-") == 49
    assert placed(data, "default/tenant-b-") == 2


@settings(derandomize=True, deadline=None, max_examples=8)
@given(st.integers(min_value=1, max_value=70))
def test_drf_shares_converge_for_any_task_count(tmp_path_factory: pytest.TempPathFactory,
                                                n: int) -> None:
    data = two_tenants(tmp_path_factory.mktemp("drf"), n)
    a, b = placed(data, "default/tenant-a-"), placed(data, "default/tenant-b-")
    assert a == b == min(n, 33)
    assert group(data, "tenant-a")["dominantShare"] == group(data, "tenant-b")["dominantShare"]


def test_gang_is_all_or_nothing(tmp_path: Path) -> None:
    """12 CPUs let the 3 × 4-CPU gang in, but each 6-CPU node holds one of its tasks: the two
    it placed are discarded, leaving the cluster empty."""
    data = run(tmp_path, [node("n1", "6"), node("n2", "6"),
                          vcjob("big", 3, {"cpu": "4"}, min_available=3)])
    assert placed(data, "default/big-") == 0
    assert group(data, "big")["phase"] == "Inqueue"
    assert data["volcano"]["cluster"]["utilisation"]["cpu"] == 0
    big = [p for p in data["pods"] if p["pod"].startswith("default/big-")]
    assert all("gang" in p["message"] for p in big)


@settings(derandomize=True, deadline=None, max_examples=10)
@given(st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=6),
       st.integers(min_value=1, max_value=12))
def test_gang_min_member_all_or_nothing_property(
        tmp_path_factory: pytest.TempPathFactory, replicas: int, min_available: int,
        cpus: int) -> None:
    min_available = min(min_available, replicas)
    data = run(tmp_path_factory.mktemp("gang"),
               [node("n1", str(cpus)), vcjob("g", replicas, {"cpu": "2"},
                                               min_available=min_available)])
    n = placed(data, "default/g-")
    assert n == 0 or n >= min_available
    assert n == (min(replicas, cpus // 2) if cpus // 2 >= min_available else 0)


@settings(derandomize=True, deadline=None, max_examples=10)
@given(st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=20))
def test_a_queue_never_gets_more_than_its_capability(
        tmp_path_factory: pytest.TempPathFactory, cap: int, tasks: int) -> None:
    data = run(tmp_path_factory.mktemp("cap"),
               [node("n1", "16"), queue("capped", capability={"cpu": str(cap)}),
                vcjob("j", tasks, {"cpu": "1"}, queue_name="capped")])
    assert placed(data, "default/j-") == min(cap, tasks)


def test_proportion_divides_by_weight(tmp_path: Path) -> None:
    data = run(tmp_path, [node("n1", "12"), queue("q1", 1), queue("q2", 2),
                          vcjob("j1", 12, {"cpu": "1"}, queue_name="q1"),
                          vcjob("j2", 12, {"cpu": "1"}, queue_name="q2")])
    queues = data["volcano"]["queues"]
    assert queues["q1"]["deserved"]["cpu"] == 4
    assert queues["q2"]["deserved"]["cpu"] == 8
    assert placed(data, "default/j1-") == 4
    assert placed(data, "default/j2-") == 8


def test_water_filling_hands_what_a_satisfied_queue_leaves_to_the_others() -> None:
    """Volcano's proportion example: total 12 CPUs, weights 1:1:1; q1 asks 2, q2 asks 6,
    q3 asks 10. Round one offers 4 each: q1 is met at 2, q2 and q3 hold 4; round two splits
    the 2 left: q2 and q3 end at 5 each."""
    queues = [QueueAttr("q1", 1, request={"cpu": 2000.0}),
              QueueAttr("q2", 1, request={"cpu": 6000.0}),
              QueueAttr("q3", 1, request={"cpu": 10000.0})]
    water_fill({"cpu": 12000.0}, queues)
    assert [round(q.deserved["cpu"]) for q in queues] == [2000, 5000, 5000]


def test_guarantee_is_reserved_from_other_queues_capability() -> None:
    queues = [QueueAttr("q1", 1, guarantee={"cpu": 4000.0}, request={"cpu": 4000.0}),
              QueueAttr("q2", 10, request={"cpu": 20000.0})]
    water_fill({"cpu": 10000.0}, queues)
    assert round(queues[0].deserved["cpu"]) == 4000
    assert round(queues[1].deserved["cpu"]) == 6000


def test_enqueue_holds_a_job_whose_min_resources_exceed_the_queue(tmp_path: Path) -> None:
    data = run(tmp_path, [node("n1", "16"), queue("small", capability={"cpu": "2"}),
                          vcjob("wide", 4, {"cpu": "1"}, min_available=4, queue_name="small")])
    assert placed(data, "default/wide-") == 0
    assert group(data, "wide")["phase"] == "Pending"
    assert "not enqueueable" in next(p for p in data["pods"]
                                     if p["pod"].startswith("default/wide-"))["message"]


def test_priority_orders_jobs_before_drf(tmp_path: Path) -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": "high"}, "value": 1000}
    data = run(tmp_path, [pc, node("n1", "4"), vcjob("low", 4, {"cpu": "1"}),
                          vcjob("high", 4, {"cpu": "1"}, priority_class="high")])
    assert placed(data, "default/high-") == 4
    assert placed(data, "default/low-") == 0


def test_backfill_places_best_effort_pods(tmp_path: Path) -> None:
    data = run(tmp_path, [node("n1", "1"), vcjob("fill", 1, {"cpu": "1"}),
                          vcjob("be", 3, {})])
    assert placed(data, "default/be-") == 3


def test_binpack_score_is_volcanos_formula() -> None:
    bp = Binpack(PluginOption("binpack", arguments={"binpack.weight": 10,
                                                     "binpack.resources": "nvidia.com/gpu",
                                                     "binpack.resources.nvidia.com/gpu": 2}))
    # cpu (2+6)/10 × 1, gpu (1+1)/4 × 2: (0.8 + 1.0) / 3 × 100 × 10
    score = bp.score({"cpu": 2000.0, "nvidia.com/gpu": 1000.0},
                     {"cpu": 6000.0, "nvidia.com/gpu": 1000.0},
                     {"cpu": 10000.0, "nvidia.com/gpu": 4000.0})
    assert score == pytest.approx((0.8 + 1.0) / 3 * 100 * 10)
    assert bp.score({"cpu": 5000.0}, {"cpu": 6000.0}, {"cpu": 10000.0}) == 0.0


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_every_plugin_refuses_an_argument_it_does_not_model(name: str) -> None:
    with pytest.raises(InputError, match="argument 'weight' of plugin") as err:
        PLUGINS[name](PluginOption(name, arguments={"weight": 2}))
    assert err.value.field == f"{name}.arguments.weight"


def test_a_resources_argument_covers_its_per_resource_keys() -> None:
    bp = Binpack(PluginOption("binpack", arguments={"binpack.resources": "example.com/fpga",
                                                     "binpack.resources.example.com/fpga": 3}))
    assert bp.resources["example.com/fpga"] == 3


def test_pods_without_a_pod_group_get_their_own(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo"},
           "spec": {"schedulerName": "volcano", "containers": [
               {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    data = run(tmp_path, [node("n1", "2"), pod])
    assert placed(data, "default/solo") == 1
    assert "default/podgroup-solo" in data["volcano"]["podGroups"]


def test_nodes_are_filtered_by_kube_scheduler_predicates(tmp_path: Path) -> None:
    tainted = node("t1", "100")
    tainted["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    data = run(tmp_path, [tainted, node("n1", "2"), vcjob("j", 4, {"cpu": "1"})])
    assert placed(data, "default/j-") == 2
    assert {p["selectedNode"] for p in data["pods"] if p["result"] == "Scheduled"} == {"n1"}
