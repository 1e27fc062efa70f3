"""The Python artifacts of a release, built from this checkout once a session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "dist"


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """``dist/wheelhouse`` (beside the wheels and sdist in ``dist/``), from ``scripts/dist.sh
    python``: built anew, so the tests never read a previous checkout's artifacts. It needs PyPI
    for the build tools and dependencies; the installs the tests make from it do not."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "dist.sh"), "python"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return DIST / "wheelhouse"
