"""What a real cluster needs to run the live controllers: ``kubeberth manifests``' documents.

Every controller gets its own ServiceAccount, a ClusterRole holding exactly the verbs its code
calls (:data:`RBAC`, the one table of them), a Role for its leader-election Lease in the
deployment namespace, a ConfigMap with its configuration file and a Deployment running the
matching ``kubeberth`` command with probes on ``/healthz`` and ``/readyz`` and the metrics port
exposed. The metrics port is plain HTTP on the pod's own address, so a NetworkPolicy per
controller admits to it only pods in namespaces labelled :data:`SCRAPER_LABEL` (the monitoring
namespace: ``kubectl label namespace monitoring kubeberth.io/scrape-metrics=true``) and nothing
else reaches the pod; the kubelet's probes are not subject to NetworkPolicy. Least privilege
per controller is why they do not share one account: the descheduler can evict but not bind,
the scheduler can bind but not evict through the eviction API, the spill controller can patch
nodes and write nothing else but Events. The spill controller's rights follow its configured
signal source: nodes and pods are listed (and Events posted about those it cannot read) only
when the signal comes from the API.

The output is deterministic (same options, same bytes), so it can be diffed and kept in Git.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeberth import __version__
from kubeberth.api.errors import InputError
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.spill.config import load_spill_config

# One RBAC rule: (apiGroup, resource or resource/subresource, verbs).
Rule = tuple[str, str, tuple[str, ...]]

LEASES = ("coordination.k8s.io", "leases", ("create", "get", "update"))
EVENTS = ("", "events", ("create",))

# What each controller calls on the API, and so what it is granted; nothing more.
# tests/live/test_rbac.py runs each controller against the embedded API server with a request
# audit, through every path that talks to the API, and asserts that used == granted, verb by
# verb. RBAC names API groups, not versions: admission reads Kueue in whichever of v1beta1 and
# v1beta2 the API serves (cohorts in v1alpha1 next to v1beta1), all under kueue.x-k8s.io.
RBAC: dict[str, list[Rule]] = {
    "scheduler": [
        # Informer list + watch; get after a rejected binding (read the pod back); delete a
        # preemption victim.
        ("", "pods", ("delete", "get", "list", "watch")),
        ("", "pods/binding", ("create",)),
        # status.nominatedNodeName and the PodScheduled=False condition.
        ("", "pods/status", ("patch",)),
        ("", "nodes", ("list", "watch")),
        ("", "namespaces", ("list", "watch")),
        ("scheduling.k8s.io", "priorityclasses", ("list", "watch")),
        ("policy", "poddisruptionbudgets", ("list", "watch")),
        ("scheduling.x-k8s.io", "podgroups", ("list", "watch")),
        # Kubernetes 1.37's native PodGroups (where served) and their PodGroupInitiallyScheduled
        # condition.
        ("scheduling.k8s.io", "podgroups", ("list", "watch")),
        ("scheduling.k8s.io", "podgroups/status", ("patch",)),
        EVENTS,
        LEASES,
    ],
    "descheduler": [
        # Informer caches only: a pass reads the snapshot, never a single object.
        ("", "pods", ("list", "watch")),
        ("", "pods/eviction", ("create",)),
        ("", "nodes", ("list", "watch")),
        ("", "namespaces", ("list", "watch")),
        ("policy", "poddisruptionbudgets", ("list", "watch")),
        ("scheduling.k8s.io", "priorityclasses", ("list", "watch")),
        # Owners, for the evictor's checks (a pod's ReplicaSet, Deployment or Job).
        ("apps", "deployments", ("list", "watch")),
        ("apps", "replicasets", ("list", "watch")),
        ("batch", "jobs", ("list", "watch")),
        EVENTS,
        LEASES,
    ],
    "spill-controller": [
        # Read the virtual-kubelet node's taints every tick; a flip is a JSON patch. The
        # free-GPU signal adds SPILL_API_SIGNAL when it is computed from the API.
        ("", "nodes", ("get", "patch")),
        LEASES,
    ],
    "admission": [
        ("kueue.x-k8s.io", "resourceflavors", ("list", "watch")),
        ("kueue.x-k8s.io", "clusterqueues", ("list", "watch")),
        ("kueue.x-k8s.io", "clusterqueues/status", ("patch",)),
        ("kueue.x-k8s.io", "cohorts", ("list", "watch")),
        ("kueue.x-k8s.io", "localqueues", ("list", "watch")),
        ("kueue.x-k8s.io", "localqueues/status", ("patch",)),
        ("kueue.x-k8s.io", "workloadpriorityclasses", ("list", "watch")),
        # Read for their controllerName and parameters; the Active condition of a check a
        # plugin models is decided by kubeberth, not written. (A plugin's parameters kind,
        # such as ConfigMaps, needs list and watch on top: docs/live.md.)
        ("kueue.x-k8s.io", "admissionchecks", ("list", "watch")),
        # One Workload per queued Job or pod group; get re-reads one after a 409; patch sets
        # spec.active false on a Workload an admission check rejected.
        ("kueue.x-k8s.io", "workloads", ("create", "get", "list", "patch", "watch")),
        ("kueue.x-k8s.io", "workloads/status", ("patch",)),
        ("", "namespaces", ("list", "watch")),
        ("scheduling.k8s.io", "priorityclasses", ("list", "watch")),
        # Queue-labelled Jobs: suspended until admitted, started and stopped by patch.
        ("batch", "jobs", ("get", "list", "patch", "watch")),
        # Queue-labelled pods: ungated by patch, deleted when their workload is preempted.
        ("", "pods", ("delete", "get", "list", "patch", "watch")),
        # Kubernetes 1.37's native PodGroups (where served): a gang's pods are one Workload.
        ("scheduling.k8s.io", "podgroups", ("list", "watch")),
        EVENTS,
        LEASES,
    ],
}

# What the spill controller needs on top when its signal comes from the API (SpillConfig
# controller.signal.source: cluster, the default): informer caches of nodes and pods, and the
# Warning Event on a node or pod it cannot read. With source prometheus it reads no pod, lists
# no node and posts no Event.
SPILL_API_SIGNAL: list[Rule] = [
    ("", "nodes", ("list", "watch")),
    ("", "pods", ("list", "watch")),
    EVENTS,
]


# What the scheduler needs on top when a profile's plugin reads a ConfigMap (NetworkCapacity's
# slots): the live scheduler then lists and watches ConfigMaps, and only then.
SCHEDULER_CONFIG_MAPS: Rule = ("", "configmaps", ("list", "watch"))


def rbac_rows(controller: str, spill_source: str = "cluster",
              config_maps: bool = False) -> list[Rule]:
    """The rows of :data:`RBAC` for ``controller``; for the spill controller with the API as
    its signal source, merged with :data:`SPILL_API_SIGNAL` (one row per resource); for a
    scheduler whose profiles read ConfigMaps, with :data:`SCHEDULER_CONFIG_MAPS`."""
    rows = list(RBAC[controller])
    if controller == "scheduler" and config_maps:
        rows.insert(len(rows) - 1, SCHEDULER_CONFIG_MAPS)  # before the Lease
    if controller != "spill-controller" or spill_source != "cluster":
        return rows
    for group, resource, verbs in SPILL_API_SIGNAL:
        at = next((i for i, r in enumerate(rows) if r[:2] == (group, resource)), None)
        if at is None:
            rows.insert(len(rows) - 1, (group, resource, verbs))  # before the Lease
        else:
            rows[at] = (group, resource, tuple(sorted({*rows[at][2], *verbs})))
    return rows


DEFAULT_NAMESPACE = "kubeberth-system"
DEFAULT_IMAGE = f"kubeberth:{__version__}"
CONFIG_DIR = "/etc/kubeberth"
# Namespaces with this label (value "true") may scrape the controllers' metrics port.
SCRAPER_LABEL = "kubeberth.io/scrape-metrics"

DEFAULT_SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
# A second scheduler: pods opt in with spec.schedulerName: kubeberth-scheduler, and
# kube-scheduler keeps every other pod.
profiles:
- schedulerName: kubeberth-scheduler
"""

