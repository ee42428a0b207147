"""Edges of the PDB status and the eviction verdict that the behavioural tests pass by: exact
verdicts, percent rounding, failing safe, pods without controllers, the defaulted namespace.
(Written against the surviving mutants of tools/mutation.py's ``pdb`` target.)"""

from __future__ import annotations

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
)
from kubeberth.state.disruption import (
    ALLOWED,
    MORE_THAN_ONE_PDB,
    MULTIPLE_PDBS,
    TOO_MANY_REQUESTS,
    VIOLATES_BUDGET,
    DisruptionBudgets,
    EvictionVerdict,
    PodView,
    pdb_status,
    scaled_value,
    selected_pods,
)

from .test_disruption import pdb, pod, scale_of


def by_name(scales: dict[str, int | None]) -> object:
    def lookup(kind: str, namespace: str, name: str) -> int | None:
        return scales[name]
    return lookup


def test_scales_of_several_controllers_add_up_and_bare_pods_are_skipped() -> None:
    # A bare pod first, then pods of two ReplicaSets scaled 3 and 2: expected 3 + 2 = 5.
    pods = [pod("bare", controller=None), pod("a1", controller=("ReplicaSet", "a")),
            pod("a2", controller=("ReplicaSet", "a")), pod("b1", controller=("ReplicaSet", "b"))]
    st = pdb_status(pdb(max_unavailable=1), pods, by_name({"a": 3, "b": 2}))  # type: ignore[arg-type]
    assert (st.expected_pods, st.desired_healthy, st.current_healthy,
            st.disruptions_allowed, st.error) == (5, 4, 4, 0, "")


def test_percent_max_unavailable_rounds_up() -> None:
    # 50% of 5 expected is 2.5, rounded up to 3 unavailable: desired 5 − 3 = 2.
    pods = [pod(f"p{i}") for i in range(5)]
    st = pdb_status(pdb(max_unavailable="50%"), pods, scale_of(5))
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed) == (5, 2, 3)


@pytest.mark.parametrize(("value", "total", "up", "want"), [
    ("50%", 10, False, 5), ("10%", 30, False, 3), ("25%", 4, True, 1),
])
def test_scaled_value_exact_percentages(value: str, total: int, up: bool, want: int) -> None:
    assert scaled_value(value, total, up) == want


def test_failing_safe_zeroes_the_whole_status() -> None:
    job_pods = [pod("j1", controller=("Job", "etl")), pod("j2", controller=("Job", "etl"))]
    spec = pdb(max_unavailable=1)
    st = pdb_status(spec, job_pods, scale_of(2))
    assert st.pdb is spec
    assert (st.expected_pods, st.desired_healthy, st.current_healthy,
            st.disruptions_allowed) == (0, 0, 0, 0)
    assert st.error == 'found no controllers for pod "j1"'
    # DisruptionBudgets.compute fails safe the same way unless told to count the pods.
    assert DisruptionBudgets.compute([spec], job_pods, scale_of(2)).statuses[0].error
    counted = DisruptionBudgets.compute([spec], job_pods, scale_of(2), count_unknown=True)
    assert counted.statuses[0].disruptions_allowed == 1


def test_nothing_expected_allows_nothing() -> None:
    # Bare pods under maxUnavailable: no controller scale, expected 0, so 0 allowed although
    # two pods are healthy and nothing is desired.
    st = pdb_status(pdb(max_unavailable=1), [pod("x", controller=None),
                                             pod("y", controller=None)], scale_of(2))
    assert (st.expected_pods, st.desired_healthy, st.current_healthy,
            st.disruptions_allowed) == (0, 0, 2, 0)


def test_a_pdb_with_neither_field_expects_and_allows_nothing() -> None:
    st = pdb_status(pdb(), [pod("a"), pod("b")], scale_of(2))
    assert (st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed,
            st.error) == (0, 0, 2, 0, "")


