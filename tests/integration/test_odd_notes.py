"""A vault with the notes that used to go wrong, on the real model and through the CLI.

The fixture vault is generated at test time: a 10,000-heading note (586 KB of changelog), a note
Notepad saved as UTF-16 with a byte-order mark, a binary without a single NUL byte named ``.md``,
and ordinary notes. The huge note is capped at ``max_chunks_per_file`` with one warning, the
UTF-16 note is found by meaning, the binary is skipped by name, and a second command says
nothing about any of them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import REPO, write_note

pytestmark = pytest.mark.slow

HEADINGS = 10_000


def make_odd_vault(root: Path) -> Path:
    write_note(root, "garden.md", "# Garden\n\nTomatoes need full sun and deep watering.\n")
    write_note(root, "bikes.md", "# Bikes\n\nPatch an inner tube with glue and a rubber patch.\n")
    (root / "windows").mkdir(parents=True)
    (root / "windows" / "Kündigung.md").write_bytes(
        b"\xff\xfe" + ("# Kündigung der Wohnung\n\nThe rental contract for the flat ends with "
                       "three months' notice, given in writing to the landlord.\n"
                       ).encode("utf-16-le"))
    (root / "windows" / "Lease.md").write_bytes(  # UTF-16 saved without a mark
        ("# Lease renewal\n\nThe landlord offered to renew the lease for two more years at "
         "the same rent.\n").encode("utf-16-le"))
    rng = random.Random(11)
    (root / "attachments").mkdir()
    (root / "attachments" / "scan.md").write_bytes(
        bytes(rng.randrange(1, 256) for _ in range(20_000)))
    write_note(root, "changelog.md", "# Changelog\n\n" + "\n".join(
        f"## Release {i}\n\nRelease {i} fixed issue {i * 7 % 1000}.\n" for i in range(HEADINGS)))
    return root


def test_odd_notes_with_the_real_model(tmp_path: Path, real_embedder) -> None:
    vault = make_odd_vault(tmp_path / "vault")
    assert (vault / "changelog.md").stat().st_size > 400_000
    settings = Settings(max_chunks_per_file=40)
    with Workspace.open(vault, settings, embedder=real_embedder,
                        index_dir=tmp_path / "idx") as ws:
        report = ws.index()
        assert set(ws.manifest.files()) == {"garden.md", "bikes.md", "windows/Kündigung.md",
                                            "windows/Lease.md", "changelog.md"}
        assert len(ws.manifest.chunks_for("changelog.md")) == 40
        capped = [w for w in report.warnings if "changelog.md" in w]
        assert len(capped) == 1 and f"{HEADINGS + 1:,} chunks" in capped[0]
        binary = [w for w in report.warnings if "attachments/scan.md" in w]
        assert len(binary) == 1 and "binary" in binary[0]
        hits = ws.hits("how much notice to end my apartment lease", 1, mode="semantic")
        assert hits[0].path == "windows/Kündigung.md"
        assert hits[0].title == "Kündigung der Wohnung"
        assert ws.hits("fix a flat tyre", 1, mode="semantic")[0].path == "bikes.md"
        assert ws.hits("extend my rental agreement", 1,
                       mode="semantic")[0].path == "windows/Lease.md"
        assert ws.index().warnings == []


def test_the_cli_warns_once_per_change(tmp_path: Path) -> None:
    vault = make_odd_vault(tmp_path / "vault")
    (vault / "changelog.md").unlink()  # its 2,000 chunks would only slow this test down
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mdsearch_ls", *args], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=900)

    first = run("index", str(vault))
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("attachments/scan.md") == 1
    second = run("search", "ending a flat rental contract", "--root", str(vault), "--json",
                 "-k", "1")
    assert second.returncode == 0, second.stderr
    assert "scan.md" not in second.stderr and "warning" not in second.stderr
    assert json.loads(second.stdout)["results"][0]["path"] == "windows/Kündigung.md"
    third = run("search", "renew the lease for two more years", "--root", str(vault), "--json",
                "-k", "1")
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["results"][0]["path"] == "windows/Lease.md"  # no mark
