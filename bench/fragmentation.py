"""One fragmentation-experiment run per policy: seconds on one core.

Usage: python bench/fragmentation.py [--policy P ...] [--seed 42] [--tune 1.3] [--repeat 1]
Runs the default openb trace on the 1,213 GPU nodes (as ``kubeberth experiment fragmentation``
does for one grid cell) in this process and prints CPU and wall seconds per policy (the best of
``--repeat`` runs). The target is at most 10 s per run on one core for every policy.
"""

from __future__ import annotations

import argparse
import time

from common import peak_rss_mib

from kubeberth.sim.fragmentation import POLICIES, RunSpec, run_one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", action="append", choices=POLICIES)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--tune", type=float, default=1.3)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for policy in args.policy or POLICIES:
        best_cpu = best_wall = float("inf")
        rows: list[dict[str, object]] = []
        for _ in range(args.repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            rows = run_one(RunSpec(policy, "default", args.seed, args.tune))
            best_cpu = min(best_cpu, time.process_time() - cpu)
            best_wall = min(best_wall, time.perf_counter() - wall)
        last = rows[-1]
        print(f"{policy:>13}: {best_cpu:5.1f} s CPU, {best_wall:5.1f} s wall; at "
              f"{last['arrived_pct']} % arrived: {last['allocated_pct']} % allocated, "
              f"{last['unallocated_gpus']} GPUs unallocated, {last['failed_pods']} pods failed")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
