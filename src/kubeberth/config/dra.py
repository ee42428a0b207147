"""Loading the Dynamic Resource Allocation kinds (``resource.k8s.io/v1``) from manifests.

The manifest loader keeps DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate
documents raw; this module decodes them and validates what the API server refuses and a user
writing them by hand hits: names, one of ``exactly``/``firstAvailable``, allocation modes and
counts, CEL selectors that compile, constraints naming existing requests with a qualified
attribute, a slice's one node-selection field, unique devices, one value per attribute and
quantities that parse. It also checks a pod's ``spec.resourceClaims`` (one source each) and its
containers' ``resources.claims`` (naming a pod claim). References between objects (a class or
template that does not exist) are left to the scheduler, which reports them as upstream does.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field

from kubeberth.api.cel import compile_selector
from kubeberth.api.dra import (
    ALL,
    ALLOCATION_MODES,
    EXACT_COUNT,
    DeviceClaim,
    DeviceClass,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.api.quantity import parse_quantity
from kubeberth.api.selectors import compile_node_selector_term
from kubeberth.api.validation import LABEL, SUBDOMAIN
from kubeberth.config.manifests import Manifests, convert_object
from kubeberth.config.yamlsrc import Document

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_COUNT = 128  # upstream's AllocationResultsMaxSize bounds a request's devices
_C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(slots=True)
class DraObjects:
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    templates: list[ResourceClaimTemplate] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.classes or self.slices or self.claims or self.templates)


def load_dra(m: Manifests) -> DraObjects:
    """Decode and validate every DRA object in ``m`` and the pods' claim references."""
    out = DraObjects()
    for doc in m.of_kind(*KINDS):
        if doc.kind == "DeviceClass":
            dc = convert_object(doc, DeviceClass, namespaced=False)
            _selectors(doc, dc.spec.selectors, "spec.selectors")
            if dc.spec.extended_resource_name is not None:
                raise doc.error("extendedResourceName is not modelled yet",
                                field="spec.extendedResourceName",
                                expected="a DeviceClass without extendedResourceName (see "
                                "docs/dra.md)")
            out.classes.append(dc)
        elif doc.kind == "ResourceSlice":
            rs = convert_object(doc, ResourceSlice, namespaced=False)
            _slice(doc, rs)
            out.slices.append(rs)
        elif doc.kind == "ResourceClaim":
            rc = convert_object(doc, ResourceClaim, namespaced=True)
            _claim_spec(doc, rc.spec.devices, "spec.devices")
            out.claims.append(rc)
        else:
            tpl = convert_object(doc, ResourceClaimTemplate, namespaced=True)
            _claim_spec(doc, tpl.spec.spec.devices, "spec.spec.devices")
            out.templates.append(tpl)
        _unique(m, doc)
    for pod in m.pods:
        origin = m.origin("Pod", pod.metadata.name, pod.metadata.namespace)
        if origin is not None:
            check_pod_claims(origin, pod)
    return out


def _unique(m: Manifests, doc: Document) -> None:
    meta = doc.data.get("metadata") or {}
    ns = str(meta.get("namespace") or "default") if doc.kind in (
        "ResourceClaim", "ResourceClaimTemplate") else ""
    key = (doc.kind, ns, str(meta.get("name")))
    first = m.origins.get(key)
    if first is not None and first is not doc:
        raise doc.error(f"{doc.kind} {meta.get('name')} is defined twice", field="metadata.name",
                        expected=f"unique names (the first is in {first.source.name})")
    m.origins[key] = doc


def check_pod_claims(doc: Document, pod: Pod) -> None:
    """A pod's claims: unique DNS-label names, exactly one source each; containers' claims
    name one of them."""
    names: set[str] = set()
    for i, c in enumerate(pod.spec.resource_claims):
        path = f"spec.resourceClaims[{i}]"
        _new_label(doc, c.name, names, "claim", path, "unique names in spec.resourceClaims")
        names.add(c.name)
        if (c.resource_claim_name is None) == (c.resource_claim_template_name is None):
            raise doc.error(f"claim {c.name!r} must have exactly one source", field=path,
                            expected="exactly one of resourceClaimName and "
                            "resourceClaimTemplateName")
    for kind, containers in (("containers", pod.spec.containers),
                             ("initContainers", pod.spec.init_containers)):
        for i, ctr in enumerate(containers):
            for j, ref in enumerate(ctr.resources.claims):
                if ref.name not in names:
                    raise doc.error(
                        f"container {ctr.name!r} uses claim {ref.name!r}, which the pod does "
                        "not list", field=f"spec.{kind}[{i}].resources.claims[{j}].name",
                        expected="the name of an entry in spec.resourceClaims")


