"""Dynamic Resource Allocation state and the structured allocator.

``DraState`` holds the DRA objects (classes, slices, claims, templates), each claim's allocation
and the pods it is reserved for, and what the allocations use: devices taken whole, capacity
consumed on devices that allow multiple allocations, and shared counters consumed by
partitionable devices. Allocations are committed and freed only through :meth:`commit` and
:meth:`free`, which keep the usage in step; a claim is freed when its last consumer goes, as
upstream's claim controller deallocates a claim whose ``reservedFor`` empties.

``Allocator`` is upstream's structured allocator for one node: claims are allocated together in
pod order, request by request (a ``firstAvailable`` request tries its subrequests in order),
device by device with backtracking, so a ``matchAttribute`` constraint or a later request can
make an earlier choice give way. Devices are tried pool by pool (sorted by driver and pool
name, upstream's order being that of a map), slice by slice in input order, device by device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubeberth.api.cel import CelError, Selector, attribute_value, compile_selector, device_value
from kubeberth.api.cel import split_name as _split
from kubeberth.api.dra import (
    ALL,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubeberth.api.objects import NodeSelector, Pod
from kubeberth.api.quantity import parse_quantity
from kubeberth.api.selectors import compile_node_selector_term
from kubeberth.config.dra import DraObjects

DeviceId = tuple[str, str, str]  # driver, pool, device
CounterKey = tuple[str, str, str]  # driver, pool, counter set


@dataclass(slots=True)
class DeviceResult:
    """One allocated device: which request (``req`` or ``req/sub``) it serves and what it uses."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    consumed: dict[str, Fraction] = field(default_factory=dict)

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.device)


@dataclass(slots=True)
class Allocation:
    """A claim's allocation: its devices and where it may be used (a node name, a slice's node
    selector, or anywhere)."""

    results: list[DeviceResult]
    node: str | None = None
    selector: NodeSelector | None = None


@dataclass(slots=True)
class Candidate:
    """One device as the allocator sees it on a node."""

    id: DeviceId
    device: Device
    slice_: ResourceSlice
    local: bool  # published for one node (nodeName)
    multiple: bool
    capacity: dict[str, Fraction]
    attributes: dict[str, Any]  # qualified name -> comparable value
    counters: list[tuple[CounterKey, dict[str, Fraction]]]
    _value: Any = None

    def value(self) -> Any:
        if self._value is None:
            self._value = device_value(
                self.id[0], {k: attribute_value(a) for k, a in self.device.attributes.items()},
                self.capacity, self.multiple)
        return self._value


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    complete: bool
    devices: list[Candidate]


def _qualified(name: str, driver: str) -> str:
    domain, ident = _split(name, driver)
    return f"{domain}/{ident}"


def _plain(attr: Any) -> Any:
    for v in (attr.int_, attr.bool_, attr.string, attr.version):
        if v is not None:
            return (type(v).__name__, v)
    return None


