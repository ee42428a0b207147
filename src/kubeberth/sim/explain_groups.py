"""The ``podGroups`` part of ``kubeberth explain -o json``: one entry per pod-group cycle, with
its candidate placements, each one's feasibility (the first pod that did not fit and the plugin
that said so), every placement-score plugin's raw, normalized and weighted score, and the
chosen placement; when it fitted nowhere, what workload-aware preemption (the podGroupPostFilter
plugins) found. Documented in docs/explain.md."""

from __future__ import annotations

from typing import Any

from kubeberth.scheduling.pod_group_cycle import GroupOutcome


def render_group(g: GroupOutcome) -> dict[str, Any]:
    group = g.group
    return {
        "podGroup": group.key,
        "profile": g.profile,
        "policy": group.policy,
        "minCount": group.min_count,
        "topologyKey": group.topology_key or None,
        "priority": group.priority,
        "disruptionMode": group.disruption_mode,
        "pods": list(g.pods),
        "scheduledBefore": list(g.scheduled_before),
        "result": g.result,
        "message": g.message,
        "placementsToScore": g.placements_to_score,
        "chosenPlacement": g.chosen,
        "placements": [{
            "name": p.name,
            "nodes": list(p.nodes),
            "feasibility": p.verdict,
            "failedPod": p.failed_pod or None,
            "failedPlugin": p.failed_plugin or None,
            "message": p.message,
            "assignments": dict(p.assignments),
            "scores": {name: {"raw": raw, "normalized": norm, "weighted": weighted}
                       for name, (raw, norm, weighted) in p.scores.items()},
            "total": p.total,
            "chosen": p.name == g.chosen and g.chosen is not None,
        } for p in g.placements],
        "preemption": None if (pre := g.preemption) is None else {
            "plugin": pre.plugin or None,
            "result": pre.code.label,
            "message": pre.message,
            "victims": list(pre.victims),
            "nominatedNodes": dict(pre.nominated),
        },
        "notes": [],
    }


__all__ = ["render_group"]
