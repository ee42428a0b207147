"""Reading the openb trace (bundled and from files) into Nodes and timed Pods."""

from __future__ import annotations

import gzip
import io
from importlib import resources
from pathlib import Path

import msgspec
import pytest
from tests.paths import SHARED

from kubeberth.api.errors import InputError
from kubeberth.api.objects import ResourceMap
from kubeberth.api.quantity import Milli, enc_hook
from kubeberth.api.resources import GPU, GPU_MILLI, node_allocatable, pod_requests
from kubeberth.sim import traces
from kubeberth.sim.traces import (
    GPU_MODEL_LABEL,
    GPU_SPEC_ANNOTATION,
    OPENB_MAX_PODS,
    QOS_ANNOTATION,
    TracePod,
)

SHARED = SHARED / "data" / "alibaba-gpu-v2023"
MIB = 1024 * 1024 * 1000  # one MiB in milli-bytes

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def numbers(values: ResourceMap) -> dict[str, int]:
    """A trace object's quantities: every one a number already in milli-units, never text."""
    assert all(type(v) is Milli for v in values.values()), values
    return {k: int(v) for k, v in values.items()}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def bundled() -> traces.Scenario:
    return traces.default_workload()


# ---- bundled data ------------------------------------------------------------------------------

def test_bundled_counts(bundled: traces.Scenario) -> None:
    assert len(bundled.nodes) == 1523
    assert len(bundled.pods) == 8152
    gpus = [int(n.status.allocatable.get(GPU, 0)) // 1000 for n in bundled.nodes]
    assert sum(gpus) == 6212
    assert sum(1 for g in gpus if g) == 1213
    assert bundled.name == "openb-default"


def test_bundled_node_resources(bundled: traces.Scenario) -> None:
    by_name = {n.metadata.name: n for n in bundled.nodes}
    cpu_node = by_name["openb-node-0000"]
    assert node_allocatable(cpu_node) == {
        "cpu": 32000, "memory": 262144 * MIB, "pods": OPENB_MAX_PODS * 1000,
    }
    assert cpu_node.metadata.labels == {"kubernetes.io/hostname": "openb-node-0000"}
    gpu_node = by_name["openb-node-1522"]
    alloc = node_allocatable(gpu_node)
    assert alloc[GPU] == 8 * 1000
    assert alloc[GPU_MILLI] == 8000 * 1000
    assert gpu_node.metadata.labels[GPU_MODEL_LABEL] == "G2"
    models = {n.metadata.labels.get(GPU_MODEL_LABEL) for n in bundled.nodes}
    assert models == {None, "G2", "G3", "T4", "P100", "V100M16", "V100M32", "A10"}


def test_bundled_pod_requests(bundled: traces.Scenario) -> None:
    by_name = {tp.pod.metadata.name: tp for tp in bundled.pods}
    whole = by_name["openb-pod-0000"]  # 12000,16384,1,1000
    assert pod_requests(whole.pod) == {
        "cpu": 12000, "memory": 16384 * MIB, GPU: 1000, GPU_MILLI: 1000 * 1000,
    }
    share = by_name["openb-pod-0001"]  # 6000,12288,1,460
    assert pod_requests(share.pod) == {"cpu": 6000, "memory": 12288 * MIB, GPU_MILLI: 460 * 1000}
    assert share.pod.metadata.annotations == {QOS_ANNOTATION: "LS"}
    assert share.pod.metadata.namespace == "default"
    kinds = {"cpu": 0, "share": 0, "whole": 0, "multi": 0}
    for tp in bundled.pods:
        reqs = pod_requests(tp.pod)
        gpus = reqs.get(GPU, 0) // 1000
        if GPU_MILLI not in reqs:
            kinds["cpu"] += 1
        elif gpus == 0:
            kinds["share"] += 1
            assert 0 < reqs[GPU_MILLI] < 1000 * 1000
        else:
            kinds["whole" if gpus == 1 else "multi"] += 1
            assert reqs[GPU_MILLI] == gpus * 1000 * 1000
    assert kinds == {"cpu": 1088, "share": 3078, "whole": 3911, "multi": 75}


def test_bundled_timing(bundled: traces.Scenario) -> None:
    by_name = {tp.pod.metadata.name: tp for tp in bundled.pods}
    # openb-pod-0001: created 427061, scheduled 427061, deleted 12902960.
    assert by_name["openb-pod-0001"].arrival == 427061.0
    assert by_name["openb-pod-0001"].duration == 12902960.0 - 427061.0
    assert all(tp.duration is not None and tp.duration >= 0 for tp in bundled.pods)
    arrivals = [tp.arrival for tp in bundled.pods]
    assert arrivals == sorted(arrivals)


def test_reading_is_deterministic() -> None:
    first = traces.default_workload()
    second = traces.default_workload()
    def enc(obj: object) -> bytes:
        return msgspec.json.encode(obj, enc_hook=enc_hook)

    assert enc(first.nodes) == enc(second.nodes)
    assert [(enc(tp.pod), tp.arrival, tp.duration) for tp in first.pods] == [
        (enc(tp.pod), tp.arrival, tp.duration) for tp in second.pods
    ]


@pytest.mark.parametrize("name", ["openb_node_list_all_node.csv", "openb_pod_list_default.csv"])
def test_bundled_gzip_round_trips(name: str) -> None:
    data = resources.files("kubeberth.sim").joinpath("data").joinpath(name + ".gz").read_bytes()
    # Deterministic gzip: no FNAME/FEXTRA/FCOMMENT flags and a zero mtime.
    assert data[:4] == b"\x1f\x8b\x08\x00"
    assert data[4:8] == b"\x00\x00\x00\x00"
    original = SHARED / name
    if not original.exists():
        pytest.skip(f"{original} not available")
    assert gzip.decompress(data) == original.read_bytes()


def test_bundled_data_docs_ship_with_the_package() -> None:
    data = resources.files("kubeberth.sim").joinpath("data")
    readme = data.joinpath("README.md").read_text()
    assert "Fragmentation Gradient Descent" in readme
    assert "research or study" in readme
    licence = data.joinpath("LICENSE-apache-2.0-from-kubernetes-scheduler-simulator.txt")
    assert "Apache License" in licence.read_text()


# ---- small files -------------------------------------------------------------------------------

def test_nodes_from_plain_gzip_and_stream(tmp_path: Path) -> None:
    text = NODE_HEADER + "n1,8000,16384,0,\nn2,64000,262144,2,T4\n"
    plain = write(tmp_path, "nodes.csv", text)
    packed = tmp_path / "nodes.csv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    results = [traces.read_openb_nodes(plain), traces.read_openb_nodes(str(packed)),
               traces.read_openb_nodes(io.StringIO(text))]
    for nodes in results:
        assert [n.metadata.name for n in nodes] == ["n1", "n2"]
        assert GPU not in nodes[0].status.allocatable
        assert numbers(nodes[1].status.allocatable) == {
            "cpu": 64000, "memory": 262144 * MIB, "pods": OPENB_MAX_PODS * 1000, GPU: 2000,
            GPU_MILLI: 2000 * 1000,
        }
        assert nodes[1].metadata.labels == {"kubernetes.io/hostname": "n2", GPU_MODEL_LABEL: "T4"}


