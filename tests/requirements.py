"""What the suite needs outside the Python package, and what to install when it is missing.

Under CI (``CI=1`` or ``CI=true``) nothing the suite needs may be missing: ``.ci/run`` runs this
file first (``python3 -m tests.requirements``) and stops with the install hints, and
tests/conftest.py refuses the session the same way and turns any skip into a failure. Elsewhere
the tests that need a missing tool skip with the reason. Standard library only: ``.ci/run`` runs it
before the virtualenv exists.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.paths import SHARED


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true")


def _tool(name: str, *fallbacks: str) -> bool:
    return shutil.which(name) is not None or any(Path(f).exists() for f in fallbacks)


def _go() -> bool:
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    return Path(go).exists()


@dataclass(frozen=True)
class Requirement:
    name: str
    needed_by: str
    install: str

    def present(self) -> bool:
        return _CHECKS[self.name]()


_CHECKS = {
    "../shared": lambda: (SHARED / "conformance").is_dir(),
    "kubectl": lambda: _tool("kubectl", "/usr/bin/kubectl"),
    "prometheus": lambda: _tool("prometheus", "/usr/bin/prometheus"),
    "openssl": lambda: _tool("openssl"),
    "go": _go,
}

# Chromium is not listed: no test drives a browser (report HTML is checked as text).
REQUIREMENTS = (
    Requirement("../shared", "tests/conformance, tests/oracle and the shared-data tests",
                f"check out the project's shared folder beside it, at {SHARED} (read-only "
                "data and conformance cases); tests find it relative to the checkout only"),
    Requirement("kubectl", "tests/live and tests/apiserver (kubectl is their client)",
                "apt-get install -y kubernetes-client (or any kubectl at /usr/bin/kubectl)"),
    Requirement("prometheus", "tests/integration (a real Prometheus scraping the server)",
                "apt-get install -y prometheus"),
    Requirement("openssl", "the TLS tests (self-signed certificates)",
                "apt-get install -y openssl"),
    Requirement("go", "tests/oracle (upstream's scheduler, built by oracle/build.sh)",
                "install Go >= the version in oracle/go.mod (Debian: apt-get install golang-go, "
                "if new enough), or set GO=/path/to/go"),
)


def missing() -> list[Requirement]:
    return [r for r in REQUIREMENTS if not r.present()]


def report(absent: list[Requirement]) -> str:
    lines = ["CI=1: the suite cannot run in full; missing:"]
    lines += [f"  - {r.name} (needed by {r.needed_by}): {r.install}" for r in absent]
    return "\n".join(lines)


def main() -> int:
    absent = missing()
    if not absent:
        print("requirements: ../shared, kubectl, prometheus, openssl and go are present")
        return 0
    if under_ci():
        print(report(absent), file=sys.stderr)
        return 1
    print("requirements: missing " + ", ".join(r.name for r in absent)
          + "; the tests that need them will skip (CI=1 makes that a failure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
