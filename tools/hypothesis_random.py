"""Run the property tests (every test module that uses Hypothesis) with a fresh random seed.

CI runs them derandomised (tests/conftest.py: a fixed seed, printed in the pytest header), so a
green CI is reproducible; this script explores new examples instead. It prints the seed first: a
failure is replayed with ``pytest --hypothesis-seed=SEED <test>`` (or
``KUBEBERTH_HYPOTHESIS_SEED=SEED``). CI is unset for the run so the CI profile is not loaded.

    .venv/bin/python tools/hypothesis_random.py               # a random seed
    .venv/bin/python tools/hypothesis_random.py --seed 1234   # a chosen one
    .venv/bin/python tools/hypothesis_random.py -- -x -k quota   # extra pytest arguments
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USES_HYPOTHESIS = re.compile(r"^\s*(from hypothesis\b|import hypothesis\b)", re.M)


def property_modules() -> list[Path]:
    """Test modules that import Hypothesis (helpers that only build strategies excluded)."""
    return sorted(p for p in (ROOT / "tests").rglob("test_*.py")
                  if USES_HYPOTHESIS.search(p.read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="seed (default: a random one)")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**32)
    modules = property_modules()
    print(f"hypothesis seed {seed}: {len(modules)} property test modules", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "KUBEBERTH_HYPOTHESIS_SEED")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
           "-m", "not slow", *[str(m.relative_to(ROOT)) for m in modules], *opts.pytest_args]
    code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    if code != 0:
        print(f"replay: {' '.join(cmd[1:])}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
