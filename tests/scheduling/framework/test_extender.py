"""The framework calling HTTP extenders, against scripted extenders on loopback: what each verb
sends, how answers and failures change the cycle (upstream extender.go, schedule_one.go,
preemption's callExtenders, extendersBinding)."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.live.extender import ExtenderServer
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.config.types import Extender, ExtenderTLS
from kubeberth.scheduling.framework.extender import (
    MAX_EXTENDER_PRIORITY,
    SCORE_SCALE,
    ExtenderError,
    HTTPExtender,
    build_extenders,
    is_interested,
    lookup,
    pod_uid,
)
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.explain import explain
from kubeberth.state.cluster import ClusterState

Handler = Callable[[dict[str, Any]], Any]

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n3}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, uid: uid-p}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


class Scripted:
    """An extender whose answers the test writes: verb -> handler(body) -> (status, JSON)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.handlers: dict[str, Handler] = {}
        self.status: dict[str, int] = {}
        self.delay = 0.0

    def app(self) -> web.Application:
        async def dispatch(request: web.Request) -> web.Response:
            verb = request.path.rsplit("/", 1)[-1]
            body = json.loads(await request.read())
            self.requests.append((verb, body))
            if self.delay:
                await asyncio.sleep(self.delay)
            status = self.status.get(verb, 200)
            answer = self.handlers[verb](body) if verb in self.handlers else {}
            return web.Response(status=status, text=json.dumps(answer),
                                content_type="application/json")

        app = web.Application()
        app.router.add_post("/{path:.*}", dispatch)
        return app

    def bodies(self, verb: str) -> list[dict[str, Any]]:
        return [b for v, b in self.requests if v == verb]


@pytest.fixture()
def ext() -> Iterator[tuple[Scripted, ExtenderServer]]:
    scripted = Scripted()
    server = ExtenderServer(scripted.app()).start()
    yield scripted, server
    server.stop()


def run(tmp: Path, stanza: str, *, pods: str = POD, nodes: str = NODES,
        seed: int = 0) -> dict[str, Any]:
    cfg = tmp / "sched.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                   "kind: KubeSchedulerConfiguration\n" + stanza)
    (tmp / "cluster.yaml").write_text(nodes + "---\n" + pods)
    return explain(load_manifests([tmp / "cluster.yaml"]), load_scheduler_config(cfg),
                   in_tree_registry(), seed=seed)


def stanza(url: str, **fields: Any) -> str:
    lines = [f"extenders:\n- urlPrefix: {url}/scheduler"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def names_of(body: dict[str, Any]) -> list[str]:
    if body["NodeNames"] is not None:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]


def keep(*names: str, cache: bool = True, failed: dict[str, str] | None = None,
         unresolvable: dict[str, str] | None = None) -> Handler:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        kept = [n for n in names_of(body) if n in names]
        out: dict[str, Any] = {"FailedNodes": failed or {},
                               "FailedAndUnresolvableNodes": unresolvable or {}, "Error": ""}
        if cache:
            out["NodeNames"] = kept
        else:
            out["Nodes"] = {"items": [n for n in body["Nodes"]["items"]
                                      if n["metadata"]["name"] in kept]}
        return out
    return answer


# ---- filter ------------------------------------------------------------------------------------
def test_filter_node_cache_capable_sends_names_and_narrows(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep("n2", failed={"n1": "no licence", "n3": "no licence"})
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True))
    (pod,) = data["pods"]
    assert pod["selectedNode"] == "n2"
    (body,) = scripted.bodies("filter")
    assert body["Nodes"] is None and body["NodeNames"] == ["n1", "n2", "n3"]
    assert body["Pod"]["metadata"]["name"] == "p"
    assert pod["nodes"]["n1"]["feasible"] is False
    assert pod["nodes"]["n1"]["extenders"][f"{server.url}/scheduler"]["filter"] == {
        "code": "Unschedulable", "reasons": ["no licence"]}


def test_filter_without_cache_sends_and_reads_node_objects(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep("n3", cache=False)
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=False))
    assert data["pods"][0]["selectedNode"] == "n3"
    (body,) = scripted.bodies("filter")
    assert body["NodeNames"] is None
    items = body["Nodes"]["items"]
    assert [n["metadata"]["name"] for n in items] == ["n1", "n2", "n3"]
    assert items[0]["status"]["allocatable"]["cpu"] == "4"


