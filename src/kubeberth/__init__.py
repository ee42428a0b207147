"""kubeberth: decide where GPU work runs on Kubernetes, in simulation and live."""

__version__ = "0.1.0"
