"""``kubeberth manifests``' documents: valid against the Kubernetes schema of the kubectl we
test with, least privilege per controller, Deployment args the real commands accept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version
from typer.main import get_command

from kubeberth.api.errors import InputError
from kubeberth.cli.main import app
from kubeberth.config.descheduler import load_descheduler_policy
from kubeberth.config.scheduler import load_scheduler_config
from kubeberth.config.spill import load_spill_config
from kubeberth.live.deploy import CONTROLLERS, RBAC, manifests, render

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = {"scheduler": EXAMPLES / "gangs" / "scheduler-config.yaml",
           "descheduler": EXAMPLES / "spill" / "descheduler.yaml",
           "spill-controller": EXAMPLES / "spill" / "spill.yaml"}
# Controllers whose command exists today; the lead adds the others as they land.
COMMANDS = ["scheduler"]


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


@pytest.mark.parametrize("configs", [None, CONFIGS], ids=["defaults", "files"])
def test_every_document_is_valid_against_the_kubernetes_schema(configs: Any) -> None:
    docs = _all(configs=configs)
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
    table = {(g, r, v) for g, r, verbs in RBAC[controller] for v in verbs}
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
        return {r for _g, r, _v in RBAC[controller]}

    assert "pods/eviction" in resources("descheduler")
    assert "pods/binding" not in resources("descheduler")
    assert "pods/binding" in resources("scheduler")
    assert "pods/eviction" not in resources("scheduler")
    assert "nodes" in resources("spill-controller")
    assert all(not r.startswith("pods/") for r in resources("spill-controller"))


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


@pytest.mark.parametrize("controller", COMMANDS)
def test_deployment_args_parse_with_the_real_command(controller: str, tmp_path: Path) -> None:
    docs = _all(controllers=[controller], configs={controller: CONFIGS[controller]}
                if controller in CONFIGS else None)
    args = list(_by(docs, "Deployment", f"kubeberth-{controller}")["spec"]["template"]
                ["spec"]["containers"][0]["args"])
    spec = CONTROLLERS[controller]
    if spec.config_flag:  # the mounted path does not exist here: point at the same file
        args[args.index(spec.config_flag) + 1] = str(CONFIGS[controller])
    group = get_command(app)
    command = group.commands[args[0]]  # type: ignore[attr-defined]
    ctx = command.make_context(args[0], args[1:])  # parses, runs nothing
    assert ctx.params["metrics_port"] == spec.metrics_port
    assert ctx.params["metrics_address"] == "0.0.0.0"
    assert ctx.params["leader_elect"] is True


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
