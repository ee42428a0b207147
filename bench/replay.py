"""Wall time of the full default-trace replay (``kubeberth simulate`` with no arguments).

Usage: python bench/replay.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time

from common import peak_rss_mib

from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.scheduling.registry import in_tree_registry
from kubeberth.sim.engine import Simulation
from kubeberth.sim.traces import default_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    times = []
    decisions = 0
    for _ in range(args.repeat):
        wl = default_workload()
        start = time.perf_counter()
        sim = Simulation(wl, load_scheduler_config(None), in_tree_registry(), seed=0)
        res = sim.run()
        times.append(time.perf_counter() - start)
        decisions = res.decisions
    print(f"default trace replay: best {min(times):.2f} s, median "
          f"{sorted(times)[len(times) // 2]:.2f} s over {args.repeat} runs "
          f"({decisions} decisions, {len(wl.pods)} pods, {len(wl.nodes)} nodes)")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
