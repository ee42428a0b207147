"""Adapters that run kubeberth's policies against the world over HTTP."""
