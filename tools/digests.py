"""Digests of every decision the layout must not change, printed as ``name sha256`` lines.

Run it before and after a refactor and diff the two outputs (``tools/digests.py > before.txt``):
- ``kubeberth simulate``'s out/ files with no arguments, and with the spill + Kueue +
  descheduler example (docs/spill.md);
- ``kubeberth experiment fragmentation``'s CSV for the default trace, FGD and BestFit, seed 42;
- the explain / admit / deschedule JSON of every case in ``../shared/conformance``.

Only the CLI (``kubeberth.cli.main:app``) and the conformance tests' case builders are used, so
the script itself is the same on both sides of a move. ``--quick`` skips the two long runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kubeberth.cli.main import app  # noqa: E402


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _invoke(args: list[str], *, errors: bool = False) -> bytes:
    """stdout of a successful run; with ``errors``, a refused input's exit code and message
    count as the answer (two shared Kueue cases are refused on purpose, tests/conformance)."""
    result = CliRunner().invoke(app, args)
    if result.exit_code == 0:
        return result.stdout.encode()
    if errors and result.exit_code == 2:
        return f"exit 2\n{result.output}".replace(str(args[2]), "<input>").encode()
    raise SystemExit(f"kubeberth {' '.join(args)} exited {result.exit_code}:\n{result.output}")


def _tree(name: str, folder: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        yield f"{name}/{path.relative_to(folder)}", _sha(path.read_bytes())


def long_runs(tmp: Path) -> Iterator[tuple[str, str]]:
    out = tmp / "default"
    _invoke(["simulate", "-o", str(out)])
    yield from _tree("simulate-default", out)
    ex = Path("examples") / "spill"  # relative: the run records its input paths
    out = tmp / "spill"
    _invoke(["simulate", "--cluster", str(ex / "cluster.yaml"), "-w", str(ex / "kueue.yaml"),
             "--spill-config", str(ex / "spill.yaml"),
             "--deschedule-policy", str(ex / "descheduler.yaml"), "-o", str(out)])
    yield from _tree("simulate-spill-kueue-descheduler", out)
    out = tmp / "fragmentation"
    _invoke(["experiment", "fragmentation", "--policy", "FGD", "--policy", "BestFit",
             "--seed", "42", "-o", str(out)])
    yield from ((k, v) for k, v in _tree("fragmentation", out) if k.endswith(".csv"))


def conformance(tmp: Path) -> Iterator[tuple[str, str]]:
    from tests.conformance import test_kube_scheduler as ks
    from tests.conformance.casefiles import load_cases
    from tests.conformance.deschedcases import NOW_TEXT, write_case
    from tests.conformance.kueue_casefiles import NOW, case_manifests

    for case in load_cases("kube-scheduler"):
        if case["extension_point"] == "n/a" or case["plugin"] in ks.FUNCTIONS:
            continue
        d = tmp / case["id"]
        d.mkdir()
        (d / "m.yaml").write_text(yaml.safe_dump_all(ks._manifests(case), sort_keys=False))
        (d / "c.yaml").write_text(yaml.safe_dump(ks._config(case), sort_keys=False))
        yield f"explain/{case['id']}", _sha(_invoke(
            ["explain", "-f", str(d / "m.yaml"), "--config", str(d / "c.yaml"), "-o", "json"]))
    for case in load_cases("kueue"):
        d = tmp / case["id"]
        d.mkdir()
        (d / "m.yaml").write_text(yaml.safe_dump_all(case_manifests(case), sort_keys=False))
        for cycles in ("1", "10"):
            yield f"admit/{case['id']}/cycles={cycles}", _sha(_invoke(
                ["admit", "-f", str(d / "m.yaml"), "-o", "json", "--now", NOW,
                 "--cycles", cycles], errors=True))
    for case in load_cases("descheduler"):
        d = tmp / case["id"]
        d.mkdir()
        manifests, policy = write_case(case, d)
        yield f"deschedule/{case['id']}", _sha(_invoke(
            ["deschedule", "-f", str(manifests), "--policy", str(policy), "-o", "json",
             "--now", NOW_TEXT]))


def main() -> None:
    os.chdir(ROOT)  # inputs given relative to the checkout, so two checkouts compare equal
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="conformance JSON only")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        (tmp / "cases").mkdir()
        rows = list(conformance(tmp / "cases"))
        if not ns.quick:
            rows += list(long_runs(tmp))
    for name, digest in rows:
        print(name, digest)


if __name__ == "__main__":
    main()
