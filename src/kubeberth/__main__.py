"""``python -m kubeberth`` runs the command line."""

from kubeberth.cli.main import main

main()
