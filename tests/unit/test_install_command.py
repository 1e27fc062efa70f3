"""``mdsearch install``: what it installs is what the installed mdsearch-ls declares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from mdsearch_ls.cli.install import EXTRAS, requirements

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_an_extra_installs_what_the_metadata_lists(extra: str) -> None:
    """Read from the installed distribution's metadata, it is pyproject.toml's list (the
    markers gone): the extras the command offers are the package's."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = declared["optional-dependencies"][extra]

    def norm(req: str) -> tuple[str, frozenset]:
        parsed = Requirement(req)
        return parsed.name.lower(), frozenset(parsed.specifier)

    assert sorted(map(norm, requirements(extra))) == sorted(map(norm, listed))


def test_an_unknown_extra_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "mdsearch_ls", "install", "pdf"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "formats" in done.stderr
