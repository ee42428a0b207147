"""The API server's rules, offline: message and field path as upstream reports them."""

from __future__ import annotations

import msgspec
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.api.selectors import int64
from kubeberth.api.validation import check_shape, validate_node, validate_pod


def node(name: str = "n1", **spec: object) -> Node:
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, Node)


def test_node_names_are_rfc1123_subdomains() -> None:
    with pytest.raises(InputError) as err:
        validate_node(node("Bad_Name"))
    assert err.value.field == "metadata.name"
    assert err.value.message.startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 '
                                        "subdomain must consist of")
    validate_node(node("a.b-c"))
    with pytest.raises(InputError, match="no more than 253"):
        validate_node(node("a" * 254))


def test_upper_case_passes_only_when_folded() -> None:
    validate_node(node("nodeA"), fold_case=True)
    with pytest.raises(InputError):
        validate_node(node("nodeA"))


def test_taint_effect_is_one_of_upstreams() -> None:
    with pytest.raises(InputError) as err:
        validate_node(node(taints=[{"key": "k", "effect": "Explode"}]))
    assert err.value.field == "spec.taints[0].effect"
    assert err.value.message == ('Unsupported value: "Explode": supported values: '
                                 '"NoSchedule", "PreferNoSchedule", "NoExecute"')


def test_pod_priority_is_int32_and_tolerations_are_checked() -> None:
    pod = msgspec.convert({"metadata": {"name": "p"}, "spec": {"priority": 10**23}}, Pod)
    with pytest.raises(InputError, match="must be a 32-bit integer") as err:
        validate_pod(pod)
    assert err.value.field == "spec.priority"
    pod = msgspec.convert({"metadata": {"name": "p"}, "spec": {"tolerations": [
        {"key": "k", "operator": "Maybe"}]}}, Pod)
    with pytest.raises(InputError, match='Unsupported value: "Maybe"') as err:
        validate_pod(pod)
    assert err.value.field == "spec.tolerations[0].operator"


def test_label_values_are_short_and_plain() -> None:
    pod = msgspec.convert({"metadata": {"name": "p", "labels": {"a": "x" * 64}}}, Pod)
    with pytest.raises(InputError, match="no more than 63") as err:
        validate_pod(pod)
    assert err.value.field == "metadata.labels.a"


@pytest.mark.parametrize(("data", "field"), [
    ({"spec": "32Gi"}, "spec"), ({"metadata": []}, "metadata"), ({"status": 5}, "status"),
    ({"metadata": {"labels": 5}}, "metadata.labels"),
    ({"metadata": {"annotations": {"a": 1}}}, "metadata.annotations.a"),
    ({"metadata": {"name": 7}}, "metadata.name"),
])
def test_shared_parts_have_their_shape(data: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        check_shape(data)
    assert err.value.field == field


def test_int64_reads_as_parse_int() -> None:
    assert int64("-9223372036854775808") == -(2**63)
    assert int64("9223372036854775808") is None
    assert int64("1" * 5000) is None
    assert int64("12a") is None
