"""Mutation testing of the decision cores with mutmut: does a planted bug fail a test?

Each target is one module family (scoring, quota, PDB, spill, FGD) with the tests that should
guard it. For each, the project's ``src`` and ``tests`` are copied into
``.cache/mutation/<target>/`` with a ``[tool.mutmut]`` section that mutates only the target's
files and runs only its tests, and ``mutmut run`` plants every mutant (one at a time, in a forked
pytest). The result is a score per target (killed / all mutants) and every surviving mutant's
diff, printed and written to ``.cache/mutation/summary.json``.

    .venv/bin/python tools/mutation.py                 # every target, one after the other
    .venv/bin/python tools/mutation.py spill fgd       # some targets
    .venv/bin/python tools/mutation.py --list
    .venv/bin/python tools/mutation.py --report        # the verdicts of the last runs again
    .venv/bin/python tools/mutation.py --jobs 1 quota  # one mutant at a time (a shared machine)

Needs mutmut (in the dev extras). docs/testing.md records the last score and explains each
survivor that no test kills.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "mutation"


@dataclass(frozen=True)
class Target:
    name: str
    modules: tuple[str, ...]  # under src/
    tests: tuple[str, ...]  # pytest selection, relative to the checkout
    only: tuple[str, ...] = ()  # mutant name globs (default: every function of the modules)


TARGETS = {t.name: t for t in (
    # The scoring half of NodeResourcesFit (its arithmetic kernels are numba-compiled in
    # resource_kernels.py, which mutmut's trampolines cannot enter): strategy and shape
    # parsing, the per-resource plan, PreScore and Score.
    Target("scoring", ("kubeberth/scheduling/plugins/node_resources_fit.py",),
           ("tests/scheduling/plugins/test_node_resources_fit.py",
            "tests/scheduling/plugins/test_resource_kernels.py"),
           only=tuple(f"kubeberth.scheduling.plugins.node_resources_fit.{f}__mutmut_*" for f in (
               "x__parse_strategy", "x__validate_shape", "x_pod_score_requests",
               "x_score_plan", "xǁNodeResourcesFitǁ_plan", "xǁNodeResourcesFitǁpre_score",
               "xǁNodeResourcesFitǁscore"))),
    Target("quota", ("kubeberth/admission/quota.py",),
           ("tests/admission", "tests/conformance/test_kueue.py")),
    Target("pdb", ("kubeberth/state/disruption.py",),
           ("tests/state/test_disruption.py", "tests/state/test_disruption_edges.py",
            "tests/descheduling/test_pdb.py",
            "tests/scheduling/plugins/test_default_preemption.py")),
    Target("spill", ("kubeberth/spill/policy.py",),
           ("tests/spill/test_controller.py", "tests/spill/test_policy_edges.py")),
    Target("fgd", ("kubeberth/state/fragmentation.py",
                   "kubeberth/scheduling/plugins/fgd_score.py"),
           ("tests/scheduling/plugins/test_gpu_plugins.py",
            "tests/scheduling/plugins/test_fgd_paper.py",
            "tests/scheduling/plugins/test_fgd_edges.py")),
)}


# Every surviving mutant's diff in one process (``mutmut show`` once per mutant is slow).
_DIFFS = """
import json, sys
from mutmut.__main__ import find_mutant, get_diff_for_mutant
print(json.dumps({n: get_diff_for_mutant(n, path=find_mutant(n).path) for n in sys.argv[1:]}))
"""


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(target: Target) -> Path:
    """A fresh copy of the checkout's code and tests, configured for this target."""
    work = WORK / target.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # tests/paths.py finds ../shared beside the copy that pytest runs in (mutants/).
    (work / "shared").symlink_to(ROOT.parent / "shared")
    for folder in ("examples", "docs", "oracle"):
        (work / folder).symlink_to(ROOT / folder)
    pyproject = (ROOT / "pyproject.toml").read_text()
    pyproject += (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/kubeberth"]\n'
        f"only_mutate = {_toml_list([f'src/{m}' for m in target.modules])}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(target.tests)}\n"
        f"pytest_add_cli_args = {_toml_list(['-p', 'no:cacheprovider'])}\n"
        f"also_copy = {_toml_list(['examples', 'docs', 'oracle'])}\n"
    )
    (work / "pyproject.toml").write_text(pyproject)
    (work / "mutants").mkdir()
    (work / "mutants" / "shared").symlink_to(ROOT.parent / "shared")
    return work


