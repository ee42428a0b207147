"""PodLifeTime (descheduler 0.36): evict the pods every given filter matches, oldest first.

The filters, any subset but at least one: ``maxPodLifeTimeSeconds`` (age is ``now −
metadata.creationTimestamp`` in whole seconds, strictly greater than the limit; a pod from the
future is never old); ``states`` (the pod's phase, its status reason, or a container's waiting or
terminated reason; init containers' with ``includingInitContainers``, ephemeral containers' with
``includingEphemeralContainers``); ``conditions`` (a status condition matching a filter's type,
status and reason, each when set, and that last changed at least
``minTimeSinceLastTransitionSeconds`` ago when set); ``exitCodes`` (a terminated container's exit
code, init containers' with ``includingInitContainers``). ``ownerKinds`` keeps (include) or drops
(exclude) pods by their owners' kinds. The pods of all nodes are evicted together from the
oldest, so limits and PodDisruptionBudgets stop the youngest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.api.errors import InputError
from kubeberth.api.objects import ContainerStatus, Node
from kubeberth.api.times import parse_time_or_none
from kubeberth.api.validation import check_int32
from kubeberth.descheduling import args as a
from kubeberth.descheduling.framework import PluginSpec, PodView
from kubeberth.descheduling.helpers import ScopedPlugin

NAME = "PodLifeTime"
POINTS = ("deschedule",)
ALLOWED_STATES = (
    "Running", "Pending", "Succeeded", "Failed", "Unknown",
    "NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError",
    "PodInitializing", "ContainerCreating",
    "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError", "ErrImagePull",
    "CreateContainerError", "InvalidImageName",
    "OOMKilled", "Error", "Completed", "DeadlineExceeded", "Evicted", "ContainerCannotRun",
    "StartError",
)
_CONDITION_FIELDS = ("type", "status", "reason", "minTimeSinceLastTransitionSeconds")


@dataclass(frozen=True, slots=True)
class ConditionFilter:
    """One ``conditions`` entry; empty fields (None for the time) are not checked."""

    type: str = ""
    status: str = ""
    reason: str = ""
    min_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Args:
    max_pod_lifetime_seconds: int | None = None
    scope: a.PodScope = a.EVERY_POD
    states: tuple[str, ...] = ()
    conditions: tuple[ConditionFilter, ...] = ()
    exit_codes: frozenset[int] = frozenset()
    owner_kinds: a.Namespaces = a.ALL_NAMESPACES  # include/exclude, of owner kinds
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False


def parse_args(raw: Mapping[str, Any]) -> Args:
    a.reject_unknown(raw, ("maxPodLifeTimeSeconds", *a.SCOPE_FIELDS, "states", "conditions",
                           "exitCodes", "ownerKinds", "includingInitContainers",
                           "includingEphemeralContainers"))
    limit = a.uint(raw, "maxPodLifeTimeSeconds")
    states = a.choices(raw, "states", ALLOWED_STATES, "state {!r} is not supported",
                       "one of " + ", ".join(sorted(ALLOWED_STATES))) or ()
    owner_kinds = _owner_kinds(raw)
    conditions = _conditions(raw)
    exit_codes = a.integers(raw, "exitCodes")
    for i, code in enumerate(exit_codes):
        check_int32(code, f"exitCodes[{i}]")
    if limit is None and not states and not conditions and not exit_codes:
        raise InputError("at least one filtering criterion must be specified "
                         "(maxPodLifeTimeSeconds, states, conditions, or exitCodes)",
                         field="maxPodLifeTimeSeconds",
                         expected="maxPodLifeTimeSeconds, states, conditions or exitCodes")
    return Args(max_pod_lifetime_seconds=limit, scope=a.scope(raw), states=states,
                conditions=conditions, exit_codes=frozenset(exit_codes),
                owner_kinds=owner_kinds,
                including_init_containers=a.boolean(raw, "includingInitContainers"),
                including_ephemeral_containers=a.boolean(raw, "includingEphemeralContainers"))


def _owner_kinds(raw: Mapping[str, Any]) -> a.Namespaces:
    """``ownerKinds``: include or exclude, lists of kinds (the shape of ``namespaces``)."""
    value = raw.get("ownerKinds")
    if value is None:
        return a.ALL_NAMESPACES
    if not isinstance(value, Mapping):
        raise InputError("ownerKinds is not a mapping", field="ownerKinds",
                         expected="a mapping with include or exclude")
    try:
        a.reject_unknown(value, ("include", "exclude"))
        include, exclude = a.strings(value, "include") or (), a.strings(value, "exclude") or ()
    except InputError as err:
        raise err.at(field="ownerKinds") from None
    if include and exclude:
        raise InputError("only one of Include/Exclude ownerKinds can be set", field="ownerKinds",
                         expected="either ownerKinds.include or ownerKinds.exclude")
    return a.Namespaces(include, exclude)


def _conditions(raw: Mapping[str, Any]) -> tuple[ConditionFilter, ...]:
    items = raw.get("conditions")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise InputError("conditions is not a list", field="conditions",
                         expected="a list of {type, status, reason, "
                         "minTimeSinceLastTransitionSeconds}")
    out = []
    for i, item in enumerate(items):
        where = f"conditions[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("the condition filter is not a mapping", field=where,
                             expected="a mapping with type, status, reason or "
                             "minTimeSinceLastTransitionSeconds")
        try:
            a.reject_unknown(item, _CONDITION_FIELDS)
            f = ConditionFilter(a.string(item, "type"), a.string(item, "status"),
                                a.string(item, "reason"),
                                a.uint(item, "minTimeSinceLastTransitionSeconds"))
        except InputError as err:
            raise err.at(field=where) from None
        if f == ConditionFilter():
            raise InputError(f"{where}: at least one of type, status, reason, or "
                             "minTimeSinceLastTransitionSeconds must be set", field=where,
                             expected="type, status, reason or "
                             "minTimeSinceLastTransitionSeconds")
        out.append(f)
    return tuple(out)


def _terminated(statuses: list[ContainerStatus]) -> list[tuple[str, int]]:
    return [(s.state.terminated.reason, s.state.terminated.exit_code) for s in statuses
            if s.state.terminated is not None]


class PodLifeTime(ScopedPlugin[Args]):
    def _statuses(self, pod: PodView, *, ephemeral: bool) -> list[ContainerStatus]:
        status = pod.pod.status
        statuses = list(status.container_statuses)
        if self.args.including_init_containers:
            statuses += status.init_container_statuses
        if ephemeral and self.args.including_ephemeral_containers:
            statuses += status.ephemeral_container_statuses
        return statuses

    def _in_state(self, pod: PodView) -> bool:
        states = self.args.states
        if not states or pod.phase in states or pod.pod.status.reason in states:
            return True
        statuses = self._statuses(pod, ephemeral=True)
        return any(s.state.waiting is not None and s.state.waiting.reason in states
                   for s in statuses) or any(r in states for r, _ in _terminated(statuses))

    def _owned_as_asked(self, pod: PodView) -> bool:
        kinds = {ref.kind for ref in pod.owners}
        include, exclude = self.args.owner_kinds.include, self.args.owner_kinds.exclude
        if include:
            return bool(kinds.intersection(include))
        return not kinds.intersection(exclude)

    def _condition_matches(self, pod: PodView, now: float) -> bool:
        if not self.args.conditions:
            return True
        for f in self.args.conditions:
            for cond in pod.pod.status.conditions:
                wanted = ((f.type, cond.type), (f.status, cond.status), (f.reason, cond.reason))
                if any(want and got != want for want, got in wanted):
                    continue
                if f.min_seconds is not None:
                    changed = parse_time_or_none(cond.last_transition_time)
                    if changed is None or now - changed < 0 or int(now - changed) < f.min_seconds:
                        continue
                return True
        return False

    def _exit_code_matches(self, pod: PodView) -> bool:
        codes = self.args.exit_codes
        return not codes or any(c in codes for _, c in
                                _terminated(self._statuses(pod, ephemeral=False)))

    def _matches(self, pod: PodView, now: float) -> bool:
        limit = self.args.max_pod_lifetime_seconds
        if limit is not None and not (now - pod.created >= 0 and int(now - pod.created) > limit):
            return False
        return (self._in_state(pod) and self._owned_as_asked(pod)
                and self._condition_matches(pod, now) and self._exit_code_matches(pod))

    def deschedule(self, nodes: list[Node]) -> None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        now = snapshot.now
        chosen = [pod for node in nodes for pod in snapshot.all_pods_on_node(node.metadata.name)
                  if self.in_scope(pod) and self._matches(pod, now)]
        chosen.sort(key=lambda pod: pod.created)
        evictor.evict_in_order(((pod, self._reason(pod, now)) for pod in chosen), NAME)

    def _reason(self, pod: PodView, now: float) -> str:
        limit = self.args.max_pod_lifetime_seconds
        if limit is not None:
            return (f"pod is {int(now - pod.created)}s old, more than maxPodLifeTimeSeconds "
                    f"({limit})")
        return f"pod is {int(now - pod.created)}s old and matches the PodLifeTime filters"


SPEC = PluginSpec(NAME, POINTS, parse_args, PodLifeTime)
