"""``kubeberth manifests``' documents: valid against the Kubernetes schema of the kubectl we
test with, least privilege per controller (the spill controller's following its signal
source), Deployment args the real commands accept, read and answer their probes with."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version
from tests.live.harness import Live, wait_for, write
from typer.main import get_command

from kubeberth.api.errors import InputError
from kubeberth.cli.main import app
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.live.deploy import (
    CONTROLLERS,
    RBAC,
    SCRAPER_LABEL,
    SPILL_API_SIGNAL,
    manifests,
    rbac_rows,
    render,
)
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.spill.config import load_spill_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = {"scheduler": EXAMPLES / "gangs" / "scheduler-config.yaml",
           "descheduler": EXAMPLES / "spill" / "descheduler.yaml",
           "spill-controller": EXAMPLES / "spill" / "spill.yaml"}
PROMETHEUS_SPILL = """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
controller:
  threshold: 3
  signal: {source: prometheus, url: "http://prometheus.monitoring:9090"}
"""
# Every controller `kubeberth manifests` deploys is a real command; each is checked below.
COMMANDS = list(CONTROLLERS)


def _schema_version() -> str:
    """kubectl's minor version (the cluster the tests talk about), else the newest schema."""
    kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
    if Path(kubectl).exists():
        out = subprocess.run([kubectl, "version", "--client", "-o", "json"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            client = json.loads(out.stdout)["clientVersion"]
            return f"{client['major']}.{client['minor'].rstrip('+')}.0"
    return latest_version()


SCHEMA = _schema_version()


def _all(**kwargs: Any) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(render(manifests(**kwargs))))


@pytest.mark.parametrize("configs", ["defaults", "files", "prometheus-signal"])
def test_every_document_is_valid_against_the_kubernetes_schema(configs: str,
                                                               tmp_path: Path) -> None:
    files = {"defaults": None, "files": CONFIGS, "prometheus-signal": {
        **CONFIGS, "spill-controller": write(tmp_path / "spill.yaml", PROMETHEUS_SPILL)}}
    docs = _all(configs=files[configs])
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"} == {
        f"kubeberth-{c}-config" for c in ("scheduler", "descheduler", "spill-controller")}
    assert [d["kind"] for d in docs].count("Deployment") == len(CONTROLLERS)
    for doc in docs:
        # strict: an unknown or misspelt field is an error too.
        kubernetes_validate.validate(doc, SCHEMA, strict=True)


def test_the_schema_check_catches_a_misspelt_field() -> None:
    deployment = next(d for d in _all() if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["livenessProbes"] = container.pop("livenessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, SCHEMA, strict=True)


def test_output_is_deterministic_and_yaml_round_trips() -> None:
    one = render(manifests(configs=CONFIGS))
    assert one == render(manifests(configs=CONFIGS))
    assert yaml.safe_load_all(one) is not None
    assert one.startswith("---\napiVersion: v1\nkind: Namespace\n")


def _by(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("controller", list(CONTROLLERS))
def test_each_controller_has_its_own_account_and_only_its_rules(controller: str) -> None:
    docs = _all(controllers=[controller], namespace="gpu-ops")
    name = f"kubeberth-{controller}"
    kinds = [d["kind"] for d in docs]
    assert kinds[0] == "Namespace" and docs[0]["metadata"]["name"] == "gpu-ops"
    assert kinds.count("Deployment") == 1 and kinds.count("ServiceAccount") == 1
    role = _by(docs, "ClusterRole", name)
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    table = {(g, r, v) for g, r, verbs in rbac_rows(controller) for v in verbs}
    leases = {t for t in table if t[1] == "leases"}
    assert granted == table - leases
    assert not any(r == "*" or v == "*" for _g, r, v in granted)
    lease_role = _by(docs, "Role", f"{name}-leader-election")
    assert lease_role["metadata"]["namespace"] == "gpu-ops"
    named = [r for r in lease_role["rules"] if "resourceNames" in r]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [name], "verbs": ["get", "update"]}]
    for binding, kind in (("ClusterRoleBinding", name), ("RoleBinding",
                                                         f"{name}-leader-election")):
        b = _by(docs, binding, kind)
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                  "namespace": "gpu-ops"}]
        assert b["roleRef"]["name"] == kind
    pod = _by(docs, "Deployment", name)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    args = pod["containers"][0]["args"]
    assert args[0] == CONTROLLERS[controller].command
    assert args[args.index("--leader-elect-resource-namespace") + 1] == "gpu-ops"
    assert args[args.index("--leader-elect-resource-name") + 1] == name


