"""DefaultBinder: take every binding, which the host then records.

Upstream's DefaultBinder posts a Binding to the API server. Plugins here never act on the world
(see docs/design.md), so Bind only answers Success: "bind this pod to this node"; the simulator
updates its state and the live adapter posts the Binding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import BindPlugin
from kubeberth.scheduling.framework.status import SUCCESS, Status
from kubeberth.scheduling.plugins.helper import reject_args
from kubeberth.state.cluster import ClusterState, PodInfo

NAME = "DefaultBinder"


class DefaultBinder(BindPlugin):
    name = NAME

    def bind(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> Status:
        return SUCCESS


def new(args: Mapping[str, Any] | None, handle: Handle) -> DefaultBinder:
    reject_args(NAME, args)
    return DefaultBinder()
