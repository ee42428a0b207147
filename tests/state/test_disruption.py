"""PodDisruptionBudget status from live pods and the eviction API's verdicts."""

from __future__ import annotations

import pytest

from kubeberth.api.objects import (
    LabelSelector,
    ObjectMeta,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
)
from kubeberth.state.disruption import (
    ALLOWED,
    MULTIPLE_PDBS,
    TOO_MANY_REQUESTS,
    DisruptionBudgets,
    PodView,
    ScaleLookup,
    pdb_status,
    scaled_value,
)


def pdb(name: str = "web", *, min_available: int | str | None = None,
        max_unavailable: int | str | None = None, selector: LabelSelector | None = None,
        unhealthy: str | None = None, namespace: str = "default") -> PodDisruptionBudget:
    sel = selector if selector is not None else LabelSelector(match_labels={"app": "web"})
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodDisruptionBudgetSpec(min_available=min_available, max_unavailable=max_unavailable,
                                     selector=sel, unhealthy_pod_eviction_policy=unhealthy))


def pod(name: str, *, ready: bool = True, phase: str | None = None, app: str = "web",
        controller: tuple[str, str] | None = ("ReplicaSet", "web-abc"),
        namespace: str = "default") -> PodView:
    return PodView(namespace, name, {"app": app}, phase or ("Running" if ready else "Pending"),
                   ready, controller)


def scale_of(replicas: int) -> ScaleLookup:
    def lookup(kind: str, namespace: str, name: str) -> int | None:
        return None if kind == "Job" else replicas
    return lookup


@pytest.mark.parametrize(("value", "total", "up", "want"), [
    (3, 10, True, 3), ("50%", 5, True, 3), ("50%", 5, False, 2), ("0%", 7, True, 0),
    ("100%", 7, True, 7), ("33%", 10, True, 4),
])
def test_scaled_value_matches_intstr(value: int | str, total: int, up: bool, want: int) -> None:
    assert scaled_value(value, total, up) == want


def test_int_min_available_counts_selected_pods_as_expected() -> None:
    pods = [pod("a"), pod("b"), pod("c", ready=False)]
    st = pdb_status(pdb(min_available=1), pods, scale_of(3))
    assert (st.expected_pods, st.desired_healthy, st.current_healthy,
            st.disruptions_allowed) == (3, 1, 2, 1)


def test_percent_min_available_uses_controller_scale_rounded_up() -> None:
    # Scale 5 (one replica not yet created): 80% of 5 = 4 desired, 4 ready -> 0 allowed.
    pods = [pod(n) for n in "abcd"]
    st = pdb_status(pdb(min_available="80%"), pods, scale_of(5))
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed) == (5, 4, 0)
    st = pdb_status(pdb(min_available="60%"), pods, scale_of(5))
    assert (st.desired_healthy, st.disruptions_allowed) == (3, 1)


@pytest.mark.parametrize(("max_unavailable", "desired", "allowed"),
                         [(1, 3, 1), ("25%", 3, 1), ("50%", 2, 2), (0, 4, 0), (9, 0, 4)])
def test_max_unavailable_against_scale(max_unavailable: int | str, desired: int,
                                       allowed: int) -> None:
    pods = [pod(n) for n in "abcd"]
    st = pdb_status(pdb(max_unavailable=max_unavailable), pods,
                    scale_of(4))
    assert (st.desired_healthy, st.disruptions_allowed) == (desired, allowed)


def test_unmanaged_pods_are_left_out_of_the_scale() -> None:
    pods = [pod("a"), pod("b", controller=None)]
    st = pdb_status(pdb(max_unavailable=0), pods, scale_of(1))
    assert st.expected_pods == 1 and st.desired_healthy == 1
    assert st.current_healthy == 2 and st.disruptions_allowed == 1


def test_controller_without_scale_fails_safe() -> None:
    pods = [pod("a", controller=("Job", "train")), pod("b", controller=("Job", "train"))]
    st = pdb_status(pdb(max_unavailable=1), pods, scale_of(2))
    assert st.disruptions_allowed == 0 and "found no controllers" in st.error


def test_nothing_expected_allows_nothing() -> None:
    st = pdb_status(pdb(min_available=0), [], scale_of(0))
    assert st.disruptions_allowed == 0


