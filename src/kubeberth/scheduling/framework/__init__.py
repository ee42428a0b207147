"""Scheduling framework: extension points, statuses, registry, profiles, queue, scheduler."""