def test_node_model_column_is_optional() -> None:
    nodes = traces.read_openb_nodes(io.StringIO("sn,cpu_milli,memory_mib,gpu\nn1,1000,1024,1\n"))
    assert nodes[0].metadata.labels == {"kubernetes.io/hostname": "n1"}


def test_pod_kinds_and_annotations() -> None:
    text = POD_HEADER + (
        "cpu,4000,8192,0,0,,BE,Running,0,100,0\n"
        "share,2000,4096,1,250,T4|P100,LS,Running,1,101,1\n"
        "whole,8000,0,1,1000,,,Running,2,102,2\n"
        "multi,16000,65536,4,1000,V100M32,Burstable,Running,3,103,3\n"
    )
    pods = {tp.pod.metadata.name: tp.pod for tp in traces.read_openb_pods(io.StringIO(text))}
    assert numbers(pods["cpu"].spec.containers[0].resources.requests) == {
        "cpu": 4000, "memory": 8192 * MIB}
    assert pods["cpu"].spec.containers[0].resources.limits == {}
    share = pods["share"].spec.containers[0].resources
    assert numbers(share.requests) == {"cpu": 2000, "memory": 4096 * MIB, GPU_MILLI: 250_000}
    assert numbers(share.limits) == {GPU_MILLI: 250_000}
    assert pods["share"].metadata.annotations == {
        GPU_SPEC_ANNOTATION: "T4|P100", QOS_ANNOTATION: "LS",
    }
    # An explicit zero memory request stays explicit (it is not defaulted to 200Mi in scoring).
    assert numbers(pods["whole"].spec.containers[0].resources.requests) == {
        "cpu": 8000, "memory": 0, GPU: 1000, GPU_MILLI: 1000 * 1000,
    }
    assert pods["whole"].metadata.annotations == {}
    assert pod_requests(pods["multi"]) == {
        "cpu": 16000, "memory": 65536 * MIB, GPU: 4000, GPU_MILLI: 4000 * 1000,
    }
    assert len(pods["multi"].spec.containers) == 1


