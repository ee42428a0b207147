"""Fixtures for the live controllers (the harness is in harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.live.harness import Live


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    env = Live(tmp_path)
    try:
        yield env
    finally:
        env.close()
