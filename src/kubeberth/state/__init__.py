"""Cluster state: nodes × resources as int64 matrices, and the pods on each node."""

from kubeberth.state.cluster import ClusterState, PodInfo, ResourceIndex, make_pod_info

__all__ = ["ClusterState", "PodInfo", "ResourceIndex", "make_pod_info"]
