"""`kubeberth extender`: each verb of the served profile, the state it judges against, bad
requests, and the command itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from kubeberth.api.errors import InputError
from kubeberth.cli.main import app
from kubeberth.config.manifests import load_manifests
from kubeberth.live.extender import (
    NOT_CACHED,
    PREFILTER_REJECTED,
    ExtenderServer,
    ExtenderService,
    make_app,
    normalize,
)
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: a, labels: {zone: z1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: b, labels: {zone: z2}}
status: {allocatable: {cpu: "8", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: resident, uid: uid-resident}
spec:
  nodeName: a
  priority: 0
  containers: [{name: c, resources: {requests: {cpu: "3"}}}]
"""


def pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                     **spec}}


@pytest.fixture()
def service(tmp_path: Path) -> ExtenderService:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    return ExtenderService(load_scheduler_config(None), in_tree_registry(),
                           load_manifests([tmp_path / "cluster.yaml"]))


@pytest.fixture()
def served(service: ExtenderService) -> Iterator[tuple[ExtenderService, httpx.Client]]:
    with ExtenderServer(make_app(service)) as server, \
            httpx.Client(base_url=server.url + "/any/prefix") as client:
        yield service, client


def post(client: httpx.Client, verb: str, body: Any) -> Any:
    resp = client.post(verb, content=json.dumps(body))
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_normalize_maps_totals_onto_zero_to_ten() -> None:
    assert normalize(np.array([100, 150, 200], dtype=np.int64)) == [0, 5, 10]
    assert normalize(np.array([7, 7], dtype=np.int64)) == [0, 0]
    assert normalize(np.array([0, 1, 3], dtype=np.int64)) == [0, 3, 10]
    assert normalize(np.array([], dtype=np.int64)) == []


def test_filter_by_names_runs_the_profile_filters(
        served: tuple[ExtenderService, httpx.Client]) -> None:
    _svc, client = served
    out = post(client, "filter", {"Pod": pod("p", "2"), "NodeNames": ["a", "b", "ghost"]})
    assert out["NodeNames"] == ["b"] and out["Nodes"] is None
    assert out["FailedNodes"] == {"a": "Insufficient cpu"}
    assert out["FailedAndUnresolvableNodes"] == {"ghost": NOT_CACHED}
    assert out["Error"] == ""


def test_filter_with_node_objects_updates_the_cached_nodes(
        served: tuple[ExtenderService, httpx.Client]) -> None:
    svc, client = served
    bigger = {"metadata": {"name": "a", "labels": {"zone": "z1"}},
              "status": {"allocatable": {"cpu": "16", "memory": "8Gi", "pods": "10"}}}
    new = {"metadata": {"name": "c"}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}}
    out = post(client, "filter", {"Pod": pod("p", "2"), "Nodes": {"items": [bigger, new]}})
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["a"]
    assert out["NodeNames"] is None
    # More than the node's whole allocatable: unresolvable, as NodeResourcesFit says.
    assert out["FailedAndUnresolvableNodes"] == {"c": "Insufficient cpu"}
    # The resident pod is still counted on the updated node.
    assert svc.snap.pods["default/resident"].node == svc.snap.node_index["a"]
    assert svc.snap.num_nodes == 3


def test_prefilter_narrowing_and_rejection(
        served: tuple[ExtenderService, httpx.Client]) -> None:
    _svc, client = served
    pinned = pod("p", "1", nodeSelector={}, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}})
    out = post(client, "filter", {"Pod": pinned, "NodeNames": ["a", "b"]})
    assert out["NodeNames"] == ["a"]
    assert out["FailedAndUnresolvableNodes"] == {"b": PREFILTER_REJECTED}


def test_prioritize_normalizes_the_profile_scores(
        served: tuple[ExtenderService, httpx.Client]) -> None:
    _svc, client = served
    out = post(client, "prioritize", {"Pod": pod("p", "1"), "NodeNames": ["a", "b"]})
    # LeastAllocated: b (8 cpu, empty) beats a (4 cpu, 3 used).
    assert out == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": 10}]


