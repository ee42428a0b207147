"""A pod's effective resource request, computed as kube-scheduler computes it.

Upstream (``component-helpers/resource.PodRequests``) sums the app containers, adds restartable
init containers (sidecars) to that sum, takes the per-resource maximum against each ordinary init
container plus the sidecars started before it, and finally adds the pod overhead. Scoring plugins
use a "non-zero" variant in which a container that does not mention cpu or memory is counted as
100m / 200Mi, so that request-less pods do not all pile onto one node. Both are computed once per
pod, in milli-units, after the API server's defaulting of requests from limits (a manifest read
from a file has not been through an API server).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Container, Node, Pod, ResourceMap
from kubeberth.api.quantity import EXPECTED_QUANTITY, to_milli

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU = "nvidia.com/gpu"
# Node-level milli-GPU pool used until per-device accounting exists (see docs/gpu.md).
GPU_MILLI = "kubeberth.io/gpu-milli"

DEFAULT_MILLI_CPU_REQUEST = 100  # 100m, upstream schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024 * 1000  # 200Mi in milli-bytes
_NON_ZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def resource_map(values: ResourceMap, field: str) -> dict[str, int]:
    """Parse a manifest ResourceList into milli-units, rejecting negative or unparsable values."""
    out: dict[str, int] = {}
    for name, raw in values.items():
        try:
            milli = to_milli(name, raw)
        except InputError as err:
            raise err.at(field=f"{field}.{name}") from None
        if milli < 0:
            raise InputError(
                f"negative quantity {raw!r}", field=f"{field}.{name}",
                expected=f"a non-negative {EXPECTED_QUANTITY}",
            )
        out[name] = milli
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)


def _container_requests(c: Container, field: str, non_zero: bool) -> dict[str, int]:
    """A container's requests after the API server's defaulting: a resource with a limit and
    no request requests its limit (``SetDefaults_Pod``)."""
    reqs = resource_map(c.resources.limits, f"{field}.resources.limits")
    reqs.update(resource_map(c.resources.requests, f"{field}.resources.requests"))
    if non_zero:
        for name, default in _NON_ZERO_DEFAULTS.items():
            reqs.setdefault(name, default)
    return reqs


def _requests(pod: Pod, non_zero: bool) -> dict[str, int]:
    reqs: dict[str, int] = {}
    for i, c in enumerate(pod.spec.containers):
        _add(reqs, _container_requests(c, f"spec.containers[{i}]", non_zero))
    sidecars: dict[str, int] = {}
    init_reqs: dict[str, int] = {}
    for i, c in enumerate(pod.spec.init_containers):
        creqs = _container_requests(c, f"spec.initContainers[{i}]", non_zero)
        if c.restart_policy == "Always":
            _add(reqs, creqs)
            _add(sidecars, creqs)
            effective = dict(sidecars)
        else:
            effective = dict(creqs)
            _add(effective, sidecars)
        _max(init_reqs, effective)
    _max(reqs, init_reqs)
    _add(reqs, resource_map(pod.spec.overhead, "spec.overhead"))
    return reqs


def pod_requests(pod: Pod) -> dict[str, int]:
    """Effective requests in milli-units (what NodeResourcesFit's filter and the cache count)."""
    return _requests(pod, non_zero=False)


def pod_non_zero_requests(pod: Pod) -> dict[str, int]:
    """Effective requests with the 100m/200Mi defaults for containers that omit cpu/memory."""
    return _requests(pod, non_zero=True)


def node_allocatable(node: Node) -> dict[str, int]:
    """Allocatable in milli-units; capacity stands in for a missing allocatable, as the kubelet
    would report it."""
    source = node.status.allocatable or node.status.capacity
    field = "status.allocatable" if node.status.allocatable else "status.capacity"
    return resource_map(source, field)


def is_extended_resource(name: str) -> bool:
    """Extended resources live in a domain other than kubernetes.io and are not hugepages."""
    if name in (CPU, MEMORY, PODS, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
        return False
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def names(*maps: Iterable[str]) -> list[str]:
    """Union of resource names in first-seen order (deterministic column order)."""
    seen: dict[str, None] = {}
    for m in maps:
        for name in m:
            seen.setdefault(name, None)
    return list(seen)
