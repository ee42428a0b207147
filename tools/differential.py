#!/usr/bin/env python3
"""Differential testing beyond CI's budget: N hypothesis-generated clusters (or the openb trace)
through ``kubeberth explain`` and the upstream oracle (oracle/build.sh builds it).

    tools/differential.py --cases 5000 [--seed 7] [--nodes 8]
    tools/differential.py --openb 3000

Disagreements print both outputs side by side with the shrunk input and keep it under
.cache/oracle/failures/; the exit status is 1 if any.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from tests.oracle import openb  # noqa: E402
from tests.oracle.generate import cluster  # noqa: E402
from tests.oracle.harness import Disagreement, compare  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000, help="generated clusters to try")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--nodes", type=int, default=5, help="most nodes per generated cluster")
    ap.add_argument("--openb", type=int, metavar="PODS", help="compare the openb trace instead")
    ap.add_argument("--openb-nodes", type=int, default=99)
    args = ap.parse_args()
    if args.openb:
        with tempfile.TemporaryDirectory() as d:
            try:
                compare(Path(d), openb.manifests(args.openb, args.openb_nodes), None)
            except Disagreement as e:
                print(e)
                return 1
        print(f"openb: the first {args.openb} decisions agree")
        return 0

    @settings(max_examples=args.cases, deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @seed(args.seed)
    @given(docs=cluster(max_nodes=args.nodes))
    def run(docs: list[dict[str, object]]) -> None:
        with tempfile.TemporaryDirectory() as d:
            compare(Path(d), docs, None)

    try:
        run()
    except Disagreement as e:
        print(e)
        return 1
    print(f"{args.cases} generated clusters agree (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
