"""CPU instructions per scheduling decision, counted by valgrind: a figure that does not move with
the load of a shared machine, so two versions of the code can be compared on a busy box.

Usage: python bench/instructions.py [--nodes openb|15000] [--pods 1000]
Runs the decision benchmark's loop under ``valgrind --tool=cachegrind`` twice (100 pods, then
100 + ``--pods``) and prints the difference divided by ``--pods``: start-up, imports and data
loading cancel out. The loop runs once natively first, so the numba kernels it reaches are
compiled into their on-disk cache before valgrind runs (compiling under valgrind would take
very long and count the compiler). numba keys its cache by CPU and valgrind reports a CPU of
its own, so every run here compiles for numba's ``generic`` x86-64 (``NUMBA_CPU_NAME``) and
all three share the cache entries. Needs valgrind on PATH; takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from common import pod_stream, scheduler_for, synthetic_nodes

from kubeberth.sim.traces import bundled_nodes
from kubeberth.state.cluster import make_pod_info

BASE_PODS = 100


def run_loop(nodes_spec: str, pods: int) -> None:
    nodes = bundled_nodes() if nodes_spec == "openb" else synthetic_nodes(int(nodes_spec))
    sched, _snap = scheduler_for(nodes)
    for i, tp in enumerate(pod_stream(pods)):
        sched.add(make_pod_info(tp.pod, seq=i))
    while (res := sched.schedule_one()) is not None:
        if res.outcome == "assumed":
            sched.bind(res)


def count(nodes_spec: str, pods: int) -> int:
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
           sys.executable, str(Path(__file__).resolve()), "--loop", "--nodes", nodes_spec,
           "--pods", str(pods)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    match = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if match is None:
        raise SystemExit("valgrind printed no instruction count:\n" + out[-2000:])
    return int(match.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="openb", help="openb, or a synthetic node count")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.loop:
        run_loop(args.nodes, args.pods)
        return
    # Before the first kernel imports numba, which reads it once.
    os.environ["NUMBA_CPU_NAME"] = "generic"
    run_loop(args.nodes, BASE_PODS + args.pods)  # warm-up: fill numba's cache
    small = count(args.nodes, BASE_PODS)
    large = count(args.nodes, BASE_PODS + args.pods)
    print(f"{args.nodes} nodes: {(large - small) / args.pods:,.0f} instructions/decision "
          f"({args.pods} decisions)")


if __name__ == "__main__":
    main()
