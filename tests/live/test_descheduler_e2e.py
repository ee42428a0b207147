"""The live descheduler against the embedded API server over HTTP: VK pods evicted once the
low-gpu-usage taint is on and re-created by their owner in the cluster, PodDisruptionBudgets
(the pass's own check and the API's 429), dry runs, re-lists after dropped watches and 410s,
and the same evictions `kubeberth deschedule` prints for the same objects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from tests.live.harness import Live, wait_for, write
from tests.live.spillenv import (
    LOW,
    VK,
    descheduler,
    pdb,
    running_on,
    spilled,
)

from kubeberth.api.objects import to_dict
from kubeberth.live.metrics import HealthServer


def test_vk_pods_are_evicted_and_come_back_to_the_cluster(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    ctl = descheduler(live, tmp_path)
    # No taint yet: passes run and evict nothing.
    wait_for(lambda: ctl.passes >= 2, "two passes")
    assert ctl.outcomes == []
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: len(running_on(live, "gpu-1", "llm")) == 2,
             "the Deployment's pods to come back to gpu-1")
    assert running_on(live, VK) == []
    assert not set(on_vk) & set(live.pods())  # the evicted pods are gone, new ones replaced them
    assert sorted(o.pod for o in ctl.outcomes) == on_vk  # each once, none a 404 retry
    assert {(o.node, o.plugin, o.result) for o in ctl.outcomes} == {
        (VK, "RemovePodsViolatingNodeTaints", "evicted")}
    # Upstream's event on each evicted pod.
    def descheduled() -> list[str]:
        events = json.loads(live.kubectl("get", "events", "-o", "json"))["items"]
        return sorted(f"default/{e['involvedObject']['name']}" for e in events
                      if e.get("source", {}).get("component") == "sigs.k8s.io.descheduler")
    wait_for(lambda: descheduled() == on_vk, "the Descheduled events")
    events = json.loads(live.kubectl("get", "events", "-o", "json"))["items"]
    ours = [e for e in events if e.get("source", {}).get("component") ==
            "sigs.k8s.io.descheduler"]
    assert {(e["type"], e["reason"], e["message"]) for e in ours} == {
        ("Normal", "RemovePodsViolatingNodeTaints",
         f"pod evicted from {VK} node by sigs.k8s.io/descheduler")}
    text = ctl.metrics.exposition().decode()
    line = ('descheduler_pods_evicted{namespace="default",node="virtual-kubelet",'
            'profile="spill-return",result="success",strategy="RemovePodsViolatingNodeTaints"}')
    assert f"{line} 2.0" in text
    assert line.replace("evicted{", "evicted_total{") + " 2.0" in text
    assert "# TYPE descheduler_pods_evicted_total counter" in text
    assert re.search(r"descheduler_descheduler_loop_duration_seconds_count [1-9]", text)
    assert re.search(r"\ndescheduler_loop_duration_seconds_count [1-9]", text)


def test_pass_equals_kubeberth_deschedule_on_the_same_objects(live: Live,
                                                              tmp_path: Path) -> None:
    spilled(live, tmp_path, replicas=3)
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    live.kubectl("apply", "-f", str(write(tmp_path / "pdb.yaml", pdb("llm", "llm", 2))))
    ctl = descheduler(live, tmp_path, dry_run=True, interval=3600)
    wait_for(lambda: ctl.passes == 1, "the first pass")
    planned = ctl.plan()
    # The same objects written out as manifests, through the files path.
    dump = tmp_path / "dump.json"
    items = []
    for kind in ("nodes", "pods", "pdb", "deployments", "replicasets"):
        items += json.loads(live.kubectl("get", kind, "-A", "-o", "json"))["items"]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    from kubeberth.config.manifests import load_manifests
    from kubeberth.descheduling.policy import load_descheduler_policy
    from kubeberth.descheduling.registry import Snapshot, build_descheduler
    files = build_descheduler(load_descheduler_policy(tmp_path / "policy.yaml")).run_pass(
        Snapshot.from_manifests(load_manifests([dump]), ctl.wall()))
    assert planned.to_json() == files.to_json()
    # minAvailable 2 of 3: one eviction, the others refused by the budget in the pass.
    assert len(planned.evictions) == 1 and len(planned.skipped) == 2
    assert all("PodDisruptionBudget default/llm" in d.reason or "PodDisruptionBudget llm"
               in d.reason for d in planned.skipped)


def test_pdb_refusal_in_the_pass_evicts_nothing(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    live.kubectl("apply", "-f", str(write(tmp_path / "pdb.yaml", pdb("llm", "llm", 2))))
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    ctl = descheduler(live, tmp_path)
    wait_for(lambda: ctl.passes >= 3, "three passes")
    assert ctl.outcomes == []
    assert running_on(live, VK, "llm") == on_vk
    found = re.search(r'kubeberth_descheduler_pods_skipped_total\{profile="spill-return",'
                      r'strategy="RemovePodsViolatingNodeTaints"\} (\d+)',
                      ctl.metrics.exposition().decode())
    assert found is not None and int(found.group(1)) >= 6  # both pods, every pass


def test_api_429_skips_the_pod_and_is_not_retried(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    ctl = descheduler(live, tmp_path, interval=3600)
    wait_for(lambda: ctl.passes == 1, "the first pass (nothing to evict)")
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: LOW in json.dumps(to_dict(ctl.cache.get("Node", VK))),
             "the cache to see the taint")
    planned = ctl.plan()
    assert sorted(d.pod for d in planned.evictions) == on_vk
    # A budget appears between the pass and its evictions: the race the API's check is for.
    live.kubectl("apply", "-f", str(write(tmp_path / "pdb.yaml", pdb("llm", "llm", 2))))
    outcomes = ctl.apply(planned.evictions)
    assert [o.result for o in outcomes] == ["pdb", "pdb"]
    assert all("disruption budget llm needs 2 healthy pods" in o.detail for o in outcomes)
    assert len(ctl.outcomes) == 2  # one request per pod, no retry loop
    assert running_on(live, VK, "llm") == on_vk
    text = ctl.metrics.exposition().decode()
    assert 'descheduler_pods_evicted{namespace="default",node="virtual-kubelet",' \
           'profile="spill-return",result="error",' \
           'strategy="RemovePodsViolatingNodeTaints"} 2.0' in text


def test_a_pass_right_after_evictions_does_not_evict_again(live: Live,
                                                          tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    ctl = descheduler(live, tmp_path, interval=3600)
    wait_for(lambda: ctl.passes == 1, "the first pass (nothing to evict)")
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    wait_for(lambda: LOW in json.dumps(to_dict(ctl.cache.get("Node", VK))),
             "the cache to see the taint")
    first = ctl.apply(ctl.plan().evictions)
    assert sorted(o.pod for o in first) == on_vk and {o.result for o in first} == {"evicted"}
    # Whether or not the watch has reported the deletions yet, the evicted pods are not judged
    # again (the replacements avoid the tainted node).
    assert ctl.plan().evictions == []
    wait_for(lambda: len(running_on(live, "gpu-1", "llm")) == 2, "the replacements")
    assert ctl.plan().evictions == []


def test_dry_run_writes_nothing(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path)
    live.kubectl("taint", "nodes", VK, f"{LOW}=true:NoSchedule")
    events_before = live.kubectl("get", "events", "-o", "name")
    ctl = descheduler(live, tmp_path, dry_run=True)
    wait_for(lambda: ctl.passes >= 3, "three passes")
    assert {o.result for o in ctl.outcomes} == {"dry-run"}
    assert sorted({o.pod for o in ctl.outcomes}) == on_vk
    assert running_on(live, VK, "llm") == on_vk
    assert live.kubectl("get", "events", "-o", "name") == events_before


def test_dropped_watches_and_410_are_survived(live: Live, tmp_path: Path) -> None:
    on_vk = spilled(live, tmp_path, history=5)
    srv = live.server
    assert srv is not None
    ctl = descheduler(live, tmp_path)
    wait_for(lambda: ctl.passes >= 1, "a pass")
    lists = sum(inf.stats.lists for inf in ctl.informers)

    def drop() -> None:
        srv.api.store.compact()
        srv.api.store.close_watches()
        # The taint arrives while the streams are down.
        srv.api.patch(srv.api.nodes, "", VK, "application/merge-patch+json", json.dumps(
            {"spec": {"taints": [
                {"key": "vk.node.com", "value": "true", "effect": "NoSchedule"},
                {"key": LOW, "value": "true", "effect": "NoSchedule"}]}}).encode())
        # More node changes than the server's history holds: resuming is a 410.
        for i in range(8):
            srv.api.patch(srv.api.nodes, "", "gpu-1", "application/merge-patch+json",
                          json.dumps({"metadata": {"labels": {"rev": str(i)}}}).encode())

    srv.call(drop)
    wait_for(lambda: len(running_on(live, "gpu-1", "llm")) == 2, "the pods to come back")
    assert sum(inf.stats.lists for inf in ctl.informers) > lists
    assert json.dumps(to_dict(ctl.cache.get("Node", "gpu-1"))).count('"rev": "7"') == 1
    assert sorted(o.pod for o in ctl.outcomes) == on_vk


def test_health_endpoints(live: Live, tmp_path: Path) -> None:
    spilled(live, tmp_path, replicas=1)
    ctl = descheduler(live, tmp_path)
    health = HealthServer("127.0.0.1", 0, healthy=ctl.healthy, ready=ctl.ready,
                          metrics=ctl.metrics.exposition).start()
    try:
        base = f"http://127.0.0.1:{health.port}"
        assert httpx.get(f"{base}/healthz").text == "ok"
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert "descheduler_loop_duration_seconds" in httpx.get(f"{base}/metrics").text
        ctl.stop.set()
        wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 503, "unhealthy")
    finally:
        health.stop()
