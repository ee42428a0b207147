"""NetworkCapacity in the live scheduler: the capacity ConfigMap is applied and changed with
kubectl, the scheduler's informer brings it into the snapshot and the waiting pod binds; a
malformed value is an Error status for the pod, not a crash; ConfigMaps are watched only by a
scheduler whose profiles read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.live.harness import Live, bound, node, wait_for, write

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "gpu" / "packing-profile.yaml"
FAST = "{kubeberth.io/network: high-speed}"


def capacity(data: str) -> str:
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: network-capacity, namespace: kube-system}}
data: {data}
"""


def trainer(name: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, annotations: {{kubeberth.io/network-slots: "1"}}}}
spec:
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: "2", memory: 4Gi, nvidia.com/gpu: "2"}}
      limits: {{nvidia.com/gpu: "2"}}
---
"""


def condition(live: Live, key: str) -> dict[str, Any]:
    conds = live.pods()[key]["status"].get("conditions", [])
    return next((c for c in conds if c["type"] == "PodScheduled"), {})


def test_kubectl_applied_capacity_and_its_update_drive_placement(live: Live,
                                                                tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("rdma-a", 8, labels=FAST)
                     + node("rdma-b", 8, labels=FAST) + node("plain", 8)))
    ctl = live.scheduler(PROFILE)
    assert "ConfigMap" in {inf.kind for inf in ctl.informers}
    cm = tmp_path / "capacity.yaml"
    live.kubectl("apply", "-f", str(write(cm, capacity('{rdma-a: "1"}'))))
    wait_for(lambda: "kube-system/network-capacity" in ctl.snap.config_maps, "the ConfigMap")
    live.kubectl("apply", "-f", str(write(tmp_path / "pods.yaml",
                                          trainer("t0") + trainer("t1"))))
    wait_for(lambda: len(bound(live)) == 1, "the first trainer")
    assert bound(live) == {"default/t0": "rdma-a"}
    wait_for(lambda: condition(live, "default/t1").get("reason") == "Unschedulable",
             "t1's PodScheduled condition")
    message = condition(live, "default/t1")["message"]
    assert "had no network slots in ConfigMap kube-system/network-capacity" in message
    assert "didn't have high-speed networking" in message

    # A malformed value: the pending pod gets an Error status, the controller keeps running.
    live.kubectl("apply", "-f", str(write(cm, capacity('{rdma-a: "1", rdma-b: "lots"}'))))
    wait_for(lambda: condition(live, "default/t1").get("reason") == "SchedulerError",
             "the Error status")
    assert "ConfigMap kube-system/network-capacity: field data.rdma-b: 'lots'" in \
        condition(live, "default/t1")["message"]
    assert ctl.healthy()

    # Fixed: rdma-b has a slot now and t1 binds there (at its next retry).
    live.kubectl("apply", "-f", str(write(cm, capacity('{rdma-a: "1", rdma-b: "1"}'))))
    wait_for(lambda: len(bound(live)) == 2, "the second trainer", timeout=60)
    assert bound(live) == {"default/t0": "rdma-a", "default/t1": "rdma-b"}

    # Deleting t0 returns rdma-a's slot; shrinking rdma-b to 0 keeps t1 where it is.
    live.kubectl("apply", "-f", str(write(cm, capacity('{rdma-a: "1", rdma-b: "0"}'))))
    live.kubectl("delete", "pod", "t0")
    live.kubectl("apply", "-f", str(write(tmp_path / "t2.yaml", trainer("t2"))))
    wait_for(lambda: "default/t2" in bound(live), "the third trainer")
    assert bound(live) == {"default/t1": "rdma-b", "default/t2": "rdma-a"}
    live.stop_controller(ctl)


def test_a_deleted_config_map_leaves_no_capacity(live: Live, tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("rdma-a", 8, labels=FAST)))
    ctl = live.scheduler(PROFILE)
    cm = write(tmp_path / "capacity.yaml", capacity('{rdma-a: "4"}'))
    live.kubectl("apply", "-f", str(cm))
    wait_for(lambda: "kube-system/network-capacity" in ctl.snap.config_maps, "the ConfigMap")
    live.kubectl("delete", "-f", str(cm))
    wait_for(lambda: not ctl.snap.config_maps, "the deletion")
    live.kubectl("apply", "-f", str(write(tmp_path / "p.yaml", trainer("t0"))))
    wait_for(lambda: condition(live, "default/t0").get("reason") == "Unschedulable",
             "the attempt")
    assert bound(live) == {}
    live.stop_controller(ctl)


def test_a_scheduler_without_a_config_map_reader_does_not_watch_them(live: Live,
                                                                     tmp_path: Path) -> None:
    live.serve(write(tmp_path / "cluster.yaml", node("n1", 8)))
    ctl = live.scheduler()
    assert "ConfigMap" not in {inf.kind for inf in ctl.informers}
    live.stop_controller(ctl)
