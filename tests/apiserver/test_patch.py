"""Patch algorithms on plain objects: RFC 7386, strategic merge directives, RFC 6902."""

from __future__ import annotations

from typing import Any

import pytest

from kubeberth.apiserver.errors import ApiError
from kubeberth.apiserver.patch import (
    json_merge_patch,
    json_patch,
    merge_key,
    strategic_merge_patch,
)

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"],
                 "ownerReferences": [{"uid": "u1", "kind": "Job"}]},
    "spec": {"containers": [{"name": "main", "image": "m:1", "env": [{"name": "A", "value": "1"}]},
                            {"name": "side", "image": "s:1"}],
             "tolerations": [{"key": "t1", "operator": "Exists"}],
             "schedulingGates": [{"name": "g1"}, {"name": "g2"}]},
    "status": {"conditions": [{"type": "Ready", "status": "False"},
                              {"type": "PodScheduled", "status": "True"}]},
}


def test_merge_key_table() -> None:
    assert merge_key("spec.containers") == "name"
    assert merge_key("spec.template.spec.containers") == "name"
    assert merge_key("spec.jobTemplate.spec.template.spec.initContainers") == "name"
    assert merge_key("spec.containers.env") == "name"
    assert merge_key("spec.template.spec.containers.ports") == "containerPort"
    assert merge_key("status.conditions") == "type"
    assert merge_key("metadata.ownerReferences") == "uid"
    assert merge_key("spec.schedulingGates") == "name"
    assert merge_key("spec.tolerations") is None
    assert merge_key("spec.taints") is None


def test_json_merge_patch_rfc7386_examples() -> None:
    assert json_merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert json_merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert json_merge_patch({"a": "b"}, {"a": None}) == {}
    assert json_merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert json_merge_patch({"a": "c"}, {"a": ["b"]}) == {"a": ["b"]}
    assert json_merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert json_merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert json_merge_patch(["a", "b"], ["c", "d"]) == ["c", "d"]
    assert json_merge_patch({"a": "foo"}, "bar") == "bar"


def test_strategic_merges_containers_and_nested_env_by_name() -> None:
    out = strategic_merge_patch(POD, {"spec": {"containers": [
        {"name": "main", "env": [{"name": "B", "value": "2"}]},
        {"name": "new", "image": "n:1"}]}})
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "side", "new"]
    assert containers[0]["image"] == "m:1"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert POD["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]  # untouched


def test_strategic_replaces_lists_without_merge_key() -> None:
    out = strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "t2",
                                                                "operator": "Exists"}]}})
    assert out["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]


def test_strategic_delete_directive_in_list_and_map() -> None:
    out = strategic_merge_patch(POD, {"spec": {"schedulingGates": [
        {"name": "g1", "$patch": "delete"}]}})
    assert out["spec"]["schedulingGates"] == [{"name": "g2"}]
    out = strategic_merge_patch(POD, {"status": {"$patch": "delete"}})
    assert "status" not in out


def test_strategic_replace_directives() -> None:
    out = strategic_merge_patch(POD, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})
    assert out["metadata"]["labels"] == {"c": "3"}
    out = strategic_merge_patch(POD, {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "only", "image": "o:1"}]}})
    assert out["spec"]["containers"] == [{"name": "only", "image": "o:1"}]


def test_strategic_conditions_by_type_and_null_deletes() -> None:
    out = strategic_merge_patch(POD, {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}, "metadata": {"labels": {"a": None}}})
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "PodScheduled", "status": "True"}]
    assert out["metadata"]["labels"] == {"b": "2"}


def test_strategic_finalizers_are_a_set_and_delete_from_primitive_list() -> None:
    out = strategic_merge_patch(POD, {"metadata": {"finalizers": ["x", "y"]}})
    assert out["metadata"]["finalizers"] == ["x", "y"]
    out = strategic_merge_patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers":
                                                   ["x"]}})
    assert out["metadata"]["finalizers"] == []


def test_strategic_set_element_order_and_retain_keys() -> None:
    out = strategic_merge_patch(POD, {"spec": {
        "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
        "containers": [{"name": "side", "image": "s:2"}]}})
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [
        ("side", "s:2"), ("main", "m:1")]
    out = strategic_merge_patch({"spec": {"strategy": {"type": "RollingUpdate",
                                                       "rollingUpdate": {"maxSurge": 1}}}},
                                {"spec": {"strategy": {"$retainKeys": ["type"],
                                                       "type": "Recreate"}}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_strategic_errors() -> None:
    with pytest.raises(ApiError) as err:
        strategic_merge_patch(POD, {"spec": {"containers": [{"image": "no-name"}]}})
    assert err.value.code == 400
    with pytest.raises(ApiError):
        strategic_merge_patch(POD, {"spec": {"$patch": "explode"}})


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "d", "e/f": 1, "g~h": 2}
    out = json_patch(doc, [
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "replace", "path": "/c", "value": "x"},
        {"op": "remove", "path": "/e~1f"},
        {"op": "copy", "from": "/g~0h", "path": "/i"},
        {"op": "move", "from": "/c", "path": "/j"},
        {"op": "test", "path": "/a/b", "value": [1, 9, 2, 3]},
    ])
    assert out == {"a": {"b": [1, 9, 2, 3]}, "g~h": 2, "i": 2, "j": "x"}
    assert doc["a"]["b"] == [1, 2]


@pytest.mark.parametrize(("ops", "code"), [
    ({"op": "add"}, 400),
    ([{"op": "add", "path": "/x"}], 400),
    ([{"op": "frobnicate", "path": "/x"}], 400),
    ([{"op": "remove", "path": "/missing"}], 422),
    ([{"op": "replace", "path": "/missing", "value": 1}], 422),
    ([{"op": "add", "path": "/list/5", "value": 1}], 422),
    ([{"op": "test", "path": "/list/0", "value": 2}], 422),
    ([{"op": "add", "path": "no-slash", "value": 1}], 400),
])
def test_json_patch_errors(ops: Any, code: int) -> None:
    with pytest.raises(ApiError) as err:
        json_patch({"list": [1]}, ops)
    assert err.value.code == code
