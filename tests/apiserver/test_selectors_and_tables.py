"""Selector strings, field labels, table cells and human durations."""

from __future__ import annotations

import pytest

from kubeberth.apiserver.errors import ApiError
from kubeberth.apiserver.resources import Registry
from kubeberth.apiserver.selectors import (
    field_value,
    parse_field_selector,
    parse_label_selector,
)
from kubeberth.apiserver.tables import human_duration, table


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ("", {}, True),
    ("a=1", {"a": "1"}, True),
    ("a==1", {"a": "2"}, False),
    ("a!=1", {}, True),
    ("a in (1, 2)", {"a": "2"}, True),
    ("a notin (1,2)", {}, True),
    ("a notin (1,2)", {"a": "1"}, False),
    ("a", {"a": ""}, True),
    ("!a", {"a": ""}, False),
    ("a>3", {"a": "4"}, True),
    ("a<3", {"a": "x"}, False),
    ("a in (1,2),b", {"a": "1"}, False),
    ("example.com/key=v", {"example.com/key": "v"}, True),
])
def test_label_selector_strings(selector: str, labels: dict[str, str], want: bool) -> None:
    assert parse_label_selector(selector)(labels) is want


@pytest.mark.parametrize("bad", ["a=(", "a in 1", "=x", "a>x", "a b"])
def test_malformed_label_selectors(bad: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector(bad)
    assert err.value.code == 400


def test_field_selectors_per_kind() -> None:
    pod = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "x"},
           "status": {"phase": "Running"}}
    assert parse_field_selector("spec.nodeName=x,status.phase!=Failed", "Pod")(pod)
    assert not parse_field_selector("metadata.namespace==m", "Pod")(pod)
    assert parse_field_selector("spec.unschedulable=false", "Node")({"spec": {}}) is False
    assert parse_field_selector("spec.unschedulable=true", "Node")(
        {"spec": {"unschedulable": True}})
    with pytest.raises(ApiError, match=r"field label not supported: spec\.nodeName"):
        parse_field_selector("spec.nodeName=x", "Node")
    with pytest.raises(ApiError, match="invalid selector"):
        parse_field_selector("spec.nodeName", "Pod")


def test_field_value_of_event_source() -> None:
    assert field_value({"source": {"component": "kubelet"}}, "source") == "kubelet"
    assert field_value({}, "involvedObject.name") == ""


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-0.5, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
    (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"),
    (8 * 3600, "8h"), (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"),
    (730 * 86400, "2y"), (731 * 86400, "2y1d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration_matches_apimachinery(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_table_rows_and_metadata_objects() -> None:
    reg = Registry()
    nodes = reg.by_path("", "v1", "nodes")
    assert nodes is not None
    node = {"metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0"}}}
    out = table(nodes, [node], 1_767_225_600 + 3700, "7")
    assert [c["name"] for c in out["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Roles", "Age", "Version"]
    assert out["rows"][0]["cells"][:5] == ["n", "NotReady,SchedulingDisabled",
                                           "control-plane", "61m", "v1.32.0"]
    assert out["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table(nodes, [node], 0, "7", "None")["rows"][0].get("object") is None
    assert table(nodes, [node], 0, "7", "Object")["rows"][0]["object"] is node


def test_crd_tables_fall_back_to_name_and_age() -> None:
    reg = Registry()
    rf = reg.by_path("kueue.x-k8s.io", "v1beta1", "resourceflavors")
    assert rf is not None
    out = table(rf, [{"metadata": {"name": "gpu"}}], 0, "1")
    assert [c["name"] for c in out["columnDefinitions"]] == ["Name", "Age"]
    assert out["rows"][0]["cells"] == ["gpu", "<unknown>"]