def test_descheduler_may_evict_but_not_bind_and_scheduler_the_reverse() -> None:
    def resources(controller: str) -> set[str]:
        return {r for _g, r, _v in rbac_rows(controller)}

    assert "pods/eviction" in resources("descheduler")
    assert "pods/binding" not in resources("descheduler")
    assert "pods/binding" in resources("scheduler")
    assert "pods/eviction" not in resources("scheduler")
    assert "nodes" in resources("spill-controller")
    assert all(not r.startswith("pods/") for r in resources("spill-controller"))
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    # Outside its Lease, the spill controller writes one thing: node taints.
    # It writes node taints, and Events only about nodes and pods its informers cannot read.
    assert {(r, v) for _g, r, verbs in rbac_rows("spill-controller") for v in verbs
            if v in writes and r != "leases"} == {("nodes", "patch"), ("events", "create")}
    assert {(r, v) for _g, r, verbs in rbac_rows("spill-controller", "prometheus")
            for v in verbs if v in writes and r != "leases"} == {("nodes", "patch")}


def _rules(docs: list[dict[str, Any]], name: str) -> set[tuple[str, str, str]]:
    role = _by(docs, "ClusterRole", name)
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def test_spill_controller_rules_follow_the_configured_signal_source(tmp_path: Path) -> None:
    api = _rules(_all(controllers=["spill-controller"]), "kubeberth-spill-controller")
    assert api == {("", "nodes", v) for v in ("get", "list", "patch", "watch")} | {
        ("", "pods", "list"), ("", "pods", "watch"), ("", "events", "create")}
    prom = write(tmp_path / "spill.yaml", PROMETHEUS_SPILL)
    docs = _all(controllers=["spill-controller"], configs={"spill-controller": prom})
    assert _rules(docs, "kubeberth-spill-controller") == {("", "nodes", "get"),
                                                          ("", "nodes", "patch")}
    # The API signal's extra rows are exactly the difference.
    assert api - _rules(docs, "kubeberth-spill-controller") == {
        (g, r, v) for g, r, verbs in SPILL_API_SIGNAL for v in verbs} - {
        ("", "nodes", "get"), ("", "nodes", "patch")}
    # The example file computes the signal from the API: the API's rules.
    docs = _all(controllers=["spill-controller"],
                configs={"spill-controller": CONFIGS["spill-controller"]})
    assert _rules(docs, "kubeberth-spill-controller") == api
    assert RBAC["spill-controller"] == rbac_rows("spill-controller", "prometheus")


def test_probes_and_metrics_port_match_the_args() -> None:
    for doc in _all():
        if doc["kind"] != "Deployment":
            continue
        container = doc["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        port = int(args[args.index("--metrics-port") + 1])
        assert args[args.index("--metrics-address") + 1] == "0.0.0.0"
        assert container["ports"] == [{"name": "metrics", "containerPort": port,
                                       "protocol": "TCP"}]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert "--leader-elect" in args


def test_metrics_ports_are_closed_to_all_but_labelled_namespaces() -> None:
    docs = _all()
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        component = deployment["metadata"]["labels"]["app.kubernetes.io/component"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        port = deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0][
            "containerPort"]
        policies = [d for d in docs if d["kind"] == "NetworkPolicy" and
                    d["metadata"]["labels"]["app.kubernetes.io/component"] == component]
        assert len(policies) == 1
        spec = policies[0]["spec"]
        selector = spec["podSelector"]["matchLabels"]
        assert selector.items() <= labels.items()
        assert spec["policyTypes"] == ["Ingress"]
        assert spec["ingress"] == [{
            "from": [{"namespaceSelector": {"matchLabels": {SCRAPER_LABEL: "true"}}}],
            "ports": [{"protocol": "TCP", "port": port}]}]


def test_config_files_are_embedded_and_mounted_where_the_args_point() -> None:
    docs = _all(configs=CONFIGS)
    for controller, path in CONFIGS.items():
        spec = CONTROLLERS[controller]
        cm = _by(docs, "ConfigMap", f"kubeberth-{controller}-config")
        assert cm["data"] == {spec.config_file: path.read_text()}
        pod = _by(docs, "Deployment", f"kubeberth-{controller}")["spec"]["template"]
        args = pod["spec"]["containers"][0]["args"]
        mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"]
                     if m["name"] == "config")
        assert args[args.index(spec.config_flag) + 1] == \
            f"{mount['mountPath']}/{spec.config_file}"
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == cm["metadata"]["name"]
    admission = _by(docs, "Deployment", "kubeberth-admission")["spec"]["template"]["spec"]
    assert not any(v["name"] == "config" for v in admission["volumes"])