class DraState:
    """DRA objects, allocations, reservations and device usage for one cluster."""

    def __init__(self) -> None:
        self.classes: dict[str, DeviceClass] = {}
        self.slices: list[ResourceSlice] = []
        self.claims: dict[str, ResourceClaim] = {}
        self.templates: dict[str, ResourceClaimTemplate] = {}
        self.allocations: dict[str, Allocation] = {}
        self.reserved: dict[str, list[str]] = {}
        # claim key -> the pod a template claim was generated for (deleted with it).
        self.generated: dict[str, str] = {}
        self.taken: dict[DeviceId, int] = {}
        self.consumed: dict[DeviceId, dict[str, Fraction]] = {}
        self.counters_used: dict[CounterKey, dict[str, Fraction]] = {}
        self._pools: dict[tuple[str, tuple[tuple[str, str], ...]], list[Pool]] = {}
        self._matches: dict[tuple[str, DeviceId], bool | str] = {}

    def __bool__(self) -> bool:
        return bool(self.classes or self.slices or self.claims or self.templates)

    def load(self, objs: DraObjects) -> None:
        """Take the objects; claims allocated in the input keep their devices in use."""
        for dc in objs.classes:
            self.classes[dc.metadata.name] = dc
        self.slices.extend(objs.slices)
        for tpl in objs.templates:
            self.templates[tpl.key] = tpl
        for rc in objs.claims:
            self.claims[rc.key] = rc
            alloc = rc.status.allocation
            if alloc is None:
                continue
            results = [DeviceResult(
                r.request, r.driver, r.pool, r.device, bool(r.admin_access),
                {k: parse_quantity(v) for k, v in r.consumed_capacity.items()})
                for r in alloc.devices.results]
            self.commit(rc.key, Allocation(results, _pinned(alloc.node_selector),
                                           alloc.node_selector))
            self.reserved[rc.key] = [f"{rc.metadata.namespace}/{ref.name}"
                                     for ref in rc.status.reserved_for if ref.resource == "pods"]
        self._pools.clear()

    # ---- the claims of a pod -----------------------------------------------------------------
    def pod_claims(self, pod: Pod) -> list[tuple[str, str, ResourceClaim | None, str]]:
        """Per pod claim entry: (entry name, claim key, the claim or None, why it is missing).
        A template's claim is generated for the pod (named ``<pod>-<entry>``) on first use."""
        ns = pod.metadata.namespace or "default"
        out: list[tuple[str, str, ResourceClaim | None, str]] = []
        for entry in pod.spec.resource_claims:
            if entry.resource_claim_name is not None:
                key = f"{ns}/{entry.resource_claim_name}"
                claim = self.claims.get(key)
                out.append((entry.name, key, claim,
                            "" if claim else f'resourceclaim "{entry.resource_claim_name}" '
                            "not found"))
                continue
            tname = entry.resource_claim_template_name or ""
            key = f"{ns}/{pod.metadata.name}-{entry.name}"
            claim = self.claims.get(key)
            if claim is None:
                tpl = self.templates.get(f"{ns}/{tname}")
                if tpl is None:
                    out.append((entry.name, key, None,
                                f'resourceclaimtemplate "{tname}" not found'))
                    continue
                claim = ResourceClaim(metadata=type(tpl.metadata)(
                    name=f"{pod.metadata.name}-{entry.name}", namespace=ns),
                    spec=tpl.spec.spec)
                self.claims[key] = claim
                self.generated[key] = f"{ns}/{pod.metadata.name}"
            out.append((entry.name, key, claim, ""))
        return out

    # ---- usage -------------------------------------------------------------------------------
    def commit(self, key: str, alloc: Allocation) -> None:
        if key in self.allocations:
            raise RuntimeError(f"claim {key} is already allocated")
        self.allocations[key] = alloc
        for r in alloc.results:
            if r.admin_access:
                continue
            if r.consumed:
                used = self.consumed.setdefault(r.id, {})
                for name, amount in r.consumed.items():
                    used[name] = used.get(name, Fraction(0)) + amount
            else:
                self.taken[r.id] = self.taken.get(r.id, 0) + 1
            for ck, amounts in self._consumption(r.id):
                used = self.counters_used.setdefault(ck, {})
                for name, amount in amounts.items():
                    used[name] = used.get(name, Fraction(0)) + amount

    def free(self, key: str) -> Allocation:
        alloc = self.allocations.pop(key)
        for r in alloc.results:
            if r.admin_access:
                continue
            if r.consumed:
                used = self.consumed[r.id]
                for name, amount in r.consumed.items():
                    used[name] -= amount
                    if not used[name]:
                        del used[name]
                if not used:
                    del self.consumed[r.id]
            else:
                self.taken[r.id] -= 1
                if not self.taken[r.id]:
                    del self.taken[r.id]
            for ck, amounts in self._consumption(r.id):
                used = self.counters_used[ck]
                for name, amount in amounts.items():
                    used[name] -= amount
                    if not used[name]:
                        del used[name]
                if not used:
                    del self.counters_used[ck]
        return alloc

    def _consumption(self, dev: DeviceId) -> list[tuple[CounterKey, dict[str, Fraction]]]:
        for rs in self.slices:
            spec = rs.spec
            if spec.driver != dev[0] or spec.pool.name != dev[1]:
                continue
            for d in spec.devices:
                if d.name == dev[2]:
                    return [((dev[0], dev[1], cc.counter_set),
                             {n: parse_quantity(c.value) for n, c in cc.counters.items()})
                            for cc in d.consumes_counters]
        return []

    def reserve(self, key: str, pod_key: str) -> None:
        users = self.reserved.setdefault(key, [])
        if pod_key not in users:
            users.append(pod_key)

    def unreserve(self, key: str, pod_key: str) -> None:
        """Drop ``pod_key`` from the claim's consumers; the last one out frees the claim."""
        users = self.reserved.get(key)
        if users is None or pod_key not in users:
            return
        users.remove(pod_key)
        if users:
            return
        del self.reserved[key]
        if key in self.allocations:
            self.free(key)

    def pod_deleted(self, pod_key: str) -> None:
        """A pod is gone (evicted, finished): it holds no claim any more, and the claims
        generated for it from templates are deleted with it."""
        for key in [k for k, users in self.reserved.items() if pod_key in users]:
            self.unreserve(key, pod_key)
        for key in [k for k, owner in self.generated.items() if owner == pod_key]:
            del self.generated[key]
            del self.claims[key]

    # ---- devices on a node -------------------------------------------------------------------
    def pools(self, node: str, labels: dict[str, str]) -> list[Pool]:
        """The pools whose slices are available on ``node``, sorted by driver and pool name."""
        cache_key = (node, tuple(sorted(labels.items())))
        cached = self._pools.get(cache_key)
        if cached is not None:
            return cached
        by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for rs in self.slices:
            spec = rs.spec
            if spec.node_name is not None and spec.node_name != node:
                continue
            if spec.node_selector is not None and not any(
                    compile_node_selector_term(t)(labels, node)
                    for t in spec.node_selector.node_selector_terms):
                continue
            by_pool.setdefault((spec.driver, spec.pool.name), []).append(rs)
        # Counter sets may sit in any slice of the pool, node-local or not.
        counter_sets: dict[tuple[str, str], set[str]] = {}
        for rs in self.slices:
            for cs in rs.spec.shared_counters:
                counter_sets.setdefault((rs.spec.driver, rs.spec.pool.name), set()).add(cs.name)
        pools: list[Pool] = []
        for (driver, name), slices in sorted(by_pool.items()):
            newest = max(s.spec.pool.generation for s in slices)
            current = [s for s in slices if s.spec.pool.generation == newest]
            complete = len(current) == current[0].spec.pool.resource_slice_count
            devices = [
                Candidate(
                    (driver, name, d.name), d, s, s.spec.node_name is not None,
                    bool(d.allow_multiple_allocations),
                    {k: parse_quantity(c.value) for k, c in d.capacity.items()},
                    {_qualified(k, driver): _plain(a) for k, a in d.attributes.items()},
                    [((driver, name, cc.counter_set),
                      {n: parse_quantity(c.value) for n, c in cc.counters.items()})
                     for cc in d.consumes_counters])
                for s in current for d in s.spec.devices]
            pools.append(Pool(driver, name, complete, devices))
        self._pools[cache_key] = pools
        return pools

    def counter_total(self, key: CounterKey, counter: str) -> Fraction | None:
        for rs in self.slices:
            if rs.spec.driver != key[0] or rs.spec.pool.name != key[1]:
                continue
            for cs in rs.spec.shared_counters:
                if cs.name == key[2] and counter in cs.counters:
                    return parse_quantity(cs.counters[counter].value)
        return None

    def matches(self, sel: Selector, cand: Candidate) -> bool | str:
        """Whether a selector picks a device; a string is the CEL runtime error."""
        k = (sel.expression, cand.id)
        hit = self._matches.get(k)
        if hit is None:
            try:
                hit = sel.matches(cand.value())
            except CelError as err:
                hit = f"CEL runtime error: {err}"
            self._matches[k] = hit
        return hit