def test_filter_sees_only_nodes_the_in_tree_filters_passed(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep("n1", "n2", "n3")
    tainted = NODES.replace("metadata: {name: n2}",
                            "metadata: {name: n2}\nspec: {taints: [{key: k, effect: NoSchedule}]}")
    run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True), nodes=tainted)
    assert scripted.bodies("filter")[0]["NodeNames"] == ["n1", "n3"]


def test_filter_rejecting_all_gives_fit_error_with_extender_reasons(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep(failed={"n1": "busy", "n2": "busy"},
                                       unresolvable={"n2": "wrong rack", "n3": "wrong rack"})
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True))
    (pod,) = data["pods"]
    assert pod["result"] == "Unschedulable"
    # FailedAndUnresolvableNodes takes precedence over FailedNodes for n2.
    # ... and only n1 (Unschedulable) is worth a preemption attempt.
    assert pod["message"] == (
        "0/3 nodes are available: 1 busy, 2 wrong rack. preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for "
        "scheduling.")
    verdict = pod["nodes"]["n2"]["extenders"][f"{server.url}/scheduler"]["filter"]
    assert verdict == {"code": "UnschedulableAndUnresolvable", "reasons": ["wrong rack"]}


def test_filter_dropping_a_node_silently_makes_it_infeasible(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep()
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True))
    (pod,) = data["pods"]
    assert pod["result"] == "Unschedulable"
    # No status, so no reason in the histogram; preemption counts them unresolvable.
    assert pod["message"] == ("0/3 nodes are available: . preemption: 0/3 nodes are available: "
                              "3 Preemption is not helpful for scheduling.")
    assert all(not n["feasible"] for n in pod["nodes"].values())


