"""The Descheduler inside a simulation: a DeschedulerPolicy run as the engine's periodic pass.

The policy code (:mod:`kubeberth.descheduling.registry`) judges a :class:`Snapshot` and applies
nothing. This module builds that snapshot from the simulator's cluster state, with the owners'
desired replicas so PDB percentages count what the controllers want (as upstream's disruption
controller does), and hands the evictions back to the engine, whose eviction path checks the
PDBs once more at eviction time, as the eviction API would. Like the descheduler binary with
``--descheduling-interval``, a pass runs every interval of simulated time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubeberth.descheduling.framework import Eviction
from kubeberth.descheduling.policy import DEFAULT_EVICTOR, DeschedulerPolicy
from kubeberth.descheduling.registry import DeschedulerRegistry, Snapshot, build_descheduler
from kubeberth.sim.engine import Simulation
from kubeberth.sim.owners import OwnerRuntime
from kubeberth.state.cluster import ClusterState

# Upstream's descheduler runs once when no interval is given; a simulation needs a period.
DEFAULT_INTERVAL = 300.0

OwnerReplicas = Mapping[tuple[str, str, str], int]


@dataclass(slots=True)
class PassLog:
    """What each pass did, for the run's summary."""

    passes: int = 0
    skipped_cycles: int = 0
    requested: int = 0
    refused_by_policy: int = 0
    by_plugin: dict[str, int] = field(default_factory=dict)


class SimDescheduler:
    """A validated policy as the engine's ``descheduler`` callable; ``registry`` adds
    out-of-tree plugins to the in-tree ones."""

    def __init__(self, policy: DeschedulerPolicy,
                 registry: DeschedulerRegistry | None = None) -> None:
        self._descheduler = build_descheduler(policy, registry)
        self._owners: Callable[[], OwnerReplicas] = dict
        self.log = PassLog()

    def attach(self, sim: Simulation) -> None:
        """Read desired replicas from the run's owner controllers from now on."""
        self._owners = lambda: owner_replicas(sim.owners)

    def __call__(self, state: ClusterState, now: float) -> list[Eviction]:
        result = self._descheduler.run_pass(Snapshot.from_cluster(state, now, self._owners()))
        log = self.log
        log.passes += 1
        log.skipped_cycles += result.cycle_skipped is not None
        log.requested += len(result.evictions)
        log.refused_by_policy += len(result.skipped)
        for decision in result.evictions:
            log.by_plugin[decision.plugin] = log.by_plugin.get(decision.plugin, 0) + 1
        return result.evictions


def owner_replicas(owners: OwnerRuntime) -> dict[tuple[str, str, str], int]:
    """(controller kind, namespace, name) -> desired replicas of every scalable owner; Jobs have
    no scale, so their pods are counted as they are."""
    out: dict[tuple[str, str, str], int] = {}
    for run in owners.runs.values():
        spec = run.spec
        if spec.kind != "Job" and not run.deleted:
            out[(spec.controller_kind, spec.namespace, spec.controller_name)] = run.desired
    return out


def policy_variant(policy: DeschedulerPolicy, *, min_pod_age: float | None = None,
                   max_per_node: int | None = None) -> DeschedulerPolicy:
    """``policy`` with every profile's DefaultEvictor ``minPodAge`` (seconds) and the policy's
    ``maxNoOfPodsToEvictPerNode`` replaced where given: the knobs a spill sweep compares."""
    out = copy.deepcopy(policy)
    if max_per_node is not None:
        out.max_pods_to_evict_per_node = max_per_node
    if min_pod_age is not None:
        for profile in out.profiles:
            args = profile.plugin_config.setdefault(DEFAULT_EVICTOR, {})
            args["minPodAge"] = f"{min_pod_age:g}s"
    return out
