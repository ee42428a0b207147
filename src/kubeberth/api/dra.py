"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``) as typed msgspec Structs.

DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate carry what the structured
allocator reads: devices with attributes, capacity and counter consumption; requests with
classes, CEL selectors, counts, prioritized alternatives and capacity requests; constraints.
Opaque driver configuration and device taints are kept out: kubeberth does not model them yet
(docs/dra.md).
"""

from __future__ import annotations

import msgspec

from kubeberth.api.objects import NodeSelector, QuantityValue, _K8s, _Object

API_VERSION = "resource.k8s.io/v1"
EXACT_COUNT, ALL = "ExactCount", "All"
ALLOCATION_MODES = (EXACT_COUNT, ALL)


class CELDeviceSelector(_K8s):
    expression: str = ""


class DeviceSelector(_K8s):
    cel: CELDeviceSelector | None = None


class DeviceClassSpec(_K8s):
    selectors: list[DeviceSelector] = msgspec.field(default_factory=list)
    extended_resource_name: str | None = None


class DeviceClass(_Object):
    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


class DeviceAttribute(_K8s):
    """Exactly one of the four values is set (checked by the loader)."""

    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class CapacityRequestPolicyRange(_K8s):
    min: QuantityValue | None = None
    max: QuantityValue | None = None
    step: QuantityValue | None = None


class CapacityRequestPolicy(_K8s):
    default: QuantityValue | None = None
    valid_values: list[QuantityValue] = msgspec.field(default_factory=list)
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(_K8s):
    value: QuantityValue = 0
    request_policy: CapacityRequestPolicy | None = None


class Counter(_K8s):
    value: QuantityValue = 0


class CounterSet(_K8s):
    name: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)


class DeviceCounterConsumption(_K8s):
    counter_set: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)


class Device(_K8s):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    consumes_counters: list[DeviceCounterConsumption] = msgspec.field(default_factory=list)
    allow_multiple_allocations: bool | None = None


class ResourcePool(_K8s):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(_K8s):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = msgspec.field(default_factory=list)
    shared_counters: list[CounterSet] = msgspec.field(default_factory=list)


class ResourceSlice(_Object):
    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class CapacityRequirements(_K8s):
    requests: dict[str, QuantityValue] = msgspec.field(default_factory=dict)


class ExactDeviceRequest(_K8s):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = msgspec.field(default_factory=list)
    allocation_mode: str = EXACT_COUNT
    count: int | None = None
    admin_access: bool | None = None
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(_K8s):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = msgspec.field(default_factory=list)
    allocation_mode: str = EXACT_COUNT
    count: int | None = None
    capacity: CapacityRequirements | None = None


class DeviceRequest(_K8s):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = msgspec.field(default_factory=list)


class DeviceConstraint(_K8s):
    requests: list[str] = msgspec.field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(_K8s):
    requests: list[DeviceRequest] = msgspec.field(default_factory=list)
    constraints: list[DeviceConstraint] = msgspec.field(default_factory=list)


class ResourceClaimSpec(_K8s):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(_K8s):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    share_id: str | None = msgspec.field(default=None, name="shareID")
    consumed_capacity: dict[str, QuantityValue] = msgspec.field(default_factory=dict)


class DeviceAllocationResult(_K8s):
    results: list[DeviceRequestAllocationResult] = msgspec.field(default_factory=list)


class AllocationResult(_K8s):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(_K8s):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_K8s):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = msgspec.field(default_factory=list)


class ResourceClaim(_Object):
    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class ResourceClaimTemplateSpec(_K8s):
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(_Object):
    api_version: str = API_VERSION
    kind: str = "ResourceClaimTemplate"
    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


__all__ = [
    "ALL", "ALLOCATION_MODES", "API_VERSION", "EXACT_COUNT", "AllocationResult",
    "CELDeviceSelector", "CapacityRequestPolicy", "CapacityRequestPolicyRange",
    "CapacityRequirements", "Counter", "CounterSet", "Device", "DeviceAllocationResult",
    "DeviceAttribute", "DeviceCapacity", "DeviceClaim", "DeviceClass", "DeviceClassSpec",
    "DeviceConstraint", "DeviceCounterConsumption", "DeviceRequest",
    "DeviceRequestAllocationResult", "DeviceSelector", "DeviceSubRequest", "ExactDeviceRequest",
    "ResourceClaim", "ResourceClaimConsumerReference", "ResourceClaimSpec",
    "ResourceClaimStatus", "ResourceClaimTemplate", "ResourceClaimTemplateSpec",
    "ResourcePool", "ResourceSlice", "ResourceSliceSpec",
]
