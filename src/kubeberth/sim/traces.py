"""Workloads for the simulator: a cluster of Nodes and a stream of Pods with arrival and run times.

Simulations need a realistic cluster and workload without the user writing thousands of
manifests, so this module reads the Alibaba GPU trace v2023 ("openb", bundled in ``sim/data``;
see its README for attribution, citation and research-use terms) and annotated manifests, and
turns both into plain :class:`~kubeberth.api.objects.Node` / :class:`~kubeberth.api.objects.Pod`
structs. How openb rows become objects:

* Node ``sn`` → a Node with that name and ``kubernetes.io/hostname`` label, allocatable cpu
  ``<cpu_milli>m``, memory ``<memory_mib>Mi``, ``nvidia.com/gpu`` and the node-level milli-GPU
  pool ``kubeberth.io/gpu-milli`` = 1000 × gpu, and the GPU type as label
  ``kubeberth.io/gpu-model``.
  The pod-slot limit is :data:`OPENB_MAX_PODS` (10,000), not the kubelet's default 110: every
  openb pod asks for at least one core and no node has more than 128, so the trace never meant
  the slot count to bind, and 110 would bind on its 128-core nodes.
* Pod row → one container requesting ``<cpu_milli>m`` and ``<memory_mib>Mi`` (a 0 in the trace is
  an explicit zero request, as written). Whole-GPU pods (``gpu_milli`` 1000) request
  ``nvidia.com/gpu: num_gpu`` and ``kubeberth.io/gpu-milli: 1000 × num_gpu``; GPU-share pods
  (one GPU, ``gpu_milli`` below 1000) request only ``kubeberth.io/gpu-milli: gpu_milli``. GPU
  limits equal the requests, as the API server demands for extended resources. ``gpu_spec`` and
  ``qos`` are kept as annotations ``kubeberth.io/gpu-spec`` / ``kubeberth.io/qos``.
* Timing: arrival is ``creation_time``. In the simulator a pod's run time starts when it is
  bound, so its duration is what it ran in the trace: ``deletion_time − scheduled_time``. A pod
  that was never scheduled in the trace (empty ``scheduled_time``; 897 of the default file's
  pods) gets ``deletion_time − creation_time``, the time it existed, so that if a better policy
  places it, it holds resources no longer than it was wanted. An empty ``deletion_time`` means
  it runs forever (``None``). openb has no empty one: the 34 pods presumably still running at
  the snapshot carry its last timestamp (12,902,960 s, after every arrival), which is taken
  literally, so they end only once nothing else arrives. Files without time columns
  (``multigpu*``) arrive one per second in row order and run forever, so a run packs them until
  the cluster is full. Pods keep file order; the resampled files are not sorted by arrival, so
  the event loop orders them.

The numbers stay numbers: each count is checked against the state's int64 milli-units and put
in the manifests as :class:`~kubeberth.api.quantity.Milli`, never written out as a quantity
string to be parsed again.

Rows are checked strictly and errors name the file, the 1-based line (the header is line 1),
the column and the expected form. This module does not map ``qos`` to priority; GPU models and
per-device placement are the GpuDevices plugin's (see docs/gpu.md).
"""

from __future__ import annotations

import csv
import dataclasses
import gc
import gzip
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, NamedTuple

from kubeberth.api.errors import InputError
from kubeberth.api.gpu import MILLI_PER_GPU
from kubeberth.api.objects import (
    Container,
    Node,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceMap,
    ResourceRequirements,
)
from kubeberth.api.quantity import MAX_MILLI, Milli
from kubeberth.api.resources import CPU, GPU, GPU_MILLI, MEMORY, PODS
from kubeberth.config.manifests import MANIFEST_SUFFIXES, Manifests, load_manifests, pod_timing
from kubeberth.config.workloads import Owner, load_owners
from kubeberth.config.yamlsrc import STDIN

GPU_MODEL_LABEL = "kubeberth.io/gpu-model"
GPU_SPEC_ANNOTATION = "kubeberth.io/gpu-spec"
QOS_ANNOTATION = "kubeberth.io/qos"
HOSTNAME_LABEL = "kubernetes.io/hostname"
OPENB_MAX_PODS = 10_000
POD_NAMESPACE = "default"

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu")
NODE_OPTIONAL_COLUMNS = ("model",)
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL_COLUMNS = (
    "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time",
)

