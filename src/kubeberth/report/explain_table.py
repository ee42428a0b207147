"""Terminal renderings of ``explain`` output and of the plugin registry.

The JSON from :func:`kubeberth.sim.explain.explain` is the contract; these tables are a reading
aid built only from it, so what a user sees on the terminal is never richer or poorer than what a
script gets from ``-o json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from kubeberth.admission.checks import CheckRegistry
from kubeberth.descheduling.registry import DeschedulerRegistry
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.placement import POINT_KINDS
from kubeberth.scheduling.framework.registry import Registry
from kubeberth.scheduling.framework.runtime import EXTENSION_POINT_KINDS
from kubeberth.state.cluster import ClusterState


def _score_table(columns: tuple[str, ...],
                 scores: list[dict[str, Any]]) -> tuple[Table, list[str]]:
    """A table of ``columns``, then one per score plugin (in the order first met) and the
    total; with those plugins' names, for the rows to follow."""
    plugins = list(dict.fromkeys(name for row in scores for name in row))
    t = Table(show_header=True, header_style="bold")
    for column in columns:
        t.add_column(column)
    for name in plugins:
        t.add_column(name, justify="right")
    t.add_column("total", justify="right")
    return t, plugins


def render_explain(console: Console, data: dict[str, Any]) -> None:
    for pod in data["pods"]:
        head = f"[bold]{pod['pod']}[/]: {pod['result']}"
        if pod.get("selectedNode"):
            head += f" → [green]{pod['selectedNode']}[/]"
        if pod.get("nominatedNode"):
            head += f" (nominated [yellow]{pod['nominatedNode']}[/], victims: " \
                    f"{', '.join(pod['victims']) or 'none'})"
        console.print(head)
        if pod.get("message"):
            console.print(f"  {pod['message']}", highlight=False)
        nodes = pod.get("nodes") or {}
        if not nodes:
            continue
        t, score_plugins = _score_table(("node", "filter"),
                                        [entry["score"] for entry in nodes.values()])
        for node, entry in nodes.items():
            failures = [f"{pl}: {', '.join(v['reasons']) or v['code']}"
                        for pl, v in entry["filter"].items() if v["code"] != "Success"]
            verdict = "[green]pass[/]" if entry["feasible"] else "[red]" + "; ".join(failures) \
                + "[/]"
            row = [node + (" ✓" if node == pod.get("selectedNode") else ""), verdict]
            for name in score_plugins:
                s = entry["score"].get(name)
                row.append(f"{s['normalized']} ({s['weighted']})" if s else "")
            row.append(str(entry["total"]) if entry["scored"] else "")
            t.add_row(*row)
        console.print(t)
    for group in data.get("podGroups", []):
        render_pod_group(console, group)
    if data.get("unmodelledPlugins"):
        console.print("not modelled (no effect): " + ", ".join(data["unmodelledPlugins"]))
    if data.get("volcano"):
        _render_volcano(console, data["volcano"])


def _render_volcano(console: Console, vc: dict[str, Any]) -> None:
    """The Volcano sessions' outcome: PodGroups with their tasks and shares, and utilisation."""
    console.print(f"[bold]Volcano[/]: {vc['sessions']} session(s) every {vc['schedulePeriod']}, "
                  f"actions {', '.join(vc['actions'])}")
    t = Table(show_header=True, header_style="bold")
    for col in ("podgroup", "queue", "phase", "tasks", "allocated", "dominant share"):
        t.add_column(col)
    for name, g in vc["podGroups"].items():
        alloc = ", ".join(f"{k} {v:g}" for k, v in g["allocated"].items())
        t.add_row(name, g["queue"], g["phase"], str(g["tasks"]), alloc,
                  f"{g['dominantShare']:.0%}")
    console.print(t)
    util = ", ".join(f"{k} {v:.0%}" for k, v in vc["cluster"]["utilisation"].items())
    console.print(f"cluster utilisation: {util}", highlight=False)


def render_pod_group(console: Console, group: dict[str, Any]) -> None:
    """One pod-group cycle: its placements, their feasibility, scores and the choice."""
    topology = f", topology {group['topologyKey']}" if group.get("topologyKey") else ""
    console.print(f"[bold]pod group {group['podGroup']}[/] ({group['policy']}, minCount "
                  f"{group['minCount']}{topology}): {group['result']}"
                  + (f" → [green]{group['chosenPlacement'] or 'all nodes'}[/]"
                     if group["result"] == "Scheduled" else ""), highlight=False)
    if group.get("message"):
        console.print(f"  {group['message']}", highlight=False)
    t, score_plugins = _score_table(("placement", "nodes", "feasibility"),
                                    [placement["scores"] for placement in group["placements"]])
    for placement in group["placements"]:
        verdict = placement["feasibility"]
        if placement.get("failedPod"):
            verdict += f": {placement['failedPod']} ({placement['failedPlugin'] or '-'})"
        row = [(placement["name"] or "all nodes") + (" ✓" if placement["chosen"] else ""),
               ", ".join(placement["nodes"]), verdict]
        for name in score_plugins:
            s = placement["scores"].get(name)
            row.append(f"{s['raw']} → {s['normalized']} ({s['weighted']})" if s else "")
        row.append("" if placement["total"] is None else str(placement["total"]))
        t.add_row(*row)
    console.print(t)
    pre = group.get("preemption")
    if pre is not None:
        by = f" ({pre['plugin']})" if pre["plugin"] else ""
        console.print(f"  preemption{by}: {pre['result']}"
                      + (f": {pre['message']}" if pre["message"] else ""), highlight=False)
        if pre["victims"]:
            console.print("    victims: " + ", ".join(pre["victims"]), highlight=False)
        if pre["nominatedNodes"]:
            console.print("    nominated: " + ", ".join(
                f"{pod} → {node}" for pod, node in pre["nominatedNodes"].items()),
                highlight=False)
    for note in group.get("notes", []):
        console.print(f"  note: {note}", highlight=False)


def plugin_listing(scheduling: Registry, descheduling: DeschedulerRegistry,
                   checks: CheckRegistry) -> dict[str, list[dict[str, Any]]]:
    """Every family's registered plugins and what each implements (``kubeberth plugins``)."""
    handle = Handle(ClusterState(), clock=lambda: 0.0, rng=np.random.default_rng(0))
    sched = []
    for name in scheduling:
        factory = scheduling.get(name)
        assert factory is not None
        plugin = factory(None, handle)
        sched.append({"name": name, "extensionPoints": [
            p for p, kind in (*EXTENSION_POINT_KINDS.items(), *POINT_KINDS.items())
            if isinstance(plugin, kind)]})
    return {
        "scheduling": sched,
        "descheduling": [{"name": name, "extensionPoints": list(spec.points)}
                         for name, spec in descheduling.items()],
        "admissionChecks": [{"name": name, "extensionPoints": ["controllerName"]}
                            for name in checks],
    }


def plugin_table(listing: dict[str, list[dict[str, Any]]]) -> Table:
    t = Table(title="registered plugins")
    t.add_column("family")
    t.add_column("plugin")
    t.add_column("extension points")
    for family, plugins in listing.items():
        for row in plugins:
            t.add_row(family, row["name"], ", ".join(row["extensionPoints"]))
    return t
