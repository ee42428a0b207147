"""Scheduling decisions per second with the default profile.

Usage: python bench/decisions.py [--pods N]
Prints decisions/s on the 1,523-node openb cluster and on a synthetic 15,000-node cluster.
"""

from __future__ import annotations

import argparse

from common import measure_decisions, peak_rss_mib, synthetic_nodes

from kubeberth.sim.traces import bundled_nodes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for label, nodes in (("openb 1,523 nodes", bundled_nodes()),
                         ("synthetic 15,000 nodes", synthetic_nodes(15000))):
        best = 0.0
        scheduled = 0
        for _ in range(args.repeat):
            rate, scheduled = measure_decisions(nodes, args.pods)
            best = max(best, rate)
        print(f"{label}: {best:,.0f} decisions/s (best of {args.repeat}, {args.pods} pods, "
              f"{scheduled} scheduled)")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