def test_a_changed_config_rolls_the_pods() -> None:
    def checksum(docs: list[dict[str, Any]]) -> str:
        pod = _by(docs, "Deployment", "kubeberth-scheduler")["spec"]["template"]
        return str(pod["metadata"]["annotations"]["kubeberth.io/config-sha256"])

    assert checksum(_all()) != checksum(_all(configs={"scheduler": CONFIGS["scheduler"]}))


def test_default_configs_load_as_the_controllers_will(tmp_path: Path) -> None:
    loaders = {"scheduler": load_scheduler_config, "descheduler": load_descheduler_policy,
               "spill-controller": load_spill_config}
    for controller, load in loaders.items():
        spec = CONTROLLERS[controller]
        path = tmp_path / spec.config_file
        path.write_text(spec.default_config)
        load(path)  # raises InputError if the default were invalid
    cfg = load_scheduler_config(tmp_path / "scheduler.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == ["kubeberth-scheduler"]


def _command(name: str) -> Any:
    """The click command behind ``kubeberth <name>``."""
    return get_command(app).commands[name]  # type: ignore[attr-defined]


def _args(controller: str, configs: dict[str, Path] | None) -> list[str]:
    docs = _all(controllers=[controller], configs=configs)
    return list(_by(docs, "Deployment", f"kubeberth-{controller}")["spec"]["template"]
                ["spec"]["containers"][0]["args"])


def _config_file(controller: str, configs: dict[str, Path] | None, tmp_path: Path) -> Path:
    """The ConfigMap's file written where the test can read it (the pod mounts it)."""
    spec = CONTROLLERS[controller]
    docs = _all(controllers=[controller], configs=configs)
    data = _by(docs, "ConfigMap", f"kubeberth-{controller}-config")["data"]
    return write(tmp_path / spec.config_file, data[spec.config_file])


def _files(controller: str, which: str) -> dict[str, Path] | None:
    return {controller: CONFIGS[controller]} if which == "files" and controller in CONFIGS \
        else None


@pytest.mark.parametrize("which", ["defaults", "files"])
@pytest.mark.parametrize("controller", COMMANDS)
def test_deployment_args_parse_with_the_real_command(controller: str, which: str,
                                                     tmp_path: Path) -> None:
    """Every flag the Deployment passes is an option of the command; the metrics port and
    the Lease name are the command's own defaults (so docs, probes and a standalone run agree);
    the configuration file goes to the option the command loads it from."""
    configs = _files(controller, which)
    args = _args(controller, configs)
    spec = CONTROLLERS[controller]
    command = _command(args[0])
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    assert {a for a in args[1:] if a.startswith("-")} <= options
    if spec.config_flag:  # the mounted path does not exist here: point at the same text
        args[args.index(spec.config_flag) + 1] = str(_config_file(controller, configs,
                                                                  tmp_path))
    ctx = command.make_context(args[0], args[1:])  # parses, runs nothing
    defaults = {p.name: p.default for p in command.params}
    assert ctx.params["metrics_port"] == spec.metrics_port == defaults["metrics_port"]
    assert ctx.params["metrics_address"] == "0.0.0.0"
    assert ctx.params["leader_elect"] is True
    assert ctx.params["lease_name"] == spec.lease == defaults["lease_name"]
    if spec.config_flag:
        param = next(p for p in command.params if spec.config_flag in p.opts)
        assert ctx.params[param.name] == tmp_path / spec.config_file
    else:  # admission: no file passed, the command runs on Kueue's default Configuration
        assert ctx.params.get("config") is None


def _banner(controller: str, path: Path | None) -> str:
    """What the command's first line says about the configuration it loaded."""
    if controller == "scheduler":
        return "profiles " + ", ".join(p.scheduler_name
                                       for p in load_scheduler_config(path).profiles)
    if controller == "descheduler":
        assert path is not None
        return f"{len(load_descheduler_policy(path).profiles)} profile(s)"
    if controller == "spill-controller":
        c = load_spill_config(path).controller
        return f"threshold {c.threshold:g}, stabilization {c.stabilization_seconds:g}s"
    return "Kueue v1beta1"


@pytest.mark.parametrize("which", ["defaults", "files"])
@pytest.mark.parametrize("controller", COMMANDS)
def test_deployment_args_run_the_command_and_its_probes_answer(controller: str, which: str,
                                                               live: Live,
                                                               tmp_path: Path) -> None:
    """The container's command line, against the embedded API server (the kubeconfig stands
    in for the pod's service account, port 0 for the fixed port): it loads the ConfigMap's
    file, takes its Lease in the deployment namespace, answers the liveness and readiness
    probes' paths, and stops cleanly on SIGTERM."""
    live.serve()
    configs = _files(controller, which)
    docs = _all(controllers=[controller], configs=configs)
    live.kubectl("apply", "-f", "-", input=render(docs[:1]))  # the Namespace, as emitted
    doc = _by(docs, "Deployment", f"kubeberth-{controller}")
    container = doc["spec"]["template"]["spec"]["containers"][0]
    args = list(container["args"])
    spec = CONTROLLERS[controller]
    path = None
    if spec.config_flag:
        path = _config_file(controller, configs, tmp_path)
        args[args.index(spec.config_flag) + 1] = str(path)
    args[args.index("--metrics-port") + 1] = "0"
    proc = subprocess.Popen([sys.executable, "-m", "kubeberth", *args,
                             "--kubeconfig", str(live.kubeconfig)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert banner.startswith(f"kubeberth {spec.command}: "), proc.stderr and banner
        assert _banner(controller, path) in banner
        found = re.search(r"http://0\.0\.0\.0:(\d+)/metrics", banner)
        assert found is not None, banner
        base = f"http://127.0.0.1:{found.group(1)}"
        ready, alive = (container[p]["httpGet"]["path"]
                        for p in ("readinessProbe", "livenessProbe"))
        wait_for(lambda: httpx.get(base + ready).status_code == 200, "the readiness probe")
        assert httpx.get(base + alive).status_code == 200
        path_ = doc["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"]
        assert httpx.get(base + path_).status_code == 200
        srv = live.server
        assert srv is not None
        wait_for(lambda: any(
            lease["metadata"]["name"] == spec.lease
            for lease in srv.call(lambda: list(srv.api.store.items(next(
                r for r in srv.api.registry.resources if r.plural == "leases"))))
            if lease["metadata"]["namespace"] == "kubeberth-system"), "the Lease")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.rstrip().endswith(f"kubeberth {spec.command} stopped")


def test_bad_options_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown controller 'kueue'"):
        manifests(["kueue"])
    with pytest.raises(InputError, match="--policy"):
        manifests(["scheduler"], configs={"descheduler": CONFIGS["descheduler"]})
    with pytest.raises(InputError, match="--namespace"):
        manifests(namespace="Kube_System")
    with pytest.raises(InputError, match="--image"):
        manifests(image="two words")
    bad = tmp_path / "sched.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: "
                   "KubeSchedulerConfiguration\nprofiles: 3\n")
    with pytest.raises(InputError, match=r"sched\.yaml"):
        manifests(configs={"scheduler": bad})
