"""KubeSchedulerConfiguration v1: defaults, plugin merging, strict decoding and validation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.scheduling.config.defaults import merge_plugin_set, merge_plugins
from kubeberth.scheduling.config.loader import (
    DEFAULT_PLUGINS,
    load_scheduler_config,
)
from kubeberth.scheduling.config.types import (
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    MULTI_POINT,
    PluginRef,
    PluginSet,
    SchedulerConfiguration,
)

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def write(tmp_path: Path, body: str, name: str = "config.yaml", header: bool = True) -> Path:
    path = tmp_path / name
    path.write_text((HEADER if header else "") + textwrap.dedent(body).lstrip("\n"),
                    encoding="utf-8")
    return path


def load(tmp_path: Path, body: str) -> SchedulerConfiguration:
    return load_scheduler_config(write(tmp_path, body))


def error_of(tmp_path: Path, body: str) -> InputError:
    path = write(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_scheduler_config(path)
    assert info.value.source == str(path)
    return info.value


def names(ps: PluginSet) -> list[tuple[str, int]]:
    return [(r.name, r.weight) for r in ps.enabled]


def ps(*enabled: str | tuple[str, int], disabled: tuple[str, ...] = ()) -> PluginSet:
    refs = [PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in enabled]
    return PluginSet(enabled=refs, disabled=list(disabled))


# ---- defaults ------------------------------------------------------------------------------------

def test_default_plugin_list_follows_newest_upstream() -> None:
    assert DEFAULT_PLUGINS == [
        ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
        ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0),
        ("VolumeZone", 0), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
        ("DynamicResources", 0), ("DefaultPreemption", 0),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0),
        ("NodeDeclaredFeatures", 0), ("GangScheduling", 0), ("TopologyPlacementGenerator", 0),
        ("PodGroupPodsCount", 1),
    ]


def test_no_file_gives_upstream_defaults() -> None:
    config = load_scheduler_config(None)
    (profile,) = config.profiles
    assert profile.scheduler_name == DEFAULT_SCHEDULER_NAME
    assert names(profile.plugins[MULTI_POINT]) == DEFAULT_PLUGINS
    assert all(profile.plugins[p] == PluginSet() for p in EXTENSION_POINTS)
    assert (config.parallelism, config.pod_initial_backoff_seconds,
            config.pod_max_backoff_seconds) == (16, 1.0, 10.0)
    assert config.percentage_of_nodes_to_score is None
    assert config.extenders == []


def test_minimal_file_equals_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, "")
    defaults = load_scheduler_config(None)
    assert config.profiles == defaults.profiles
    assert config.source == str(tmp_path / "config.yaml")


def test_empty_profiles_list_gets_default_profile(tmp_path: Path) -> None:
    (profile,) = load(tmp_path, "profiles: []\n").profiles
    assert profile.scheduler_name == DEFAULT_SCHEDULER_NAME


def test_global_fields(tmp_path: Path) -> None:
    config = load(tmp_path, """
        parallelism: 4
        percentageOfNodesToScore: 30
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 20
        enableProfiling: false
        leaderElection: {leaderElect: false}
        clientConnection: {qps: 100, burst: 200}
        profiles:
        - schedulerName: a
          percentageOfNodesToScore: 70
        - schedulerName: b
        """)
    assert (config.parallelism, config.percentage_of_nodes_to_score) == (4, 30)
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2.0, 20.0)
    assert [(p.scheduler_name, p.index, p.percentage_of_nodes_to_score)
            for p in config.profiles] == [("a", 0, 70), ("b", 1, None)]


# ---- plugin merging (cases from upstream default_plugins_test.go TestMergePlugins) ------------

DEFAULT_12 = ps("DefaultPlugin1", "DefaultPlugin2")
DEFAULT_123 = ps("Plugin1", "Plugin2", "Plugin3")


@pytest.mark.parametrize(("default", "custom", "expected"), [
    pytest.param(DEFAULT_12, ps("CustomPlugin"),
                 ps("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"), id="AppendCustomPlugin"),
    pytest.param(DEFAULT_12, ps("CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",)),
                 ps("DefaultPlugin1", "CustomPlugin", "DefaultPlugin2",
                    disabled=("DefaultPlugin2",)), id="InsertAfterDefaultPlugins2"),
    pytest.param(DEFAULT_12,
                 ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",)),
                 ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",)),
                 id="InsertBeforeAllPlugins"),
    pytest.param(DEFAULT_12, ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",)),
                 ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",)),
                 id="ReorderDefaultPlugins"),
    pytest.param(DEFAULT_123, ps(("Plugin1", 2), ("Plugin3", 3)),
                 ps(("Plugin1", 2), "Plugin2", ("Plugin3", 3)),
                 id="CustomPluginOverrideDefaultPlugin"),
    pytest.param(DEFAULT_123, ps(("Plugin2", 2), ("Plugin1", 1)),
                 ps(("Plugin1", 1), ("Plugin2", 2), "Plugin3"), id="OrderPreserveAfterOverride"),
    pytest.param(DEFAULT_123, ps("Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)),
                 ps("Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)),
                 id="RepeatedCustomPlugin"),
    pytest.param(ps("DefaultPlugin", disabled=("DefaultPlugin2",)), ps("CustomPlugin"),
                 ps("DefaultPlugin", "CustomPlugin", disabled=("DefaultPlugin2",)),
                 id="disabled MultiPoint plugin in default set"),
    pytest.param(ps("DefaultPlugin"), ps(disabled=("DefaultPlugin",)),
                 ps(disabled=("DefaultPlugin",)), id="multipoint with only disabled gets merged"),
    pytest.param(ps("DefaultPlugin"), ps(("DefaultPlugin", 5)), ps(("DefaultPlugin", 5)),
                 id="override default MultiPoint plugins with custom value"),
])
def test_merge_plugin_set_matches_upstream(default: PluginSet, custom: PluginSet,
                                           expected: PluginSet) -> None:
    assert merge_plugin_set(default, custom) == expected


def test_merge_plugins_per_extension_point() -> None:
    # "Append disabled Multipoint plugins": each point is merged on its own.
    default = {MULTI_POINT: DEFAULT_12}
    custom = {
        MULTI_POINT: ps("CustomPlugin", "CustomPlugin2", disabled=("DefaultPlugin2",)),
        "score": ps(disabled=("CustomPlugin2",)),
    }
    merged = merge_plugins(default, custom)
    assert merged[MULTI_POINT] == ps("DefaultPlugin1", "CustomPlugin", "CustomPlugin2",
                                     disabled=("DefaultPlugin2",))
    assert merged["score"] == ps(disabled=("CustomPlugin2",))
    assert merged["filter"] == PluginSet()
    # "ApplyNilCustomPlugin": no plugins section keeps the defaults (as copies).
    plain = merge_plugins({"filter": DEFAULT_12}, None)
    assert plain["filter"] == DEFAULT_12 and plain["filter"] is not DEFAULT_12


def test_disabling_a_default_at_score_keeps_multipoint(tmp_path: Path) -> None:
    (profile,) = load(tmp_path, """
        profiles:
        - plugins:
            score:
              disabled:
              - name: ImageLocality
              - name: NodeResourcesBalancedAllocation
        """).profiles
    assert names(profile.plugins[MULTI_POINT]) == DEFAULT_PLUGINS
    assert profile.plugins["score"] == ps(
        disabled=("ImageLocality", "NodeResourcesBalancedAllocation"))


def test_disabling_all_multipoint_defaults(tmp_path: Path) -> None:
    (profile,) = load(tmp_path, """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: PrioritySort
              - name: NodeResourcesFit
                weight: 2
              - name: DefaultBinder
              disabled:
              - name: "*"
        """).profiles
    assert profile.plugins[MULTI_POINT] == ps(
        "PrioritySort", ("NodeResourcesFit", 2), "DefaultBinder", disabled=("*",))


def test_reenabling_a_default_with_new_weight_keeps_its_position(tmp_path: Path) -> None:
    (profile,) = load(tmp_path, """
        profiles:
        - plugins:
            multiPoint:
              enabled:
              - name: MyPlugin
                weight: 4
              - name: PodTopologySpread
                weight: 5
              disabled:
              - name: ImageLocality
        """).profiles
    expected = [(n, 5 if n == "PodTopologySpread" else w) for n, w in DEFAULT_PLUGINS
                if n != "ImageLocality"] + [("MyPlugin", 4)]
    assert names(profile.plugins[MULTI_POINT]) == expected
    assert profile.plugins[MULTI_POINT].disabled == ["ImageLocality"]


# ---- pluginConfig and locate ---------------------------------------------------------------------

def test_plugin_config_args_and_paths(tmp_path: Path) -> None:
    config = load(tmp_path, """
        profiles:
        - schedulerName: default-scheduler
          pluginConfig:
          - name: DefaultPreemption
            args: {minCandidateNodesPercentage: 20}
          - name: NodeResourcesFit
            args:
              apiVersion: kubescheduler.config.k8s.io/v1
              kind: NodeResourcesFitArgs
              scoringStrategy:
                type: MostAllocated
                resources:
                - name: cpu
                  weight: 1
          - name: NodeAffinity
        """)
    (profile,) = config.profiles
    assert profile.plugin_config == {
        "DefaultPreemption": {"minCandidateNodesPercentage": 20},
        "NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated",
                                                 "resources": [{"name": "cpu", "weight": 1}]}},
        "NodeAffinity": {},
    }
    assert profile.plugin_config_path["NodeResourcesFit"] == "profiles[0].pluginConfig[1].args"
    # The framework reports arg errors below that path; locate resolves them to lines.
    base = profile.plugin_config_path["NodeResourcesFit"]
    assert config.locate(base) == 9
    assert config.locate(f"{base}.scoringStrategy.type") == 13
    assert config.locate(f"{base}.scoringStrategy.resources[0].weight") == 16
    assert config.locate(f"{base}.scoringStrategy.requestedToCapacityRatio.shape") == 12
    assert config.locate("profiles[0].plugins.score") == 4
    assert config.locate("profiles[0].pluginConfig[2].args") == 17


def test_plugin_config_for_a_plugin_not_enabled_is_an_error(tmp_path: Path) -> None:
    """Upstream drops such args silently; a misspelt name would lose the user's tuning."""
    with pytest.raises(InputError) as err:
        load(tmp_path, """
            profiles:
            - schedulerName: packing
              pluginConfig:
              - name: NodeResourceFit
                args: {scoringStrategy: {type: MostAllocated}}
            """)
    text = str(err.value)
    assert "profiles[0].pluginConfig[0].name" in text
    assert "profile 'packing'" in text and "'NodeResourceFit'" in text
    assert "did you mean 'NodeResourcesFit'?" in text
    with pytest.raises(InputError, match="'NodeResourcesFit', which it does not enable"):
        load(tmp_path, """
            profiles:
            - plugins:
                multiPoint: {disabled: [{name: NodeResourcesFit}]}
              pluginConfig:
              - name: NodeResourcesFit
            """)


