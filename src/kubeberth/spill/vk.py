"""The virtual-kubelet spill node: one node that stands for an external GPU provider.

virtual-kubelet registers a provider as a node with a large advertised capacity; production
keeps the permanent taint ``vk.node.com=true:NoSchedule`` on it so only workloads migrated
there (which tolerate it) land on it, and the spill controller adds
``vk.node.com/low-gpu-usage=true:NoSchedule``, which no pod tolerates, while the cluster has
free GPUs. This module builds that Node and its taint changes as new objects; it never
mutates a node the snapshot holds (the host applies the update).
"""

from __future__ import annotations

from kubeberth.api.objects import Node, NodeCondition, NodeSpec, NodeStatus, ObjectMeta, Taint
from kubeberth.api.resources import GPU, GPU_MILLI, resource_map
from kubeberth.spill.config import VirtualNode

VK_TAINT = Taint(key="vk.node.com", value="true", effect="NoSchedule")
LOW_GPU_TAINT = Taint(key="vk.node.com/low-gpu-usage", value="true", effect="NoSchedule")
UNREACHABLE_TAINT = Taint(key="node.kubernetes.io/unreachable", effect="NoSchedule")


def virtual_node(cfg: VirtualNode) -> Node:
    """The VK node: advertised capacity (plus the milli-GPU pool kubeberth uses for GPU-share
    pods, 1000 per advertised GPU, unless given), its labels and the permanent taint."""
    capacity = dict(cfg.capacity)
    gpus = resource_map(capacity, "virtualNode.capacity").get(GPU, 0) // 1000
    if GPU_MILLI not in capacity and gpus:
        capacity[GPU_MILLI] = 1000 * gpus
    labels = {**cfg.labels, "kubernetes.io/hostname": cfg.name}
    return Node(metadata=ObjectMeta(name=cfg.name, labels=labels),
                spec=NodeSpec(taints=[VK_TAINT]),
                status=NodeStatus(capacity=dict(capacity), allocatable=capacity))


def _same(a: Taint, b: Taint) -> bool:
    return a.key == b.key and a.effect == b.effect


def with_taint(node: Node, taint: Taint) -> Node:
    """A copy of ``node`` carrying ``taint`` (unchanged taints keep their order)."""
    taints = [t for t in node.spec.taints if not _same(t, taint)] + [taint]
    return Node(metadata=node.metadata, spec=NodeSpec(unschedulable=node.spec.unschedulable,
                                                      taints=taints,
                                                      provider_id=node.spec.provider_id),
                status=node.status)


def without_taint(node: Node, taint: Taint) -> Node:
    taints = [t for t in node.spec.taints if not _same(t, taint)]
    return Node(metadata=node.metadata, spec=NodeSpec(unschedulable=node.spec.unschedulable,
                                                      taints=taints,
                                                      provider_id=node.spec.provider_id),
                status=node.status)


def with_ready(node: Node, ready: bool) -> Node:
    """A copy with the Ready condition set (an outage makes the provider unreachable)."""
    conds = [c for c in node.status.conditions if c.type != "Ready"]
    conds.append(NodeCondition(type="Ready", status="True" if ready else "Unknown",
                               reason="" if ready else "NodeStatusUnknown"))
    status = NodeStatus(capacity=node.status.capacity, allocatable=node.status.allocatable,
                        conditions=conds)
    return Node(metadata=node.metadata, spec=node.spec, status=status)


def has_taint(node: Node, taint: Taint) -> bool:
    return any(_same(t, taint) for t in node.spec.taints)