BUNDLED_NODES = "openb_node_list_all_node.csv.gz"
BUNDLED_PODS = "openb_pod_list_default.csv.gz"

TraceSource = str | os.PathLike[str] | IO[str]
Timing = Callable[[Pod], tuple[float, float | None]]

_EXPECT_INT = "a non-negative whole number such as 4000"
_EXPECT_SECONDS = ("a non-negative number of seconds such as 427061 or 12.5, below 1e15 "
                   "(about 31 million years)")
# Times past this lose sub-second precision as floats; nothing real is that late.
_MAX_SECONDS = 1e15
_MAX_TIME_CHARS = 64
_EXPECT_GPU_MILLI = (
    "0 for a pod without GPUs, 1 to 999 for a share of one GPU, 1000 for whole GPUs"
)
_EXPECT_GPU_SPEC = "GPU types separated by '|', such as T4 or V100M16|V100M32, or empty for any"
_DECIMAL = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)", re.ASCII)
_GZIP_MAGIC = b"\x1f\x8b"
_MILLI_PER_MIB = 2**20 * 1000
_MAX_PODS = Milli(OPENB_MAX_PODS * 1000)


class TracePod(NamedTuple):
    """A pod and when it enters and leaves the simulation."""

    pod: Pod
    arrival: float  # seconds from the start of the trace
    duration: float | None  # run time from binding; None: runs until the simulation ends


@dataclass(slots=True)
class Scenario:
    """A cluster and the pods submitted to it: everything a simulation run replays."""

    nodes: list[Node]
    pods: list[TracePod]
    name: str  # short, for report titles
    source: str  # where the nodes and pods came from, for provenance in reports
    # PriorityClasses, Namespaces, PDBs and other kinds found in manifest inputs (their node and
    # pod lists are empty: those are above), for the layers that use them.
    extras: Manifests = field(default_factory=Manifests)
    # Deployments, ReplicaSets and Jobs; their first pods are already in ``pods``.
    owners: list[Owner] = field(default_factory=list)


# ---- reading text ------------------------------------------------------------------------------

def _decode(data: bytes, source: str) -> str:
    """Bytes (optionally gzip) → text; undecodable input is the user's to fix, not a crash."""
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise InputError(f"cannot decompress gzip data ({err})", source=source,
                             expected="a valid gzip file or plain text") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", source=source,
                         expected="a UTF-8 text file") from None