def test_config_found_among_other_documents(tmp_path: Path) -> None:
    path = write(tmp_path, """
        apiVersion: v1
        kind: Node
        metadata: {name: n}
        ---
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: x
          percentageOfNodesToScore: 200
        """, header=False)
    with pytest.raises(InputError) as info:
        load_scheduler_config(path)
    assert (info.value.line, info.value.field) == (9, "profiles[0].percentageOfNodesToScore")


def test_no_or_two_configurations(tmp_path: Path) -> None:
    none = write(tmp_path, "apiVersion: v1\nkind: Node\n", header=False)
    with pytest.raises(InputError) as info:
        load_scheduler_config(none)
    assert info.value.source == str(none)
    assert info.value.expected is not None and "KubeSchedulerConfiguration" in info.value.expected
    two = write(tmp_path, "---\n" + HEADER, name="two.yaml")
    with pytest.raises(InputError) as info:
        load_scheduler_config(two)
    assert (info.value.line, info.value.field) == (5, "kind")


# ---- strict decoding -----------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "line", "field"), [
    ("percentageOfNodeToScore: 10\n", 3, "percentageOfNodeToScore"),
    ("profiles:\n- schedulerName: a\n  plugin: {}\n", 5, "profiles[0].plugin"),
    ("profiles:\n- plugins:\n    scores: {}\n", 5, "profiles[0].plugins.scores"),
    ("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: A\n        wieght: 2\n",
     8, "profiles[0].plugins.score.enabled[0].wieght"),
    ("profiles:\n- pluginConfig:\n  - name: A\n    arguments: {}\n", 6,
     "profiles[0].pluginConfig[0].arguments"),
    ("extenders:\n- urlPrefix: http://x\n  filterverb: f\n", 5, "extenders[0].filterverb"),
    ("leaderElection:\n  leaderElection: true\n", 4, "leaderElection.leaderElection"),
])
def test_unknown_fields_are_errors(tmp_path: Path, body: str, line: int, field: str) -> None:
    err = error_of(tmp_path, body)
    assert (err.line, err.field) == (line, field)
    assert "unknown field" in err.message


