"""TopologyPlacementGenerator: one placement per value of the group's topology key (KEP-5732).

A PodGroup with ``schedulingConstraints.topology[0].key`` (e.g. a rack label) gets one candidate
placement per distinct value of that node label among the parent placement's nodes, in sorted
order, named ``key=value``; nodes without the label are in none. Once members of the group are
bound or assumed, only the domain holding them is offered (an error if they span several or sit
on a node without the label). A group without a constraint gets the parent placement (all
nodes) as its one placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.placement import (
    Placement,
    PlacementGeneratePlugin,
    PodGroupInfo,
)
from kubeberth.scheduling.framework.status import SUCCESS, Code, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import ClusterState

NAME = "TopologyPlacementGenerator"


class TopologyPlacementGenerator(PlacementGeneratePlugin):
    name = NAME

    def generate_placements(self, state: CycleState, group: PodGroupInfo, parent: Placement,
                            snap: ClusterState) -> tuple[list[Placement], Status]:
        key = group.group.topology_key
        if not key:
            return [parent], SUCCESS
        labels = snap.labels
        if group.scheduled:
            domains = set()
            for member in group.scheduled:
                value = labels[member.node].get(key)
                if value is None:
                    return [], Status(Code.ERROR, (f"no topology domain found for pod "
                                                   f"{member.key}",))
                domains.add(value)
            if len(domains) > 1:
                return [], Status(Code.ERROR, (f"more than 1 domain found for pod group "
                                               f"{group.group.key}: {sorted(domains)}",))
        else:
            domains = {v for n in parent.nodes.tolist() if (v := labels[n].get(key)) is not None}
        by_domain: dict[str, list[int]] = {d: [] for d in domains}
        for n in parent.nodes.tolist():
            value = labels[n].get(key)
            if value in by_domain:
                by_domain[value].append(n)
        return [Placement(f"{key}={d}", np.array(by_domain[d], dtype=np.int64))
                for d in sorted(domains)], SUCCESS


def new(args: Mapping[str, Any] | None, handle: Handle) -> TopologyPlacementGenerator:
    reject_args(NAME, args)
    return TopologyPlacementGenerator()
