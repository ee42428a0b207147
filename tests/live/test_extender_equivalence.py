"""Our framework against `kubeberth extender` over real loopback HTTP decides what the same
profile decides in-process (issue #6, section 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeberth.config.manifests import load_manifests
from kubeberth.live.extender import ExtenderServer, ExtenderService, make_app
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain

# Six nodes of different sizes (so scores differ), a tainted one, zones, pods already bound,
# pending pods that land, one that fits nowhere and a high-priority one that must preempt.
CLUSTER = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {zone: a}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {zone: b}}
status: {allocatable: {cpu: "16", memory: 32Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: n4, labels: {zone: b}}
spec:
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: n5, labels: {zone: c}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: n6, labels: {zone: c}}
status: {allocatable: {cpu: "6", memory: 6Gi, pods: "20"}}
---
apiVersion: v1
kind: Pod
metadata: {name: old-1, namespace: default}
spec:
  nodeName: n3
  containers: [{name: c, resources: {requests: {cpu: "10", memory: 20Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: old-2, namespace: default}
spec:
  nodeName: n2
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 2Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: old-3, namespace: default}
spec:
  nodeName: n6
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 1Gi}}}]
"""

PENDING = """\
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, labels: {app: web}}
spec:
  containers: [{name: c, resources: {requests: {cpu: "2", memory: 3Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch-1}
spec:
  containers: [{name: c, resources: {requests: {cpu: "5", memory: 4Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-1}
spec:
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, resources: {requests: {cpu: "12", memory: 10Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: zoned}
spec:
  nodeSelector: {zone: c}
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers: [{name: c, resources: {requests: {cpu: "64", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: small-1}
spec:
  containers: [{name: c, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"""

PREEMPTOR = """\
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priorityClassName: high
  nodeSelector: {zone: c}
  containers: [{name: c, resources: {requests: {cpu: "6", memory: 1Gi}}}]
"""

PLAIN = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""

MOST_ALLOCATED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
"""


def _config(tmp: Path, base: str, extender: str, client_plugins: str = "") -> Any:
    text = base.rstrip("\n") + "\n" + client_plugins + extender
    path = tmp / "client.yaml"
    path.write_text(text)
    return load_scheduler_config(path)


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "pending.yaml").write_text(PENDING)
    (tmp_path / "urgent.yaml").write_text(PREEMPTOR)
    return tmp_path


@pytest.fixture(params=[PLAIN, MOST_ALLOCATED], ids=["LeastAllocated", "MostAllocated"])
def base(request: pytest.FixtureRequest) -> str:
    text: str = request.param
    return text


def _serve(files: Path, base: str) -> ExtenderServer:
    (files / "served.yaml").write_text(base)
    service = ExtenderService(load_scheduler_config(files / "served.yaml"), in_tree_registry(),
                              load_manifests([files / "cluster.yaml"]))
    return ExtenderServer(make_app(service)).start()


@pytest.fixture()
def server(files: Path, base: str) -> Iterator[ExtenderServer]:
    srv = _serve(files, base)
    yield srv
    srv.stop()


def _decisions(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(p["pod"], p["result"], p["selectedNode"], p["nominatedNode"], tuple(p["victims"]))
            for p in data["pods"]]


def _inputs(files: Path) -> list[Path]:
    return [files / "cluster.yaml", files / "pending.yaml", files / "urgent.yaml"]


def _stanza(url: str, *, cache: bool, weight: int = 1) -> str:
    return (f"extenders:\n- urlPrefix: {url}\n  filterVerb: filter\n"
            f"  prioritizeVerb: prioritize\n  preemptVerb: preempt\n  bindVerb: bind\n"
            f"  weight: {weight}\n  nodeCacheCapable: {str(cache).lower()}\n")


@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "fullNodes"])
def test_profile_plus_extender_decides_as_in_process(files: Path, base: str,
                                                     server: ExtenderServer,
                                                     cache: bool) -> None:
    registry = in_tree_registry()
    (files / "plain.yaml").write_text(base)
    alone = explain(load_manifests(_inputs(files)), load_scheduler_config(files / "plain.yaml"),
                    registry, seed=7)
    both = explain(load_manifests(_inputs(files)),
                   _config(files, base, _stanza(server.url, cache=cache, weight=3)),
                   registry, seed=7)
    assert _decisions(both) == _decisions(alone)
    results = {p["pod"]: p["result"] for p in alone["pods"]}
    # The scenario exercises every outcome the equivalence has to cover.
    assert results["default/huge"] == "Unschedulable"
    assert results["default/web-1"] == "Scheduled"
    urgent = next(p for p in both["pods"] if p["pod"] == "default/urgent")
    assert urgent["nominatedNode"] and urgent["victims"]
    # Every binding went through the extender, which now holds the same pods per node.
    for p in both["pods"]:
        if p["result"] == "Scheduled":
            assert p["extenders"]["boundBy"] == server.url


def test_extender_alone_decides_as_in_process(files: Path, base: str,
                                              server: ExtenderServer) -> None:
    """Client filters and scores switched off: the extender's filter and its 0..10 scores
    alone reproduce the profile's choices (each pod's best node wins by a clear margin)."""
    registry = in_tree_registry()
    (files / "plain.yaml").write_text(base)
    inputs = [files / "cluster.yaml", files / "pending.yaml"]
    alone = explain(load_manifests(inputs), load_scheduler_config(files / "plain.yaml"),
                    registry, seed=3)
    off = ("  plugins:\n    filter: {disabled: [{name: '*'}]}\n"
           "    score: {disabled: [{name: '*'}]}\n")
    remote = explain(load_manifests(inputs), _config(files, base, _stanza(server.url, cache=True),
                                                     client_plugins=off), registry, seed=3)
    assert [(p["pod"], p["result"], p["selectedNode"]) for p in remote["pods"]] == \
        [(p["pod"], p["result"], p["selectedNode"]) for p in alone["pods"]]
    # One reason per failing node: the FitError text is the same too.
    huge = next(p for p in remote["pods"] if p["pod"] == "default/huge")
    in_process = next(p for p in alone["pods"] if p["pod"] == "default/huge")
    assert huge["message"] == in_process["message"]
    assert huge["message"].startswith("0/6 nodes are available: ")
    n1 = huge["nodes"]["n1"]["extenders"][server.url]["filter"]
    assert n1 == {"code": "UnschedulableAndUnresolvable", "reasons": ["Insufficient cpu"]}
    assert huge["nodes"]["n1"]["feasible"] is False
