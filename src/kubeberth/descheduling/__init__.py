"""The Descheduler: framework (profiles, evictor, limits), registry and plugins."""
