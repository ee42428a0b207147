"""Kueue admission as pure policy: quota tree, flavor assignment, preemption, queues, cycles.

The entry point for a simulator or a live controller is :func:`run_cycle`: it takes an
:class:`AdmissionState` and a time and returns the workloads admitted (with their Kueue
``status.admission``), the preemptions issued and the reasons the other heads wait, plus the
next state. The caller applies them (ungate pods with :func:`admitted_pod`, evict victims) and
reports back with :func:`finish_evictions` and :func:`finish_workloads`.
"""

from kubeberth.admission.cycle import (
    AdmissionState,
    CycleResult,
    finish_evictions,
    finish_workloads,
    mark_pods_ready,
    pods_ready_timeout,
    run_cycle,
)
from kubeberth.admission.pods import admitted_pod, gated_pod

__all__ = [
    "AdmissionState",
    "CycleResult",
    "admitted_pod",
    "finish_evictions",
    "finish_workloads",
    "gated_pod",
    "mark_pods_ready",
    "pods_ready_timeout",
    "run_cycle",
]