def test_filter_error_fails_the_cycle_unless_ignorable(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = lambda _b: {"Error": "licence server down"}
    data = run(tmp_path, stanza(server.url, filterVerb="filter"))
    assert data["pods"][0]["result"] == "Error"
    assert data["pods"][0]["message"] == "licence server down"
    data = run(tmp_path, stanza(server.url, filterVerb="filter", ignorable=True))
    (pod,) = data["pods"]
    assert pod["result"] == "Scheduled"
    assert pod["extenders"]["ignoredErrors"] == {f"{server.url}/scheduler": "licence server down"}


def test_filter_http_status_error_fails_closed(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.status["filter"] = 500
    data = run(tmp_path, stanza(server.url, filterVerb="filter"))
    assert data["pods"][0]["result"] == "Error"
    assert data["pods"][0]["message"] == (f"failed filter with extender at URL "
                                          f"{server.url}/scheduler/filter, code 500")


def test_slow_filter_times_out_and_fails_closed(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.delay = 1.0
    scripted.handlers["filter"] = keep("n1", "n2", "n3")
    data = run(tmp_path, stanza(server.url, filterVerb="filter", httpTimeout="100ms"))
    (pod,) = data["pods"]
    assert pod["result"] == "Error" and pod["selectedNode"] is None
    assert "ReadTimeout" in pod["message"]
    data = run(tmp_path, stanza(server.url, filterVerb="filter", httpTimeout="100ms",
                                ignorable=True))
    assert data["pods"][0]["result"] == "Scheduled"


def test_unreachable_extender_fails_closed(tmp_path: Path) -> None:
    data = run(tmp_path, stanza("http://127.0.0.1:9", filterVerb="filter"))
    assert data["pods"][0]["result"] == "Error"
    assert "ConnectError" in data["pods"][0]["message"]


def test_filter_claiming_an_unknown_node_is_an_error(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = lambda _b: {"NodeNames": ["n9"]}
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True))
    assert data["pods"][0]["result"] == "Error"
    assert 'claims a filtered node "n9"' in data["pods"][0]["message"]


def test_answers_are_read_case_insensitively(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = lambda _b: {"nodenames": ["n3"], "failedNodes": {}}
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True))
    assert data["pods"][0]["selectedNode"] == "n3"


def test_invalid_json_is_an_extender_error(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = lambda _b: ["not", "a", "result"]
    data = run(tmp_path, stanza(server.url, filterVerb="filter"))
    assert data["pods"][0]["result"] == "Error"
    assert "not an ExtenderFilterResult" in data["pods"][0]["message"]


def test_managed_resources_limit_the_pods_an_extender_sees(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep("n1")
    pods = POD + """\
---
apiVersion: v1
kind: Pod
metadata: {name: fpga}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "1"}, limits: {example.com/fpga: "1"}}
"""
    fpga_nodes = NODES.replace('pods: "10"', 'pods: "10", example.com/fpga: "2"')
    data = run(tmp_path, stanza(server.url, filterVerb="filter", nodeCacheCapable=True,
                                managedResources=[{"name": "example.com/fpga"}]),
               pods=pods, nodes=fpga_nodes)
    assert [b["Pod"]["metadata"]["name"] for b in scripted.bodies("filter")] == ["fpga"]
    assert {p["pod"]: p["selectedNode"] for p in data["pods"]}["default/fpga"] == "n1"


# ---- prioritize --------------------------------------------------------------------------------
def test_prioritize_scores_are_scaled_by_weight_and_max_node_score(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["prioritize"] = lambda _b: [{"Host": "n1", "Score": 2},
                                                  {"Host": "n2", "Score": 7},
                                                  {"Host": "n3", "Score": 0},
                                                  {"Host": "elsewhere", "Score": 10}]
    data = run(tmp_path, stanza(server.url, prioritizeVerb="prioritize", weight=3))
    (pod,) = data["pods"]
    name = f"{server.url}/scheduler"
    # Identical empty nodes: in-tree totals tie, the extender's 7 × 3 × (100 / 10) decides.
    assert pod["selectedNode"] == "n2"
    assert SCORE_SCALE == 100 // MAX_EXTENDER_PRIORITY == 10
    for node, score in (("n1", 2), ("n2", 7), ("n3", 0)):
        entry = pod["nodes"][node]
        assert entry["extenders"][name]["score"] == {"raw": score, "weighted": score * 3 * 10}
        in_tree = sum(s["weighted"] for s in entry["score"].values())
        assert entry["total"] == in_tree + score * 3 * 10
    (body,) = scripted.bodies("prioritize")
    assert body["NodeNames"] is None and len(body["Nodes"]["items"]) == 3


def test_prioritize_errors_are_ignored_even_when_not_ignorable(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.status["prioritize"] = 503
    data = run(tmp_path, stanza(server.url, prioritizeVerb="prioritize", weight=1))
    (pod,) = data["pods"]
    assert pod["result"] == "Scheduled"
    assert "code 503" in pod["extenders"]["ignoredErrors"][f"{server.url}/scheduler"]


def test_prioritize_is_skipped_with_a_single_feasible_node(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["filter"] = keep("n1")
    scripted.handlers["prioritize"] = lambda _b: []
    cfg = stanza(server.url, filterVerb="filter", prioritizeVerb="prioritize", weight=1,
                 nodeCacheCapable=True)
    cfg_path = tmp_path / "sched.yaml"
    cfg_path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                        "kind: KubeSchedulerConfiguration\n" + cfg)
    (tmp_path / "c.yaml").write_text(NODES + "---\n" + POD)
    from kubeberth.scheduling.framework.status import SUCCESS
    from kubeberth.scheduling.scheduler import Scheduler
    from kubeberth.sim.explain import build_state

    snap, pending = build_state(load_manifests([tmp_path / "c.yaml"]))
    sched = Scheduler(load_scheduler_config(cfg_path), in_tree_registry(), snap,
                      clock=lambda: 0.0, binder=lambda _p, _n: SUCCESS,
                      evictor=lambda _v, _p: None)
    sched.add(pending[0])
    res = sched.schedule_one()
    assert res is not None and res.node == "n1" and res.feasible == 1
    assert scripted.bodies("prioritize") == []


# ---- bind --------------------------------------------------------------------------------------
def test_bind_is_delegated_to_the_binder_extender(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["bind"] = lambda _b: {"Error": ""}
    data = run(tmp_path, stanza(server.url, bindVerb="bind"))
    (pod,) = data["pods"]
    assert pod["result"] == "Scheduled"
    assert pod["extenders"]["boundBy"] == f"{server.url}/scheduler"
    assert scripted.bodies("bind") == [{"PodName": "p", "PodNamespace": "default",
                                        "PodUID": "uid-p", "Node": pod["selectedNode"]}]


def test_bind_error_fails_binding_unless_ignorable(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["bind"] = lambda _b: {"Error": "binding refused"}
    data = run(tmp_path, stanza(server.url, bindVerb="bind"))
    assert data["pods"][0]["result"] == "Error"
    assert data["pods"][0]["message"] == "binding refused"
    data = run(tmp_path, stanza(server.url, bindVerb="bind", ignorable=True))
    (pod,) = data["pods"]
    assert pod["result"] == "Scheduled" and pod["extenders"]["boundBy"] is None
    assert pod["extenders"]["ignoredErrors"] == {f"{server.url}/scheduler": "binding refused"}


# ---- preempt -----------------------------------------------------------------------------------
VICTIMS = """\
apiVersion: v1
kind: Pod
metadata: {name: low-1, uid: uid-low-1}
spec:
  nodeName: n1
  priority: 1
  containers: [{name: c, resources: {requests: {cpu: "4"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: low-2}
spec:
  nodeName: n2
  priority: 2
  containers: [{name: c, resources: {requests: {cpu: "4"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priority: 100
  containers: [{name: c, resources: {requests: {cpu: "4"}}}]
"""
TWO_NODES = NODES.split("---\n")[0] + "---\n" + NODES.split("---\n")[1]


def test_preempt_sends_meta_victims_and_the_extender_picks_the_node(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    # Without the extender, preemption evicts the lowest-priority pod (low-1 on n1).
    plain = run(tmp_path, "", pods=VICTIMS, nodes=TWO_NODES)
    urgent = next(p for p in plain["pods"] if p["pod"] == "default/urgent")
    assert (urgent["nominatedNode"], urgent["victims"]) == ("n1", ["default/low-1"])
    scripted.handlers["preempt"] = lambda b: {"NodeNameToMetaVictims": {
        "n2": b["NodeNameToMetaVictims"]["n2"]}}
    data = run(tmp_path, stanza(server.url, preemptVerb="preempt", nodeCacheCapable=True),
               pods=VICTIMS, nodes=TWO_NODES)
    urgent = next(p for p in data["pods"] if p["pod"] == "default/urgent")
    assert (urgent["nominatedNode"], urgent["victims"]) == ("n2", ["default/low-2"])
    (body,) = scripted.bodies("preempt")
    assert body["NodeNameToVictims"] is None
    assert body["NodeNameToMetaVictims"] == {
        "n1": {"Pods": [{"UID": "uid-low-1"}], "NumPDBViolations": 0},
        "n2": {"Pods": [{"UID": "default/low-2"}], "NumPDBViolations": 0}}


def test_preempt_without_cache_sends_full_victim_pods(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["preempt"] = lambda _b: {"NodeNameToMetaVictims": {
        "n1": {"Pods": [{"UID": "uid-low-1"}], "NumPDBViolations": 0}}}
    data = run(tmp_path, stanza(server.url, preemptVerb="preempt"), pods=VICTIMS,
               nodes=TWO_NODES)
    urgent = next(p for p in data["pods"] if p["pod"] == "default/urgent")
    assert urgent["nominatedNode"] == "n1"
    (body,) = scripted.bodies("preempt")
    assert body["NodeNameToMetaVictims"] is None
    victims = body["NodeNameToVictims"]["n1"]["Pods"]
    assert victims[0]["metadata"]["name"] == "low-1"
    assert victims[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"


def test_preempt_dropping_every_node_leaves_no_candidate(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    scripted, server = ext
    scripted.handlers["preempt"] = lambda _b: {"NodeNameToMetaVictims": {}}
    data = run(tmp_path, stanza(server.url, preemptVerb="preempt"), pods=VICTIMS,
               nodes=TWO_NODES)
    urgent = next(p for p in data["pods"] if p["pod"] == "default/urgent")
    assert urgent["result"] == "Unschedulable" and urgent["nominatedNode"] is None
    assert "no candidate node for preemption" in urgent["message"]


@pytest.mark.parametrize("answer,error,ignored_choice", [
    # An ignorable extender only loses the node it named without victims: none is left.
    ({"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 0}}},
     'expected at least one victim pod on node "n1"', None),
    # An ignorable extender that failed is skipped: the in-tree choice stands.
    ({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "nobody"}]}}},
     "claims to preempt pod (UID: nobody) on node: n1", "n1"),
    ({"NodeNameToMetaVictims": {"n7": {"Pods": [{"UID": "x"}]}}},
     'nodeinfo not found for node name "n7"', "n1"),
])
def test_preempt_bad_answers_fail_unless_ignorable(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer], answer: dict[str, Any],
        error: str, ignored_choice: str | None) -> None:
    scripted, server = ext
    scripted.handlers["preempt"] = lambda _b: answer
    data = run(tmp_path, stanza(server.url, preemptVerb="preempt"), pods=VICTIMS,
               nodes=TWO_NODES)
    urgent = next(p for p in data["pods"] if p["pod"] == "default/urgent")
    assert urgent["nominatedNode"] is None and urgent["victims"] == []
    assert error in urgent["message"]
    data = run(tmp_path, stanza(server.url, preemptVerb="preempt", ignorable=True),
               pods=VICTIMS, nodes=TWO_NODES)
    urgent = next(p for p in data["pods"] if p["pod"] == "default/urgent")
    assert urgent["nominatedNode"] == ignored_choice


# ---- client pieces -----------------------------------------------------------------------------
def test_is_interested_reads_requests_and_limits_of_all_containers() -> None:
    from kubeberth.api.objects import Container, Pod, PodSpec, ResourceRequirements

    def pod(init: bool, where: str) -> Pod:
        res = ResourceRequirements(**{where: {"example.com/x": "1"}})
        c = Container(name="c", resources=res)
        spec = PodSpec(init_containers=[c]) if init else PodSpec(containers=[c])
        return Pod(spec=spec)

    managed = frozenset({"example.com/x"})
    assert is_interested(frozenset(), Pod())
    assert not is_interested(managed, Pod())
    for init in (True, False):
        for where in ("requests", "limits"):
            assert is_interested(managed, pod(init, where))


def test_lookup_and_pod_uid() -> None:
    from kubeberth.api.objects import ObjectMeta, Pod

    assert lookup({"nodenames": [1]}, "NodeNames") == [1]
    assert lookup({}, "NodeNames") is None
    assert pod_uid(Pod(metadata=ObjectMeta(name="a", namespace="ns"))) == "ns/a"
    assert pod_uid(Pod(metadata=ObjectMeta(name="a", uid="u"))) == "u"


def test_bad_tls_material_is_input_error(tmp_path: Path) -> None:
    bad = Extender(url_prefix="https://x", enable_https=True,
                   tls=ExtenderTLS(ca_file=str(tmp_path / "missing.pem")))
    with pytest.raises(InputError) as err:
        build_extenders([bad])
    assert err.value.field == "extenders[0].tlsConfig"


def test_tls_config_base64_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                   "kind: KubeSchedulerConfiguration\nextenders:\n- urlPrefix: https://x\n"
                   "  tlsConfig: {caData: '***'}\n")
    with pytest.raises(InputError) as err:
        load_scheduler_config(cfg)
    assert err.value.field == "extenders[0].tlsConfig.caData"


@pytest.fixture()
def certs(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_https_with_ca_verifies_and_enable_https_alone_does_not(
        certs: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certs
    scripted = Scripted()
    scripted.handlers["filter"] = lambda _b: {"NodeNames": ["n1"]}
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    snap = ClusterState()
    from kubeberth.api.objects import Node, ObjectMeta, Pod

    snap.add_node(Node(metadata=ObjectMeta(name="n1")))
    with ExtenderServer(scripted.app(), "127.0.0.1", ssl_context=ctx) as server:
        by_ip = server.url + "/s"
        url = by_ip.replace("127.0.0.1", "localhost")
        trusted = HTTPExtender(Extender(url_prefix=url, filter_verb="filter",
                                        node_cache_capable=True, enable_https=True,
                                        tls=ExtenderTLS(ca_file=str(cert))))
        assert trusted.filter(Pod(), snap, [0]).passed == ["n1"]
        insecure = HTTPExtender(Extender(url_prefix=url, filter_verb="filter",
                                         node_cache_capable=True, enable_https=True))
        assert insecure.filter(Pod(), snap, [0]).passed == ["n1"]
        strict = HTTPExtender(Extender(url_prefix=url, filter_verb="filter",
                                       node_cache_capable=True))
        with pytest.raises(ExtenderError, match=r"CERTIFICATE_VERIFY_FAILED|ConnectError"):
            strict.filter(Pod(), snap, [0])
        # By IP address, the certificate's name only matches through serverName.
        named = HTTPExtender(Extender(url_prefix=by_ip, filter_verb="filter",
                                      node_cache_capable=True, enable_https=True,
                                      tls=ExtenderTLS(ca_file=str(cert),
                                                      server_name="localhost")))
        assert named.filter(Pod(), snap, [0]).passed == ["n1"]
        unnamed = HTTPExtender(Extender(url_prefix=by_ip, filter_verb="filter",
                                        node_cache_capable=True, enable_https=True,
                                        tls=ExtenderTLS(ca_file=str(cert))))
        with pytest.raises(ExtenderError, match="CERTIFICATE_VERIFY_FAILED"):
            unnamed.filter(Pod(), snap, [0])
        for client in (trusted, insecure, strict, named, unnamed):
            client.close()


@pytest.mark.parametrize("accept,expected_node,calls", [
    (True, "n2", [["n2"]]),
    (False, "n3", [["n2"], ["n1", "n2", "n3"]]),
])
def test_nominated_node_is_checked_by_extenders_first(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer], accept: bool,
        expected_node: str, calls: list[list[str]]) -> None:
    """Upstream evaluateNominatedNode runs the extenders on the nominated node alone; when
    they reject it, the cycle goes on over every node."""
    from kubeberth.scheduling.framework.status import SUCCESS
    from kubeberth.scheduling.scheduler import Scheduler
    from kubeberth.sim.explain import build_state

    scripted, server = ext
    scripted.handlers["filter"] = keep("n2", "n3") if accept else keep("n3")
    cfg_path = tmp_path / "sched.yaml"
    cfg_path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                        "kind: KubeSchedulerConfiguration\n"
                        + stanza(server.url, filterVerb="filter", nodeCacheCapable=True)
                        + "profiles:\n- plugins: {score: {disabled: [{name: '*'}]}}\n")
    nominated = POD + "status: {nominatedNodeName: n2}\n"
    (tmp_path / "c.yaml").write_text(NODES + "---\n" + nominated)
    snap, pending = build_state(load_manifests([tmp_path / "c.yaml"]))
    sched = Scheduler(load_scheduler_config(cfg_path), in_tree_registry(), snap,
                      clock=lambda: 0.0, seed=1, binder=lambda _p, _n: SUCCESS,
                      evictor=lambda _v, _p: None)
    sched.add(pending[0])
    res = sched.schedule_one()
    assert res is not None
    assert [b["NodeNames"] for b in scripted.bodies("filter")] == calls
    assert res.node == expected_node


def test_capacity_scheduling_preemption_consults_preempt_extenders(
        tmp_path: Path, ext: tuple[Scripted, ExtenderServer]) -> None:
    """CapacityScheduling preempts through the same evaluator, extenders included: an
    extender that accepts no candidate stops the reclaim."""
    import yaml

    scripted, server = ext
    scripted.handlers["preempt"] = lambda _b: {"NodeNameToMetaVictims": {}}
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "extenders": [{"urlPrefix": server.url, "preemptVerb": "preempt"}],
        "profiles": [{"schedulerName": "default-scheduler", "plugins": {
            "preFilter": {"enabled": [{"name": "CapacityScheduling"}]},
            "postFilter": {"enabled": [{"name": "CapacityScheduling"}],
                           "disabled": [{"name": "*"}]},
            "reserve": {"enabled": [{"name": "CapacityScheduling"}]}}}]}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "20"}}}]
    for ns in ("a", "b"):
        docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                     "metadata": {"name": "quota", "namespace": ns},
                     "spec": {"min": {"cpu": "4", "memory": "64Gi"},
                              "max": {"cpu": "8", "memory": "64Gi"}}})
    for i in range(4):
        docs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"b{i}", "namespace": "b"},
                     "spec": {"nodeName": "n1", "priority": 100, "containers": [
                         {"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
                     "status": {"phase": "Running",
                                "startTime": f"2024-01-01T00:00:0{i}Z"}})
    docs.append({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "claim", "namespace": "a"},
                 "spec": {"priority": 0, "containers": [
                     {"name": "c", "resources": {"requests": {"cpu": "2"}}}]}})
    (tmp_path / "m.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = explain(load_manifests([tmp_path / "m.yaml"]),
                  load_scheduler_config(tmp_path / "c.yaml"), in_tree_registry())
    claim = next(p for p in out["pods"] if p["pod"] == "a/claim")
    assert claim["nominatedNode"] is None and claim["victims"] == []
    assert "no candidate node for preemption" in claim["message"]
    (body,) = scripted.bodies("preempt")
    assert body["NodeNameToVictims"]["n1"]["Pods"][0]["metadata"]["name"] == "b3"
