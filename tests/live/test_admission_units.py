"""Pieces of the live admission controller that need no API server: condition bookkeeping,
version normalisation, the flavor injection into pod specs, and the --config loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.times import format_time
from kubeberth.cli.admission import load_configuration
from kubeberth.live.admission import (
    LiveAdmission,
    _normalise,
    _rv,
    _set_conditions,
)


def _obj(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "w"}, "status": {"conditions": conditions}}


def test_set_conditions_moves_the_transition_time_only_on_a_status_change() -> None:
    old = _obj([{"type": "QuotaReserved", "status": "False", "reason": "WaitingForQuota",
                 "message": "a", "lastTransitionTime": "2025-01-01T00:00:00Z"}])
    same = _set_conditions(old, [{"type": "QuotaReserved", "status": "False",
                                  "reason": "NoMatchingFlavor", "message": "b"}], 1e9)
    assert same == [{"type": "QuotaReserved", "status": "False", "reason": "NoMatchingFlavor",
                     "message": "b", "lastTransitionTime": "2025-01-01T00:00:00Z"}]
    flipped = _set_conditions(old, [{"type": "QuotaReserved", "status": "True",
                                     "reason": "QuotaReserved", "message": "c"},
                                    {"type": "Admitted", "status": "True", "reason": "Admitted",
                                     "message": "d"}], 1e9)
    assert [c["lastTransitionTime"] for c in flipped] == [format_time(1e9)] * 2
    assert [c["type"] for c in flipped] == ["QuotaReserved", "Admitted"]
    # The input is not modified.
    assert old["status"]["conditions"][0]["reason"] == "WaitingForQuota"


def test_resource_versions_compare_as_integers_or_not_at_all() -> None:
    assert _rv({"metadata": {"resourceVersion": "12"}}) == 12
    assert _rv({"metadata": {}}) == 0
    assert _rv({"metadata": {"resourceVersion": "opaque"}}) == -1


@pytest.mark.parametrize(("version", "spec", "want"), [
    ("v1beta1", {"cohortName": "gpus"}, {"cohort": "gpus"}),
    ("v1beta2", {"cohort": "gpus"}, {"cohortName": "gpus"}),
    ("v1beta1", {"cohort": "gpus"}, {"cohort": "gpus"}),
    ("v1beta2", {"cohortName": "a", "cohort": "b"}, {"cohortName": "a", "cohort": "b"}),
])
def test_cluster_queue_cohort_field_follows_the_version_read(
        version: str, spec: dict[str, str], want: dict[str, str]) -> None:
    data = {"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": dict(spec)}
    out = _normalise("ClusterQueue", data, version)
    assert out["spec"] == want
    assert data["spec"] == spec  # copied, not changed in place


def test_other_kinds_are_not_normalised() -> None:
    data = {"spec": {"cohort": "x"}}
    assert _normalise("Cohort", data, "v1beta2") is data


def _controller_with_flavors(flavors: dict[str, dict[str, Any]]) -> LiveAdmission:
    ctl = LiveAdmission.__new__(LiveAdmission)
    ctl.cache = {"ResourceFlavor": {name: {"metadata": {"name": name}, "spec": spec}
                                    for name, spec in flavors.items()}}
    return ctl


def test_injection_adds_flavor_labels_and_tolerations_of_the_podset_only() -> None:
    tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ctl = _controller_with_flavors({
        "a100": {"nodeLabels": {"gpu": "a100", "zone": "z1"}, "tolerations": [tol]},
        "cpu": {"nodeLabels": {"pool": "cpu"}},
    })
    admission = {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"nvidia.com/gpu": "a100", "cpu": "a100"}},
        {"name": "other", "flavors": {"cpu": "cpu"}}]}
    spec = {"nodeSelector": {"zone": "mine"}, "tolerations": [tol]}
    selector, tolerations = ctl._injected(spec, admission, "main")
    # A key the pod already selects is kept; a toleration already there is not repeated.
    assert selector == {"zone": "mine", "gpu": "a100"}
    assert tolerations == [tol]
    assert spec == {"nodeSelector": {"zone": "mine"}, "tolerations": [tol]}
    assert ctl._injected({}, admission, "other") == ({"pool": "cpu"}, [])
    assert ctl._injected({}, admission, "absent") == ({}, [])


def test_injection_ignores_a_flavor_that_is_gone() -> None:
    ctl = _controller_with_flavors({})
    admission = {"podSetAssignments": [{"name": "main", "flavors": {"cpu": "gone"}}]}
    assert ctl._injected({}, admission, "main") == ({}, [])


def test_configuration_defaults_and_values(tmp_path: Path) -> None:
    assert load_configuration(None).fair_sharing is False
    cfg = tmp_path / "c.yaml"
    cfg.write_text("""\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanInitialShare]
featureGates: {PartialAdmission: false}
""")
    loaded = load_configuration(cfg)
    assert loaded.fair_sharing is True
    assert loaded.preemption_strategies == ("LessThanInitialShare",)
    assert loaded.partial_admission is False


@pytest.mark.parametrize("text", [
    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    "fairSharing: {enable: true}\n",
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
    "featureGates: {TopologyAwareScheduling: true}\n",
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
    "",
])
def test_bad_configuration_is_an_input_error(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(InputError):
        load_configuration(cfg)