def _read_source(src: TraceSource) -> tuple[str, str]:
    """Return (text, name for errors) for a path (plain or gzip) or an open text stream."""
    if isinstance(src, str | os.PathLike):
        path = Path(src)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise InputError(f"cannot read file: {err.strerror or err}", source=str(path),
                             expected="a readable file") from None
        return _decode(data, str(path)), str(path)
    name = str(getattr(src, "name", "<stream>"))
    return src.read(), name


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building objects: each row allocates a dozen containers, which
    triggers collections that find nothing and double the reading time (measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _rows(text: str, source: str, required: Sequence[str],
          optional: Sequence[str]) -> tuple[dict[str, int], Iterable[tuple[int, list[str]]]]:
    """Check the header; return column positions and (line number, fields) per data row.

    ``line_num`` counts physical lines, so line numbers stay right across quoted newlines."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    form = ",".join(required) + "".join(f"[,{c}]" for c in optional)
    if not header:
        raise InputError("the file is empty", source=source, line=1,
                         expected=f"a CSV header {form}")
    columns: dict[str, int] = {}
    for i, col in enumerate(header):
        col = col.strip()
        if col in columns:
            raise InputError(f"column {col!r} appears twice in the header", source=source,
                             line=1, expected=f"a CSV header {form}")
        columns[col] = i
    missing = [c for c in required if c not in columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=source, line=1,
                         expected=f"a CSV header {form}")
    width = len(header)

    def data_rows() -> Iterable[tuple[int, list[str]]]:
        for row in reader:
            if not row:
                continue
            if len(row) != width:
                raise InputError(
                    f"the row has {len(row)} fields but the header has {width}",
                    source=source, line=reader.line_num,
                    expected=f"{width} comma-separated fields ({','.join(header)})",
                )
            yield reader.line_num, row

    return columns, data_rows()


def _int(value: str, source: str, line: int, column: str, milli_per_unit: int = 1000) -> int:
    """A count whose milli-units (``milli_per_unit`` per unit) fit the state's int64."""
    if value.isdigit() and value.isascii():
        # Only short digit strings reach int(): its cost grows with the length.
        if len(value) <= 19 or len(value.lstrip("0")) <= 19:
            n = int(value)
            if n * milli_per_unit <= MAX_MILLI:
                return n
        raise InputError(f"{_shown(value)} is out of range", source=source, line=line,
                         field=column, expected=f"at most {MAX_MILLI // milli_per_unit}")
    raise InputError(f"{_shown(value)} is not a non-negative whole number", source=source,
                     line=line, field=column, expected=_EXPECT_INT)


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 40 else repr(value[:32] + "…")


def _seconds(value: str, source: str, line: int, column: str) -> float:
    if len(value) <= _MAX_TIME_CHARS and (
            (value.isdigit() and value.isascii()) or _DECIMAL.fullmatch(value) is not None):
        seconds = float(value)
        if seconds <= _MAX_SECONDS:
            return seconds
    raise InputError(f"{_shown(value)} is not a number of seconds", source=source, line=line,
                     field=column, expected=_EXPECT_SECONDS)


def _unique_name(value: str, what: str, column: str, seen: dict[str, int], source: str,
                 line: int) -> str:
    """The row's name, recorded in ``seen`` (name → line); empty and repeated names are errors."""
    name = value.strip()
    if not name:
        raise InputError(f"empty {what} name", source=source, line=line, field=column,
                         expected=f"a unique {what} name such as openb-{what}-0000")
    if name in seen:
        raise InputError(f"{what} {name!r} already appears on line {seen[name]}",
                         source=source, line=line, field=column,
                         expected=f"a unique {what} name")
    seen[name] = line
    return name


# ---- nodes -------------------------------------------------------------------------------------

def _parse_nodes(text: str, source: str) -> list[Node]:
    columns, rows = _rows(text, source, NODE_COLUMNS, NODE_OPTIONAL_COLUMNS)
    i_sn, i_cpu, i_mem, i_gpu = (columns[c] for c in NODE_COLUMNS)
    i_model = columns.get("model")
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        name = _unique_name(row[i_sn], "node", "sn", seen, source, line)
        cpu = _int(row[i_cpu].strip(), source, line, "cpu_milli", 1)
        mem = _int(row[i_mem].strip(), source, line, "memory_mib", _MILLI_PER_MIB)
        gpus = _int(row[i_gpu].strip(), source, line, "gpu", 1000 * MILLI_PER_GPU)
        model = row[i_model].strip() if i_model is not None else ""
        alloc: ResourceMap = {CPU: Milli(cpu), MEMORY: Milli(mem * _MILLI_PER_MIB),
                              PODS: _MAX_PODS}
        if gpus:
            alloc[GPU] = Milli(1000 * gpus)
            alloc[GPU_MILLI] = Milli(1000 * MILLI_PER_GPU * gpus)
        labels = {HOSTNAME_LABEL: name}
        if model:
            labels[GPU_MODEL_LABEL] = model
        nodes.append(Node(
            metadata=ObjectMeta(name=name, labels=labels),
            status=NodeStatus(capacity=dict(alloc), allocatable=alloc),
        ))
    return nodes


def read_openb_nodes(src: TraceSource) -> list[Node]:
    """Read an openb node list (``sn,cpu_milli,memory_mib,gpu[,model]``), plain or gzip."""
    text, source = _read_source(src)
    with _gc_paused():
        return _parse_nodes(text, source)


# ---- pods --------------------------------------------------------------------------------------

def _gpu_requests(num_gpu: int, gpu_milli: int, source: str, line: int) -> ResourceMap:
    """The GPU part of a pod's requests; rejects combinations the trace format cannot mean."""
    if num_gpu == 0:
        if gpu_milli:
            raise InputError(f"gpu_milli is {gpu_milli} but num_gpu is 0", source=source,
                             line=line, field="gpu_milli", expected=_EXPECT_GPU_MILLI)
        return {}
    if gpu_milli == 1000:
        return {GPU: Milli(1000 * num_gpu), GPU_MILLI: Milli(1000 * MILLI_PER_GPU * num_gpu)}
    if gpu_milli == 0 or gpu_milli > 1000:
        raise InputError(f"gpu_milli is {gpu_milli} with num_gpu {num_gpu}", source=source,
                         line=line, field="gpu_milli", expected=_EXPECT_GPU_MILLI)
    if num_gpu > 1:
        raise InputError(
            f"gpu_milli is {gpu_milli} with num_gpu {num_gpu}; only one GPU can be shared",
            source=source, line=line, field="gpu_milli",
            expected="gpu_milli 1000 when num_gpu is above 1 (multi-GPU pods take whole GPUs)",
        )
    return {GPU_MILLI: Milli(1000 * gpu_milli)}


def _timing(row: list[str], cols: tuple[int | None, int | None, int | None], index: int,
            source: str, line: int) -> tuple[float, float | None]:
    """(arrival, duration) of one row; see the module docstring for why."""
    i_create, i_delete, i_sched = cols
    if i_create is None:
        return float(index), None
    created = _seconds(row[i_create].strip(), source, line, "creation_time")
    deleted_raw = row[i_delete].strip() if i_delete is not None else ""
    sched_raw = row[i_sched].strip() if i_sched is not None else ""
    started = created
    if sched_raw:
        started = _seconds(sched_raw, source, line, "scheduled_time")
        if started < created:
            raise InputError(
                f"scheduled_time {sched_raw} is before creation_time {row[i_create].strip()}",
                source=source, line=line, field="scheduled_time",
                expected="a time at or after creation_time, or empty if never scheduled",
            )
    if not deleted_raw:
        return created, None
    deleted = _seconds(deleted_raw, source, line, "deletion_time")
    if deleted < started:
        what = "scheduled_time" if sched_raw else "creation_time"
        raise InputError(
            f"deletion_time {deleted_raw} is before {what}", source=source, line=line,
            field="deletion_time",
            expected=f"a time at or after {what}, or empty for a pod that never ends",
        )
    return created, deleted - started


def _parse_pods(text: str, source: str) -> list[TracePod]:
    columns, rows = _rows(text, source, POD_COLUMNS, POD_OPTIONAL_COLUMNS)
    i_name, i_cpu, i_mem, i_num, i_milli = (columns[c] for c in POD_COLUMNS)
    i_spec = columns.get("gpu_spec")
    i_qos = columns.get("qos")
    timing_cols = (columns.get("creation_time"), columns.get("deletion_time"),
                   columns.get("scheduled_time"))
    if timing_cols[0] is None and (timing_cols[1] is not None or timing_cols[2] is not None):
        raise InputError("deletion_time/scheduled_time without creation_time", source=source,
                         line=1, expected="creation_time alongside the other time columns")
    pods: list[TracePod] = []
    seen: dict[str, int] = {}
    for index, (line, row) in enumerate(rows):
        name = _unique_name(row[i_name], "pod", "name", seen, source, line)
        cpu = _int(row[i_cpu].strip(), source, line, "cpu_milli", 1)
        mem = _int(row[i_mem].strip(), source, line, "memory_mib", _MILLI_PER_MIB)
        num_gpu = _int(row[i_num].strip(), source, line, "num_gpu", 1000 * MILLI_PER_GPU)
        gpu_milli = _int(row[i_milli].strip(), source, line, "gpu_milli")
        requests: ResourceMap = {CPU: Milli(cpu), MEMORY: Milli(mem * _MILLI_PER_MIB)}
        gpu = _gpu_requests(num_gpu, gpu_milli, source, line)
        requests.update(gpu)
        annotations: dict[str, str] = {}
        if i_spec is not None:
            spec = row[i_spec].strip()
            if spec:
                if "" in (s.strip() for s in spec.split("|")):
                    raise InputError(f"{spec!r} has an empty GPU type", source=source,
                                     line=line, field="gpu_spec", expected=_EXPECT_GPU_SPEC)
                annotations[GPU_SPEC_ANNOTATION] = spec
        if i_qos is not None:
            qos = row[i_qos].strip()
            if qos:
                annotations[QOS_ANNOTATION] = qos
        arrival, duration = _timing(row, timing_cols, index, source, line)
        pod = Pod(
            metadata=ObjectMeta(name=name, namespace=POD_NAMESPACE, annotations=annotations),
            spec=PodSpec(containers=[Container(
                name="main",
                resources=ResourceRequirements(requests=requests, limits=gpu),
            )]),
        )
        pods.append(TracePod(pod, arrival, duration))
    return pods


def read_openb_pods(src: TraceSource) -> list[TracePod]:
    """Read an openb pod list (``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and optional
    ``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time``), plain or gzip."""
    text, source = _read_source(src)
    with _gc_paused():
        return _parse_pods(text, source)


# ---- bundled data ------------------------------------------------------------------------------

def _bundled_text(filename: str) -> tuple[str, str]:
    data = resources.files("kubeberth.sim").joinpath("data").joinpath(filename).read_bytes()
    source = "bundled:" + filename.removesuffix(".gz")
    return _decode(data, source), source


def bundled_nodes() -> list[Node]:
    """The openb cluster shipped with kubeberth: 1,523 nodes, 6,212 GPUs."""
    with _gc_paused():
        return _parse_nodes(*_bundled_text(BUNDLED_NODES))


def bundled_pods() -> list[TracePod]:
    """The openb default workload shipped with kubeberth: 8,152 pods."""
    with _gc_paused():
        return _parse_pods(*_bundled_text(BUNDLED_PODS))


def default_workload() -> Scenario:
    """The bundled openb cluster and default pod list: a realistic run with no input files."""
    return Scenario(
        nodes=bundled_nodes(), pods=bundled_pods(), name="openb-default",
        source="Alibaba GPU trace v2023 (openb, bundled): "
               "openb_node_list_all_node.csv + openb_pod_list_default.csv",
    )


# ---- any trace file, manifests, combining sources ----------------------------------------------

_NODE_LIST, _POD_LIST, _MANIFESTS = "openb node list", "openb pod list", "manifests"
_BUNDLED_CLUSTER = "bundled:openb_node_list_all_node.csv"
_BUNDLED_PODS = "bundled:openb_pod_list_default.csv"
_DEFAULT_NAME = "openb-default"


def _stem(path: Path) -> str:
    if str(path) == STDIN:
        return "stdin"
    name = path.name.removesuffix(".gz")
    return name.rsplit(".", 1)[0] if "." in name and not path.is_dir() else name


def _csv_kind(text: str, source: str, path: Path) -> str:
    """Which trace format ``text`` is, judged by its first line (the CSV header)."""
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    columns = {c.strip() for c in first.split(",")}
    if columns.issuperset(NODE_COLUMNS):
        return _NODE_LIST
    if columns.issuperset(POD_COLUMNS):
        return _POD_LIST
    looks_csv = "," in first and ":" not in first and first.lstrip()[:1] not in ("#", "-", "{", "[")
    if path.name.removesuffix(".gz").endswith(".csv") or looks_csv:
        raise InputError(
            "unrecognised CSV header", source=source, line=1,
            expected=f"an openb node list ({','.join(NODE_COLUMNS)}[,model]) or pod list "
                     f"({','.join(POD_COLUMNS)}[,...])",
        )
    return _MANIFESTS


def _sniff(path: Path) -> tuple[str, str, str]:
    """(format, text for CSVs, source name); directories, stdin and *.yaml are manifests."""
    name = str(path)
    if name == STDIN or path.suffix in MANIFEST_SUFFIXES or path.is_dir():
        return _MANIFESTS, "", name
    text, source = _read_source(path)
    return _csv_kind(text, source, path), text, source


def _without_nodes_and_pods(m: Manifests) -> Manifests:
    return dataclasses.replace(m, nodes=[], pods=[])


def expand_owners(owners: Sequence[Owner], existing: Sequence[Pod] = ()) -> list[TracePod]:
    """The pods each owner creates when it arrives: a Deployment's or ReplicaSet's replicas,
    a StatefulSet's first sync (its missing ordinals, or with OrderedReady the first one), a
    Job's first ``min(parallelism, completions)`` pods, less the ``existing`` live pods its
    template's labels select in its namespace. A DaemonSet's pods, and later pods
    (replacements, scale-ups, a Job's next completions), are created by the simulator's
    controllers."""
    pods: list[TracePod] = []
    for owner in owners:
        if owner.kind == "DaemonSet":
            continue  # its pods depend on the nodes: the simulator creates them on arrival
        if owner.kind == "StatefulSet":
            create, _ = owner.stateful_sync(owner.replicas, owner.ordinals_in(existing))
            pods.extend(TracePod(owner.new_pod(o), owner.arrival, None) for o in create)
            continue
        if owner.kind == "Job":
            count = owner.parallelism if owner.completions is None \
                else min(owner.parallelism, owner.completions)
            duration = owner.pod_duration
        else:
            count, duration = owner.replicas, None
        labels = owner.template.metadata.labels.items()
        count -= sum(1 for p in existing if p.metadata.namespace == owner.namespace
                     and labels <= p.metadata.labels.items()
                     and p.status.phase not in ("Succeeded", "Failed"))
        pods.extend(TracePod(owner.new_pod(), owner.arrival, duration) for _ in range(count))
    return pods


@dataclass(slots=True)
class _Role:
    """What one side (cluster or workload) of a run contributes."""

    nodes: list[Node]
    pods: list[TracePod]
    extras: Manifests
    names: list[str]
    sources: list[str]
    owners: list[Owner] = field(default_factory=list)


def _add_manifests(role: _Role, m: Manifests, cluster: bool) -> None:
    """A side's objects from manifests. Pods in cluster manifests are already there (bound
    ones are placed on their nodes), and an owner there counts them as its own (a cluster
    dump such as ``kubeberth snapshot`` keeps both): it creates only the pods it lacks."""
    for vcjob in m.volcano_jobs():
        raise vcjob.error("Volcano Jobs are not simulated yet", field="apiVersion",
                          expected="batch/v1 Jobs here; run Volcano Jobs through kubeberth "
                                   "explain (docs/volcano.md)")
    if m.nodes and not cluster:
        node = m.nodes[0]
        doc = m.origin("Node", node.metadata.name)
        err = InputError(f"Node {node.metadata.name} is in a workload input", field="kind",
                         expected="only Pods (and the objects they use) in workload inputs; "
                         "Nodes go with the cluster")
        raise doc.locate(err) if doc is not None else err
    role.nodes.extend(m.nodes)
    role.pods.extend(TracePod(p, *pod_timing(p)) for p in m.pods)
    role.extras = _without_nodes_and_pods(m)
    role.owners = load_owners(m)
    role.pods.extend(expand_owners(role.owners, m.pods if cluster else ()))


def _load_role(paths: Sequence[str | os.PathLike[str]], cluster: bool, seed: int) -> _Role:
    role = _Role(nodes=[], pods=[], extras=Manifests(), names=[], sources=[])
    manifest_paths: list[Path] = []
    for raw in paths:
        path = Path(raw)
        kind, text, source = _sniff(path)
        role.names.append(_stem(path))
        role.sources.append(source)
        if kind == _MANIFESTS:
            manifest_paths.append(path)
        elif kind == _NODE_LIST and not cluster:
            raise InputError("an openb node list describes a cluster, not a workload",
                             source=source, expected="an openb pod list or Pod manifests here; "
                             "node lists go with the cluster")
        elif kind == _POD_LIST and cluster:
            raise InputError("an openb pod list describes a workload, not a cluster",
                             source=source, expected="an openb node list or Node manifests here; "
                             "pod lists go with the workload")
        else:
            with _gc_paused():
                if kind == _NODE_LIST:
                    role.nodes.extend(_parse_nodes(text, source))
                else:
                    role.pods.extend(_parse_pods(text, source))
    if manifest_paths:
        _add_manifests(role, load_manifests(manifest_paths, seed=seed), cluster)
    if cluster and not role.nodes:
        raise InputError("no nodes found", source=", ".join(role.sources),
                         expected="an openb node list or manifests with kind: Node")
    return role


def _check_unique(keys: Iterable[tuple[str, str]], what: str) -> None:
    """Objects from different inputs must not share a name: the state keys them by name."""
    seen: dict[str, str] = {}
    for key, source in keys:
        first = seen.get(key)
        if first is not None:
            where = source if first == source else f"{first} and {source}"
            raise InputError(f"{what} {key} is defined twice (in {where})",
                             expected=f"unique {what} names across all inputs")
        seen[key] = source


def _merge_extras(a: Manifests, b: Manifests) -> Manifests:
    """Combine the other objects of cluster and workload manifests, refusing duplicates."""
    for key, doc in b.origins.items():
        first = a.origins.get(key)
        if first is not None:
            kind, namespace, name = key
            shown = f"{namespace}/{name}" if namespace else name
            raise doc.error(f"{kind} {shown} is defined in both the cluster and the workload",
                            field="metadata.name", expected="each object in one input only")
    return Manifests(
        priority_classes=a.priority_classes + b.priority_classes,
        namespaces=a.namespaces + b.namespaces, pdbs=a.pdbs + b.pdbs, other=a.other + b.other,
        workload_api=a.workload_api + b.workload_api, origins={**a.origins, **b.origins},
    )


def load_workload(cluster: Sequence[str | os.PathLike[str]] | None,
                  workload: Sequence[str | os.PathLike[str]] | None, *,
                  seed: int = 0) -> Scenario:
    """Combine a cluster (node lists or manifests with Nodes) and a workload (pod lists or Pod
    manifests); either left out (None or empty) is the bundled openb data. ``seed`` names the
    objects given by ``generateName``.

    Nodes keep input order with openb lists before manifests of the same side; pods from
    cluster manifests (objects already running) come before the workload's pods."""
    if not cluster and not workload:
        return default_workload()
    if cluster:
        c = _load_role(cluster, cluster=True, seed=seed)
    else:
        c = _Role(nodes=bundled_nodes(), pods=[], extras=Manifests(), names=[],
                  sources=[_BUNDLED_CLUSTER])
    cluster_src = ", ".join(c.sources)
    _check_unique(((n.metadata.name, cluster_src) for n in c.nodes), "node")
    if workload:
        w = _load_role(workload, cluster=False, seed=seed + 1)
    else:
        w = _Role(nodes=[], pods=bundled_pods(), extras=Manifests(), names=[],
                  sources=[_BUNDLED_PODS])
    return _scenario(c, w)


def _scenario(c: _Role, w: _Role) -> Scenario:
    cluster_src, workload_src = ", ".join(c.sources), ", ".join(w.sources)
    _check_unique([(tp.pod.key, cluster_src) for tp in c.pods]
                  + [(tp.pod.key, workload_src) for tp in w.pods], "pod")
    name = "+".join(w.names) or _DEFAULT_NAME
    if c.names:
        name += " on " + "+".join(c.names)
    return Scenario(
        nodes=c.nodes, pods=c.pods + w.pods, name=name,
        source=f"cluster: {cluster_src}; workload: {workload_src}",
        extras=_merge_extras(c.extras, w.extras), owners=c.owners + w.owners,
    )


def scenario_from_manifests(cluster: Manifests, workload: Manifests, *, cluster_name: str,
                            workload_name: str) -> Scenario:
    """A run of manifests already loaded (and possibly edited, as ``whatif`` does): the same
    reading as :func:`load_workload` of files."""
    c = _Role(nodes=[], pods=[], extras=Manifests(), names=[cluster_name],
              sources=[cluster_name])
    _add_manifests(c, cluster, cluster=True)
    if not c.nodes:
        raise InputError("no nodes found", source=cluster_name,
                         expected="manifests with kind: Node")
    _check_unique(((n.metadata.name, cluster_name) for n in c.nodes), "node")
    w = _Role(nodes=[], pods=[], extras=Manifests(), names=[workload_name],
              sources=[workload_name])
    _add_manifests(w, workload, cluster=False)
    return _scenario(c, w)
