"""The CLI as a user runs it: a real ``mdsearch`` process over a vault indexed with the real
model. The index is built once per session, in-process with the session's model (a subprocess
would load it again), in the default place under its own cache folder, so a command run inside
the vault finds it by walking up, as it would on a user's machine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import copy_vault


@dataclass(frozen=True)
class IndexedVault:
    """A copy of examples/vault and the cache folder that holds its index. Read-only for tests:
    a test that edits notes makes its own copy."""

    vault: Path
    cache: Path


def run_cli(
    *args: str,
    cache: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``mdsearch ARGS`` in a fresh process (stdout and stderr piped, so not a terminal)."""
    full = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100"}
    full.pop("NO_COLOR", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "mdsearch_ls", *args],
        capture_output=True, text=True, timeout=timeout, env=full, cwd=cwd, input=stdin,
    )


@pytest.fixture(scope="session")
def indexed_vault(tmp_path_factory: pytest.TempPathFactory, real_embedder: object) -> IndexedVault:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.workspace import Workspace

    base = tmp_path_factory.mktemp("indexed")
    vault = copy_vault(base / "vault")
    cache = base / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDSEARCH_CACHE_DIR", str(cache))
        with Workspace.open(vault, Settings(), embedder=real_embedder) as ws:  # type: ignore[arg-type]
            report = ws.index()
    assert report.files_total == 20
    return IndexedVault(vault, cache)
