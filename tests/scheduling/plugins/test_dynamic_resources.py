"""The structured allocator and DynamicResources' bookkeeping: one table test per allocator
feature, and properties of the usage (never beyond counters or capacity, freed once, nothing
left after Unreserve)."""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeberth.api.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kubeberth.api.objects import ObjectMeta, Pod, PodResourceClaim, PodSpec
from kubeberth.config.dra import DraObjects
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.plugins.dynamic_resources import DynamicResources, new
from kubeberth.state.cluster import ClusterState, make_pod_info
from kubeberth.state.dra import Allocator, DraState

from .plugin_builders import make_node

GI = 2**30
CLASS = {"metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def gpu(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra}


def slice_(devices: list[dict[str, Any]], *, node: str = "n1", pool: str = "n1",
           counters: list[dict[str, Any]] | None = None, **where: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "gpu.example.com",
                            "pool": {"name": pool, "resourceSliceCount": 1},
                            "devices": devices, "sharedCounters": counters or []}
    spec.update(where or {"nodeName": node})
    return {"metadata": {"name": f"{pool}-slice"}, "spec": spec}


def claim(name: str, requests: list[dict[str, Any]],
          constraints: list[dict[str, Any]] | None = None) -> ResourceClaim:
    return msgspec.convert({"metadata": {"name": name, "namespace": "default"},
                            "spec": {"devices": {"requests": requests,
                                                 "constraints": constraints or []}}},
                           ResourceClaim)


def exactly(name: str = "r", **kw: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu", **kw}}


def state(*slices: dict[str, Any]) -> DraState:
    s = DraState()
    s.load(DraObjects(classes=[msgspec.convert(CLASS, DeviceClass)],
                      slices=[msgspec.convert(x, ResourceSlice) for x in slices]))
    return s


def allocate(s: DraState, *claims: ResourceClaim, node: str = "n1",
             labels: dict[str, str] | None = None) -> dict[str, list[str]] | str:
    a = Allocator(s, node, labels or {}, [(c.key, c) for c in claims])
    found = a.run()
    if isinstance(found, str):
        return found
    for key, results in found.items():
        s.commit(key, a.allocation(results))
    return {k: [f"{r.request}:{r.device}" for r in v] for k, v in found.items()}


def test_exact_count_takes_devices_in_slice_order() -> None:
    s = state(slice_([gpu("g0"), gpu("g1"), gpu("g2")]))
    assert allocate(s, claim("a", [exactly(count=2)])) == {"default/a": ["r:g0", "r:g1"]}
    assert allocate(s, claim("b", [exactly()])) == {"default/b": ["r:g2"]}
    why = allocate(s, claim("c", [exactly()]))
    assert why == ("claim default/c: request r: 1 device(s) needed, 3 match, 0 free "
                   "(g0 allocated; g1 allocated; g2 allocated)")


def test_pools_are_tried_by_driver_and_pool_name() -> None:
    s = state(slice_([gpu("z")], pool="zz", node="n1"), slice_([gpu("a")], pool="aa"))
    assert allocate(s, claim("a", [exactly()])) == {"default/a": ["r:a"]}


def test_selectors_use_attributes_capacity_and_versions() -> None:
    s = state(slice_([
        gpu("a100", attributes={"model": {"string": "A100"}, "drv": {"version": "1.2.3"}},
            capacity={"memory": {"value": "40Gi"}}),
        gpu("h100", attributes={"model": {"string": "H100"}, "drv": {"version": "1.10.0"}},
            capacity={"memory": {"value": "80Gi"}}),
    ]))
    sel = [{"cel": {"expression": 'device.capacity["gpu.example.com"].memory'
                                  '.compareTo(quantity("64Gi")) >= 0 && '
                                  'device.attributes["gpu.example.com"].drv'
                                  '.isGreaterThan(semver("1.9.0"))'}}]
    assert allocate(s, claim("a", [exactly(selectors=sel)])) == {"default/a": ["r:h100"]}


def test_allocation_mode_all_needs_every_matching_device_free() -> None:
    s = state(slice_([gpu("g0"), gpu("g1")]))
    assert allocate(s, claim("all", [exactly(allocationMode="All")])) == \
        {"default/all": ["r:g0", "r:g1"]}
    s.free("default/all")
    assert allocate(s, claim("one", [exactly()])) == {"default/one": ["r:g0"]}
    assert "2 device(s) needed, 2 match, 1 free" in str(
        allocate(s, claim("all", [exactly(allocationMode="All")])))


def test_first_available_falls_back_in_order() -> None:
    s = state(slice_([gpu("small", attributes={"size": {"int": 1}})]))
    req = {"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "selectors": [
            {"cel": {"expression": 'device.attributes["gpu.example.com"].size > 1'}}]},
        {"name": "any", "deviceClassName": "gpu"}]}
    assert allocate(s, claim("a", [req])) == {"default/a": ["r/any:small"]}


