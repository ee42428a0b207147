"""Where the tests find the project's own folders and ``../shared``: relative to this checkout,
never a machine's absolute layout."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
