import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from kubeberth.api.selectors import (
    compile_label_selector,
    compile_node_selector_term,
    toleration_tolerates,
)


def test_label_selector_match_labels_and_expressions() -> None:
    sel = LabelSelector(match_labels={"app": "a"}, match_expressions=[
        LabelSelectorRequirement(key="tier", operator="In", values=["web", "api"]),
        LabelSelectorRequirement(key="canary", operator="DoesNotExist"),
    ])
    pred = compile_label_selector(sel)
    assert pred({"app": "a", "tier": "web"})
    assert not pred({"app": "a", "tier": "db"})
    assert not pred({"app": "a", "tier": "web", "canary": "1"})


def test_empty_selector_matches_all_nil_matches_none() -> None:
    assert compile_label_selector(LabelSelector())({"x": "y"})
    assert not compile_label_selector(None)({"x": "y"})
    assert compile_label_selector(None, nil_matches=True)({})


def test_unknown_operator_is_input_error() -> None:
    sel = LabelSelector(match_expressions=[LabelSelectorRequirement(key="a", operator="Gt")])
    with pytest.raises(InputError):
        compile_label_selector(sel)


def test_node_selector_gt_lt_and_fields() -> None:
    term = NodeSelectorTerm(
        match_expressions=[NodeSelectorRequirement(key="gpus", operator="Gt", values=["3"])],
        match_fields=[NodeSelectorRequirement(key="metadata.name", operator="In",
                                              values=["n1"])])
    match = compile_node_selector_term(term)
    assert match({"gpus": "4"}, "n1")
    assert not match({"gpus": "3"}, "n1")
    assert not match({"gpus": "8"}, "n2")
    assert not match({"gpus": "x"}, "n1")
    assert not compile_node_selector_term(NodeSelectorTerm())({}, "n1")


def test_toleration_rules() -> None:
    taint = Taint(key="gpu", value="a100", effect="NoSchedule")
    assert toleration_tolerates(Toleration(key="gpu", operator="Exists"), taint)
    assert toleration_tolerates(Toleration(key="gpu", value="a100"), taint)
    assert not toleration_tolerates(Toleration(key="gpu", value="t4"), taint)
    assert toleration_tolerates(Toleration(operator="Exists"), taint)
    assert not toleration_tolerates(Toleration(key="gpu", operator="Exists",
                                               effect="NoExecute"), taint)