def _pinned(sel: NodeSelector | None) -> str | None:
    """The node an allocation's selector names by ``metadata.name``, if that is all it says."""
    if sel is None or len(sel.node_selector_terms) != 1:
        return None
    term = sel.node_selector_terms[0]
    if len(term.match_fields) == 1 and not term.match_expressions:
        f = term.match_fields[0]
        if f.key == "metadata.name" and f.operator == "In" and len(f.values) == 1:
            return f.values[0]
    return None


def allocation_fits(alloc: Allocation, node: str, labels: dict[str, str]) -> bool:
    """Whether an existing allocation may be used on ``node``."""
    if alloc.node is not None:
        return alloc.node == node
    if alloc.selector is None:
        return True
    return any(compile_node_selector_term(t)(labels, node)
               for t in alloc.selector.node_selector_terms)


@dataclass(slots=True)
class _Alt:
    """One way to satisfy a request: the request itself or one of its subrequests."""

    name: str  # "req" or "req/sub"
    parent: str
    class_name: str
    selectors: list[DeviceSelector]
    mode: str
    count: int
    admin: bool
    capacity: dict[str, Fraction]


@dataclass(slots=True)
class _Req:
    claim: str
    name: str
    alts: list[_Alt]
    constraints: list[int]  # indexes into the allocator's constraint table