def test_preempt_selects_victims_and_forgets_them_once_nominated(
        served: tuple[ExtenderService, httpx.Client]) -> None:
    svc, client = served
    urgent = pod("urgent", "4", priority=100, nodeSelector={"zone": "z1"})
    out = post(client, "preempt", {"Pod": urgent, "NodeNameToMetaVictims": {
        "a": {"Pods": [{"UID": "uid-resident"}], "NumPDBViolations": 0},
        "b": {"Pods": [], "NumPDBViolations": 0}}})
    # b does not match the nodeSelector: the profile finds no victims there.
    assert out == {"NodeNameToMetaVictims": {
        "a": {"Pods": [{"UID": "uid-resident"}], "NumPDBViolations": 0}}}
    assert "default/resident" in svc.snap.pods
    urgent["status"] = {"nominatedNodeName": "a"}
    out = post(client, "filter", {"Pod": urgent, "NodeNames": ["a"]})
    assert out["NodeNames"] == ["a"]
    assert "default/resident" not in svc.snap.pods


def test_bind_records_pods_it_has_seen(served: tuple[ExtenderService, httpx.Client]) -> None:
    svc, client = served
    out = post(client, "bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "",
                                "Node": "b"})
    assert "unknown to the extender" in out["Error"]
    post(client, "filter", {"Pod": pod("p", "6"), "NodeNames": ["b"]})
    assert post(client, "bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "",
                                 "Node": "nowhere"})["Error"] == \
        "node 'nowhere' is not in the extender's cluster"
    assert post(client, "bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "",
                                 "Node": "b"}) == {"Error": ""}
    assert svc.snap.pods["default/p"].node == svc.snap.node_index["b"]
    out = post(client, "filter", {"Pod": pod("q", "4"), "NodeNames": ["b"]})
    assert out["FailedNodes"] == {"b": "Insufficient cpu"}


def test_bad_requests(served: tuple[ExtenderService, httpx.Client]) -> None:
    _svc, client = served
    assert client.post("filter", content=b"{not json").status_code == 400
    assert client.post("filter", content=b"[]").status_code == 400
    assert client.post("filter", content=json.dumps({"Pod": pod("p", "1")})).status_code == 400
    resp = client.post("filter", content=json.dumps({"Pod": {"spec": 3}, "NodeNames": []}))
    assert resp.status_code == 400 and "Pod" in resp.text
    assert client.post("explode", content=b"{}").status_code == 404
    assert client.post("preempt", content=json.dumps({"Pod": pod("p", "1")})).status_code == 400


def test_healthz(service: ExtenderService) -> None:
    with ExtenderServer(make_app(service)) as server:
        assert httpx.get(server.url + "/healthz").text == "ok"


def test_unknown_profile_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        ExtenderService(load_scheduler_config(None), in_tree_registry(), profile="nope")
    assert err.value.field == "--profile"


def test_pod_sent_by_our_client_round_trips(service: ExtenderService) -> None:
    """What kubeberth's client encodes (msgspec, camelCase) the server decodes unchanged."""
    import msgspec

    from kubeberth.api.objects import Pod

    text = CLUSTER.split("---\n")[2].replace("nodeName: a", "nodeName: ''") + """\
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  nodeSelector: {zone: z2}
"""
    sent = load_manifests_text(text).pods[0]
    wire = json.loads(msgspec.json.encode({"Pod": sent, "NodeNames": ["a", "b"]}))
    assert msgspec.convert(wire["Pod"], Pod) == sent
    assert service.filter(wire)["NodeNames"] == ["b"]


def load_manifests_text(text: str) -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.yaml"
        path.write_text(text)
        return load_manifests([path])


