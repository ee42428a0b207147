"""The production PromQL for "free in-cluster GPUs", built from kube-state-metrics series.

The live controller and the simulated one must agree on what the signal means, so the query is
generated here from the same knobs the simulation reads (the VK node names, the pods to
exclude) and :class:`~kubeberth.spill.signal.ClusterSignal` computes the same quantity
from a snapshot. In words: allocatable ``nvidia.com/gpu`` of nodes that are Ready, schedulable
and not virtual-kubelet nodes, minus the GPU requests of Running pods on those nodes (pods
matched by the exclusion selector left out), floored at 0.

kube-state-metrics names the resource ``nvidia_com_gpu`` and exposes pod labels as
``label_<sanitised key>`` on ``kube_pod_labels`` only for keys in its
``--metric-labels-allowlist``; the exclusion by label needs those keys allowlisted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kubeberth.spill.config import ExcludePods, SpillConfig

_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_RE2_META = re.compile(r"([.^$*+?()\[\]{}|\\])")


def ksm_label_name(key: str) -> str:
    """kube-state-metrics' label name for a Kubernetes label key (``app.kubernetes.io/name`` →
    ``label_app_kubernetes_io_name``)."""
    return "label_" + _LABEL_CHARS.sub("_", key)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _regex_alternatives(values: Sequence[str]) -> str:
    return _quote("|".join(_RE2_META.sub(r"\\\1", v) for v in values))


def configured_query(cfg: SpillConfig) -> str:
    """The query a SpillConfig runs: its own ``signal.query``, else :func:`free_gpu_query` for
    its VK node and excluded pods."""
    c = cfg.controller
    return c.signal.query or free_gpu_query([cfg.virtual_node.name], c.exclude_pods)


def free_gpu_query(vk_nodes: Sequence[str], exclude: ExcludePods) -> str:
    """The instant query whose single sample is the number of free in-cluster GPUs."""
    not_vk = f"node!~{_regex_alternatives(vk_nodes)}" if vk_nodes else ""
    sep = "," if not_vk else ""
    eligible = ("and on(node) (kube_node_spec_unschedulable == 0)\n"
                "      and on(node) (kube_node_status_condition"
                '{condition="Ready",status="true"} == 1)')
    excluded = []
    if exclude.match_labels:
        matchers = ",".join(f"{ksm_label_name(k)}={_quote(v)}"
                            for k, v in sorted(exclude.match_labels.items()))
        excluded.append(f"      unless on(namespace, pod) kube_pod_labels{{{matchers}}}")
    if exclude.priority_class_names:
        classes = _regex_alternatives(sorted(exclude.priority_class_names))
        excluded.append("      unless on(namespace, pod) "
                        f"kube_pod_info{{priority_class=~{classes}}}")
    unless = ("\n" + "\n".join(excluded)) if excluded else ""
    return (
        "clamp_min(\n"
        "  sum(\n"
        f'    kube_node_status_allocatable{{resource="nvidia_com_gpu"{sep}{not_vk}}}\n'
        f"      {eligible}\n"
        "  )\n"
        "  - (\n"
        "    sum(\n"
        f'      kube_pod_container_resource_requests{{resource="nvidia_com_gpu"{sep}{not_vk}}}\n'
        '      and on(namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)\n'
        f"      {eligible}"
        f"{unless}\n"
        "    ) or vector(0)\n"
        "  ),\n"
        "  0\n"
        ")"
    )
