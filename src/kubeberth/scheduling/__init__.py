"""kube-scheduler: the scheduling framework, its plugins, registry and configuration."""
