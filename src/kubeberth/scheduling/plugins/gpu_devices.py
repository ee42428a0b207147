"""GpuDevices: device-level GPU fit, GPU model constraints, and which devices a pod takes.

The node-level pool ``kubeberth.io/gpu-milli`` cannot see that two half-free GPUs do not make
one free GPU, so this plugin filters on the devices themselves (as the gpushare scheduler
plugin the FGD artifact calls Open-Gpu-Share): a share pod needs one device with at least its
milli-GPU free, a pod of N whole GPUs needs N fully free devices, and a pod with a
``kubeberth.io/gpu-spec`` list needs a node whose ``kubeberth.io/gpu-model`` is in it.

Reserve picks the devices on the chosen node: the choice a score plugin recorded (FGD records
one), else ``deviceSelection`` — ``BestFit`` (default: the fitting device with the least free),
``WorstFit`` or ``Random`` (seeded). Whole-GPU pods always take the lowest-numbered free
devices. This is the one device choice for the pod: the scheduler assumes it with its devices
still open, and the state makes its own (best-fit) choice only for pods no Reserve plugin chose
for. Giving the reservation back (Unreserve, then the scheduler forgetting the pod) returns the
devices through the state, so Unreserve itself has nothing to undo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeberth.api.errors import InputError
from kubeberth.scheduling.framework.cycle_state import CycleState
from kubeberth.scheduling.framework.handle import Handle
from kubeberth.scheduling.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubeberth.scheduling.framework.status import SKIP, SUCCESS, Code, FilterResult, Status
from kubeberth.scheduling.plugins.gpu_common import DEVICE_CHOICE_KEY, DeviceChoice
from kubeberth.scheduling.plugins.helper import all_pass, args_mapping, args_str, reject_unknown
from kubeberth.state.cluster import ClusterState, IntArray, PodInfo
from kubeberth.state.gpu import best_fit_devices, random_devices, worst_fit_devices

NAME = "GpuDevices"
BEST_FIT, WORST_FIT, RANDOM = "BestFit", "WorstFit", "Random"
SELECTIONS = (BEST_FIT, WORST_FIT, RANDOM)
REASON_NO_GPU = "node(s) had no GPU"
REASON_MODEL = "node(s) had a GPU model the pod does not accept"
REASON_DEVICES = "node(s) had no GPU device with enough free capacity"
_REASONS: list[tuple[str, ...]] = [(), (REASON_NO_GPU,), (REASON_MODEL,), (REASON_DEVICES,)]


@dataclass(frozen=True, slots=True)
class GpuDevicesArgs:
    device_selection: str = BEST_FIT

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> GpuDevicesArgs:
        raw = args_mapping(raw)
        reject_unknown(raw, ("deviceSelection",), None)
        selection = args_str(raw, "deviceSelection", None, BEST_FIT)
        if selection not in SELECTIONS:
            raise InputError(f"Unsupported value: {selection!r}", field="deviceSelection",
                             expected=" | ".join(SELECTIONS))
        return cls(selection)


class GpuDevices(PreFilterPlugin, FilterPlugin, ReservePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, args: GpuDevicesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snap: ClusterState) -> tuple[PreFilterResult | None, Status]:
        """Pods without GPUs skip the Filter."""
        if pod.gpu.count == 0:
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, snap: ClusterState,
               nodes: IntArray) -> FilterResult:
        gpu = pod.gpu
        if gpu.count == 0:
            return all_pass(len(nodes))
        gpus = snap.gpus
        enough = gpus.fitting_devices(nodes, gpu.milli) >= gpu.count
        allowed = gpus.model_allowed(nodes, gpu.spec) if gpu.spec else None
        if enough.all() and (allowed is None or allowed.all()):
            return all_pass(len(nodes))
        # Reasons by precedence: no GPU at all, then the model, then the devices.
        reason = np.where(enough, 0, 3).astype(np.int32)
        if allowed is not None:
            reason[~allowed] = 2
        reason[gpus.count[nodes] == 0] = 1
        codes = np.where(reason == 3, np.int8(Code.UNSCHEDULABLE),
                         np.int8(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)).astype(np.int8)
        codes[reason == 0] = 0
        return FilterResult(codes, reason, list(_REASONS))

    def devices_for(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                    node: int) -> tuple[int, ...]:
        """The devices this pod should hold on ``node``."""
        gpus = snap.gpus
        free = gpus.free[node, : gpus.count[node]]
        if pod.gpu.is_share:
            choice = state.get(DEVICE_CHOICE_KEY)
            if isinstance(choice, DeviceChoice):
                device = choice.on(node)
                if device is not None:
                    return (device,)
            if self.args.device_selection == RANDOM:
                return random_devices(free, pod.gpu, self.handle.rng)
            if self.args.device_selection == WORST_FIT:
                return worst_fit_devices(free, pod.gpu)
        return best_fit_devices(free, pod.gpu)

    def reserve(self, state: CycleState, pod: PodInfo, snap: ClusterState,
                node: int) -> Status:
        if pod.gpu.count == 0:
            return SUCCESS
        held = pod.gpu_devices
        # Devices are judged with this pod's own claim given back.
        if held:
            snap.gpus.give_back(node, pod.gpu, held)
        try:
            devices = self.devices_for(state, pod, snap, node)
        finally:
            if held:
                snap.gpus.take(node, pod.gpu, held)
        if not devices:
            return Status(Code.UNSCHEDULABLE, (REASON_DEVICES,))
        try:
            snap.place_gpu_devices(pod, devices)
        except RuntimeError as err:
            return Status(Code.UNSCHEDULABLE, (str(err),))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, snap: ClusterState, node: int) -> None:
        """Nothing to undo here: the scheduler forgets the assumed pod right after, and the
        cluster state returns its devices then."""

    def events_to_register(self) -> list[ClusterEvent]:
        """Devices come free when a pod goes; nodes with GPUs arrive or change."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "UpdateNodeAllocatable"),
                ClusterEvent("Node", "UpdateNodeLabel")]


def new(args: Mapping[str, Any] | None, handle: Handle) -> GpuDevices:
    return GpuDevices(GpuDevicesArgs.parse(args), handle)