# ---- the command -------------------------------------------------------------------------------
def test_cli_bad_config_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                   "kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n")
    res = CliRunner().invoke(app, ["extender", "--config", str(bad), "--profile", "y"])
    assert res.exit_code == 2
    assert "no profile named 'y'" in res.stderr


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    env = {**os.environ, "COLUMNS": "300"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeberth", "extender", "--port", "0", "--cluster",
         str(tmp_path / "cluster.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("serving profile 'default-scheduler' as an extender at ")
        url = first.rsplit(" ", 1)[-1].strip()
        stanza = proc.stdout.readline()
        assert f"urlPrefix: {url}" in stanza
        out = httpx.post(url + "/filter", content=json.dumps(
            {"Pod": pod("p", "2"), "NodeNames": ["a", "b"]})).json()
        assert out["NodeNames"] == ["b"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_pods_seen_are_remembered_up_to_a_bound(service: ExtenderService,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import kubeberth.live.extender as mod

    monkeypatch.setattr(mod, "REMEMBERED", 2)
    for i in range(5):
        service.filter({"Pod": pod(f"p{i}", "1"), "NodeNames": ["b"]})
    # The two newest pods can still be bound; the oldest were forgotten.
    assert "unknown" in service.bind({"PodName": "p0", "Node": "b"})["Error"]
    assert service.bind({"PodName": "p4", "Node": "b"}) == {"Error": ""}
    assert service.bind({"PodName": "p3", "Node": "b"}) == {"Error": ""}


def test_cli_unreadable_tls_certificate_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["extender", "--port", "0", "--tls-cert",
                                   str(tmp_path / "missing.pem")])
    assert res.exit_code == 2
    assert "cannot serve on 127.0.0.1:0" in res.stderr


def test_token_is_required_on_the_verbs(service: ExtenderService) -> None:
    with ExtenderServer(make_app(service, token="s3cret")) as server, \
            httpx.Client(base_url=server.url) as client:
        body = json.dumps({"Pod": pod("p", "2"), "NodeNames": ["a", "b"]})
        assert client.post("/filter", content=body).status_code == 401
        assert client.post("/filter", content=body,
                           headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = client.post("/filter", content=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.json()["NodeNames"] == ["b"]
        assert client.get("/healthz").text == "ok"  # probes stay open


def test_exposure_warning_names_what_is_missing() -> None:
    from kubeberth.live.extender import exposure_warning

    assert exposure_warning("127.0.0.1", tls=False, token=False) is None
    assert exposure_warning("::1", tls=False, token=False) is None
    assert exposure_warning("0.0.0.0", tls=True, token=True) is None
    warning = exposure_warning("0.0.0.0", tls=True, token=False)
    assert warning is not None and "bearer token" in warning and "TLS" not in warning
    warning = exposure_warning("10.0.0.5", tls=False, token=False)
    assert warning is not None and "TLS" in warning and "bearer token" in warning


def test_cli_token_file_and_loud_warning_off_loopback(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    env = {**os.environ, "COLUMNS": "300"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeberth", "extender", "--port", "0", "--host", "0.0.0.0",
         "--token-file", str(tmp_path / "token")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().rsplit(" ", 1)[-1].strip().replace("0.0.0.0", "127.0.0.1")
        assert "WARNING" in proc.stderr.readline()
        body = json.dumps({"Pod": pod("p", "1"), "NodeNames": ["x"]})
        assert httpx.post(url + "/filter", content=body).status_code == 401
        assert httpx.post(url + "/filter", content=body,
                          headers={"Authorization": "Bearer from-file"}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_cli_token_and_token_file_conflict(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("x")
    res = CliRunner().invoke(app, ["extender", "--port", "0", "--token", "y", "--token-file",
                                   str(tmp_path / "token")])
    assert res.exit_code == 2
    assert "--token and --token-file both given" in res.stderr


def test_deeply_nested_body_is_400(served: tuple[ExtenderService, httpx.Client]) -> None:
    _service, client = served
    resp = client.post("filter", content="[" * 100_000 + "]" * 100_000)
    assert resp.status_code == 400
    assert "nests too deep" in resp.text
