"""Loaders for the upstream YAML kinds: manifests and KubeSchedulerConfiguration v1."""
