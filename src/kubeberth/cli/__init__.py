"""The kubeberth command line."""