def test_pod_timing_rules() -> None:
    text = POD_HEADER + (
        "ran,1000,1024,0,0,,LS,Succeeded,10,100,40\n"  # scheduled: runs deletion - scheduled
        "never,1000,1024,0,0,,LS,Pending,20,50,\n"  # never scheduled: deletion - creation
        "forever,1000,1024,0,0,,LS,Running,30,,35\n"  # no deletion: runs forever
        "frac,1000,1024,0,0,,LS,Running,1.5,4,2.5\n"
    )
    got = [(tp.pod.metadata.name, tp.arrival, tp.duration)
           for tp in traces.read_openb_pods(io.StringIO(text))]
    assert got == [
        ("ran", 10.0, 60.0), ("never", 20.0, 30.0), ("forever", 30.0, None),
        ("frac", 1.5, 1.5),
    ]


def test_pods_without_time_columns_arrive_in_row_order() -> None:
    text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\na,1000,1024,2,1000\nb,1000,1024,0,0\n"
    pods = traces.read_openb_pods(io.StringIO(text))
    assert [(tp.pod.metadata.name, tp.arrival, tp.duration) for tp in pods] == [
        ("a", 0.0, None), ("b", 1.0, None),
    ]
    assert all(isinstance(tp, TracePod) for tp in pods)


# ---- broken input ------------------------------------------------------------------------------

NODE_ROW = "n1,8000,16384,1,T4"
BROKEN_NODES = [
    ("n2,8000,16384", "sn,cpu_milli,memory_mib,gpu,model", "the row has 3 fields"),
    ("n2,8k,16384,0,", "cpu_milli", "whole number"),
    ("n2,8000,-1,0,", "memory_mib", "non-negative"),
    ("n2,8000,1024,1.5,T4", "gpu", "whole number"),
    (",8000,1024,0,", "sn", "empty node name"),
    ("n1,8000,1024,0,", "sn", "already appears on line 2"),
]


@pytest.mark.parametrize(("row", "field", "message"), BROKEN_NODES)
def test_broken_node_rows(tmp_path: Path, row: str, field: str, message: str) -> None:
    path = write(tmp_path, "nodes.csv", NODE_HEADER + NODE_ROW + "\n" + row + "\n")
    with pytest.raises(InputError) as info:
        traces.read_openb_nodes(path)
    text = str(info.value)
    assert f"{path}:3:" in text
    assert field in text
    assert message in text
    assert "Expected" in text
    assert info.value.line == 3


POD_ROW = "ok,1000,1024,1,500,,LS,Running,0,10,0"
BROKEN_PODS = [
    ("p,1000,1024,1,500", "the row has 5 fields", "11 comma-separated fields"),
    ("p,abc,1024,0,0,,LS,Running,0,10,0", "field cpu_milli", "non-negative whole number"),
    ("p,1000,-5,0,0,,LS,Running,0,10,0", "field memory_mib", "non-negative whole number"),
    ("p,1000,1024,-1,0,,LS,Running,0,10,0", "field num_gpu", "non-negative whole number"),
    ("p,1000,1024,1,0,,LS,Running,0,10,0", "field gpu_milli", "1 to 999 for a share"),
    ("p,1000,1024,0,300,,LS,Running,0,10,0", "field gpu_milli", "num_gpu is 0"),
    ("p,1000,1024,1,1500,,LS,Running,0,10,0", "field gpu_milli", "1000 for whole GPUs"),
    ("p,1000,1024,2,500,,LS,Running,0,10,0", "field gpu_milli", "multi-GPU pods take whole"),
    ("p,1000,1024,0,0,T4||P100,LS,Running,0,10,0", "field gpu_spec", "separated by '|'"),
    ("p,1000,1024,0,0,,LS,Running,,10,0", "field creation_time", "number of seconds"),
    ("p,1000,1024,0,0,,LS,Running,nan,10,0", "field creation_time", "number of seconds"),
    ("p,1000,1024,0,0,,LS,Running,-3,10,0", "field creation_time", "number of seconds"),
    ("p,1000,1024,0,0,,LS,Running,5,10,4", "field scheduled_time", "after creation_time"),
    ("p,1000,1024,0,0,,LS,Running,5,7,8", "field deletion_time", "after scheduled_time"),
    ("p,1000,1024,0,0,,LS,Pending,5,4,", "field deletion_time", "after creation_time"),
    (",1000,1024,0,0,,LS,Running,0,10,0", "field name", "empty pod name"),
    ("ok,1000,1024,0,0,,LS,Running,0,10,0", "field name", "already appears on line 2"),
]


