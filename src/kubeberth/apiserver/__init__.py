"""kubeberth's embedded Kubernetes-compatible API server (``kubeberth serve``).

It serves enough of the Kubernetes API (discovery, core/v1 nodes, namespaces, pods, events,
priority classes, PDBs, leases, workloads and the CRDs kubeberth models) for kubectl and
ordinary clients, with in-cluster controllers and a fake kubelet, so kubeberth's live
controllers can run and be tested end to end without a real cluster. The in-process entry point
is :class:`EmbeddedServer`; see docs/apiserver.md for what is served and how it deviates.
"""

from kubeberth.apiserver.clock import ManualClock, SystemClock
from kubeberth.apiserver.server import Cluster, EmbeddedServer

__all__ = ["Cluster", "EmbeddedServer", "ManualClock", "SystemClock"]
