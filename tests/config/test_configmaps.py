"""ConfigMaps in manifests: string data, namespaces, timed versions and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.configmaps import initial_config_maps, load_config_maps
from kubeberth.config.manifests import load_manifests


def load(tmp_path: Path, text: str) -> list[tuple[str, dict[str, str], float]]:
    path = tmp_path / "cm.yaml"
    path.write_text(text)
    return [(v.key, v.data, v.at) for v in load_config_maps(load_manifests([path]))]


def test_versions_are_ordered_by_time_and_default_namespace(tmp_path: Path) -> None:
    got = load(tmp_path, """\
apiVersion: v1
kind: ConfigMap
metadata: {name: caps, annotations: {kubeberth.io/arrival-seconds: "30"}}
data: {a: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: caps}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: empty, namespace: ops}
""")
    assert got == [("default/caps", {"a": "1"}, 0.0), ("ops/empty", {}, 0.0),
                   ("default/caps", {"a": "2"}, 30.0)]
    path = tmp_path / "cm.yaml"
    assert initial_config_maps(load_config_maps(load_manifests([path]))) == {
        "default/caps": {"a": "1"}, "ops/empty": {}}


@pytest.mark.parametrize(("text", "where", "words"), [
    ("metadata: {name: c}\ndata: {a: 4}", "data.a", "quote it"),
    ("metadata: {name: c}\ndata: [a]", "data", "mapping"),
    ("metadata: {namespace: x}\ndata: {}", "metadata.name", "non-empty"),
    ("metadata: {name: c, annotations: {kubeberth.io/arrival-seconds: soon}}",
     "arrival-seconds", "number of seconds"),
    ("metadata: {name: c, annotations: {kubeberth.io/arrival-seconds: \"-5\"}}",
     "arrival-seconds", "non-negative"),
])
def test_bad_config_maps_name_their_field(tmp_path: Path, text: str, where: str,
                                          words: str) -> None:
    with pytest.raises(InputError) as caught:
        load(tmp_path, "apiVersion: v1\nkind: ConfigMap\n" + text + "\n")
    message = str(caught.value)
    assert where in message and words in message
    assert "cm.yaml:" in message  # the file and line


def test_two_versions_at_the_same_time_are_refused(tmp_path: Path) -> None:
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: \"1\"}\n"
    with pytest.raises(InputError, match=r"defined twice for time 0.*cm\.yaml:1"):
        load(tmp_path, doc + "---\n" + doc)
