"""``volcano-scheduler.conf``: the actions a session runs and the tiers of plugins.

Read from the file itself or from a ConfigMap holding it under ``data.volcano-scheduler.conf``
(as Volcano's Helm chart deploys it). Unknown actions, plugins and fields are errors naming
them; known Volcano actions and plugins that kubeberth does not model yet are errors too, so a
run never silently differs from Volcano's. Without a file Volcano's default configuration
applies (``DefaultSchedulerConf``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.config.yamlsrc import Document, Source, load_documents, parse_source

CONF_KEY = "volcano-scheduler.conf"
MODELLED_ACTIONS = ("enqueue", "allocate", "backfill")
VOLCANO_ACTIONS = (*MODELLED_ACTIONS, "preempt", "reclaim", "shuffle", "gangpreempt",
                   "gangreclaim")
MODELLED_PLUGINS = ("priority", "gang", "conformance", "drf", "proportion", "predicates",
                    "nodeorder", "binpack", "overcommit")
VOLCANO_PLUGINS = (*MODELLED_PLUGINS, "capacity", "task-topology", "sla", "tdm", "numaaware",
                   "deviceshare", "extender", "cdp", "nodegroup", "pdb", "rescheduling",
                   "resourcequota", "usage", "network-topology-aware", "resource-strategy-fit")
# The per-plugin switches (conf.PluginOption); absent means enabled.
ENABLE_FLAGS = {
    "enableJobOrder": "job_order", "enableHierarchy": "hierarchy",
    "enableJobReady": "job_ready", "enableJobPipelined": "job_pipelined",
    "enableTaskOrder": "task_order", "enablePreemptable": "preemptable",
    "enableReclaimable": "reclaimable", "enablePreemptive": "preemptive",
    "enableQueueOrder": "queue_order", "enabledClusterOrder": "cluster_order",
    "enablePredicate": "predicate", "enableBestNode": "best_node",
    "enableNodeOrder": "node_order", "enableTargetJob": "target_job",
    "enableReservedNodes": "reserved_nodes", "enableJobEnqueued": "job_enqueued",
    "enabledVictim": "victim", "enableJobStarving": "job_starving",
    "enabledOverused": "overused", "enabledAllocatable": "allocatable",
    "enabledHyperNodeOrder": "hyper_node_order", "enabledSubJobReady": "sub_job_ready",
    "enabledSubJobPipelined": "sub_job_pipelined", "enabledSubJobOrder": "sub_job_order",
    "enabledHyperNodeGradient": "hyper_node_gradient",
}
DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


@dataclass(slots=True)
class PluginOption:
    """One plugin in a tier: its switches (a name from ENABLE_FLAGS' values -> on) and args."""

    name: str
    flags: dict[str, bool] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    def enabled(self, switch: str) -> bool:
        """Whether a switch is on; absent switches are on (ApplyPluginConfDefaults)."""
        return self.flags.get(switch, True)


@dataclass(slots=True)
class VolcanoConf:
    actions: list[str]
    tiers: list[list[PluginOption]]
    source: str = "<default>"

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None


def load_volcano_conf(path: str | Path | None) -> VolcanoConf:
    """The configuration in ``path`` (the conf itself or a ConfigMap), or Volcano's default."""
    if path is None:
        return parse_volcano_conf(Source("<default volcano-scheduler.conf>", DEFAULT_CONF))
    docs = load_documents(path)
    if len(docs) != 1:
        raise InputError(f"the file holds {len(docs)} documents", source=str(path),
                         expected="one volcano-scheduler.conf or one ConfigMap holding it")
    doc = docs[0]
    if doc.kind == "ConfigMap":
        data = doc.data.get("data") or {}
        text = data.get(CONF_KEY) if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise doc.error(f"the ConfigMap has no {CONF_KEY}", field=f"data.{CONF_KEY}",
                            expected="the scheduler configuration as a string under "
                                     f"data.{CONF_KEY}")
        try:
            return parse_volcano_conf(Source(f"{doc.source.name} (data.{CONF_KEY})", text))
        except InputError as err:
            raise err.at(source=err.source or doc.source.name) from None
    return _parse(doc)


def parse_volcano_conf(source: Source) -> VolcanoConf:
    docs = parse_source(source)
    if len(docs) != 1:
        raise InputError(f"the configuration holds {len(docs)} documents", source=source.name,
                         expected="one mapping with actions and tiers")
    return _parse(docs[0])


def _parse(doc: Document) -> VolcanoConf:
    data = doc.data
    for key in data:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            raise doc.error(f"unknown field {key!r}", field=str(key),
                            expected="actions, tiers, configurations or metrics")
    if data.get("configurations"):
        raise doc.error("per-action configurations are not modelled yet", field="configurations",
                        expected="no configurations (see docs/volcano.md)")
    raw = data.get("actions")
    if not isinstance(raw, str) or not raw.strip():
        raise doc.error("actions is missing or not a string", field="actions",
                        expected='a comma-separated string such as "enqueue, allocate, '
                                 'backfill"')
    actions = [a.strip() for a in raw.split(",") if a.strip()]
    for a in actions:
        if a not in VOLCANO_ACTIONS:
            raise doc.error(f"unknown action {a!r}", field="actions",
                            expected="actions among " + ", ".join(VOLCANO_ACTIONS))
        if a not in MODELLED_ACTIONS:
            raise doc.error(f"action {a!r} is not modelled yet", field="actions",
                            expected="actions among " + ", ".join(MODELLED_ACTIONS)
                            + " (see docs/volcano.md)")
    tiers_raw = data.get("tiers")
    if not isinstance(tiers_raw, list) or not tiers_raw:
        raise doc.error("tiers is missing or empty", field="tiers",
                        expected="a list of tiers, each with plugins: [{name: ...}]")
    tiers: list[list[PluginOption]] = []
    seen: set[str] = set()
    for t, tier in enumerate(tiers_raw):
        where = f"tiers[{t}]"
        plugins = tier.get("plugins") if isinstance(tier, dict) else None
        if not isinstance(plugins, list):
            raise doc.error("the tier has no plugins list", field=f"{where}.plugins",
                            expected="plugins: a list of {name: ...}")
        out: list[PluginOption] = []
        for i, p in enumerate(plugins):
            pw = f"{where}.plugins[{i}]"
            out.append(_plugin(doc, p, pw, seen))
        tiers.append(out)
    return VolcanoConf(actions, tiers, doc.source.name)


def _plugin(doc: Document, p: Any, where: str, seen: set[str]) -> PluginOption:
    if not isinstance(p, dict) or not isinstance(p.get("name"), str):
        raise doc.error("the plugin has no name", field=f"{where}.name",
                        expected="a plugin name such as drf")
    name = p["name"]
    if name not in VOLCANO_PLUGINS:
        raise doc.error(f"unknown plugin {name!r}", field=f"{where}.name",
                        expected="a Volcano plugin: " + ", ".join(VOLCANO_PLUGINS))
    if name not in MODELLED_PLUGINS:
        raise doc.error(f"plugin {name!r} is not modelled yet", field=f"{where}.name",
                        expected="plugins among " + ", ".join(MODELLED_PLUGINS)
                        + " (see docs/volcano.md)")
    if name in seen:
        raise doc.error(f"plugin {name!r} appears twice", field=f"{where}.name",
                        expected="each plugin once")
    seen.add(name)
    opt = PluginOption(name)
    for key, value in p.items():
        if key == "name":
            continue
        if key == "arguments":
            if value is not None and not isinstance(value, dict):
                raise doc.error("arguments is not a mapping", field=f"{where}.arguments",
                                expected="a mapping of argument names to values")
            opt.arguments = dict(value or {})
            continue
        switch = ENABLE_FLAGS.get(key)
        if switch is None:
            raise doc.error(f"unknown field {key!r}", field=f"{where}.{key}",
                            expected="name, arguments or a switch: " + ", ".join(ENABLE_FLAGS))
        if not isinstance(value, bool):
            raise doc.error(f"{key} is {value!r}", field=f"{where}.{key}",
                            expected="true or false")
        opt.flags[switch] = value
    return opt


__all__ = ["CONF_KEY", "DEFAULT_CONF", "PluginOption", "VolcanoConf", "load_volcano_conf",
           "parse_volcano_conf"]
