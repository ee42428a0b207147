"""The openb default trace (Alibaba GPU v2023) as explain manifests, written here from the
trace's documented mapping (src/kubeberth/sim/traces.py's docstring), not by kubeberth's reader.

explain has no clock, so the first N pods in arrival order are all pending at once and attempted
in that order, each placement kept: the first N decisions of a replay in which nothing ends yet.
Nodes are a stride sample of the node list, fewer than 100 so that percentageOfNodesToScore
never cuts (where kubeberth's node visiting order deliberately differs from upstream's).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

TRACE = Path(__file__).resolve().parents[3] / "shared" / "data" / "alibaba-gpu-v2023"
GPU, GPU_MILLI = "nvidia.com/gpu", "kubeberth.io/gpu-milli"
MAX_PODS = "10000"  # kubeberth's OPENB_MAX_PODS: the trace never meant the slot count to bind


def nodes(count: int) -> list[dict[str, Any]]:
    with (TRACE / "openb_node_list_all_node.csv").open() as f:
        rows = list(csv.DictReader(f))
    stride = max(1, len(rows) // count)
    out = []
    for row in rows[::stride][:count]:
        alloc = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi",
                 "pods": MAX_PODS}
        labels = {"kubernetes.io/hostname": row["sn"]}
        if int(row["gpu"]):
            alloc[GPU] = row["gpu"]
            alloc[GPU_MILLI] = str(1000 * int(row["gpu"]))
        if row.get("model"):
            labels["kubeberth.io/gpu-model"] = row["model"]
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": row["sn"], "labels": labels},
                    "status": {"allocatable": alloc, "capacity": dict(alloc)}})
    return out


def pods(count: int) -> list[dict[str, Any]]:
    with (TRACE / "openb_pod_list_default.csv").open() as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda r: int(r["creation_time"]))  # stable: file order among equal times
    out = []
    for row in rows[:count]:
        req = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi"}
        num, milli = int(row["num_gpu"]), int(row["gpu_milli"])
        if num and milli == 1000:
            req[GPU], req[GPU_MILLI] = str(num), str(1000 * num)
        elif num:
            req[GPU_MILLI] = str(milli)
        limits = {k: v for k, v in req.items() if k in (GPU, GPU_MILLI)}
        resources: dict[str, Any] = {"requests": req}
        if limits:
            resources["limits"] = limits
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": row["name"], "namespace": "default"},
                    "spec": {"containers": [{"name": "main", "image": "pause",
                                             "resources": resources}]}})
    return out


def manifests(num_pods: int, num_nodes: int) -> list[dict[str, Any]]:
    return nodes(num_nodes) + pods(num_pods)
