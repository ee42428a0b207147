"""How a pod asks for GPUs and how a node advertises them, read from ordinary manifests.

Real GPU clusters are not counted in whole nodes: a pod asks for a share of one GPU, for whole
GPUs, or for one of several GPU models. Kubernetes has no built-in field for a GPU share or a
model list, so kubeberth reads them from the extended resources and annotations GPU-sharing
device plugins use (Alibaba's gpushare, which the openb trace comes from, works the same way):

* ``nvidia.com/gpu: N`` (N ≥ 1) in the requests: N whole devices. If the pod also requests
  ``kubeberth.io/gpu-milli`` it must be ``1000 × N``.
* otherwise ``kubeberth.io/gpu-milli: M`` (1 ≤ M ≤ 1000): M thousandths of one device (1000 is
  one whole device).
* annotation ``kubeberth.io/gpu-spec: "T4|V100M16"``: the GPU models the pod accepts (empty or
  absent: any model).
* annotation ``kubeberth.io/gpu-index: "0-1"`` on a bound pod: the devices it holds (as the
  gpushare ``gpu-index`` annotation). Absent, the cluster state picks them.

A node has ``nvidia.com/gpu`` devices in its allocatable (or ``kubeberth.io/gpu-milli`` / 1000
when only the pool is given), each worth 1000 milli-GPU, and its model in the label
``kubeberth.io/gpu-model``. This module only parses; accounting lives in the cluster state.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Node, Pod
from kubeberth.api.resources import GPU, GPU_MILLI

MILLI_PER_GPU = 1000
GPU_MODEL_LABEL = "kubeberth.io/gpu-model"
GPU_SPEC_ANNOTATION = "kubeberth.io/gpu-spec"
GPU_INDEX_ANNOTATION = "kubeberth.io/gpu-index"
_EXPECT_DEMAND = (f"{GPU}: N whole GPUs (with {GPU_MILLI} absent or 1000 × N), or {GPU_MILLI} "
                  "from 1 to 1000 for a share of one GPU")


@dataclass(frozen=True, slots=True)
class GpuDemand:
    """What a pod needs from GPU devices: ``count`` devices with ``milli`` free each (a share
    pod has count 1 and milli below 1000), the accepted models (empty: any) and, for a bound
    pod, the devices its manifest says it holds."""

    count: int = 0
    milli: int = 0
    spec: tuple[str, ...] = ()
    devices: tuple[int, ...] = ()

    @property
    def total_milli(self) -> int:
        return self.count * self.milli

    @property
    def is_share(self) -> bool:
        return self.count == 1 and self.milli < MILLI_PER_GPU


NO_GPU = GpuDemand()


def parse_gpu_spec(raw: str) -> tuple[str, ...]:
    """``"T4|V100M16"`` → ``("T4", "V100M16")``; blanks are ignored, so ``""`` means any model."""
    return tuple(sorted({part.strip() for part in raw.split("|") if part.strip()}))


def _parse_index(raw: str, pod: Pod, count: int) -> tuple[int, ...]:
    field = f"metadata.annotations[{GPU_INDEX_ANNOTATION}]"
    parts = [p.strip() for p in raw.split("-")] if raw.strip() else []
    if not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise InputError(f"pod {pod.key}: {raw!r} is not a list of device indices", field=field,
                         expected="distinct device indices joined by '-', such as 0 or 0-1-2-3")
    if len(parts) != count:
        raise InputError(f"pod {pod.key} holds {len(parts)} device(s) in {raw!r} but asks for "
                         f"{count}", field=field, expected=f"{count} device indices")
    return tuple(sorted(int(p) for p in parts))


def gpu_demand(pod: Pod, requests: dict[str, int]) -> GpuDemand:
    """A pod's GPU demand from its effective requests (milli-units) and annotations."""
    whole = requests.get(GPU, 0)
    pool = requests.get(GPU_MILLI, 0)
    if whole == 0 and pool == 0:
        return NO_GPU
    where = "spec.containers[*].resources.requests"
    if whole:
        if whole % 1000:
            raise InputError(f"pod {pod.key} requests a fraction of {GPU}",
                             field=f"{where}.{GPU}", expected=_EXPECT_DEMAND)
        count, milli = whole // 1000, MILLI_PER_GPU
        if pool and pool != whole * MILLI_PER_GPU:
            raise InputError(f"pod {pod.key} requests {count} {GPU} and {pool // 1000} "
                             f"{GPU_MILLI}", field=f"{where}.{GPU_MILLI}", expected=_EXPECT_DEMAND)
    else:
        count, milli = 1, pool // 1000
        if pool % 1000 or milli > MILLI_PER_GPU:
            raise InputError(f"pod {pod.key} requests {pool / 1000:g} {GPU_MILLI} without "
                             f"{GPU}", field=f"{where}.{GPU_MILLI}", expected=_EXPECT_DEMAND)
    annotations = pod.metadata.annotations
    spec = parse_gpu_spec(annotations.get(GPU_SPEC_ANNOTATION, ""))
    raw_index = annotations.get(GPU_INDEX_ANNOTATION)
    devices = _parse_index(raw_index, pod, count) if raw_index is not None else ()
    return GpuDemand(count, milli, spec, devices)


def node_gpu_count(alloc: dict[str, int]) -> int:
    """Devices a node has, from its allocatable in milli-units."""
    whole = alloc.get(GPU, 0) // 1000
    return whole if whole else alloc.get(GPU_MILLI, 0) // (1000 * MILLI_PER_GPU)


def node_gpu_model(node: Node) -> str:
    return node.metadata.labels.get(GPU_MODEL_LABEL, "")
