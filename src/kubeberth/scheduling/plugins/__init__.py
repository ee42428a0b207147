"""One module per kube-scheduler plugin, each registered by its upstream NAME."""
