"""Load the shared upstream-derived conformance cases and turn them into manifests.

The cases live in ``../shared/conformance`` beside the project (read-only, never edited). The
project's own tests find them relative to the repository root; when the folder is absent (a
wheel installed elsewhere) the conformance tests skip with that reason.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "conformance"


def load_cases(kind: str) -> list[dict[str, Any]]:
    path = SHARED / kind / "cases.yaml"
    if not path.exists():
        return []
    with path.open() as f:
        doc = yaml.load(f, Loader=yaml.CSafeLoader)
    cases: list[dict[str, Any]] = doc["cases"]
    return cases


def newest(expect: dict[str, Any]) -> dict[str, Any]:
    """The expectation for the newest upstream release when a case lists several versions."""
    by_version = expect.get("by_version")
    if not by_version:
        return expect
    for key in ("newest-upstream", "current-upstream"):
        if key in by_version:
            chosen: dict[str, Any] = by_version[key]
            return chosen
    raise KeyError(f"no newest entry in {sorted(by_version)}")


# Cases transcribed from an upstream release older than the one kubeberth follows, whose test in
# the newest release expects other reasons. The shared file is read-only, so the newest
# expectation is restated here with its source; an entry whose old reasons the case no longer
# holds fails, so it goes once the shared file catches up.
# TaintToleration's Filter reason stopped naming the taint: in upstream v1.37.2's
# pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go
# (TestTaintTolerationFilter) the same cases expect "node(s) had untolerated taint(s)".
SUPERSEDED_REASONS: dict[str, tuple[list[str], list[str]]] = {
    "taint-filter-01": (["node(s) had untolerated taint {dedicated: user1}"],
                        ["node(s) had untolerated taint(s)"]),
    "taint-filter-02": (["node(s) had untolerated taint {foo: bar}"],
                        ["node(s) had untolerated taint(s)"]),
}


def newest_expectation(case: dict[str, Any]) -> dict[str, Any]:
    """The case's expectation for the newest upstream release: its ``newest-upstream`` entry,
    with the reasons :data:`SUPERSEDED_REASONS` restates."""
    expect = newest(case["expect"])
    superseded = SUPERSEDED_REASONS.get(case["id"])
    if superseded is None:
        return expect
    old, new = superseded
    verdicts = {node: dict(v) for node, v in expect["verdicts"].items()}
    replaced = [node for node, v in verdicts.items() if v.get("reasons") == old]
    if not replaced:
        raise AssertionError(f"{case['id']} no longer says {old}: drop its SUPERSEDED_REASONS "
                             "entry")
    for node in replaced:
        verdicts[node]["reasons"] = list(new)
    return {**expect, "verdicts": verdicts}


def _quantity(resource: str, value: Any) -> str:
    if resource == "cpu":
        return f"{value}m"
    return str(value)


def _requests(reqs: dict[str, Any]) -> dict[str, str]:
    return {k: _quantity(k, v) for k, v in reqs.items()}


def _container(i: int, c: dict[str, Any], init: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"{'init' if init else 'c'}{i}", "image": "pause"}
    if "requests" in c:
        out["resources"] = {"requests": _requests(c["requests"])}
    if c.get("restart_policy"):
        out["restartPolicy"] = c["restart_policy"]
    return out


def _node_affinity(aff: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "preferred" in aff:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": t["weight"], "preference": {"matchExpressions": t["matchExpressions"]}}
            for t in aff["preferred"]]
    if "required" in aff:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": aff["required"]}
    return out


def pod_manifest(p: dict[str, Any], default_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(i, c)
                                           for i, c in enumerate(p.get("containers") or [])]}
    if p.get("init_containers"):
        spec["initContainers"] = [_container(i, c, init=True)
                                  for i, c in enumerate(p["init_containers"])]
    if p.get("overhead"):
        spec["overhead"] = _requests(p["overhead"])
    if p.get("tolerations"):
        spec["tolerations"] = p["tolerations"]
    if "priority" in p:
        spec["priority"] = p["priority"]
    if p.get("topologySpreadConstraints"):
        spec["topologySpreadConstraints"] = p["topologySpreadConstraints"]
    if p.get("affinity"):
        aff = dict(p["affinity"])
        if "nodeAffinity" in aff:
            aff["nodeAffinity"] = _node_affinity(aff["nodeAffinity"])
        spec["affinity"] = aff
    if p.get("node"):
        spec["nodeName"] = p["node"]
    meta: dict[str, Any] = {"name": p.get("name", default_name),
                            "namespace": p.get("namespace", "default")}
    if p.get("labels"):
        meta["labels"] = p["labels"]
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if "start_time" in p:
        # Only the order of start times matters; one second per unit keeps them distinct.
        when = dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=p["start_time"])
        doc["status"] = {"phase": "Running",
                         "startTime": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    return doc


def node_manifest(n: dict[str, Any], default_pods: int | None) -> dict[str, Any]:
    alloc = _requests(n.get("allocatable") or {})
    if default_pods is not None:
        alloc.setdefault("pods", str(default_pods))
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": n["name"], "labels": n.get("labels") or {}},
                            "spec": {}, "status": {"allocatable": alloc}}
    if n.get("taints"):
        node["spec"]["taints"] = n["taints"]
    return node


def pdb_manifest(i: int, pdb: dict[str, Any]) -> dict[str, Any]:
    status = dict(pdb.get("status") or {})
    disrupted = status.pop("disruptedPods", [])
    status["disruptedPods"] = {name: "2020-01-01T00:00:00Z" for name in disrupted}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{i}", "namespace": pdb.get("namespace", "default")},
            "spec": {"selector": pdb.get("selector")}, "status": status}