@pytest.mark.parametrize(("body", "line", "field", "expected"), [
    ("parallelism: \"16\"\n", 3, "parallelism", "an integer"),
    ("podInitialBackoffSeconds: 1.5\n", 3, "podInitialBackoffSeconds", "an integer"),
    ("profiles:\n- schedulerName: 7\n", 4, "profiles[0].schedulerName", "a string"),
    ("profiles: {a: 1}\n", 3, "profiles", "a list"),
    ("profiles:\n- plugins:\n    score:\n      enabled:\n      - weight: 2\n", 7,
     "profiles[0].plugins.score.enabled[0].name", "a string"),
    ("profiles:\n- pluginConfig:\n  - name: A\n    args: [1]\n", 6,
     "profiles[0].pluginConfig[0].args", "a mapping"),
    ("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: A\n"
     "        weight: 3000000000\n",
     8, "profiles[0].plugins.score.enabled[0].weight", "an integer between"),
    ("enableProfiling: yes please\n", 3, "enableProfiling", "true or false"),
])
def test_type_errors(tmp_path: Path, body: str, line: int, field: str, expected: str) -> None:
    err = error_of(tmp_path, body)
    assert (err.line, err.field) == (line, field)
    assert err.expected is not None and err.expected.startswith(expected)


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "parallelism: 2\nparallelism: 4\n")
    with pytest.raises(InputError) as info:
        load_scheduler_config(path)
    assert info.value.line == 4
    assert "duplicate key" in info.value.message


