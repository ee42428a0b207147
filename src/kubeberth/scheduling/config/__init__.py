"""KubeSchedulerConfiguration v1: types, upstream defaults and the loader."""
