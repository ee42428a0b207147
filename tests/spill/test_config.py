"""Reading SpillConfig files: defaults, located errors, one document of the right kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.spill.config import load_spill_config

HEAD = "apiVersion: kubeberth.io/v1alpha1\nkind: SpillConfig\n"


def load(tmp_path: Path, text: str) -> object:
    f = tmp_path / "spill.yaml"
    f.write_text(text)
    return load_spill_config(f)


def test_defaults_without_a_file() -> None:
    cfg = load_spill_config(None)
    assert cfg.virtual_node.name == "virtual-kubelet"
    assert cfg.controller.signal.source == "cluster"
    assert (cfg.controller.threshold, cfg.controller.window_seconds,
            cfg.controller.stabilization_seconds) == (4.0, 300.0, 600.0)


def test_partial_file_keeps_other_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, HEAD + "controller:\n  threshold: 2\n")
    assert cfg.controller.threshold == 2.0  # type: ignore[attr-defined]
    assert cfg.controller.window_seconds == 300.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("body", "line", "field"), [
    ("controller:\n  threshold: lots\n", 4, "controller.threshold"),
    ("controller:\n  windowSeconds: 0\n", 4, "controller.windowSeconds"),
    ("virtualNode:\n  capacity:\n    nvidia.com/gpu: 1x\n", 5, "virtualNode.capacity"),
    ("controller:\n  signal:\n    source: prometheus\n    url: prom:9090\n", 6,
     "controller.signal.url"),
])
def test_errors_name_line_and_field(tmp_path: Path, body: str, line: int, field: str) -> None:
    with pytest.raises(InputError) as info:
        load(tmp_path, HEAD + body)
    err = info.value
    assert err.source is not None and err.source.endswith("spill.yaml")
    assert err.line == line, str(err)
    assert field in (err.field or ""), str(err)


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="stabilisationSeconds"):
        load(tmp_path, HEAD + "controller:\n  stabilisationSeconds: 60\n")


def test_wrong_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a SpillConfig") as info:
        load(tmp_path, "apiVersion: v1\nkind: ConfigMap\n")
    assert info.value.field == "kind"


def test_exactly_one_document(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="found 2 documents"):
        load(tmp_path, HEAD + "---\n" + HEAD)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_spill_config(tmp_path / "nope.yaml")