DEFAULT_DESCHEDULER_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
# Bring work spilled to the virtual-kubelet node back once the spill controller has marked
# that node low-usage.
maxNoOfPodsToEvictPerNode: 2
profiles:
- name: spill-return
  pluginConfig:
  - name: DefaultEvictor
    args:
      minPodAge: 10m
  - name: RemovePodsViolatingNodeTaints
    args:
      includedTaints: ["vk.node.com/low-gpu-usage"]
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"""

DEFAULT_SPILL_CONFIG = """\
apiVersion: kubeberth.io/v1alpha1
kind: SpillConfig
# Every field at its default: see docs/spill.md.
"""


@dataclass(slots=True, frozen=True)
class ControllerSpec:
    """How one controller is run: its command, its configuration file and its ports."""

    command: str
    metrics_port: int
    config_flag: str = ""  # the command's option naming its configuration file
    config_file: str = ""  # the file name inside the ConfigMap
    default_config: str = ""

    @property
    def lease(self) -> str:
        return f"kubeberth-{self.command}"


CONTROLLERS: dict[str, ControllerSpec] = {
    "scheduler": ControllerSpec("scheduler", 10259, "--config", "scheduler.yaml",
                                DEFAULT_SCHEDULER_CONFIG),
    "descheduler": ControllerSpec("descheduler", 10258, "--policy", "policy.yaml",
                                  DEFAULT_DESCHEDULER_POLICY),
    # `kubeberth spill-controller` reads its SpillConfig from --config (`kubeberth manifests`
    # takes it as --spill-config, since --config there is the scheduler's).
    "spill-controller": ControllerSpec("spill-controller", 10262, "--config", "spill.yaml",
                                       DEFAULT_SPILL_CONFIG),
    # Admission reads ClusterQueues, LocalQueues and the rest from the API, and runs with
    # Kueue's default Configuration: no file. 8080 is Kueue's metrics port.
    "admission": ControllerSpec("admission", 8080),
}

# Which option of `kubeberth manifests` carries each controller's file, and its loader.
CONFIG_OPTIONS = {"scheduler": "--config", "descheduler": "--policy",
                  "spill-controller": "--spill-config"}


def _validate_config(controller: str, path: Path) -> None:
    """Load the file as the controller will, so bad input fails here, not in the cluster."""
    if controller == "scheduler":
        load_scheduler_config(path)
    elif controller == "descheduler":
        load_descheduler_policy(path)
    elif controller == "spill-controller":
        load_spill_config(path)


def scheduler_reads_config_maps(path: Path | None) -> bool:
    """Whether the scheduler with the configuration in ``path`` (None: the default profile)
    will watch ConfigMaps, decided as the live scheduler decides it."""
    from kubeberth.live.scheduler import reads_config_maps
    from kubeberth.scheduling.registry import in_tree_registry
    from kubeberth.scheduling.scheduler import Scheduler
    from kubeberth.state.cluster import ClusterState

    def unused(*_args: object) -> Any:  # only the plugins' event registrations are read
        raise RuntimeError("this scheduler never schedules")

    sched = Scheduler(load_scheduler_config(path), in_tree_registry(), ClusterState(),
                      clock=lambda: 0.0, binder=unused, evictor=unused)
    return reads_config_maps(sched)


def spill_source(path: Path | None) -> str:
    """The signal source (``cluster`` or ``prometheus``) the spill controller will use with
    the SpillConfig in ``path`` (None: the defaults): what its RBAC depends on."""
    return load_spill_config(path).controller.signal.source


def _labels(controller: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "kubeberth", "app.kubernetes.io/component": controller,
            "app.kubernetes.io/part-of": "kubeberth", "app.kubernetes.io/version": __version__}


def _meta(name: str, controller: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = _labels(controller)
    return meta


def cluster_rules(rows: list[Rule]) -> list[dict[str, Any]]:
    """The ClusterRole rules: every row (of :func:`rbac_rows`) but the Lease, one rule per
    row."""
    return [{"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
            for group, resource, verbs in rows if resource != "leases"]


def lease_rules(rows: list[Rule], lease: str) -> list[dict[str, Any]]:
    """The Role rules for the leader Lease: create (which RBAC cannot narrow by name), and
    the other verbs on that one Lease only."""
    verbs = next((v for _g, r, v in rows if r == "leases"), ())
    rules: list[dict[str, Any]] = []
    if "create" in verbs:
        rules.append({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "verbs": ["create"]})
    named = sorted(v for v in verbs if v != "create")
    if named:
        rules.append({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [lease], "verbs": named})
    return rules


def network_policy(controller: str, spec: ControllerSpec, namespace: str) -> dict[str, Any]:
    """Ingress to the controller's pods: its metrics port, from labelled namespaces only (the
    controllers serve nothing else; their egress to the API server is left open)."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": _meta(f"kubeberth-{controller}-metrics", controller, namespace),
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kubeberth",
                                            "app.kubernetes.io/component": controller}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {SCRAPER_LABEL:
                                                                         "true"}}}],
                         "ports": [{"protocol": "TCP", "port": spec.metrics_port}]}],
        },
    }


