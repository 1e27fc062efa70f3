"""The damaged-index suite as a user meets it: ``mdsearch`` processes with the real model.

Before, a damaged manifest or Chroma database made every command exit 4, ``index --rebuild``
included, until the user found and deleted the index folder. Now ``search`` and ``index`` heal it
(one message on stderr), answer, and leave an index equal to a clean build; ``status`` (a read)
says it is damaged and who heals it, and changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.layout import DAMAGED_PREFIX
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import EXAMPLE_VAULT, REPO, FakeEmbedder
from tests.index_state import IndexSnapshot, clean_build, snapshot
from tests.unit.test_healing import (
    delete_hnsw_files,
    garbage_chroma_sqlite,
    garbage_manifest_header,
    manifest_of_another_schema,
    truncate_manifest_to_half,
)

pytestmark = pytest.mark.slow

NOTES = ["operations/Crisis management and escalation.md", "finance/Revenue tracking.md",
         "people/Hiring process.md"]
QUERY = "crisis escalation threshold"
TOP = "operations/Crisis management and escalation.md"


def run(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mdsearch_ls", *args],
        capture_output=True, text=True, timeout=900, cwd=REPO,
        env={**os.environ, "MDSEARCH_CACHE_DIR": str(cache)},
    )


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, IndexSnapshot]:
    """Three notes of the demo vault indexed by ``mdsearch index`` (real model)."""
    base = tmp_path_factory.mktemp("heal-cli")
    vault = base / "vault"
    for rel in NOTES:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXAMPLE_VAULT / rel, vault / rel)
    index = base / "index"
    res = run("index", str(vault), "--index-dir", str(index), cache=base)
    assert res.returncode == 0, res.stderr
    return vault, index, clean_build(vault, base / "clean", FakeEmbedder())


def _after(vault: Path, index: Path) -> IndexSnapshot:
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index) as ws:
        assert ws.healed is None and ws.repaired == 0
        return snapshot(ws)


@pytest.mark.parametrize("damage", [garbage_manifest_header, truncate_manifest_to_half,
                                    manifest_of_another_schema, garbage_chroma_sqlite,
                                    delete_hnsw_files], ids=lambda d: d.__name__)
def test_search_heals_a_damaged_index_and_answers(cli_index, tmp_path: Path,
                                                  damage: Callable[[Path], None]) -> None:
    vault, built, clean = cli_index
    index = tmp_path / "index"
    shutil.copytree(built, index)
    damage(index)
    res = run("search", QUERY, "--root", str(vault), "--index-dir", str(index), "--json",
              "-k", "1", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["path"] == TOP
    # Chroma answers the vector search, so the search's own open heals either store and
    # says so once; the vectors come back from the manifest, with nothing to re-embed.
    if damage is not delete_hnsw_files:  # a three-note graph lives in Chroma's log: nothing lost
        assert res.stderr.count("was damaged") == 1, res.stderr
        assert len(list(index.glob(f"{DAMAGED_PREFIX}*"))) == 1
    assert _after(vault, index) == clean  # healed for good: the next open finds nothing


def test_rebuild_needs_nothing_of_the_old_index(cli_index, tmp_path: Path) -> None:
    vault, built, clean = cli_index
    index = tmp_path / "index"
    shutil.copytree(built, index)
    garbage_manifest_header(index)
    garbage_chroma_sqlite(index)
    res = run("index", str(vault), "--index-dir", str(index), "--rebuild", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "was damaged" in res.stderr and f"indexed {vault}" in res.stdout
    assert _after(vault, index) == clean


def test_status_reports_damage_and_the_next_search_answers(cli_index, tmp_path: Path) -> None:
    """``status`` holds the index for its run like any command: its open sets the damaged
    manifest aside and says so (once, naming where it went); the next search rebuilds from
    the notes and answers as a clean build does."""
    vault, built, clean = cli_index
    index = tmp_path / "index"
    shutil.copytree(built, index)
    garbage_manifest_header(index)
    res = run("status", "--root", str(vault), "--index-dir", str(index), cache=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("was damaged") == 1 and "Traceback" not in res.stderr
    assert len(list(index.glob(f"{DAMAGED_PREFIX}*"))) == 1
    res = run("search", QUERY, "--root", str(vault), "--index-dir", str(index), "--json",
              "-k", "1", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["path"] == TOP
    assert _after(vault, index) == clean


def test_a_zero_byte_manifest_is_rebuilt_by_the_next_search(cli_index, tmp_path: Path) -> None:
    """A manifest emptied to 0 bytes (a full disk, a crash while copying) made `search` exit 2
    with "not indexed yet" (issue 27): the search rebuilds it from the notes and answers."""
    vault, built, clean = cli_index
    index = tmp_path / "index"
    shutil.copytree(built, index)
    manifests = list(index.glob("*.sqlite3"))
    assert len(manifests) == 1
    manifests[0].write_bytes(b"")
    res = run("search", QUERY, "--root", str(vault), "--index-dir", str(index), "--json",
              "-k", "1", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["path"] == TOP
    assert _after(vault, index) == clean
