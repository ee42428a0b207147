"""Reading YAML/JSON sources: documents, lists, line lookup and parser errors."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.yamlsrc import (
    Source,
    join_path,
    load_documents,
    parse_source,
    validation_error,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_documents(path)
    return info.value


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
spec:
  containers:
  - name: a
    resources:
      requests:
        cpu: 100m
        nvidia.com/gpu: 1
  - name: b
    image: busybox
"""


# ---- documents -----------------------------------------------------------------------------------

def test_multi_document_file_skips_empty_documents(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", """
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: n1}
        ---
        ---
        # only a comment
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: n2}
        """)
    docs = load_documents(path)
    assert [d.data["metadata"]["name"] for d in docs] == ["n1", "n2"]
    assert [d.line for d in docs] == [2, 9]
    assert [d.index for d in docs] == [0, 3]
    assert docs[1].line_of("metadata.name") == 11


def test_list_kind_is_split_into_items_with_their_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "l.yaml", """
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: n1}
        - apiVersion: v1
          kind: Pod
          metadata:
            name: p1
        """)
    docs = load_documents(path)
    assert [d.kind for d in docs] == ["Node", "Pod"]
    assert [d.base for d in docs] == ["items[0]", "items[1]"]
    assert [d.line for d in docs] == [4, 7]
    assert docs[1].line_of("metadata.name") == 10
    err = docs[1].error("bad", field="metadata.name", expected="good")
    assert (err.source, err.line, err.field) == (str(path), 10, "items[1].metadata.name")


def test_typed_list_items_get_kind_and_api_version(tmp_path: Path) -> None:
    path = write(tmp_path, "pl.yaml", """
        apiVersion: v1
        kind: PodList
        items:
        - metadata: {name: p1}
        """)
    (doc,) = load_documents(path)
    assert (doc.kind, doc.api_version) == ("Pod", "v1")


def test_list_items_must_be_objects(tmp_path: Path) -> None:
    path = write(tmp_path, "l.yaml", """
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
        - just a string
        """)
    err = error_of(path)
    assert (err.line, err.field) == (6, "items[1]")


def test_document_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", """
        apiVersion: v1
        ---
        - a
        - b
        """)
    err = error_of(path)
    assert err.line == 3
    assert "list" in err.message


def test_json_with_tabs_parses_and_locates_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{\n\t"apiVersion": "v1",\n\t"kind": "Pod",\n\t"metadata": {\n'
                    '\t\t"name": "x"\n\t}\n}\n', encoding="utf-8")
    (doc,) = load_documents(path)
    assert doc.data["metadata"] == {"name": "x"}
    assert doc.line_of("metadata.name") == 5


def test_json_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{\n  "kind": "Pod",\n  "metadata": {"name": "x",}\n}\n', encoding="utf-8")
    err = error_of(path)
    assert err.source == str(path)
    assert err.line == 3
    assert "invalid JSON" in err.message


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: v1\nkind: Node\n"))
    (doc,) = load_documents("-")
    assert doc.source.name == "<stdin>"
    assert doc.kind == "Node"


# ---- line lookup ---------------------------------------------------------------------------------

def test_line_of_walks_indices_and_dotted_keys() -> None:
    (doc,) = parse_source(Source("pod.yaml", textwrap.dedent(POD).lstrip("\n")))
    assert doc.line_of("spec.containers[0].resources.requests.cpu") == 12
    assert doc.line_of("spec.containers[0].resources.requests.nvidia.com/gpu") == 13
    assert doc.line_of("metadata.labels.app.kubernetes.io/name") == 6
    assert doc.line_of("spec.containers[1]") == 14
    assert doc.line_of("spec.containers[1].image") == 15


def test_line_of_falls_back_to_nearest_existing_parent() -> None:
    (doc,) = parse_source(Source("pod.yaml", textwrap.dedent(POD).lstrip("\n")))
    assert doc.line_of("spec.containers[1].resources.limits.cpu") == 14
    assert doc.line_of("spec.containers[7].name") == 8
    assert doc.line_of("spec.nodeSelector") == 7
    assert doc.line_of("") == 1


def test_locate_fills_line_from_field() -> None:
    (doc,) = parse_source(Source("pod.yaml", textwrap.dedent(POD).lstrip("\n")))
    err = doc.locate(InputError("bad cpu", field="spec.containers[0].resources.requests.cpu"))
    assert (err.source, err.line) == ("pod.yaml", 12)
    assert str(err).startswith("pod.yaml:12: field spec.containers[0].resources.requests.cpu:")
    unlocated = doc.locate(InputError("whole object is wrong"))
    assert unlocated.line == 1


def test_join_path() -> None:
    assert join_path("", "a.b") == "a.b"
    assert join_path("items[2]", "spec") == "items[2].spec"
    assert join_path("items[2]", "[0].x") == "items[2][0].x"
    assert join_path("items[2]", "") == "items[2]"


# ---- malformed input -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "words"), [
    ("apiVersion: v1\nmetadata:\n\tname: x\n", 3, "tab"),
    ("metadata:\n  name: x\n labels: {}\n", 3, "indented differently"),
    ("metadata:\n  name: \"x\n", 3, "quoted string"),
    ("kind: Pod\nmetadata: name: x\n", 2, "'key: value' pair"),
    ("spec:\n  containers:\n  - name: a\n - name: b\n", 4, "indented"),
])
def test_malformed_yaml_names_file_line_and_problem(tmp_path: Path, text: str, line: int,
                                                    words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    err = error_of(path)
    assert err.source == str(path)
    assert err.line == line
    assert words in err.message
    assert err.message.startswith("invalid YAML")
    assert err.expected is not None


def test_duplicate_keys_are_rejected_with_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "d.yaml", """
        apiVersion: v1
        kind: Pod
        metadata:
          name: a
          name: b
        """)
    err = error_of(path)
    assert err.line == 5
    assert "duplicate key 'name'" in err.message
    assert "line 4" in err.message


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", """
        base: &b {cpu: 1}
        apiVersion: v1
        kind: Node
        status:
          allocatable:
            <<: *b
            memory: 1Gi
        """)
    (doc,) = load_documents(path)
    assert doc.data["status"]["allocatable"] == {"cpu": 1, "memory": "1Gi"}


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    err = error_of(tmp_path / "nope.yaml")
    assert err.source == str(tmp_path / "nope.yaml")
    assert "cannot read" in err.message
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "UTF-8" in error_of(binary).message


# ---- msgspec errors ------------------------------------------------------------------------------

def test_validation_error_type_mismatch() -> None:
    err = validation_error("Expected `int | null`, got `str` - at `$.spec.priority`",
                           {"spec": {"priority": "100"}})
    assert err.field == "spec.priority"
    assert err.message == "got a string '100'"
    assert err.expected == "an integer"


def test_validation_error_finds_the_mapping_key() -> None:
    data = {"metadata": {"labels": {"ok": "x", "app.kubernetes.io/version": 2}}}
    err = validation_error("Expected `str`, got `int` - at `$.metadata.labels[...]`", data)
    assert err.field == "metadata.labels.app.kubernetes.io/version"
    data2 = {"r": {"cpu": "1", "gpu": [1]}}
    err2 = validation_error("Expected `int | float | str`, got `array` - at `$.r[...]`", data2)
    assert err2.field == "r.gpu"
    assert err2.expected == "an integer, a number or a string"


def test_validation_error_missing_field() -> None:
    err = validation_error(
        "Object missing required field `preference` - at `$.spec.affinity.terms[0]`", {})
    assert err.field == "spec.affinity.terms[0].preference"
    assert "preference" in err.message


# ---- Kubernetes decoding rules -------------------------------------------------------------------

def test_timestamps_stay_strings_and_nulls_are_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", """
        metadata:
          creationTimestamp: 2024-01-01T00:00:00Z
          deletionTimestamp: null
          labels:
            date: 2024-01-01
        spec: {nodeName: ~, priority: 5}
        """)
    (doc,) = load_documents(path)
    assert doc.data == {"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z",
                                     "labels": {"date": "2024-01-01"}},
                        "spec": {"priority": 5}}


def test_json_nulls_are_unset(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text('{"kind": "Pod", "metadata": {"name": "x", "labels": null}}',
                    encoding="utf-8")
    (doc,) = load_documents(path)
    assert doc.data == {"kind": "Pod", "metadata": {"name": "x"}}
