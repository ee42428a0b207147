"""DeschedulerPolicy v1alpha2: decoding, defaulting, validation, located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.descheduling.policy import (
    load_descheduler_policy,
    match_label_requirements,
    parse_label_selector_string,
)

HEADER = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
FULL = HEADER + """\
nodeSelector: "pool=spill,!legacy"
maxNoOfPodsToEvictPerNode: 2
maxNoOfPodsToEvictPerNamespace: 3
maxNoOfPodsToEvictTotal: 10
evictionFailureEventNotification: true
gracePeriodSeconds: 30
profiles:
  - name: spill
    pluginConfig:
      - name: DefaultEvictor
        args:
          minPodAge: 10m
          podProtections:
            extraEnabled: [PodsWithPVC]
      - name: RemovePodsViolatingNodeTaints
        args:
          includedTaints: ["vk.node.com/low-gpu-usage"]
    plugins:
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
  - name: balance
    pluginConfig:
      - name: LowNodeUtilization
        args:
          apiVersion: descheduler/v1alpha2
          kind: LowNodeUtilizationArgs
          thresholds: {cpu: 20, nvidia.com/gpu: 20}
          targetThresholds: {cpu: 50, nvidia.com/gpu: 60}
    plugins:
      balance:
        enabled: [LowNodeUtilization]
      filter:
        enabled: [DefaultEvictor]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_full_policy(tmp_path: Path) -> None:
    pol = load_descheduler_policy(write(tmp_path, FULL))
    assert (pol.max_pods_to_evict_per_node, pol.max_pods_to_evict_per_namespace,
            pol.max_pods_to_evict_total) == (2, 3, 10)
    assert pol.node_selector == "pool=spill,!legacy"
    assert pol.eviction_failure_event_notification is True
    assert pol.grace_period_seconds == 30
    spill, balance = pol.profiles
    assert spill.plugins["deschedule"] == ["RemovePodsViolatingNodeTaints"]
    assert spill.plugin_config["RemovePodsViolatingNodeTaints"] == {
        "includedTaints": ["vk.node.com/low-gpu-usage"]}
    assert balance.plugin_config["LowNodeUtilization"]["thresholds"] == {
        "cpu": 20, "nvidia.com/gpu": 20}
    assert balance.plugin_config_path["LowNodeUtilization"] == "profiles[1].pluginConfig[0].args"


def test_default_evictor_is_always_enabled_and_configured(tmp_path: Path) -> None:
    pol = load_descheduler_policy(write(tmp_path, FULL))
    spill, balance = pol.profiles
    for profile in (spill, balance):
        assert profile.plugins["filter"][0] == "DefaultEvictor"
        assert profile.plugins["preEvictionFilter"] == ["DefaultEvictor"]
        assert "DefaultEvictor" in profile.plugin_config
    assert balance.plugins["filter"] == ["DefaultEvictor"]
    assert spill.plugin_config["DefaultEvictor"]["minPodAge"] == "10m"
    assert balance.plugin_config["DefaultEvictor"] == {}


def test_policy_in_a_bundle_with_other_documents(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n" + HEADER + \
        "profiles: []\n"
    assert load_descheduler_policy(write(tmp_path, text)).profiles == []


@pytest.mark.parametrize(("body", "field", "line", "message"), [
    ("profiles: []\nmaxNoOfPodsToEvictPerNode: -1\n", "maxNoOfPodsToEvictPerNode", 4,
     "not a non-negative"),
    ("profiles: []\nmaxNoOfPodsToEvictTotal: lots\n", "maxNoOfPodsToEvictTotal", 4,
     "got the string"),
    ("strategies: {}\n", "strategies", 3, "unknown field"),
    ("profiles:\n  - name: a\n    plugins:\n      descheduled: {enabled: [X]}\n",
     "profiles[0].plugins.descheduled", 6, "unknown field"),
    ("profiles:\n  - name: a\n    pluginConfig:\n      - name: PodLifeTime\n"
     "      - name: PodLifeTime\n", "profiles[0].pluginConfig[1]", 7, "configured twice"),
    ("profiles:\n  - name: a\n  - name: a\n", "profiles[1].name", 5, "defined twice"),
    ("profiles:\n  - pluginConfig: []\n", "profiles[0].name", 4, "no name"),
    ("profiles:\n  - name: a\n    pluginConfig:\n      - name: PodLifeTime\n"
     "        args: {kind: OtherArgs}\n", "profiles[0].pluginConfig[0].args.kind", 7,
     "have kind"),
    ("profiles:\n  - name: a\n    plugins:\n      balance: {enabled: [A, A]}\n",
     "profiles[0].plugins.balance.enabled[1]", 6, "listed twice"),
    ("nodeSelector: 'a in (b'\nprofiles: []\n", "nodeSelector", 3, "not a label requirement"),
    ("metricsProviders:\n  - source: Graphite\n", "metricsProviders[0].source", 4,
     "unknown metrics source"),
])
def test_errors_name_file_line_and_field(tmp_path: Path, body: str, field: str, line: int,
                                         message: str) -> None:
    with pytest.raises(InputError) as err:
        load_descheduler_policy(write(tmp_path, HEADER + body))
    assert err.value.field == field
    assert err.value.line == line
    assert err.value.source == str(tmp_path / "policy.yaml")
    assert message in err.value.message


def test_wrong_api_version(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_descheduler_policy(write(tmp_path, "apiVersion: descheduler/v1alpha1\n"
                                      "kind: DeschedulerPolicy\n"))
    assert err.value.field == "apiVersion"
    assert "descheduler/v1alpha2" in (err.value.expected or "")


def test_no_policy_in_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no DeschedulerPolicy document"):
        load_descheduler_policy(write(tmp_path, "apiVersion: v1\nkind: Namespace\n"
                                      "metadata: {name: x}\n"))


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ("", {}, True),
    ("pool=spill", {"pool": "spill"}, True),
    ("pool==spill", {"pool": "cpu"}, False),
    ("pool!=spill", {}, True),
    ("tier in (a, b),gpu", {"tier": "b", "gpu": ""}, True),
    ("tier notin (a,b)", {"tier": "a"}, False),
    ("!legacy", {"legacy": "x"}, False),
    ("size>4", {"size": "8"}, True),
    ("size<4", {"size": "8"}, False),
])
def test_label_selector_strings(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert match_label_requirements(parse_label_selector_string(selector), labels) is matches


@pytest.mark.parametrize("selector", ["a,,b", "a in b", "size>big", ","])
def test_bad_label_selector_strings(selector: str) -> None:
    with pytest.raises(InputError):
        parse_label_selector_string(selector)
