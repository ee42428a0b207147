"""CPU seconds to read the bundled openb trace and compute every object's requests.

    python bench/trace_load.py [--repeat 5]

Each repeat runs in a fresh process (the quantity cache would otherwise make later repeats
free), so old and new code can be alternated with ``PYTHONPATH=<checkout>/src``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def once() -> float:
    from kubeberth.api.resources import node_allocatable, pod_non_zero_requests, pod_requests
    from kubeberth.sim.traces import bundled_nodes, bundled_pods

    start = time.process_time()
    for node in bundled_nodes():
        node_allocatable(node)
    for tp in bundled_pods():
        pod_requests(tp.pod)
        pod_non_zero_requests(tp.pod)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(f"{once():.4f}")
        return
    runs = [float(subprocess.run([sys.executable, __file__, "--once"], check=True,
                                 capture_output=True, text=True).stdout)
            for _ in range(args.repeat)]
    print(f"trace load: best {min(runs):.3f} s, median {sorted(runs)[len(runs) // 2]:.3f} s "
          f"CPU over {len(runs)} processes")


if __name__ == "__main__":
    main()
