"""Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs from manifests, validated, with the
pods they create.

A cluster re-creates an evicted pod only through the controller that owns it, under a new name, and
a PodDisruptionBudget in percent is measured against that controller's scale. So the simulator needs
the owners, not just their pods. This module decodes the owner documents the manifest loader keeps
raw, checks what the API server's validation would refuse (a selector that does not match the
template, a restartPolicy the controller does not allow, negative counts) and builds each pod an
owner creates, named and labelled as the upstream controllers name them
(``<deployment>-<pod-template-hash>-<5 chars>``, ``<job>-<5 chars>``, a StatefulSet's
``<set>-<ordinal>``, a DaemonSet's ``<daemonset>-<5 chars>``, one per eligible node, with upstream's
default daemon tolerations and a node affinity naming its node) with a controller
ownerReference. Names are derived from the owner and a
counter, so runs are reproducible. Simulation timing comes from annotations (see docs/spill.md,
"Owners"):

* ``kubeberth.io/arrival-seconds`` on the owner: when it is created (default 0);
* ``kubeberth.io/duration-seconds`` on a Deployment, ReplicaSet or StatefulSet: its lifetime, after
  which it is deleted with its pods; on a Job's pod template: each pod's run time;
* ``kubeberth.io/replicas-schedule`` on a Deployment, ReplicaSet or StatefulSet: ``"600=8,1800=2"``
  scales it to 8 replicas at 600 s and to 2 at 1800 s.

Rollouts, revision history, a StatefulSet's volume claim templates, hostname and subdomain, Job
success/failure policies and indexed Jobs are not modelled.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from kubeberth.api.errors import InputError
from kubeberth.api.objects import (
    Affinity,
    LabelSelector,
    NamespacedName,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodSpec,
    Toleration,
)
from kubeberth.api.resources import pod_requests
from kubeberth.api.selectors import (
    compile_label_selector,
    compile_node_selector_term,
    tolerated,
)
from kubeberth.api.validation import check_labels, validate_pod_spec
from kubeberth.api.workloads import (
    DaemonSet,
    Deployment,
    Job,
    PodTemplateSpec,
    ReplicaSet,
    Replicated,
    StatefulSet,
)
from kubeberth.config.manifests import (
    ANNOTATION_ARRIVAL,
    ANNOTATION_DURATION,
    Manifests,
    check_metadata,
    pod_timing,
)
from kubeberth.config.yamlsrc import Document, convert

ANNOTATION_REPLICAS_SCHEDULE = "kubeberth.io/replicas-schedule"
POD_TEMPLATE_HASH = "pod-template-hash"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
DEFAULT_BACKOFF_LIMIT = 6  # upstream Job default
OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")
# Labels the StatefulSet controller stamps on each pod (updateIdentity, setPodRevision).
STATEFULSET_POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
CONTROLLER_REVISION_HASH = "controller-revision-hash"
POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
POD_TEMPLATE_GENERATION = "pod-template-generation"
# Upstream's AddOrUpdateDaemonPodTolerations, in its order: every daemon pod survives node
# problems and tolerates the taints of node conditions (NetworkUnavailable only with
# hostNetwork).
_DAEMON_TOLERATIONS = (
    Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/pid-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
)
_HOST_NETWORK_TOLERATION = Toleration(key="node.kubernetes.io/network-unavailable",
                                      operator="Exists", effect="NoSchedule")
# Upstream's rand.String alphabet (no vowels, no confusable digits).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UID_NAMESPACE = uuid.UUID("6f1c1a55-3b7e-4f4e-9a57-6b7562657274")


@dataclass(slots=True)
class Owner(NamespacedName):
    """A controller that owns pods, reduced to what the simulator replays."""

    kind: str  # Deployment, ReplicaSet, StatefulSet or Job
    name: str
    namespace: str
    uid: str
    template: PodTemplateSpec
    replicas: int  # Deployment/ReplicaSet/StatefulSet desired replicas at creation
    arrival: float  # seconds on the simulated clock
    lifetime: float | None = None  # Deployment/ReplicaSet/StatefulSet: deleted after this long
    schedule: list[tuple[float, int]] = field(default_factory=list)  # (time, replicas)
    # Job only.
    completions: int | None = None
    parallelism: int = 1
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    pod_duration: float | None = None  # each pod's run time (Jobs)
    # Pods created so far; numbers the next pod's name.
    created: int = 0
    # The ReplicaSet a Deployment's pods belong to ("" for the others).
    replica_set: str = ""
    # StatefulSet only: OrderedReady (True) creates pod i+1 once pod i is Running and Ready;
    # Parallel (False) creates them all at once. Ordinals run from ``start_ordinal``.
    ordered: bool = False
    start_ordinal: int = 0
    revision: str = ""  # controller-revision-hash label value
    host_network: bool = False  # DaemonSet: the template's hostNetwork
    labels: dict[str, str] = field(default_factory=dict)  # the owner's own metadata.labels

    @property
    def controller_kind(self) -> str:
        """Kind named by the pods' controller ownerReference (a Deployment's pods are owned by
        its ReplicaSet)."""
        return "ReplicaSet" if self.kind == "Deployment" else self.kind

    @property
    def controller_name(self) -> str:
        return self.replica_set or self.name

    def ordinal_of(self, pod_name: str) -> int | None:
        """A StatefulSet pod's ordinal from its name (None: not ``<set>-<ordinal>``), as the
        controller's getParentNameAndOrdinal reads it."""
        prefix, _, tail = pod_name.rpartition("-")
        return int(tail) if prefix == self.name and tail.isdigit() else None

    def claims(self, pod: Pod) -> bool:
        """A pod given without an ownerReference is this StatefulSet's (named by an ordinal)
        or this DaemonSet's (for a node), with its template's labels in its namespace."""
        if pod.metadata.namespace != self.namespace or \
                not self.template.metadata.labels.items() <= pod.metadata.labels.items():
            return False
        if self.kind == "StatefulSet":
            return self.ordinal_of(pod.metadata.name) is not None
        return self.kind == "DaemonSet" and bool(self.daemon_node_of(pod))

    def ordinals_in(self, pods: Iterable[Pod]) -> dict[int, bool]:
        """The ordinals of this StatefulSet among manifest ``pods`` (its namespace, its
        template's labels, named ``<set>-<ordinal>``), each with whether the controller sees
        it Running and Ready: phase Running with condition Ready True, or, for a bound pod
        whose status is not given (a hand-written bundle), True: it stands for a running pod.
        A Succeeded or Failed pod counts as present and not ready (not replaced here)."""
        out: dict[int, bool] = {}
        for pod in pods:
            ordinal = self.ordinal_of(pod.metadata.name)
            if ordinal is None or not self.claims(pod):
                continue
            status = pod.status
            if status.phase:
                out[ordinal] = status.phase == "Running" and any(
                    c.type == "Ready" and c.status == "True" for c in status.conditions)
            else:
                out[ordinal] = bool(pod.spec.node_name)
        return out

    def stateful_sync(self, replicas: int, ready: Mapping[int, bool]) -> tuple[list[int], bool]:
        """One StatefulSet controller sync over its live pods' ordinals (-> Running and Ready):
        the ordinals to create now, lowest first, and whether the sync goes on to delete the
        condemned pods (OrderedReady stops at the first pod it creates or that is not Running
        and Ready; Parallel never stops)."""
        create: list[int] = []
        for ordinal in range(self.start_ordinal, self.start_ordinal + replicas):
            if ordinal not in ready:
                create.append(ordinal)
                if self.ordered:
                    return create, False
            elif self.ordered and not ready[ordinal]:
                return create, False
        return create, True

    def daemon_tolerations(self) -> list[Toleration]:
        """The template's tolerations with upstream's daemon defaults added or updated (a
        toleration of the same key, operator, value and effect is replaced)."""
        out = list(self.template.spec.tolerations)
        defaults = [*_DAEMON_TOLERATIONS, *([_HOST_NETWORK_TOLERATION] if self.host_network
                                           else [])]
        for default in defaults:
            same = [i for i, t in enumerate(out) if (t.key, t.operator, t.value, t.effect) == (
                default.key, default.operator, default.value, default.effect)]
            if not same:
                out.append(default)
            for i in same:
                out[i] = default
        return out

    def daemon_should_run(self, node: Node) -> tuple[bool, bool]:
        """Upstream's nodeShouldRunDaemonPod: (should run, should continue running). The
        template's nodeName, nodeSelector and required node affinity must match the node; a
        NoSchedule or NoExecute taint the pod does not tolerate stops a new pod, and only an
        untolerated NoExecute one stops a running pod."""
        spec = self.template.spec
        name = node.metadata.name
        if spec.node_name and spec.node_name != name:
            return False, False
        labels = node.metadata.labels
        if not all(labels.get(k) == v for k, v in spec.node_selector.items()):
            return False, False
        required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
            if spec.affinity is not None and spec.affinity.node_affinity is not None else None
        if required is not None and not any(compile_node_selector_term(t)(labels, name)
                                            for t in required.node_selector_terms):
            return False, False
        tolerations = self.daemon_tolerations()

        def untolerated(effects: tuple[str, ...]) -> bool:
            return any(t.effect in effects and not tolerated(tolerations, t)
                       for t in node.spec.taints)

        if untolerated(("NoSchedule", "NoExecute")):
            return False, not untolerated(("NoExecute",))
        return True, True

    def daemon_node_of(self, pod: Pod) -> str:
        """The node a daemon pod is for: its nodeName, else the value of its required node
        affinity's ``metadata.name`` field (upstream's GetTargetNodeName); "" if neither."""
        if pod.spec.node_name:
            return pod.spec.node_name
        aff = pod.spec.affinity
        required = aff.node_affinity.required_during_scheduling_ignored_during_execution \
            if aff is not None and aff.node_affinity is not None else None
        for term in required.node_selector_terms if required is not None else []:
            for req in term.match_fields:
                if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
                    return req.values[0]
        return ""

    def daemon_pod(self, node: str) -> Pod:
        """The daemon pod for ``node``: the template with the default tolerations, and its
        required node affinity replaced by ``metadata.name In [node]`` so that the default
        scheduler places it (upstream's ReplaceDaemonSetPodNodeNameNodeAffinity)."""
        pod = self.new_pod()
        spec = pod.spec
        spec.tolerations = self.daemon_tolerations()
        term = NodeSelectorTerm(match_fields=[NodeSelectorRequirement(
            key="metadata.name", operator="In", values=[node])])
        if spec.affinity is None:
            spec.affinity = Affinity()
        if spec.affinity.node_affinity is None:
            spec.affinity.node_affinity = NodeAffinity()
        spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution = \
            NodeSelector(node_selector_terms=[term])
        return pod

    def new_pod(self, ordinal: int = 0) -> Pod:
        """The next pod this owner creates, with upstream-style name, labels and ownerRef; a
        StatefulSet's is the one of ``ordinal``."""
        self.created += 1
        base = self.controller_name
        meta = self.template.metadata
        labels = dict(meta.labels)
        if self.kind == "StatefulSet":
            name = f"{self.name}-{ordinal}"
            labels[CONTROLLER_REVISION_HASH] = self.revision
            labels[STATEFULSET_POD_NAME] = name
            labels[POD_INDEX] = str(ordinal)
        else:
            if self.kind == "DaemonSet":
                labels[CONTROLLER_REVISION_HASH] = self.revision
                labels[POD_TEMPLATE_GENERATION] = "1"
            name = f"{base}-{_suffix(f'{self.uid}/{self.created}')}"
        if self.kind == "Deployment":
            labels[POD_TEMPLATE_HASH] = self.replica_set.rsplit("-", 1)[1]
        if self.kind == "Job":
            for key in JOB_NAME_LABELS:
                labels[key] = self.name
            for key in JOB_UID_LABELS:
                labels[key] = self.uid
        ref = OwnerReference(api_version="batch/v1" if self.kind == "Job" else "apps/v1",
                             kind=self.controller_kind, name=self.controller_name,
                             uid=_uid(self.controller_kind, self.namespace, self.controller_name),
                             controller=True)
        return Pod(
            metadata=ObjectMeta(name=name, namespace=self.namespace, labels=labels,
                                annotations=dict(meta.annotations), owner_references=[ref]),
            spec=_copy_spec(self.template.spec),
        )


