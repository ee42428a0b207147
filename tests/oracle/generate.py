"""Hypothesis strategies for small clusters and pending pods that exercise the default profile:
resources (cpu, memory, pods, nvidia.com/gpu), taints and tolerations, node affinity, pod
(anti-)affinity, topology spread, priorities (so preemption) and PDBs.

Values come from small sets on purpose: collisions (equal scores, shared labels, full nodes) are
where implementations disagree, and hypothesis shrinks a failure to a few objects.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

Json = dict[str, Any]
ZONES = ("a", "b", "c")
APPS = ("x", "y")
TAINTS = ({"key": "gpu", "value": "true", "effect": "NoSchedule"},
          {"key": "gpu", "value": "true", "effect": "PreferNoSchedule"},
          {"key": "spot", "value": "yes", "effect": "NoSchedule"},
          {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"})
TOLERATIONS = ({"key": "gpu", "operator": "Exists"},
               {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
               {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
               {"operator": "Exists"})


@st.composite
def node(draw: st.DrawFn, i: int) -> Json:
    name = f"node-{i}"
    alloc = {"cpu": str(draw(st.sampled_from([1, 2, 4, 8]))),
             "memory": f"{draw(st.sampled_from([2, 4, 8, 16]))}Gi",
             "pods": str(draw(st.sampled_from([2, 4, 110])))}
    gpus = draw(st.sampled_from([0, 0, 1, 2, 4, 8]))
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": draw(
        st.sampled_from(ZONES))}
    if draw(st.booleans()):
        labels["tier"] = draw(st.sampled_from(["gold", "silver"]))
    taints = draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"]))
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": list(taints)} if taints else {},
            "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _selector(app: str) -> Json:
    return {"matchLabels": {"app": app}}


@st.composite
def affinity(draw: st.DrawFn) -> Json:
    out: Json = {}
    if draw(st.integers(0, 3)) == 0:
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
        expr = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}
        na = out.setdefault("nodeAffinity", {})
        if draw(st.booleans()):
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]}
        else:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": draw(st.sampled_from([1, 50, 100])),
                 "preference": {"matchExpressions": [{"key": "tier", "operator": "In",
                                                      "values": ["gold"]}]}}]
    for kind in ("podAffinity", "podAntiAffinity"):
        if draw(st.integers(0, 4)) == 0:
            term = {"labelSelector": _selector(draw(st.sampled_from(APPS))),
                    "topologyKey": draw(st.sampled_from(["kubernetes.io/hostname",
                                                         "topology.kubernetes.io/zone"]))}
            if draw(st.booleans()):
                out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            else:
                out[kind] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": draw(st.sampled_from([1, 10, 100])), "podAffinityTerm": term}]}
    return out


@st.composite
def pod(draw: st.DrawFn, name: str, nodes: list[str] | None, started: int = 0) -> Json:
    """A pending pod (``nodes`` None) or one bound to one of ``nodes`` that started at second
    ``started`` (distinct per pod: upstream orders equal-priority victims by start time and
    counts a missing one as "now" at each comparison, which leaves ties undefined)."""
    requests = {"cpu": f"{draw(st.sampled_from([0, 100, 500, 1000, 2000, 3000]))}m",
                "memory": f"{draw(st.sampled_from([0, 256, 1024, 4096]))}Mi"}
    gpus = draw(st.sampled_from([0, 0, 0, 1, 2, 4]))
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    container: Json = {"name": "c", "image": "pause", "resources": {"requests": requests}}
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    app = draw(st.sampled_from(APPS))
    spec: Json = {"containers": [container], "priority": draw(st.sampled_from([0, 10, 100]))}
    if nodes is not None:
        spec["nodeName"] = draw(st.sampled_from(nodes))
        meta_status: Json = {"phase": "Running",
                             "startTime": f"2024-01-01T00:{started // 60:02d}:{started % 60:02d}Z"}
    else:
        meta_status = {}
        tolerations = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2))
        if tolerations:
            spec["tolerations"] = list(tolerations)
        aff = draw(affinity())
        if aff:
            spec["affinity"] = aff
        if draw(st.integers(0, 3)) == 0:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": draw(st.sampled_from([1, 2])),
                "topologyKey": draw(st.sampled_from(["kubernetes.io/hostname",
                                                     "topology.kubernetes.io/zone"])),
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                "labelSelector": _selector(app)}]
        if draw(st.integers(0, 5)) == 0:
            spec["preemptionPolicy"] = "Never"
    doc: Json = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
                 "spec": spec}
    if meta_status:
        doc["status"] = meta_status
    return doc


@st.composite
def cluster(draw: st.DrawFn, max_nodes: int = 5, max_bound: int = 6,
            max_pending: int = 4) -> list[Json]:
    """Manifests: nodes, bound pods, PDBs, then the pending pods."""
    n = draw(st.integers(1, max_nodes))
    nodes = [draw(node(i)) for i in range(n)]
    names = [x["metadata"]["name"] for x in nodes]
    num_bound = draw(st.integers(0, max_bound))
    starts = draw(st.permutations(range(num_bound)))
    bound = [draw(pod(f"bound-{i}", names, starts[i])) for i in range(num_bound)]
    pdbs = [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": f"pdb-{app}", "namespace": "default"},
             "spec": {"selector": _selector(app)},
             "status": {"disruptionsAllowed": draw(st.sampled_from([0, 1])), "currentHealthy": 1,
                        "desiredHealthy": 1, "expectedPods": 1}}
            for app in draw(st.lists(st.sampled_from(APPS), max_size=2, unique=True))]
    pending = [draw(pod(f"pending-{i}", None)) for i in range(draw(st.integers(1, max_pending)))]
    return nodes + bound + pdbs + pending