def _new_label(doc: Document, name: str, seen: Container[str], what: str, path: str,
               unique: str) -> None:
    """Claims and requests are named by DNS labels, unique among their siblings."""
    if not LABEL.fullmatch(name):
        raise doc.error(f"{what} name {name!r} is not a DNS label", field=f"{path}.name",
                        expected="a lowercase RFC 1123 label such as gpu")
    if name in seen:
        raise doc.error(f"{what} {name!r} is listed twice", field=f"{path}.name",
                        expected=unique)


def _selectors(doc: Document, selectors: list[DeviceSelector], path: str) -> None:
    for i, sel in enumerate(selectors):
        where = f"{path}[{i}].cel.expression"
        if sel.cel is None:
            raise doc.error("the selector has no cel", field=f"{path}[{i}].cel",
                            expected="cel: {expression: ...}")
        try:
            compile_selector(sel.cel.expression)
        except InputError as err:
            meta = doc.data.get("metadata") or {}
            raise doc.error(f"{doc.kind} {meta.get('name')}: {err.message}", field=where,
                            expected=err.expected) from None


def _quantity(doc: Document, value: object, path: str) -> None:
    with doc.located(path):
        parse_quantity(value)


def _count(doc: Document, mode: str, count: int | None, path: str) -> None:
    if mode not in ALLOCATION_MODES:
        raise doc.error(f"unknown allocationMode {mode!r}", field=f"{path}.allocationMode",
                        expected=" or ".join(ALLOCATION_MODES))
    if mode == ALL and count is not None:
        raise doc.error("count is set with allocationMode All", field=f"{path}.count",
                        expected="no count (All takes every matching device)")
    if mode == EXACT_COUNT and count is not None and not 1 <= count <= MAX_COUNT:
        raise doc.error(f"count {count} is out of range", field=f"{path}.count",
                        expected=f"an integer from 1 to {MAX_COUNT}")


def _claim_spec(doc: Document, spec: DeviceClaim, path: str) -> None:
    if len(spec.requests) > MAX_REQUESTS:
        raise doc.error(f"{len(spec.requests)} requests", field=f"{path}.requests",
                        expected=f"at most {MAX_REQUESTS} requests")
    names: dict[str, set[str]] = {}
    for i, req in enumerate(spec.requests):
        rp = f"{path}.requests[{i}]"
        _new_label(doc, req.name, names, "request", rp, "unique request names")
        if (req.exactly is None) == (not req.first_available):
            raise doc.error(f"request {req.name!r} must have exactly one of exactly and "
                            "firstAvailable", field=rp,
                            expected="exactly: {deviceClassName: ...} or firstAvailable: [...]")
        subs: set[str] = set()
        if req.exactly is not None:
            ex = req.exactly
            _class_name(doc, ex.device_class_name, f"{rp}.exactly.deviceClassName")
            _selectors(doc, ex.selectors, f"{rp}.exactly.selectors")
            _count(doc, ex.allocation_mode, ex.count, f"{rp}.exactly")
            if ex.capacity is not None:
                for name, value in ex.capacity.requests.items():
                    _quantity(doc, value, f"{rp}.exactly.capacity.requests.{name}")
        else:
            if len(req.first_available) > MAX_SUBREQUESTS:
                raise doc.error(f"{len(req.first_available)} subrequests",
                                field=f"{rp}.firstAvailable",
                                expected=f"at most {MAX_SUBREQUESTS} subrequests")
            for j, sub in enumerate(req.first_available):
                sp = f"{rp}.firstAvailable[{j}]"
                if not LABEL.fullmatch(sub.name) or sub.name in subs:
                    raise doc.error(f"subrequest name {sub.name!r} is not a unique DNS label",
                                    field=f"{sp}.name",
                                    expected="a unique lowercase RFC 1123 label")
                subs.add(sub.name)
                _class_name(doc, sub.device_class_name, f"{sp}.deviceClassName")
                _selectors(doc, sub.selectors, f"{sp}.selectors")
                _count(doc, sub.allocation_mode, sub.count, sp)
                if sub.capacity is not None:
                    for name, value in sub.capacity.requests.items():
                        _quantity(doc, value, f"{sp}.capacity.requests.{name}")
        names[req.name] = subs
    for i, con in enumerate(spec.constraints):
        cp = f"{path}.constraints[{i}]"
        if con.distinct_attribute is not None:
            raise doc.error("distinctAttribute is not modelled yet",
                            field=f"{cp}.distinctAttribute",
                            expected="matchAttribute (see docs/dra.md)")
        if con.match_attribute is None:
            raise doc.error("the constraint has no matchAttribute", field=cp,
                            expected="matchAttribute: <domain>/<attribute>")
        _qualified(doc, con.match_attribute, f"{cp}.matchAttribute")
        for j, ref in enumerate(con.requests):
            req_name, _, sub_name = ref.partition("/")
            if req_name not in names or (sub_name and sub_name not in names[req_name]):
                raise doc.error(f"constraint names request {ref!r}, which the claim does not "
                                "have", field=f"{cp}.requests[{j}]",
                                expected="the name of a request (or request/subrequest)")