@pytest.mark.parametrize(("row", "field", "message"), BROKEN_PODS)
def test_broken_pod_rows(tmp_path: Path, row: str, field: str, message: str) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + POD_ROW + "\n" + row + "\n")
    with pytest.raises(InputError) as info:
        traces.read_openb_pods(path)
    text = str(info.value)
    assert f"{path}:3:" in text
    assert field in text
    assert message in text
    assert "Expected" in text


@pytest.mark.parametrize(("text", "message"), [
    ("", "the file is empty"),
    ("name,cpu_milli,memory_mib\n", "missing column(s) num_gpu, gpu_milli"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,name\n", "appears twice"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,scheduled_time\n", "without creation_time"),
])
def test_broken_pod_headers(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "pods.csv", text)
    with pytest.raises(InputError) as info:
        traces.read_openb_pods(path)
    assert f"{path}:1:" in str(info.value)
    assert message in str(info.value)


def test_unreadable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read file"):
        traces.read_openb_pods(tmp_path / "missing.csv")
    bad_gzip = tmp_path / "pods.csv.gz"
    bad_gzip.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(InputError, match="gzip"):
        traces.read_openb_pods(bad_gzip)
    latin = tmp_path / "nodes.csv"
    latin.write_bytes(NODE_HEADER.encode() + b"n\xe9,1000,1024,0,\n")
    with pytest.raises(InputError, match="UTF-8"):
        traces.read_openb_nodes(latin)


# ---- every published openb file ----------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "openb_node_list_gpu_node.csv", "openb_pod_list_gpuspec33.csv", "openb_pod_list_cpu300.csv",
    "openb_pod_list_gpushare100.csv", "openb_pod_list_multigpu50.csv",
])
def test_shared_variants_load(name: str) -> None:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    rows = len(path.read_text().splitlines()) - 1
    if "node" in name:
        assert len(traces.read_openb_nodes(path)) == rows
        return
    pods = traces.read_openb_pods(path)
    assert len(pods) == rows
    if "multigpu" in name:
        assert [tp.arrival for tp in pods[:3]] == [0.0, 1.0, 2.0]
        assert all(tp.duration is None for tp in pods)
    if "gpuspec" in name:
        assert any(GPU_SPEC_ANNOTATION in tp.pod.metadata.annotations for tp in pods)


# ---- any input, manifests and combining cluster with workload ---------------------------------

NODES_CSV = NODE_HEADER + "n1,8000,16384,0,\nn2,64000,262144,2,T4\n"
PODS_CSV = POD_HEADER + "p1,1000,1024,1,500,,LS,Running,5,50,10\n"
CLUSTER_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: m1
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata:
  name: running
spec:
  nodeName: m1
  containers:
  - name: c
    resources: {requests: {cpu: 500m}}
"""
WORKLOAD_YAML = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: job
  annotations:
    kubeberth.io/arrival-seconds: "30"
    kubeberth.io/duration-seconds: "2.5"
spec:
  priorityClassName: high
  containers:
  - name: c
    resources: {requests: {cpu: "1"}}
"""


def test_inputs_are_judged_by_content(tmp_path: Path) -> None:
    # Names without a telling suffix: the content decides.
    cluster = write(tmp_path, "cluster.txt", NODES_CSV)
    packed = tmp_path / "pods.data.gz"
    packed.write_bytes(gzip.compress(PODS_CSV.encode()))
    wl = traces.load_workload([cluster], [packed])
    assert [n.metadata.name for n in wl.nodes] == ["n1", "n2"]
    assert [(tp.pod.metadata.name, tp.arrival, tp.duration) for tp in wl.pods] == [
        ("p1", 5.0, 40.0),
    ]
    manifest = traces.load_workload([cluster], [write(tmp_path, "objects", WORKLOAD_YAML)])
    assert [n.metadata.name for n in manifest.nodes] == ["n1", "n2"]
    assert [(tp.pod.key, tp.arrival, tp.duration) for tp in manifest.pods] == [
        ("default/job", 30.0, 2.5),
    ]
    assert [pc.metadata.name for pc in manifest.extras.priority_classes] == ["high"]
    assert manifest.extras.pods == []


