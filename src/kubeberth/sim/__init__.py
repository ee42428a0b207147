"""Discrete-event simulation: event loop, traces, metrics, explain."""