def _mutmut() -> str:
    found = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if found is None:
        sys.exit("mutmut is not installed: pip install -e '.[dev]'")
    return found


def run(target: Target, jobs: int | None = None) -> dict[str, object]:
    """Plant and test every mutant of ``target`` in a fresh copy, then collect the verdicts.
    ``jobs`` caps the mutants tested at once (mutmut's default: one per core)."""
    work = prepare(target)
    start = time.monotonic()
    cap = [] if jobs is None else ["--max-children", str(jobs)]
    proc = subprocess.run([_mutmut(), "run", *cap, *target.only], cwd=work, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise SystemExit(f"mutmut run failed for {target.name}:\n{tail}")
    return collect(target, round(time.monotonic() - start))


def collect(target: Target, seconds: int | None = None) -> dict[str, object]:
    """The verdicts of the last run of ``target`` (its copy under .cache/mutation)."""
    work = WORK / target.name
    results = subprocess.run([_mutmut(), "results", "--all", "true"], cwd=work,
                             capture_output=True, text=True, check=True).stdout
    status: dict[str, str] = {}
    for line in results.splitlines():
        found = re.match(r"\s*(\S+): (\S.*)$", line)
        if found:
            status[found[1]] = found[2].strip()
    # A run stopped early (or one limited by ``only``) leaves mutants unchecked: they are
    # counted apart, never as killed or survived.
    unchecked = [n for n, v in status.items() if v in ("not checked", "skipped")]
    for n in unchecked:
        del status[n]
    names = sorted(n for n, v in status.items() if v in ("survived", "no tests"))
    diffs = json.loads(subprocess.run([sys.executable, "-c", _DIFFS, *names], cwd=work,
                                      capture_output=True, text=True, check=True).stdout)
    survivors = {name: [ln for ln in diffs[name].splitlines()
                        if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] for name in names}
    killed = sum(1 for v in status.values() if v in ("killed", "timeout", "segfault"))
    return {"target": target.name, "modules": list(target.modules), "tests": list(target.tests),
            "mutants": len(status), "killed": killed, "survived": len(survivors),
            "unchecked": len(unchecked),
            "score": round(100.0 * killed / len(status), 1) if status else None,
            "seconds": seconds, "survivors": survivors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help=f"some of {', '.join(TARGETS)} (default all)")
    parser.add_argument("--list", action="store_true", help="list the targets and stop")
    parser.add_argument("--report", action="store_true",
                        help="only collect the verdicts of the last run of each target")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="test at most N mutants at once (default: one per core)")
    opts = parser.parse_args()
    if opts.list:
        for t in TARGETS.values():
            print(f"{t.name}: {', '.join(t.modules)} <- {' '.join(t.tests)}")
        return 0
    unknown = [n for n in opts.targets if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {unknown}; known: {', '.join(TARGETS)}")
    summary_file = WORK / "summary.json"
    summary = {}
    for name in opts.targets or list(TARGETS):
        if opts.report and not (WORK / name / "mutants").exists():
            continue
        result = collect(TARGETS[name]) if opts.report else run(TARGETS[name], opts.jobs)
        summary[name] = result
        took = f" in {result['seconds']}s" if result["seconds"] is not None else ""
        left = f", {result['unchecked']} not run" if result["unchecked"] else ""
        print(f"{name}: {result['killed']}/{result['mutants']} killed ({result['score']}%)"
              f"{took}{left}", flush=True)
        for mutant, lines in result["survivors"].items():  # type: ignore[attr-defined]
            print(f"  survived {mutant}")
            for ln in lines:
                print(f"    {ln}")
        summary_file.write_text(json.dumps(summary, indent=1) + "\n")
    total = sum(int(r["mutants"]) for r in summary.values())
    killed = sum(int(r["killed"]) for r in summary.values())
    print(f"total: {killed}/{total} killed ({100.0 * killed / total:.1f}%)" if total else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
