"""Real mdsearch processes on the default backend never import torch, sentence-transformers or
transformers: ``index``, ``search``, and ``serve`` through initialize and a workspace/symbol
answer. Each runs with ``python -X importtime``, which logs every module a process imports to
stderr, whatever way it exits; torch may well be installed (CI installs the torch extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.stdio_client import StdioClient

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "sentence_transformers", "transformers", "scipy", "sklearn"}


def imported(stderr: str) -> set[str]:
    """Top-level packages named in ``-X importtime`` lines."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") >= 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name.split(".")[0])
    return names


def mdsearch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "mdsearch_ls", *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["MDSEARCH_CACHE_DIR"] = str(tmp_path / "cache")
    e.pop("OMP_WAIT_POLICY", None)
    return e


@pytest.fixture
def vault(tmp_path: Path, write) -> Path:
    root = tmp_path / "vault"
    write(root, "ops/Incidents.md", "# Incidents\n\n## Escalation\n\nPage the on-call lead when "
          "more than 5% of requests fail for ten minutes.\n")
    write(root, "eng/Releases.md", "# Releases\n\n## Rolling back\n\nRedeploy the previous image "
          "tag first, investigate later.\n")
    write(root, "Home.md", "# Home\n\nThe studio handbook: [[Incidents]], [[Releases]].\n")
    return root


def test_index_and_search_import_no_torch(vault: Path, env: dict[str, str]) -> None:
    index = mdsearch(["index", str(vault)], env)
    assert index.returncode == 0, index.stderr[-2000:]
    assert "onnxruntime" in imported(index.stderr), "the index command embedded nothing?"
    assert not imported(index.stderr) & HEAVY, imported(index.stderr) & HEAVY
    for mode in ("hybrid", "semantic", "keyword"):
        search = mdsearch(["search", "roll back a bad release", "--root", str(vault),
                           "--mode", mode, "--json"], env)
        assert search.returncode == 0, search.stderr[-2000:]
        hits = json.loads(search.stdout.splitlines()[0])["results"]
        assert hits and hits[0]["path"] == "eng/Releases.md", (mode, hits)
        assert not imported(search.stderr) & HEAVY, (mode, imported(search.stderr) & HEAVY)


def test_serve_through_a_workspace_symbol_answer_imports_no_torch(
    vault: Path, env: dict[str, str], tmp_path: Path
) -> None:
    stderr = tmp_path / "serve.stderr"
    client = StdioClient([sys.executable, "-X", "importtime", "-m", "mdsearch_ls", "serve"],
                         env, stderr=stderr)
    try:
        client.open_folder(vault)
        client.wait_folders(timeout=180)  # indexing runs in the background
        symbols = client.request("workspace/symbol", {"query": "roll back a bad release"})
        assert symbols and symbols[0]["location"]["uri"].endswith("eng/Releases.md"), symbols
    finally:
        client.stop()
    names = imported(stderr.read_text())
    assert {"pygls", "onnxruntime"} <= names, "the server never loaded the model?"
    assert not names & HEAVY, names & HEAVY