def _deployment(controller: str, spec: ControllerSpec, namespace: str, image: str,
                config_text: str) -> dict[str, Any]:
    name = f"kubeberth-{controller}"
    args = [spec.command]
    if spec.config_flag:
        args += [spec.config_flag, f"{CONFIG_DIR}/{spec.config_file}"]
    args += ["--metrics-address", "0.0.0.0", "--metrics-port", str(spec.metrics_port),
             "--leader-elect", "--leader-elect-resource-name", spec.lease,
             "--leader-elect-resource-namespace", namespace]
    probe = {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": str(spec.metrics_port),
                   "prometheus.io/path": "/metrics"}
    if spec.config_flag:
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": f"{name}-config"}})
        # A changed configuration rolls the pods.
        annotations["kubeberth.io/config-sha256"] = hashlib.sha256(
            config_text.encode()).hexdigest()
    selector = {"app.kubernetes.io/name": "kubeberth", "app.kubernetes.io/component": controller}
    container = {
        "name": controller,
        "image": image,
        "command": ["kubeberth"],
        "args": args,
        "env": [{"name": "MPLCONFIGDIR", "value": "/tmp"}],
        "ports": [{"name": "metrics", "containerPort": spec.metrics_port, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                          "initialDelaySeconds": 15, **probe},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                           "initialDelaySeconds": 5, **probe},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(name, controller, namespace),
        "spec": {
            # One active replica at a time either way (leader election); more only stand by.
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(controller), "annotations": annotations},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "runAsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def controller_documents(controller: str, namespace: str, image: str,
                         config_text: str | None = None,
                         spill_signal: str = "cluster",
                         config_maps: bool = False) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole + binding, Lease Role + binding, ConfigMap (if the
    controller reads a file), Deployment and its metrics NetworkPolicy for one controller;
    ``spill_signal`` is the spill controller's signal source and ``config_maps`` whether the
    scheduler reads ConfigMaps (their RBAC depends on them)."""
    spec = CONTROLLERS[controller]
    rows = rbac_rows(controller, spill_signal, config_maps)
    name = f"kubeberth-{controller}"
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    text = spec.default_config if config_text is None else config_text
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _meta(name, controller, namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(name, controller), "rules": cluster_rules(rows)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(name, controller),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": subject},
    ]
    lease = lease_rules(rows, spec.lease)
    if lease:
        role = f"{name}-leader-election"
        docs += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": _meta(role, controller, namespace), "rules": lease},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": _meta(role, controller, namespace),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": role},
             "subjects": subject},
        ]
    if spec.config_flag:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": _meta(f"{name}-config", controller, namespace),
                     "data": {spec.config_file: text}})
    docs.append(_deployment(controller, spec, namespace, image, text))
    docs.append(network_policy(controller, spec, namespace))
    return docs


def manifests(controllers: Iterable[str] | None = None, *, namespace: str = DEFAULT_NAMESPACE,
              image: str = DEFAULT_IMAGE,
              configs: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """Every document for ``controllers`` (default: all four, in table order), the Namespace
    first. ``configs`` maps a controller to its configuration file, embedded in its ConfigMap
    after loading it as the controller will (bad input is an :class:`InputError`)."""
    chosen = list(CONTROLLERS) if controllers is None else list(dict.fromkeys(controllers))
    for name in chosen:
        if name not in CONTROLLERS:
            raise InputError(f"unknown controller {name!r}", field="--controller",
                             expected=f"one of {', '.join(CONTROLLERS)}")
    configs = configs or {}
    for name in configs:
        if name not in chosen:
            raise InputError(f"{CONFIG_OPTIONS[name]} configures the {name}, which is not "
                             "among the controllers to deploy", field=CONFIG_OPTIONS[name],
                             expected=f"--controller {name}, or no {CONFIG_OPTIONS[name]}")
    if not _is_dns_label(namespace):
        raise InputError(f"namespace {namespace!r} is not a DNS label", field="--namespace",
                         expected="lower-case letters, digits and '-', at most 63, starting "
                                  "and ending with a letter or digit")
    if not image or any(c.isspace() for c in image):
        raise InputError(f"image {image!r} is not an image reference", field="--image",
                         expected="a reference such as registry.example/kubeberth:0.1.0")
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "labels": {"app.kubernetes.io/part-of": "kubeberth"}}}]
    for name in chosen:
        text = None
        path = configs.get(name)
        if path is not None:
            _validate_config(name, path)
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as err:
                raise InputError(f"cannot read it: {err}", source=str(path)) from None
        signal = spill_source(path) if name == "spill-controller" else "cluster"
        config_maps = name == "scheduler" and scheduler_reads_config_maps(path)
        docs += controller_documents(name, namespace, image, text, signal, config_maps)
    return docs


def _is_dns_label(name: str) -> bool:
    return (0 < len(name) <= 63 and name[0].isalnum() and name[-1].isalnum()
            and all(c.isdigit() or ("a" <= c <= "z") or c == "-" for c in name))


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the embedded configuration files) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(docs: list[dict[str, Any]]) -> str:
    """The documents as one multi-document YAML stream, keys in Kubernetes' usual order."""
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         explicit_start=True, width=100)