def test_match_attribute_backtracks_to_a_domain_with_room() -> None:
    devs = [gpu(f"g{i}", attributes={"nvlink": {"int": i // 2}}) for i in range(4)]
    s = state(slice_(devs))
    assert allocate(s, claim("busy", [exactly()])) == {"default/busy": ["r:g0"]}
    cons = [{"matchAttribute": "gpu.example.com/nvlink"}]
    assert allocate(s, claim("pair", [exactly(count=2)], cons)) == \
        {"default/pair": ["r:g2", "r:g3"]}
    why = allocate(s, claim("pair2", [exactly(count=2)], cons))
    assert why == "claim default/pair2: request r: 2 device(s) needed, 4 match, 1 free " \
        "(g0 allocated; g2 allocated; g3 allocated)"


def test_match_attribute_across_requests_and_missing_attribute() -> None:
    s = state(slice_([gpu("g0", attributes={"numa": {"int": 0}}),
                      gpu("g1", attributes={"numa": {"int": 1}}),
                      gpu("nic", attributes={"numa": {"int": 1}, "nic": {"bool": True}})]))
    nic = [{"cel": {"expression": 'has(device.attributes["gpu.example.com"].nic)'}}]
    cons = [{"requests": ["gpu", "nic"], "matchAttribute": "gpu.example.com/numa"}]
    got = allocate(s, claim("a", [exactly("gpu"), exactly("nic", selectors=nic)], cons))
    assert got == {"default/a": ["gpu:g1", "nic:nic"]}
    s2 = state(slice_([gpu("g0"), gpu("g1", attributes={"numa": {"int": 0}})]))
    got = allocate(s2, claim("b", [exactly("gpu")],
                             [{"matchAttribute": "gpu.example.com/numa"}]))
    assert got == {"default/b": ["gpu:g1"]}


MIG = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]


def mig(name: str, mem: str) -> dict[str, Any]:
    return gpu(name, consumesCounters=[{"counterSet": "gpu-0",
                                        "counters": {"memory": {"value": mem}}}])


def test_partitions_share_counters() -> None:
    s = state(slice_([mig("whole", "40Gi"), mig("half-a", "20Gi"), mig("half-b", "20Gi"),
                      mig("half-c", "20Gi")], counters=MIG))
    half = [{"cel": {"expression": 'device.name != "whole"'}}]
    # The device variable has no name field (as upstream's): a CEL runtime error, reported.
    assert "CEL runtime error" in str(allocate(s, claim("x", [exactly(selectors=half)])))
    assert allocate(s, claim("a", [exactly()])) == {"default/a": ["r:whole"]}
    assert "counter gpu-0/memory has 0 left, 20Gi needed" in str(
        allocate(s, claim("b", [exactly()])))
    s.free("default/a")
    assert allocate(s, claim("b", [exactly(count=2)])) == {"default/b": ["r:half-a", "r:half-b"]}
    assert s.counters_used == {("gpu.example.com", "n1", "gpu-0"): {"memory": Fraction(40 * GI)}}


def test_consumable_capacity_shares_one_device() -> None:
    policy = {"default": "8Gi", "validRange": {"min": "8Gi", "step": "8Gi"}}
    s = state(slice_([gpu("shared", allowMultipleAllocations=True,
                          capacity={"memory": {"value": "40Gi", "requestPolicy": policy}})]))
    asks = [allocate(s, claim(f"c{i}", [exactly(capacity={"requests": {"memory": "10Gi"}})]))
            for i in range(3)]
    assert asks[:2] == [{"default/c0": ["r:shared"]}, {"default/c1": ["r:shared"]}]
    assert "memory has 8Gi left, 16Gi requested" in str(asks[2])
    assert s.consumed[("gpu.example.com", "n1", "shared")] == {"memory": Fraction(32 * GI)}
    assert allocate(s, claim("d", [exactly()])) == {"default/d": ["r:shared"]}  # default 8Gi
    assert s.consumed[("gpu.example.com", "n1", "shared")] == {"memory": Fraction(40 * GI)}


def test_admin_access_sees_allocated_devices_and_takes_nothing() -> None:
    s = state(slice_([gpu("g0")]))
    allocate(s, claim("a", [exactly()]))
    assert allocate(s, claim("admin", [exactly(adminAccess=True)])) == \
        {"default/admin": ["r:g0"]}
    assert s.taken == {("gpu.example.com", "n1", "g0"): 1}


def test_missing_class_and_other_nodes() -> None:
    s = state(slice_([gpu("g0")]))
    assert allocate(s, claim("a", [{"name": "r", "exactly": {"deviceClassName": "tpu"}}])) \
        == 'claim default/a: request r: device class "tpu" does not exist'
    assert "no device on the node matches" in str(allocate(s, claim("a", [exactly()]),
                                                           node="n2"))


def test_node_selector_slices_and_pinning() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    s = state(slice_([gpu("fabric")], pool="rack-r1", nodeSelector=sel))
    assert "no device" in str(allocate(s, claim("a", [exactly()]), labels={"rack": "r2"}))
    a = Allocator(s, "n1", {"rack": "r1"}, [("default/a", claim("a", [exactly()]))])
    found = a.run()
    assert not isinstance(found, str)
    alloc = a.allocation(found["default/a"])
    assert alloc.node is None and alloc.selector is not None


# ---- properties ------------------------------------------------------------------------------
CEL_SETTINGS = settings(max_examples=40, deadline=None, derandomize=bool(os.environ.get("CI")))
DEVICES = [mig(f"m{i}", "10Gi") for i in range(4)] + [
    gpu("s", allowMultipleAllocations=True, capacity={"memory": {"value": "24Gi"}}),
    gpu("x0"), gpu("x1")]
SELECTS = {
    "mig": 'device.attributes["gpu.example.com"].kind == "mig"',
    "shared": 'device.allowMultipleAllocations',
    "whole": 'device.attributes["gpu.example.com"].kind == "whole"',
}


def _property_state() -> DraState:
    devs = []
    for d in DEVICES:
        kind = "mig" if d["name"].startswith("m") else "whole"
        devs.append({**d, "attributes": {"kind": {"string": kind}}})
    return state(slice_(devs, counters=[{"name": "gpu-0",
                                          "counters": {"memory": {"value": "30Gi"}}}]))


def _check(s: DraState) -> None:
    """Usage equals what the allocations add up to, and stays within every limit."""
    taken: dict[Any, int] = {}
    consumed: dict[Any, Fraction] = {}
    for alloc in s.allocations.values():
        for r in alloc.results:
            if r.consumed:
                consumed[r.id] = consumed.get(r.id, Fraction(0)) + r.consumed["memory"]
            else:
                taken[r.id] = taken.get(r.id, 0) + 1
    assert taken == s.taken
    assert all(n == 1 for n in taken.values())
    assert {k: v["memory"] for k, v in s.consumed.items()} == consumed
    assert all(v <= 24 * GI for v in consumed.values())
    for used in s.counters_used.values():
        assert used["memory"] <= 30 * GI


@CEL_SETTINGS
@given(st.lists(st.tuples(st.sampled_from(sorted(SELECTS)), st.integers(1, 3),
                          st.sampled_from(["8Gi", "12Gi", "20Gi"]), st.booleans()),
                min_size=1, max_size=12))
def test_usage_never_exceeds_counters_or_capacity_and_frees_once(
        ops: list[tuple[str, int, str, bool]]) -> None:
    s = _property_state()
    held: list[str] = []
    for i, (kind, count, mem, release) in enumerate(ops):
        if release and held:
            key = held.pop(0)
            s.unreserve(key, f"default/p{key}")
            s.unreserve(key, f"default/p{key}")  # a second release is a no-op
            assert key not in s.allocations
            with pytest.raises(KeyError):
                s.free(key)
            _check(s)
            continue
        req = exactly(selectors=[{"cel": {"expression": SELECTS[kind]}}], count=count,
                      capacity={"requests": {"memory": mem}})
        c = claim(f"c{i}", [req])
        if not isinstance(allocate(s, c), str):
            s.reserve(c.key, f"default/p{c.key}")
            held.append(c.key)
        _check(s)
    for key in held:
        s.unreserve(key, f"default/p{key}")
    assert not s.allocations and not s.taken and not s.consumed and not s.counters_used
    assert not s.reserved


# ---- the plugin: Reserve then Unreserve leaves nothing behind -----------------------------
def _cluster() -> tuple[ClusterState, DynamicResources]:
    snap = ClusterState()
    for n in ("n1", "n2"):
        snap.add_node(make_node(n, {"cpu": 8, "memory": "8Gi", "pods": 10}))
    tpl = {"metadata": {"name": "t", "namespace": "default"},
           "spec": {"spec": {"devices": {"requests": [
               {"name": "r", "exactly": {"deviceClassName": "gpu",
                                         "capacity": {"requests": {"memory": "10Gi"}}}}]}}}}
    devs = [{**d, "attributes": {"kind": {"string": "x"}}} for d in DEVICES]
    snap.dra.load(DraObjects(
        classes=[msgspec.convert(CLASS, DeviceClass)],
        slices=[msgspec.convert(slice_(devs, node=n, pool=n, counters=[
            {"name": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}]), ResourceSlice)
            for n in ("n1", "n2")],
        claims=[claim("shared", [exactly()])],
        templates=[msgspec.convert(tpl, ResourceClaimTemplate)]))
    handle = Handle(snap, clock=lambda: 0.0, rng=np.random.default_rng(0))
    return snap, new(None, handle)


def _usage(snap: ClusterState) -> tuple[Any, ...]:
    d = snap.dra
    return (dict(d.allocations), {k: list(v) for k, v in d.reserved.items()}, dict(d.taken),
            {k: dict(v) for k, v in d.consumed.items()},
            {k: dict(v) for k, v in d.counters_used.items()}, set(d.claims))


@CEL_SETTINGS
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1,
                max_size=10))
def test_unreserve_leaks_nothing(ops: list[tuple[bool, bool, bool]]) -> None:
    snap, plugin = _cluster()
    start = _usage(snap)
    kept: list[tuple[Any, Any, int]] = []
    for i, (shared, give_back, second_node) in enumerate(ops):
        entry = PodResourceClaim(name="c", resource_claim_name="shared") if shared else \
            PodResourceClaim(name="c", resource_claim_template_name="t")
        pi = make_pod_info(Pod(metadata=ObjectMeta(name=f"p{i}"),
                               spec=PodSpec(resource_claims=[entry])))
        assert plugin.pre_enqueue(pi).ok
        state = CycleState()
        _, status = plugin.pre_filter(state, pi, snap)
        assert status.ok
        nodes = np.array([1, 0] if second_node else [0, 1], dtype=np.int64)
        verdict = plugin.filter(state, pi, snap, nodes)
        feasible = [int(n) for n, c in zip(nodes, verdict.codes, strict=True) if c == 0]
        if not feasible:
            continue
        before = _usage(snap)
        assert plugin.reserve(state, pi, snap, feasible[0]).ok
        if give_back:
            plugin.unreserve(state, pi, snap, feasible[0])
            plugin.unreserve(state, pi, snap, feasible[0])  # a second Unreserve is harmless
            assert _usage(snap) == before
        else:
            kept.append((state, pi, feasible[0]))
    for state, pi, node in kept:
        plugin.unreserve(state, pi, snap, node)
    assert _usage(snap)[:5] == start[:5]
    for i in range(len(ops)):
        snap.dra.pod_deleted(f"default/p{i}")
    assert _usage(snap) == start
