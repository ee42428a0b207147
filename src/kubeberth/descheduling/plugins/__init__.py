"""One module per descheduler plugin, each registered by its upstream NAME."""
