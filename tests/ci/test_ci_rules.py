"""The CI rules themselves: with CI=1 a missing requirement stops the run with what to install,
and a test that would skip for a missing tool fails (tests/requirements.py, tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT


def _env(ci: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "1"
    return env


def test_missing_shared_fails_under_ci_and_says_where(tmp_path: Path) -> None:
    """A checkout with no ../shared beside it (the folder is found relative to the checkout)."""
    checkout = tmp_path / "project"
    (checkout / "tests").mkdir(parents=True)
    for name in ("paths.py", "requirements.py"):
        shutil.copy(ROOT / "tests" / name, checkout / "tests" / name)
    run = [sys.executable, "-m", "tests.requirements"]
    ci = subprocess.run(run, cwd=checkout, env=_env(True), capture_output=True, text=True)
    assert ci.returncode == 1
    assert "CI=1: the suite cannot run in full; missing:" in ci.stderr
    assert f"check out the project's shared folder beside it, at {tmp_path / 'shared'}" \
        in ci.stderr
    local = subprocess.run(run, cwd=checkout, env=_env(False), capture_output=True, text=True)
    assert local.returncode == 0 and "missing ../shared" in local.stdout
    # With the folder in place the same check passes.
    (tmp_path / "shared" / "conformance").mkdir(parents=True)
    again = subprocess.run(run, cwd=checkout, env=_env(True), capture_output=True, text=True)
    assert "../shared" not in again.stderr


SKIPPING = '''
import pytest

def test_needs_a_tool():
    pytest.skip("sometool is not installed")

def test_broken_case():
    pytest.skip("case lost its resourceGroups (a broken transcription)")

def test_passes():
    assert True
'''


def test_a_skip_for_a_missing_tool_fails_under_ci(tmp_path: Path) -> None:
    module = tmp_path / "test_skipping.py"
    module.write_text(SKIPPING)
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
           "-o", "addopts=", "--rootdir", str(tmp_path), "-rfs", str(module)]
    ci = subprocess.run(run, cwd=ROOT, env=_env(True), capture_output=True, text=True)
    assert ci.returncode == 1, ci.stdout
    assert "CI=1: " in ci.stdout and "would skip (sometool is not installed)" in ci.stdout
    assert "1 failed, 1 passed, 1 skipped" in ci.stdout
    assert "hypothesis: profile 'ci', seed " in ci.stdout
    local = subprocess.run(run, cwd=ROOT, env=_env(False), capture_output=True, text=True)
    assert local.returncode == 0 and "1 passed, 2 skipped" in local.stdout, local.stdout