def test_old_api_version(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1beta3\n"
                    "kind: KubeSchedulerConfiguration\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_scheduler_config(path)
    assert (info.value.line, info.value.field) == (1, "apiVersion")
    assert info.value.expected is not None
    assert "kubescheduler.config.k8s.io/v1" in info.value.expected


def test_placement_points_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "percentageOfPlacementsToScore: 30\nprofiles:\n- plugins:\n"
                           "    placementScore:\n      enabled: [{name: X, weight: 2}]\n"
                           "      disabled: [{name: PodGroupPodsCount}]\n")
    config = load_scheduler_config(path)
    assert config.percentage_of_placements_to_score == 30
    profile = config.profiles[0]
    assert profile.percentage_of_placements_to_score == 30
    assert names(profile.plugins["placementScore"]) == [("X", 2)]
    assert profile.plugins["placementScore"].disabled == ["PodGroupPodsCount"]


def test_bad_placement_percentage(tmp_path: Path) -> None:
    err = error_of(tmp_path, "profiles:\n- percentageOfPlacementsToScore: 101\n")
    assert err.field == "profiles[0].percentageOfPlacementsToScore"


# ---- validation (upstream ValidateKubeSchedulerConfiguration) ---------------------------------

@pytest.mark.parametrize(("body", "line", "field"), [
    ("parallelism: 0\n", 3, "parallelism"),
    ("percentageOfNodesToScore: 101\n", 3, "percentageOfNodesToScore"),
    ("percentageOfNodesToScore: -1\n", 3, "percentageOfNodesToScore"),
    ("profiles:\n- percentageOfNodesToScore: 120\n", 4, "profiles[0].percentageOfNodesToScore"),
    ("podInitialBackoffSeconds: 0\n", 3, "podInitialBackoffSeconds"),
    ("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n", 4, "podMaxBackoffSeconds"),
    ("profiles:\n- schedulerName: \"\"\n", 4, "profiles[0].schedulerName"),
    ("profiles:\n- schedulerName: a\n- plugins: {}\n", 5, "profiles[1].schedulerName"),
    ("profiles:\n- schedulerName: a\n- schedulerName: a\n", 5, "profiles[1].schedulerName"),
    ("profiles:\n- pluginConfig:\n  - name: A\n  - name: B\n  - name: A\n", 7,
     "profiles[0].pluginConfig[2]"),
    ("profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: A\n"
     "        weight: -1\n", 8, "profiles[0].plugins.multiPoint.enabled[0].weight"),
    ("profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: EBSLimits\n", 7,
     "profiles[0].plugins.filter.enabled[0].name"),
    ("profiles:\n- pluginConfig:\n  - name: GCEPDLimits\n", 5,
     "profiles[0].pluginConfig[0].name"),
    ("profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
     "      kind: InterPodAffinityArgs\n", 7, "profiles[0].pluginConfig[0].args.kind"),
])
def test_validation_errors(tmp_path: Path, body: str, line: int, field: str) -> None:
    err = error_of(tmp_path, body)
    assert (err.line, err.field) == (line, field)
    assert err.expected


def test_queue_sort_must_match_across_profiles(tmp_path: Path) -> None:
    err = error_of(tmp_path, """
        profiles:
        - schedulerName: a
          plugins:
            queueSort:
              enabled: [{name: PrioritySort}]
              disabled: [{name: "*"}]
        - schedulerName: b
          plugins:
            queueSort:
              enabled: [{name: CustomSort}]
              disabled: [{name: "*"}]
        """)
    assert (err.line, err.field) == (11, "profiles[1].plugins.queueSort")
    assert "queueSort" in err.message