def _alternatives(req: Any) -> list[_Alt]:
    if req.exactly is not None:
        ex = req.exactly
        return [_Alt(req.name, req.name, ex.device_class_name, ex.selectors, ex.allocation_mode,
                     ex.count or 1, bool(ex.admin_access),
                     {k: parse_quantity(v) for k, v in (ex.capacity.requests.items()
                                                        if ex.capacity else ())})]
    return [_Alt(f"{req.name}/{s.name}", req.name, s.device_class_name, s.selectors,
                 s.allocation_mode, s.count or 1, False,
                 {k: parse_quantity(v) for k, v in (s.capacity.requests.items()
                                                    if s.capacity else ())})
            for s in req.first_available]


def _applies(con: DeviceConstraint, alt: _Alt) -> bool:
    return not con.requests or alt.parent in con.requests or alt.name in con.requests


class Allocator:
    """Allocate a pod's unallocated claims on one node, or say which request could not be."""

    def __init__(self, state: DraState, node: str, labels: dict[str, str],
                 claims: Iterable[tuple[str, ResourceClaim]]) -> None:
        self.state = state
        self.node = node
        self.pools = state.pools(node, labels)
        self.reqs: list[_Req] = []
        self.constraints: list[DeviceConstraint] = []
        for key, claim in claims:
            first = len(self.constraints)
            self.constraints.extend(claim.spec.devices.constraints)
            for req in claim.spec.devices.requests:
                cons = [i for i in range(first, len(self.constraints))
                        if not self.constraints[i].requests
                        or req.name in [r.partition("/")[0]
                                        for r in self.constraints[i].requests]]
                self.reqs.append(_Req(key, req.name, _alternatives(req), cons))
        # Tentative use by the devices chosen so far, on top of the committed use.
        self.taken: dict[DeviceId, int] = {}
        self.consumed: dict[DeviceId, dict[str, Fraction]] = {}
        self.counters: dict[CounterKey, dict[str, Fraction]] = {}
        self.values: dict[int, tuple[Any, int]] = {}
        self.chosen: list[tuple[str, DeviceResult, Candidate, list[int]]] = []
        self.furthest = 0  # the furthest request the search failed at
        self._by_id: dict[DeviceId, Candidate] = {c.id: c for p in self.pools for c in p.devices}

    def run(self) -> dict[str, list[DeviceResult]] | str:
        """Device results per claim key, or why the node cannot hold the claims."""
        if self._request(0):
            out: dict[str, list[DeviceResult]] = {}
            for key, r, _, _ in self.chosen:
                out.setdefault(key, []).append(r)
            return out
        return self._explain(self.reqs[self.furthest])

    def allocation(self, results: list[DeviceResult]) -> Allocation:
        """Where the allocation may be used: this node when a device is published for it
        alone, else the node selector of a device's slice, else anywhere."""
        slices = [self._by_id[r.id].slice_ for r in results]
        if any(rs.spec.node_name is not None for rs in slices):
            return Allocation(results, self.node)
        selector = next((rs.spec.node_selector for rs in slices
                         if rs.spec.node_selector is not None), None)
        return Allocation(results, None, selector)

    def _candidates(self, alt: _Alt) -> list[Candidate] | str:
        """The node's devices the class and the request select, in allocation order; a string
        when the class is missing or a selector fails at run time."""
        dc = self.state.classes.get(alt.class_name)
        if dc is None:
            return f'device class "{alt.class_name}" does not exist'
        selectors = [compile_selector(s.cel.expression)
                     for s in (*dc.spec.selectors, *alt.selectors) if s.cel is not None]
        cands: list[Candidate] = []
        for pool in self.pools:
            for cand in pool.devices:
                for sel in selectors:
                    hit = self.state.matches(sel, cand)
                    if isinstance(hit, str):
                        return f"device {cand.id[2]}: {hit}"
                    if not hit:
                        break
                else:
                    cands.append(cand)
        return cands

    def _request(self, ri: int) -> bool:
        if ri == len(self.reqs):
            return True
        req = self.reqs[ri]
        for alt in req.alts:
            cands = self._candidates(alt)
            if isinstance(cands, str) or not cands:
                continue
            if alt.mode == ALL:
                if not all(p.complete for p in self.pools
                           if any(c in p.devices for c in cands)):
                    continue
                mark = len(self.chosen)
                if all(self._take(req, alt, c) for c in cands) and self._request(ri + 1):
                    return True
                self._undo_to(mark)
                continue
            if self._devices(ri, req, alt, cands, alt.count, 0):
                return True
        self.furthest = max(self.furthest, ri)
        return False

    def _devices(self, ri: int, req: _Req, alt: _Alt, cands: list[Candidate], left: int,
                 start: int) -> bool:
        if left == 0:
            return self._request(ri + 1)
        for k in range(start, len(cands) - left + 1):
            mark = len(self.chosen)
            if self._take(req, alt, cands[k]) and \
                    self._devices(ri, req, alt, cands, left - 1, k + 1):
                return True
            self._undo_to(mark)
        return False

    def _blocked(self, alt: _Alt, cand: Candidate) -> tuple[str, dict[str, Fraction]]:
        """Why ``cand`` cannot serve ``alt`` now ("" when it can), and the capacity one
        allocation of a shareable device consumes."""
        if alt.admin:
            return "", {}
        st = self.state
        consumed: dict[str, Fraction] = {}
        if st.taken.get(cand.id) or self.taken.get(cand.id):
            return "allocated", {}
        if not cand.multiple and (st.consumed.get(cand.id) or self.consumed.get(cand.id)):
            return "allocated", {}
        for cname, asked in alt.capacity.items():
            have = _capacity_of(cand, cname)
            if have is None:
                return f"has no capacity {cname}", {}
            if not cand.multiple and asked > have:
                return f"{cname} is {_show(have)}, {_show(asked)} requested", {}
        if cand.multiple:
            for cname, total in cand.capacity.items():
                want = _wanted(cand, cname, alt.capacity)
                if want is None:
                    return f"no valid amount of {cname} fits the request", {}
                used = st.consumed.get(cand.id, {}).get(cname, Fraction(0)) + \
                    self.consumed.get(cand.id, {}).get(cname, Fraction(0))
                if used + want > total:
                    return (f"{cname} has {_show(total - used)} left, {_show(want)} "
                            "requested"), {}
                consumed[cname] = want
        for ck, amounts in cand.counters:
            for cname, amount in amounts.items():
                limit = st.counter_total(ck, cname)
                if limit is None:
                    return f"counter set {ck[2]} has no counter {cname}", {}
                used = st.counters_used.get(ck, {}).get(cname, Fraction(0)) + \
                    self.counters.get(ck, {}).get(cname, Fraction(0))
                if used + amount > limit:
                    return (f"counter {ck[2]}/{cname} has {_show(limit - used)} left, "
                            f"{_show(amount)} needed"), {}
        return "", consumed

    def _take(self, req: _Req, alt: _Alt, cand: Candidate) -> bool:
        """Tentatively allocate ``cand`` for ``alt`` unless it is blocked or breaks one of the
        claim's ``matchAttribute`` constraints."""
        why, consumed = self._blocked(alt, cand)
        if why:
            return False
        marks: list[int] = []
        for ci in req.constraints:
            con = self.constraints[ci]
            if con.match_attribute is None or not _applies(con, alt):
                continue
            value = cand.attributes.get(con.match_attribute)
            held = self.values.get(ci)
            if value is None or (held is not None and held[0] != value):
                return False
            marks.append(ci)
        for ci in marks:
            held = self.values.get(ci)
            self.values[ci] = (cand.attributes[self.constraints[ci].match_attribute or ""],
                               (held[1] if held else 0) + 1)
        result = DeviceResult(alt.name, cand.id[0], cand.id[1], cand.device.name, alt.admin,
                              consumed)
        self.chosen.append((req.claim, result, cand, marks))
        self._apply(result, cand, +1)
        return True

    def _apply(self, r: DeviceResult, cand: Candidate, sign: int) -> None:
        if r.admin_access:
            return
        if r.consumed:
            used = self.consumed.setdefault(r.id, {})
            for name, amount in r.consumed.items():
                used[name] = used.get(name, Fraction(0)) + sign * amount
        else:
            self.taken[r.id] = self.taken.get(r.id, 0) + sign
        for ck, amounts in cand.counters:
            counters = self.counters.setdefault(ck, {})
            for name, amount in amounts.items():
                counters[name] = counters.get(name, Fraction(0)) + sign * amount

    def _undo_to(self, mark: int) -> None:
        while len(self.chosen) > mark:
            _, r, cand, marks = self.chosen.pop()
            self._apply(r, cand, -1)
            for ci in marks:
                value, n = self.values[ci]
                if n == 1:
                    del self.values[ci]
                else:
                    self.values[ci] = (value, n - 1)

    def _explain(self, req: _Req) -> str:
        """Why ``req`` could not be satisfied, judged against the committed use alone."""
        return f"claim {req.claim}: " + "; ".join(self._explain_alt(req, a) for a in req.alts)

    def _explain_alt(self, req: _Req, alt: _Alt) -> str:
        name = f"request {alt.name}"
        cands = self._candidates(alt)
        if isinstance(cands, str):
            return f"{name}: {cands}"
        if not cands:
            return f"{name}: no device on the node matches the class and selectors"
        blocked = [(c, self._blocked(alt, c)[0]) for c in cands]
        free = [c for c, why in blocked if not why]
        need = len(cands) if alt.mode == ALL else alt.count
        detail = _list([f"{c.id[2]} {why}" for c, why in blocked if why])
        if alt.mode == ALL and not all(p.complete for p in self.pools
                                       if any(c in p.devices for c in cands)):
            return f"{name}: allocationMode All needs every slice of the pool"
        if len(free) < need:
            return (f"{name}: {need} device(s) needed, {len(cands)} match, {len(free)} free"
                    + (f" ({detail})" if detail else ""))
        attrs = sorted({self.constraints[ci].match_attribute or "" for ci in req.constraints
                        if self.constraints[ci].match_attribute
                        and _applies(self.constraints[ci], alt)})
        if attrs:
            return (f"{name}: no {need} of the {len(free)} free matching devices share one "
                    f"value of {', '.join(attrs)} (matchAttribute)")
        return (f"{name}: {len(free)} free matching devices, but none fits together with the "
                "claims' other requests")