def test_nil_selector_selects_nothing_and_empty_selects_namespace() -> None:
    pods = [pod("a"), pod("b", app="other"), pod("c", namespace="prod")]
    nil = PodDisruptionBudget(metadata=ObjectMeta(name="x", namespace="default"),
                              spec=PodDisruptionBudgetSpec(min_available=0))
    assert pdb_status(nil, pods, scale_of(1)).expected_pods == 0
    empty = pdb(min_available=0, selector=LabelSelector())
    assert pdb_status(empty, pods, scale_of(1)).expected_pods == 2


def budgets(*pdbs: PodDisruptionBudget, pods: list[PodView],
            replicas: int = 3) -> DisruptionBudgets:
    return DisruptionBudgets.compute(pdbs, pods, scale_of(replicas))


def test_eviction_uses_the_budget_and_then_refuses_with_429() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    b = budgets(pdb(min_available=1), pods=pods)
    first, second, third = (b.evict(p) for p in pods)
    assert first.allowed and second.allowed and first.code == ALLOWED
    assert not third.allowed and third.code == TOO_MANY_REQUESTS
    assert "violate the pod's disruption budget" in third.message
    assert third.pdb == "default/web"


def test_an_evicted_healthy_pod_stops_counting_as_healthy() -> None:
    sick = pod("sick", ready=False, phase="Running")
    pods = [pod("a"), pod("b"), pod("c"), sick]
    b = budgets(pdb(min_available=1), pods=pods)
    assert b.evict(pods[0]).allowed and b.statuses[0].current_healthy == 2
    assert b.evict(sick).allowed and b.statuses[0].current_healthy == 2
    assert b.evict(pods[1]).allowed
    refused = b.evict(pods[2])
    assert "needs 1 healthy pods and has 1 currently" in refused.message


def test_count_unknown_scales_an_unknown_controller_by_its_unfinished_pods() -> None:
    pods = [pod("a"), pod("b"), pod("done", ready=False, phase="Succeeded")]

    def unknown(kind: str, namespace: str, name: str) -> int | None:
        return None

    st = pdb_status(pdb(max_unavailable=1), pods, unknown, count_unknown=True)
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed, st.error) == \
        (2, 1, 1, "")
    assert pdb_status(pdb(max_unavailable=1), pods, unknown).error


def test_check_is_a_dry_run() -> None:
    pods = [pod("a"), pod("b")]
    b = budgets(pdb(min_available=1), pods=pods)
    assert b.check(pods[0]).allowed and b.check(pods[1]).allowed
    assert b.statuses[0].disruptions_allowed == 1


def test_pending_and_terminal_pods_skip_the_pdb() -> None:
    pods = [pod("a"), pod("p", ready=False, phase="Pending"), pod("s", ready=False,
                                                                   phase="Succeeded")]
    b = budgets(pdb(min_available=5), pods=pods)
    assert b.evict(pods[1]).allowed and b.evict(pods[2]).allowed
    assert not b.evict(pods[0]).allowed


def test_more_than_one_pdb_is_refused_with_500() -> None:
    pods = [pod("a"), pod("b")]
    b = budgets(pdb("one", min_available=0), pdb("two", min_available=0), pods=pods)
    verdict = b.evict(pods[0])
    assert not verdict.allowed and verdict.code == MULTIPLE_PDBS


def test_unready_running_pod_if_healthy_budget() -> None:
    sick = pod("sick", ready=False, phase="Running")
    healthy = [pod("a"), pod("b")]
    # currentHealthy 2 >= desiredHealthy 2 > 0: the unready pod may go, budget untouched.
    b = budgets(pdb(min_available=2), pods=[*healthy, sick])
    assert b.evict(sick).allowed and b.statuses[0].disruptions_allowed == 0
    # Not enough healthy pods: falls through to the budget, which is empty.
    b = budgets(pdb(min_available=3), pods=[*healthy, sick])
    assert not b.evict(sick).allowed


def test_unready_pod_always_allow() -> None:
    sick = pod("sick", ready=False, phase="Running")
    b = budgets(pdb(min_available=5, unhealthy="AlwaysAllow"), pods=[pod("a"), sick])
    assert b.evict(sick).allowed


def test_other_namespaces_are_not_covered() -> None:
    stranger = pod("x", namespace="prod")
    b = budgets(pdb(min_available=9), pods=[pod("a"), stranger])
    assert b.matching(stranger) == [] and b.evict(stranger).allowed