def test_queue_sort_args_must_match_across_profiles(tmp_path: Path) -> None:
    body = """
        profiles:
        - schedulerName: a
          plugins:
            queueSort: {{enabled: [{{name: S}}], disabled: [{{name: "*"}}]}}
          pluginConfig:
          - name: S
            args: {{order: fifo}}
        - schedulerName: b
          plugins:
            queueSort: {{enabled: [{{name: S}}], disabled: [{{name: "*"}}]}}
          pluginConfig:
          - name: S
            args: {{order: {order}}}
        """
    assert len(load(tmp_path, body.format(order="fifo")).profiles) == 2
    err = error_of(tmp_path, body.format(order="lifo"))
    assert (err.line, err.field) == (15, "profiles[1].pluginConfig[0].args")


def test_only_one_queue_sort_plugin(tmp_path: Path) -> None:
    err = error_of(tmp_path, """
        profiles:
        - plugins:
            queueSort:
              enabled: [{name: A}, {name: B}]
        """)
    assert (err.line, err.field) == (6, "profiles[0].plugins.queueSort.enabled")


# ---- extenders -----------------------------------------------------------------------------------

def test_extenders_parsed(tmp_path: Path) -> None:
    config = load(tmp_path, """
        extenders:
        - urlPrefix: http://127.0.0.1:8888/
          filterVerb: filter
          prioritizeVerb: prioritize
          weight: 3
          bindVerb: bind
          enableHTTPS: true
          tlsConfig: {insecure: true}
          httpTimeout: 1m30.5s
          nodeCacheCapable: true
          ignorable: true
          managedResources:
          - name: example.com/foo
            ignoredByScheduler: true
          - name: example.com/bar
        - urlPrefix: http://other/
          filterVerb: filter
        """)
    first, second = config.extenders
    assert (first.url_prefix, first.filter_verb, first.prioritize_verb, first.bind_verb,
            first.weight) == ("http://127.0.0.1:8888/", "filter", "prioritize", "bind", 3)
    assert (first.enable_https, first.node_cache_capable, first.ignorable) == (True, True, True)
    assert first.http_timeout_seconds == 90.5
    assert first.managed_resources == ["example.com/foo", "example.com/bar"]
    assert (second.weight, second.http_timeout_seconds) == (0, 5.0)
    # Upstream hands ignoredByScheduler resources to NodeResourcesFit in every profile.
    assert config.profiles[0].plugin_config["NodeResourcesFit"] == {
        "ignoredResources": ["example.com/foo"]}


@pytest.mark.parametrize(("body", "line", "field"), [
    ("extenders:\n- filterVerb: f\n", 4, "extenders[0].urlPrefix"),
    ("extenders:\n- urlPrefix: u\n  prioritizeVerb: p\n", 4, "extenders[0].weight"),
    ("extenders:\n- urlPrefix: u\n  prioritizeVerb: p\n  weight: -2\n", 6, "extenders[0].weight"),
    ("extenders:\n- urlPrefix: u\n  bindVerb: b\n- urlPrefix: v\n  bindVerb: b\n", 7,
     "extenders[1].bindVerb"),
    ("extenders:\n- urlPrefix: u\n  managedResources:\n  - name: cpu\n", 6,
     "extenders[0].managedResources[0].name"),
    ("extenders:\n- urlPrefix: u\n  managedResources:\n  - name: a.io/x\n- urlPrefix: v\n"
     "  managedResources:\n  - name: a.io/x\n", 9, "extenders[1].managedResources[0].name"),
    ("extenders:\n- urlPrefix: u\n  managedResources:\n  - name: bad name/x\n", 6,
     "extenders[0].managedResources[0].name"),
    ("extenders:\n- urlPrefix: u\n  httpTimeout: 30\n", 5, "extenders[0].httpTimeout"),
    ("extenders:\n- urlPrefix: u\n  httpTimeout: 30 seconds\n", 5, "extenders[0].httpTimeout"),
    ("extenders:\n- urlPrefix: u\n  httpTimeout: -2s\n", 5, "extenders[0].httpTimeout"),
    ("leaderElection: []\n", 3, "leaderElection"),
])
def test_extender_validation(tmp_path: Path, body: str, line: int, field: str) -> None:
    err = error_of(tmp_path, body)
    assert (err.line, err.field) == (line, field)
    assert err.expected