def _list(items: list[str], limit: int = 4) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def _capacity_of(cand: Candidate, name: str) -> Fraction | None:
    q = _qualified(name, cand.id[0])
    for k, v in cand.capacity.items():
        if _qualified(k, cand.id[0]) == q:
            return v
    return None


def _wanted(cand: Candidate, cname: str, requests: dict[str, Fraction]) -> Fraction | None:
    """How much of capacity ``cname`` one allocation of a shareable device consumes: the
    request (or the policy's default, or all of it), raised to the next valid value or step;
    None when no valid amount fits the request."""
    q = _qualified(cname, cand.id[0])
    want = next((v for k, v in requests.items() if _qualified(k, cand.id[0]) == q), None)
    cap = cand.device.capacity[cname]
    total = cand.capacity[cname]
    policy = cap.request_policy
    if policy is None:
        return total if want is None else want
    if want is None:
        want = parse_quantity(policy.default) if policy.default is not None else total
    if policy.valid_values:
        options = sorted(parse_quantity(v) for v in policy.valid_values)
        return next((v for v in options if v >= want), None)
    rng = policy.valid_range
    if rng is not None:
        low = parse_quantity(rng.min) if rng.min is not None else Fraction(0)
        want = max(want, low)
        if rng.step is not None:
            step = parse_quantity(rng.step)
            steps = -((low - want) // step)
            want = low + steps * step
        if rng.max is not None and want > parse_quantity(rng.max):
            return None
    return want


def show_quantity(q: Fraction) -> str:
    """A quantity in its shortest exact form: 20Gi, 1500M, 7, 250m (reports and reasons)."""
    if q.denominator == 1:
        n = q.numerator
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                               ("Mi", 2**20), ("Ki", 2**10)):
            if n and n % factor == 0:
                return f"{n // factor}{suffix}"
        for suffix, factor in (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9),
                               ("M", 10**6), ("k", 10**3)):
            if n and n % factor == 0:
                return f"{n // factor}{suffix}"
        return str(n)
    for suffix, factor in (("m", 10**3), ("u", 10**6), ("n", 10**9)):
        scaled = q * factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return str(float(q))


_show = show_quantity


__all__ = ["Allocation", "Allocator", "Candidate", "DeviceResult", "DraState", "Pool",
           "allocation_fits", "show_quantity"]