def _class_name(doc: Document, name: str, path: str) -> None:
    if not name:
        raise doc.error("the request has no deviceClassName", field=path,
                        expected="the name of a DeviceClass")


def _qualified(doc: Document, name: str, path: str) -> None:
    domain, sep, ident = name.rpartition("/")
    if not sep or not SUBDOMAIN.fullmatch(domain) or not _C_IDENT.fullmatch(ident):
        raise doc.error(f"{name!r} is not a fully qualified attribute name", field=path,
                        expected="<domain>/<attribute>, such as gpu.nvidia.com/nvlinkDomain")


def _slice(doc: Document, rs: ResourceSlice) -> None:
    spec = rs.spec
    if not spec.driver or not SUBDOMAIN.fullmatch(spec.driver):
        raise doc.error(f"driver {spec.driver!r} is not a DNS subdomain", field="spec.driver",
                        expected="a driver name such as gpu.nvidia.com")
    if not spec.pool.name:
        raise doc.error("the slice has no pool name", field="spec.pool.name",
                        expected="a pool name (often the node's name)")
    if spec.pool.resource_slice_count < 1:
        raise doc.error("resourceSliceCount is below 1", field="spec.pool.resourceSliceCount",
                        expected="the number of slices in the pool, 1 or more")
    chosen = [n for n, v in (("nodeName", spec.node_name), ("nodeSelector", spec.node_selector),
                             ("allNodes", spec.all_nodes)) if v]
    if spec.per_device_node_selection:
        raise doc.error("perDeviceNodeSelection is not modelled yet",
                        field="spec.perDeviceNodeSelection",
                        expected="nodeName, nodeSelector or allNodes (see docs/dra.md)")
    if spec.shared_counters and spec.devices:
        raise doc.error("the slice has both sharedCounters and devices", field="spec.devices",
                        expected="shared counters in a slice of their own in the same pool "
                        "(resourceSliceCount counts it)")
    if len(chosen) != 1:
        raise doc.error(f"the slice sets {' and '.join(chosen) or 'no node selection'}",
                        field="spec", expected="exactly one of nodeName, nodeSelector, allNodes")
    if spec.node_selector is not None:
        for i, term in enumerate(spec.node_selector.node_selector_terms):
            with doc.located():
                compile_node_selector_term(term, f"spec.nodeSelector.nodeSelectorTerms[{i}]")
    sets: set[str] = set()
    for i, cs in enumerate(spec.shared_counters):
        if not cs.name or cs.name in sets:
            raise doc.error(f"counter set name {cs.name!r} is empty or repeated",
                            field=f"spec.sharedCounters[{i}].name",
                            expected="a unique counter set name")
        sets.add(cs.name)
        for cname, c in cs.counters.items():
            _quantity(doc, c.value, f"spec.sharedCounters[{i}].counters.{cname}.value")
    seen: set[str] = set()
    for i, dev in enumerate(spec.devices):
        dp = f"spec.devices[{i}]"
        if not LABEL.fullmatch(dev.name) or dev.name in seen:
            raise doc.error(f"device name {dev.name!r} is not a unique DNS label",
                            field=f"{dp}.name", expected="a unique lowercase RFC 1123 label")
        seen.add(dev.name)
        for aname, attr in dev.attributes.items():
            set_ = [v for v in (attr.int_, attr.bool_, attr.string, attr.version) if v is not None]
            if len(set_) != 1:
                raise doc.error(f"attribute {aname!r} has {len(set_)} values",
                                field=f"{dp}.attributes.{aname}",
                                expected="exactly one of int, bool, string, version")
        for cname, cap in dev.capacity.items():
            _quantity(doc, cap.value, f"{dp}.capacity.{cname}.value")
            pol = cap.request_policy
            if pol is not None:
                if pol.default is not None:
                    _quantity(doc, pol.default, f"{dp}.capacity.{cname}.requestPolicy.default")
                for k, v in enumerate(pol.valid_values):
                    _quantity(doc, v, f"{dp}.capacity.{cname}.requestPolicy.validValues[{k}]")
                if pol.valid_range is not None:
                    for key in ("min", "max", "step"):
                        v = getattr(pol.valid_range, key)
                        if v is not None:
                            _quantity(doc, v,
                                      f"{dp}.capacity.{cname}.requestPolicy.validRange.{key}")
        for j, cc in enumerate(dev.consumes_counters):
            for cname, c in cc.counters.items():
                _quantity(doc, c.value, f"{dp}.consumesCounters[{j}].counters.{cname}.value")


__all__ = ["KINDS", "DraObjects", "check_pod_claims", "load_dra"]
