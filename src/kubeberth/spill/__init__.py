"""Spill capacity: the virtual-kubelet node model, the free-GPU signal and the taint controller.

The policy (``controller.step``) is a pure function from the previous state and one signal
reading to the next state and at most one taint change; the simulator and a live adapter apply
the change to the VK node. Signal sources are its inputs: computed from the cluster snapshot
(``signal.ClusterSignal``) or read from Prometheus (``prometheus.PrometheusSignal``) with the
production query of ``promql.free_gpu_query``. See docs/spill.md.
"""
