"""Suite-wide rules: under CI nothing is skipped for a missing tool, and Hypothesis is
derandomised with a fixed, printed seed.

* CI (``CI=1`` or ``CI=true``): the session stops at once when ../shared, kubectl, Prometheus,
  openssl or Go is missing (tests/requirements.py says what to install), and a test that skips
  anyway fails with its reason. Only the skips named in ``SKIPS_ALLOWED_IN_CI`` stand.
* Hypothesis under CI: profile ``ci`` (no example database) and the seed ``HYPOTHESIS_SEED``
  (or ``KUBEBERTH_HYPOTHESIS_SEED``, or ``--hypothesis-seed``), printed in the header.
  ``tools/hypothesis_random.py`` runs the same property tests with a fresh random seed.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from hypothesis import core, settings
from tests.requirements import missing, report, under_ci

HYPOTHESIS_SEED = 20260522

# Skips that say something about a case, not about the machine: they stand under CI too
# (reason prefixes: tests/conformance/test_kueue.py's BROKEN_TRANSCRIPTION cases of the shared
# file, and the PodTopologySpread case runner's cases outside what it translates).
SKIPS_ALLOWED_IN_CI: tuple[str, ...] = (
    "case lost its resourceGroups",
    "case uses pod fields",
    "extension point ",
)

settings.register_profile("ci", database=None, print_blob=True)


def _seed(config: pytest.Config) -> int:
    given = config.getoption("hypothesis_seed", None)
    raw = given if given is not None else os.environ.get("KUBEBERTH_HYPOTHESIS_SEED")
    return int(raw) if raw is not None else HYPOTHESIS_SEED


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not under_ci():
        return
    absent = missing()
    if absent:
        raise pytest.UsageError(report(absent))
    settings.load_profile("ci")
    core.global_force_seed = _seed(config)  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> str:
    if not under_ci():
        return "hypothesis: randomised (CI=1 fixes the seed)"
    seed = _seed(config)
    return (f"hypothesis: profile 'ci', seed {seed} "
            f"(reproduce with CI=1 or --hypothesis-seed={seed})")


def pytest_sessionstart(session: pytest.Session) -> None:
    """With -q (the project's addopts) pytest prints no header: say the seed anyway."""
    config = session.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if under_ci() and config.option.verbose < 0 and reporter is not None:
        reporter.write_line(pytest_report_header(config))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not (under_ci() and rep.skipped) or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith(SKIPS_ALLOWED_IN_CI):
        return
    rep.outcome = "failed"
    rep.longrepr = (f"CI=1: {item.nodeid} would skip ({reason}). CI runs every test: install "
                    "what it needs (python3 -m tests.requirements lists the suite's needs).")
