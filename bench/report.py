"""What the HTML report adds to ``kubeberth simulate``: importing matplotlib, reading the run
folder back, drawing the figures and writing ``report.html``, for the default trace's outputs.

Usage: python bench/report.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kubeberth.report.output import REPORT_FILE, write_outputs
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import default_workload


def main() -> None:
    wl = default_workload()
    res = Simulation(wl, load_scheduler_config(None), in_tree_registry(), seed=0).run()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_outputs(res, out, {"workload": wl.name, "nodes": len(wl.nodes), "seed": 0,
                                 "config": "default", "kubeberth": "bench"})
        wall0, cpu0 = time.perf_counter(), time.process_time()
        from kubeberth.report.sections import write_run_report  # first import, as simulate

        cpu_import = time.process_time() - cpu0
        write_run_report(out)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        size = (out / REPORT_FILE).stat().st_size
    print(f"report for the default trace: {wall:.2f} s wall, {cpu:.2f} s CPU (importing "
          f"matplotlib {cpu_import:.2f} s of it), {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
