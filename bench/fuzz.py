"""A longer fuzz run than the suite's: random inputs to every reader, counting crashes.

    python bench/fuzz.py --inputs 100000 [--seed 1]

Inputs rotate between the quantity parser (random text from the quantity alphabet and hostile
tokens), mutated manifests (examples/ and ../shared conformance cases through every loader,
tests/fuzz/harness.py) and openb CSV rows. A crash is any exception other than InputError; the
first few are printed with the input that caused them. Prints inputs/s and the crash count;
exits 1 if anything crashed.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.harness import (  # noqa: E402
    NODE_HEADER,
    POD_HEADER,
    TOKENS,
    load_everything,
    mutate,
    random_csv_field,
    random_edits,
    read_csvs,
    seeds,
)

from kubeberth.api.errors import InputError  # noqa: E402
from kubeberth.api.quantity import to_milli  # noqa: E402

_ALPHABET = "0123456789.+-eEinumkKMGTP "
_SHOWN = 5


def _quantity(rng: random.Random, _tmp: Path) -> str:
    text = rng.choice(TOKENS) if rng.random() < 0.2 else "".join(
        rng.choice(_ALPHABET) for _ in range(rng.randint(0, 24)))
    for resource in ("cpu", "memory"):
        with contextlib.suppress(InputError):
            to_milli(resource, text)
    return repr(text)


def _manifest(rng: random.Random, tmp: Path) -> str:
    suffix, text = rng.choice(seeds())
    path = tmp / f"input{suffix}"
    path.write_text(mutate(text, random_edits(rng)))
    load_everything(path)
    return str(path)


def _csv(rng: random.Random, _tmp: Path) -> str:
    def rows(header: str, prefix: str) -> str:
        width = header.count(",") + 1
        return header + "\n" + "".join(
            ",".join([f"{prefix}{i}", *(random_csv_field(rng).replace(",", ";")
                                        for _ in range(width - 1))]) + "\n"
            for i in range(rng.randint(0, 4)))

    nodes, pods = rows(NODE_HEADER, "n"), rows(POD_HEADER, "p")
    read_csvs(nodes, pods)
    return f"{nodes!r} / {pods!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=10_000, help="how many inputs to try")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seeds()  # build the seed set before the clock starts
    kinds = (_quantity, _quantity, _manifest, _csv)
    counts = {k.__name__.lstrip("_"): 0 for k in kinds}
    crashes = 0
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for i in range(args.inputs):
            kind = kinds[i % len(kinds)]
            try:
                kind(rng, Path(tmp))
            except Exception:  # every crash is counted and the run goes on
                crashes += 1
                if crashes <= _SHOWN:
                    print(f"crash in {kind.__name__} (input {i}, --seed {args.seed}):",
                          file=sys.stderr)
                    traceback.print_exc()
            counts[kind.__name__.lstrip("_")] += 1
        elapsed = time.perf_counter() - start
    print(f"inputs: {args.inputs} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    print(f"inputs/s: {args.inputs / elapsed:.0f}")
    print(f"crashes: {crashes}")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