def test_unknown_csv_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "odd.csv", "host,cores\nx,4\n")
    with pytest.raises(InputError) as info:
        traces.load_workload([path], [write(tmp_path, "objects", WORKLOAD_YAML)])
    assert f"{path}:1:" in str(info.value)
    assert "unrecognised CSV header" in str(info.value)


def test_load_workload_defaults_to_bundled() -> None:
    wl = traces.load_workload(None, None)
    assert (len(wl.nodes), len(wl.pods), wl.name) == (1523, 8152, "openb-default")
    assert traces.load_workload([], []).name == "openb-default"


def test_load_workload_custom_cluster_with_bundled_pods(tmp_path: Path) -> None:
    wl = traces.load_workload([write(tmp_path, "small.csv", NODES_CSV)], None)
    assert [n.metadata.name for n in wl.nodes] == ["n1", "n2"]
    assert len(wl.pods) == 8152
    assert wl.name == "openb-default on small"
    assert "small.csv" in wl.source
    assert "bundled:openb_pod_list_default.csv" in wl.source


def test_load_workload_combines_manifests_and_csvs(tmp_path: Path) -> None:
    cluster = [write(tmp_path, "cluster.yaml", CLUSTER_YAML),
               write(tmp_path, "nodes.csv", NODES_CSV)]
    workload = [write(tmp_path, "pods.csv", PODS_CSV),
                write(tmp_path, "jobs.yaml", WORKLOAD_YAML)]
    wl = traces.load_workload(cluster, workload)
    # openb lists first, then manifests, on each side; cluster pods before workload pods.
    assert [n.metadata.name for n in wl.nodes] == ["n1", "n2", "m1"]
    assert [tp.pod.key for tp in wl.pods] == ["default/running", "default/p1", "default/job"]
    assert wl.pods[0].pod.spec.node_name == "m1"
    assert [pc.metadata.name for pc in wl.extras.priority_classes] == ["high"]
    assert wl.name == "pods+jobs on cluster+nodes"


@pytest.mark.parametrize(("cluster", "workload", "message"), [
    ({"pods.csv": PODS_CSV}, None, "describes a workload, not a cluster"),
    (None, {"nodes.csv": NODES_CSV}, "describes a cluster, not a workload"),
    (None, {"c.yaml": CLUSTER_YAML}, "Node m1 is in a workload input"),
    ({"w.yaml": WORKLOAD_YAML}, None, "no nodes found"),
    ({"a.csv": NODES_CSV, "b.csv": NODES_CSV}, None, "node n1 is defined twice"),
    ({"c.yaml": CLUSTER_YAML}, {"w.yaml": CLUSTER_YAML.split("---\n")[1]},
     "pod default/running is defined twice"),
])
def test_load_workload_rejects_misplaced_inputs(
    tmp_path: Path, cluster: dict[str, str] | None, workload: dict[str, str] | None,
    message: str,
) -> None:
    def paths(files: dict[str, str] | None) -> list[Path] | None:
        return None if files is None else [write(tmp_path, n, t) for n, t in files.items()]

    with pytest.raises(InputError) as info:
        traces.load_workload(paths(cluster), paths(workload))
    assert message in str(info.value)


def test_workload_node_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", WORKLOAD_YAML + "---\n" + CLUSTER_YAML)
    with pytest.raises(InputError) as info:
        traces.load_workload(None, [path])
    assert info.value.source is not None and info.value.source.endswith("w.yaml")
    assert info.value.line == 21  # the second document's "kind: Node"


def test_priority_class_in_both_sides_is_rejected(tmp_path: Path) -> None:
    pc = WORKLOAD_YAML.split("---\n")[0]
    cluster = [write(tmp_path, "c.yaml", CLUSTER_YAML + "---\n" + pc)]
    with pytest.raises(InputError, match="PriorityClass high is defined in both"):
        traces.load_workload(cluster, [write(tmp_path, "w.yaml", WORKLOAD_YAML)])
