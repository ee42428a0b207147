"""GPUBudget: an out-of-tree Kueue admission check for kubeberth.

It plays an approval controller (``controllerName: example.com/gpu-budget``) whose parameters
are a ConfigMap: a workload asking more GPUs than ``maxGPUs`` is Rejected (Kueue deactivates
it); the first ``retries`` attempts of any workload get Retry (Kueue releases the quota and
requeues the workload after ``retryAfterSeconds``); otherwise the check turns Ready
``approvalSeconds`` after the quota was reserved (Pending until then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeberth.admission.checks import CheckRequest, Verdict
from kubeberth.api.errors import InputError

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class GPUBudgetArgs:
    max_gpus: int
    approval_seconds: int = 0
    retries: int = 0
    retry_after_seconds: int = 60


def _count(data: Mapping[str, Any], key: str, default: int | None) -> int:
    raw = data.get(key)
    if raw is None:
        if default is None:
            raise InputError(f"data.{key} is missing", field=f"data.{key}",
                             expected="a whole number")
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise InputError(f"data.{key} is {raw!r}", field=f"data.{key}",
                         expected="a whole number") from None
    if value < 0:
        raise InputError(f"data.{key} is negative", field=f"data.{key}",
                         expected="0 or more")
    return value


class GPUBudget:
    NAME = "example.com/gpu-budget"

    @staticmethod
    def parse_args(parameters: Mapping[str, Any] | None) -> GPUBudgetArgs:
        if parameters is None:
            raise InputError("the parameters ConfigMap does not exist",
                             expected="spec.parameters naming a ConfigMap")
        data = parameters.get("data") or {}
        return GPUBudgetArgs(_count(data, "maxGPUs", None), _count(data, "approvalSeconds", 0),
                             _count(data, "retries", 0), _count(data, "retryAfterSeconds", 60))

    @staticmethod
    def evaluate(args: GPUBudgetArgs, request: CheckRequest) -> Verdict:
        admission = request.workload.admission
        assert admission is not None
        milli = sum(psa.resource_usage.get(GPU, 0) for psa in admission.podset_assignments)
        gpus = -(-milli // 1000)
        if gpus > args.max_gpus:
            return Verdict("Rejected", f"asks {gpus} GPUs, the budget allows {args.max_gpus}")
        if request.current.retry_count < args.retries:
            return Verdict("Retry", "the approver is busy",
                           requeue_after_seconds=args.retry_after_seconds)
        approved_at = request.reserved_at + args.approval_seconds
        if request.now >= approved_at:
            return Verdict("Ready", f"{gpus} GPUs approved")
        return Verdict("Pending", "waiting for approval", recheck_at=approved_at)
