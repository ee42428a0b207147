"""Every kube-scheduler conformance case, run through ``kubeberth explain -o json``.

Each case becomes a manifests file (nodes, bound pods, the pending pod) and a
KubeSchedulerConfiguration carrying the case's plugin args. Score cases disable every Filter so
that all nodes are scored, as upstream's score unit tests score every node they are given.
Cases that are not about one pod's scheduling cycle are checked against the package functions
they test: helpers, queue tables, CapacityScheduling's PreFilter against a fixed quota snapshot
(each pod alone, as upstream's TestPreFilter) and Volcano's proportion water-filling.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.scheduling.plugins.plugin_builders import ratio_score
from typer.testing import CliRunner

from kubeberth.cli.main import app
from kubeberth.scheduling.framework.queue import backoff_duration
from kubeberth.scheduling.framework.runtime import num_feasible_nodes_to_find

from .casefiles import (
    load_cases,
    newest,
    newest_expectation,
    node_manifest,
    pdb_manifest,
    pod_manifest,
)
from .fairshare import capacity_pre_filter_codes, proportion_deserved

CASES = load_cases("kube-scheduler")
# Plugins whose cases are checked against package functions, not one scheduling cycle.
FUNCTIONS = ("CapacityScheduling", "volcano.proportion")
ARGS_KEYS = {"NodeResourcesFit", "NodeResourcesBalancedAllocation", "NodeAffinity",
             "DefaultPreemption", "PodTopologySpread", "TaintToleration"}

pytestmark = pytest.mark.skipif(not CASES, reason="../shared/conformance is not present")


def _config(case: dict[str, Any]) -> dict[str, Any]:
    plugin = case["plugin"]
    args = {k: v for k, v in (case.get("config") or {}).items() if k != "features"}
    if plugin == "NodeAffinity" and "addedAffinity" in args:
        preferred = args["addedAffinity"].get("preferred", [])
        args["addedAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": t["weight"], "preference": {"matchExpressions": t["matchExpressions"]}}
            for t in preferred]}
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    if case["extension_point"] == "score":
        profile["plugins"] = {"filter": {"disabled": [{"name": "*"}]}}
    if args and plugin in ARGS_KEYS:
        profile["pluginConfig"] = [{"name": plugin, "args": args}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def _manifests(case: dict[str, Any]) -> list[dict[str, Any]]:
    point = case["extension_point"]
    default_pods = 32 if ("filter" in point or "postfilter" in point) else None
    docs: list[dict[str, Any]] = []
    statuses = case.get("filter_statuses") or {}
    for n in case["nodes"]:
        node = node_manifest(n, default_pods)
        if statuses.get(n["name"]) == "UnschedulableAndUnresolvable":
            # A NoSchedule taint is how a real node becomes UnschedulableAndUnresolvable.
            node["spec"]["taints"] = [{"key": "conformance/unresolvable", "value": "true",
                                       "effect": "NoSchedule"}]
        docs.append(node)
    for i, p in enumerate(case.get("existing_pods") or []):
        docs.append(pod_manifest(p, f"existing-{i}"))
    for i, pdb in enumerate(case.get("pdbs") or []):
        docs.append(pdb_manifest(i, pdb))
    docs.append(pod_manifest(case["pod"] or {}, "pod"))
    return docs


def run_explain(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(yaml.safe_dump_all(_manifests(case), sort_keys=False))
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump(_config(case), sort_keys=False))
    result = CliRunner().invoke(app, ["explain", "-f", str(manifests), "--config", str(config),
                                      "-o", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _pod(data: dict[str, Any]) -> dict[str, Any]:
    pods = [p for p in data["pods"] if p["result"] != "NotOurs"]
    assert len(pods) == 1, pods
    return pods[0]


def _ids(point_filter: str) -> list[dict[str, Any]]:
    return [c for c in CASES if c["extension_point"] == point_filter
            or (point_filter == "postfilter*" and c["extension_point"].startswith("postfilter"))]


@pytest.mark.parametrize("case", _ids("score"), ids=lambda c: c["id"])
def test_score_case(case: dict[str, Any], tmp_path: Path) -> None:
    expect = newest(case["expect"])
    pod = _pod(run_explain(case, tmp_path))
    got = {node: entry["score"][case["plugin"]]["normalized"]
           for node, entry in pod["nodes"].items() if case["plugin"] in entry["score"]}
    assert got == expect["scores"]


@pytest.mark.parametrize("case", _ids("filter"), ids=lambda c: c["id"])
def test_filter_case(case: dict[str, Any], tmp_path: Path) -> None:
    expect = newest_expectation(case)
    pod = _pod(run_explain(case, tmp_path))
    for node, verdict in expect["verdicts"].items():
        got = pod["nodes"][node]["filter"][case["plugin"]]
        assert got["code"] == verdict["code"], (node, got)
        if "reasons" in verdict:
            assert got["reasons"] == verdict["reasons"], (node, got)


@pytest.mark.parametrize("case", _ids("postfilter*"), ids=lambda c: c["id"])
def test_preemption_case(case: dict[str, Any], tmp_path: Path) -> None:
    expect = newest(case["expect"])
    pod = _pod(run_explain(case, tmp_path))
    point = case["extension_point"]
    victims = sorted(v.split("/", 1)[1] for v in pod["victims"])
    if point == "postfilter(dry-run)":
        by_node = {c["node"]: sorted(c["victims"]) for c in expect["candidates"]}
        assert pod["nominatedNode"] in by_node
        assert victims == by_node[pod["nominatedNode"]]
    elif point == "postfilter(select-candidate)":
        assert pod["nominatedNode"] in expect["selected_node_any_of"]
    else:
        assert (pod["nominatedNode"] or "") == expect["nominated_node"]
        if expect["status"] == "Success":
            assert pod["result"] == "Unschedulable" and pod["nominatedNode"]
        else:
            assert pod["result"] == "Unschedulable" and not pod["nominatedNode"]
        if "message" in expect:
            assert expect["message"] in pod["message"]


@pytest.mark.parametrize("case", [c for c in CASES if c["extension_point"] in ("n/a",)
                                  or c["plugin"] in FUNCTIONS],
                         ids=lambda c: c["id"])
def test_function_case(case: dict[str, Any]) -> None:
    plugin = case["plugin"]
    expect = case["expect"]
    if plugin == "helper.BrokenLinearFunction":
        shape = [(p["utilization"], p["score"]) for p in case["config"]["shape"]]
        for x, want in expect["function_values"].items():
            assert ratio_score(shape, int(x)) == want, x
    elif plugin == "scheduler.numFeasibleNodesToFind":
        for row in expect["table"]:
            assert num_feasible_nodes_to_find(row["percentageOfNodesToScore"],
                                              row["numAllNodes"]) == row["want"]
    elif plugin == "CapacityScheduling":
        # Each pod meets the same quota snapshot (used as given), as upstream's TestPreFilter.
        codes = capacity_pre_filter_codes(case["config"]["elasticQuotas"],
                                          [pod_manifest(p, p["name"]) for p in case["pods"]])
        assert codes == expect["codes"]
    elif plugin == "volcano.proportion":
        cfg = case["config"]
        deserved, rounds = proportion_deserved(cfg["totalResource"], cfg["queues"])
        assert rounds == expect["rounds"]
        for queue, want in expect["deserved_cpu"].items():
            assert deserved[queue]["cpu"] == pytest.approx(want, abs=0.01), queue
    elif plugin == "scheduler.backoffQueue":
        cfg = case["config"]
        for attempts, seconds in expect["backoff_seconds_by_failure_count"].items():
            assert backoff_duration(int(attempts), cfg["podInitialBackoffSeconds"],
                                    cfg["podMaxBackoffSeconds"]) == seconds
    else:
        pytest.fail(f"no harness for {plugin}")


def test_every_case_is_collected() -> None:
    covered = (len(_ids("score")) + len(_ids("filter")) + len(_ids("postfilter*"))
               + len([c for c in CASES if c["extension_point"] == "n/a"
                      or c["plugin"] in FUNCTIONS]))
    assert covered == len(CASES)