def test_a_pdb_without_namespace_is_in_default() -> None:
    unnamespaced = PodDisruptionBudget(
        metadata=ObjectMeta(name="web"),
        spec=PodDisruptionBudgetSpec(min_available=1,
                                     selector=LabelSelector(match_labels={"app": "web"})))
    pods = [pod("a"), pod("b"), pod("other", namespace="prod")]
    assert [p.name for p in selected_pods(unnamespaced, pods)] == ["a", "b"]
    budgets = DisruptionBudgets.compute([unnamespaced], pods, scale_of(2))
    assert budgets.evict(pods[0]) == EvictionVerdict(True, ALLOWED, pdb="default/web")
    assert budgets.statuses[0].pdb.key == "default/web"


def test_a_missing_selector_selects_nothing_and_a_bad_one_names_its_field() -> None:
    bare = PodDisruptionBudget(metadata=ObjectMeta(name="web", namespace="default"),
                               spec=PodDisruptionBudgetSpec(min_available=1))
    assert selected_pods(bare, [pod("a")]) == []
    bad = pdb(min_available=1, selector=LabelSelector(match_expressions=[
        LabelSelectorRequirement(key="app", operator="Sometimes", values=["web"])]))
    with pytest.raises(InputError) as err:
        selected_pods(bad, [pod("a")])
    assert err.value.field is not None and err.value.field.startswith("spec.selector.")


def test_verdicts_are_exact() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    one = DisruptionBudgets.compute([pdb(min_available=2)], pods, scale_of(3))
    pending = PodView("default", "p", {"app": "web"}, "Pending", False, ("ReplicaSet", "web"))
    assert one.check(pending) == EvictionVerdict(True, ALLOWED)
    stranger = PodView("default", "s", {"app": "db"}, "Running", True)
    assert one.check(stranger) == EvictionVerdict(True, ALLOWED)
    assert one.check(pods[0]) == EvictionVerdict(True, ALLOWED, pdb="default/web")
    assert one.evict(pods[0]) == EvictionVerdict(True, ALLOWED, pdb="default/web")
    detail = "The disruption budget web needs 2 healthy pods and has 2 currently"
    assert one.evict(pods[1]) == EvictionVerdict(
        False, TOO_MANY_REQUESTS, f"{VIOLATES_BUDGET} {detail}", pdb="default/web",
        detail=detail)
    two = DisruptionBudgets.compute([pdb("x", min_available=1), pdb("y", min_available=1)],
                                    pods, scale_of(3))
    assert two.check(pods[0]) == EvictionVerdict(False, MULTIPLE_PDBS, MORE_THAN_ONE_PDB)


def test_unready_pod_with_nothing_desired_still_needs_the_budget() -> None:
    # minAvailable 0 and no pod Ready: desired 0, healthy 0, allowed 0. "current ≥ desired > 0"
    # does not hold (desired is 0), so the unready pod needs a disruption and gets 429.
    pods = [pod("a", ready=False, phase="Running"), pod("b", ready=False, phase="Running")]
    budgets = DisruptionBudgets.compute([pdb(min_available=0)], pods, scale_of(2))
    verdict = budgets.check(pods[0])
    assert (verdict.allowed, verdict.code) == (False, TOO_MANY_REQUESTS)
    # With one Ready pod desired 1 is met: the unready one goes without using the budget.
    pods = [pod("a", ready=False, phase="Running"), pod("b")]
    budgets = DisruptionBudgets.compute([pdb(min_available=1)], pods, scale_of(2))
    assert budgets.evict(pods[0]) == EvictionVerdict(True, ALLOWED, pdb="default/web")
    assert budgets.statuses[0].disruptions_allowed == 0


def test_always_allow_lets_an_unready_pod_go_without_the_budget() -> None:
    pods = [pod("a", ready=False, phase="Running"), pod("b")]
    budgets = DisruptionBudgets.compute([pdb(min_available=2, unhealthy="AlwaysAllow")], pods,
                                        scale_of(2))
    assert budgets.statuses[0].disruptions_allowed == 0
    assert budgets.evict(pods[0]) == EvictionVerdict(True, ALLOWED, pdb="default/web")
    assert budgets.statuses[0].disruptions_allowed == 0
