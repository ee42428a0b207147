"""Object model: Kubernetes objects, quantities, effective requests and selectors."""

from kubeberth.api.errors import InputError, KubeberthError
from kubeberth.api.objects import (
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
)

__all__ = [
    "InputError",
    "KubeberthError",
    "Namespace",
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "PriorityClass",
]
