"""Policies as plugins: scheduling (kube-scheduler), later admission, deschedule, spill."""