def _copy_spec(spec: PodSpec) -> PodSpec:
    """A deep copy: the scheduler writes nodeName and nominations into the pod it binds."""
    copied: PodSpec = msgspec.convert(msgspec.to_builtins(spec), PodSpec)
    return copied


def _suffix(seed: str, length: int = 5) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


def _uid(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def _template_hash(template: PodTemplateSpec) -> str:
    """A stable stand-in for upstream's pod-template-hash (10 chars of the same alphabet)."""
    return _suffix(msgspec.json.encode(template).decode(), 10)


def parse_replicas_schedule(raw: str) -> list[tuple[float, int]]:
    """``"600=8,1800=2"`` → [(600.0, 8), (1800.0, 2)], times ascending."""
    expected = ('comma-separated <seconds>=<replicas> pairs in increasing time order, such as '
                '"600=8,1800=2"')
    field_path = f"metadata.annotations.{ANNOTATION_REPLICAS_SCHEDULE}"
    out: list[tuple[float, int]] = []
    for part in raw.split(","):
        when, sep, count = part.strip().partition("=")
        try:
            t = float(when)
            n = int(count)
        except ValueError:
            raise InputError(f"{part.strip()!r} is not <seconds>=<replicas>", field=field_path,
                             expected=expected) from None
        if not sep or t < 0 or n < 0 or t != t or (out and t <= out[-1][0]):
            raise InputError(f"{part.strip()!r} is not a valid step", field=field_path,
                             expected=expected)
        out.append((t, n))
    return out


def _check_template(doc: Document, template: PodTemplateSpec, allowed_restart: tuple[str, ...],
                    kind: str) -> None:
    restart = template.spec.restart_policy
    if restart not in allowed_restart:
        raise doc.error(f"restartPolicy {restart!r} is not allowed for a {kind}",
                        field="spec.template.spec.restartPolicy",
                        expected=" or ".join(allowed_restart))
    probe = Pod(metadata=template.metadata, spec=template.spec)
    with doc.located(under="spec.template"):
        check_labels(template.metadata.labels, "metadata.labels")
        validate_pod_spec(template.spec)
        pod_requests(probe)
        pod_timing(probe)


def _check_selector(doc: Document, template: PodTemplateSpec, selector_given: bool,
                    required: bool) -> None:
    spec = doc.data.get("spec") or {}
    if not selector_given:
        if required:
            raise doc.error("spec.selector is missing", field="spec.selector",
                            expected="a label selector matching spec.template.metadata.labels")
        return
    sel = msgspec.convert(spec.get("selector"), LabelSelector)
    with doc.located():
        matches = compile_label_selector(sel, "spec.selector")
    if not sel.match_labels and not sel.match_expressions:
        raise doc.error("empty selector", field="spec.selector",
                        expected="a non-empty label selector")
    if not matches(template.metadata.labels):
        raise doc.error("selector does not match template labels", field="spec.selector",
                        expected="spec.template.metadata.labels that the selector matches")


def _non_negative(doc: Document, value: int | None, path: str) -> None:
    if value is not None and value < 0:
        raise doc.error(f"{path.rsplit('.', 1)[-1]} is negative ({value})", field=path,
                        expected="a non-negative integer")


def _owner_timing(doc: Document, meta: ObjectMeta, lifetime_allowed: bool
                  ) -> tuple[float, float | None]:
    probe = Pod(metadata=ObjectMeta(annotations=meta.annotations))
    with doc.located():
        arrival, lifetime = pod_timing(probe)
    if lifetime is not None and not lifetime_allowed:
        raise doc.error(f"{ANNOTATION_DURATION} on a {doc.kind} is not supported",
                        field=f"metadata.annotations.{ANNOTATION_DURATION}",
                        expected="the annotation on spec.template.metadata (each pod's run time)")
    return arrival, lifetime


def _replicated(doc: Document, obj: Replicated | StatefulSet) -> Owner:
    meta = obj.metadata
    check_metadata(doc, meta, namespaced=True)
    _non_negative(doc, obj.spec.replicas, "spec.replicas")
    template = obj.spec.template
    _check_selector(doc, template, obj.spec.selector is not None, required=True)
    _check_template(doc, template, ("Always",), doc.kind)
    if ANNOTATION_DURATION in template.metadata.annotations:
        raise doc.error(
            f"{ANNOTATION_DURATION} on a {doc.kind}'s pod template is not supported: its pods "
            "run until deleted", field=f"spec.template.metadata.annotations.{ANNOTATION_DURATION}",
            expected=f"{ANNOTATION_DURATION} on the {doc.kind}'s own metadata (its lifetime)")
    arrival, lifetime = _owner_timing(doc, meta, lifetime_allowed=True)
    schedule: list[tuple[float, int]] = []
    raw = meta.annotations.get(ANNOTATION_REPLICAS_SCHEDULE)
    if raw is not None:
        with doc.located():
            schedule = parse_replicas_schedule(raw)
    owner = Owner(kind=doc.kind, name=meta.name, namespace=meta.namespace,
                  uid=_uid(doc.kind, meta.namespace, meta.name), template=template,
                  replicas=obj.spec.replicas, arrival=arrival, lifetime=lifetime,
                  schedule=schedule, labels=dict(meta.labels))
    if doc.kind == "Deployment":
        owner.replica_set = f"{meta.name}-{_template_hash(template)}"
    return owner


def _stateful_set(doc: Document, obj: StatefulSet) -> Owner:
    """A StatefulSet's owner: a replicated owner whose pods have ordinals."""
    spec = obj.spec
    policy = spec.pod_management_policy
    if policy not in POD_MANAGEMENT_POLICIES:
        raise doc.error(f"unsupported podManagementPolicy {policy!r}",
                        field="spec.podManagementPolicy",
                        expected=" or ".join(POD_MANAGEMENT_POLICIES))
    start = 0 if spec.ordinals is None else spec.ordinals.start
    _non_negative(doc, start, "spec.ordinals.start")
    owner = _replicated(doc, obj)
    owner.ordered = policy == "OrderedReady"
    owner.start_ordinal = start
    owner.revision = f"{owner.name}-{_template_hash(spec.template)}"
    return owner


def _job(doc: Document, job: Job) -> Owner:
    meta = job.metadata
    check_metadata(doc, meta, namespaced=True)
    spec = job.spec
    for path, value in (("spec.completions", spec.completions),
                        ("spec.parallelism", spec.parallelism),
                        ("spec.backoffLimit", spec.backoff_limit)):
        _non_negative(doc, value, path)
    template = job.spec.template
    _check_template(doc, template, ("Never", "OnFailure"), "Job")
    if spec.selector is not None:
        _check_selector(doc, template, True, required=False)
    arrival, _ = _owner_timing(doc, meta, lifetime_allowed=False)
    _, pod_duration = pod_timing(Pod(metadata=template.metadata))
    return Owner(kind="Job", name=meta.name, namespace=meta.namespace,
                 uid=_uid("Job", meta.namespace, meta.name), template=template, replicas=0,
                 arrival=arrival, completions=spec.completions,
                 parallelism=1 if spec.parallelism is None else spec.parallelism,
                 backoff_limit=DEFAULT_BACKOFF_LIMIT if spec.backoff_limit is None
                 else spec.backoff_limit,
                 pod_duration=pod_duration)


def _daemon_set(doc: Document, obj: DaemonSet) -> Owner:
    """A DaemonSet's owner: one pod per eligible node, so no replicas and no scale steps."""
    meta = obj.metadata
    check_metadata(doc, meta, namespaced=True)
    template = obj.spec.template
    _check_selector(doc, template, obj.spec.selector is not None, required=True)
    _check_template(doc, template, ("Always",), "DaemonSet")
    for where, key, why in (
            (template.metadata.annotations, ANNOTATION_DURATION, "its pods run until deleted"),
            (meta.annotations, ANNOTATION_REPLICAS_SCHEDULE, "it has no replicas")):
        if key in where:
            path = "spec.template.metadata" if key == ANNOTATION_DURATION else "metadata"
            raise doc.error(f"{key} on a DaemonSet is not supported: {why}",
                            field=f"{path}.annotations.{key}", expected=f"no {key} there")
    spec = template.spec
    required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
        if spec.affinity is not None and spec.affinity.node_affinity is not None else None
    for i, term in enumerate(required.node_selector_terms if required is not None else []):
        with doc.located():
            compile_node_selector_term(term, "spec.template.spec.affinity.nodeAffinity."
                                       "requiredDuringSchedulingIgnoredDuringExecution."
                                       f"nodeSelectorTerms[{i}]")
    arrival, lifetime = _owner_timing(doc, meta, lifetime_allowed=True)
    raw_spec = ((doc.data.get("spec") or {}).get("template") or {}).get("spec") or {}
    return Owner(kind="DaemonSet", name=meta.name, namespace=meta.namespace,
                 uid=_uid("DaemonSet", meta.namespace, meta.name), template=template, replicas=0,
                 arrival=arrival, lifetime=lifetime, revision=_template_hash(template),
                 host_network=raw_spec.get("hostNetwork") is True)


def load_owners(manifests: Manifests, kinds: tuple[str, ...] = OWNER_KINDS) -> list[Owner]:
    """The Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs among
    ``manifests.other`` (or only those of ``kinds``), in input order."""
    owners: list[Owner] = []
    seen: set[tuple[str, str, str]] = set()
    for doc in manifests.of_kind(*kinds):
        if doc.kind == "Job":
            owner = _job(doc, convert(doc, Job))
        elif doc.kind == "Deployment":
            owner = _replicated(doc, convert(doc, Deployment))
        elif doc.kind == "StatefulSet":
            owner = _stateful_set(doc, convert(doc, StatefulSet))
        elif doc.kind == "DaemonSet":
            owner = _daemon_set(doc, convert(doc, DaemonSet))
        else:
            owner = _replicated(doc, convert(doc, ReplicaSet))
        key = (owner.kind, owner.namespace, owner.name)
        if key in seen:
            raise doc.error(f"{owner.kind} {owner.key} is defined twice", field="metadata.name",
                            expected="unique names")
        seen.add(key)
        owners.append(owner)
    return owners


__all__ = ["ANNOTATION_ARRIVAL", "ANNOTATION_REPLICAS_SCHEDULE", "Owner", "load_owners",
           "parse_replicas_schedule"]
