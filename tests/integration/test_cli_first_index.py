"""A first index only of what was meant: a home folder, / or more than ``max_files`` notes asks
for ``--yes`` (naming the count) before anything is created; dot-folders stay out unless named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import run_cli

pytestmark = pytest.mark.slow


def _tiny(root: Path) -> Path:
    notes = {
        "quokka.md": "# Quokkas\n\nThe quokka lives on Rottnest Island and smiles a lot.\n",
        "ferns.md": "# Ferns\n\nTree ferns need shade and water.\n",
        "kiln.md": "# Kiln\n\nFire the kiln slowly to avoid cracks.\n",
        ".cache/junk.md": "# Junk\n\nzanzibarite cache residue\n",
        ".notes/private.md": "# Private\n\nmarzipanolo recipe from grandmother\n",
    }
    for rel, text in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return root


def test_a_folder_over_max_files_home_or_root_asks_for_yes(tmp_path: Path) -> None:
    notes = _tiny(tmp_path / "notes")
    cache = tmp_path / "cache"
    res = run_cli("index", str(notes), "--max-files", "2", cache=cache)
    assert res.returncode == 2
    assert "holds 3 notes (--max-files is 2)" in res.stderr and "--yes" in res.stderr
    res = run_cli("search", "quokka", "--root", str(notes), "--max-files", "2", cache=cache)
    assert res.returncode == 2 and "--yes" in res.stderr
    res = run_cli("index", str(notes), cache=cache, env={"HOME": str(notes)})
    assert res.returncode == 2
    assert "is your home folder (3 notes)" in res.stderr and "--yes" in res.stderr
    res = run_cli("index", "/", cache=cache)
    assert res.returncode == 2
    assert "is the root of the file system" in res.stderr and "--yes" in res.stderr
    assert not cache.exists()  # asking created nothing


def test_search_with_a_named_folder_indexes_it_first_and_dot_folders_stay_out(
    tmp_path: Path,
) -> None:
    notes = _tiny(tmp_path / "notes")
    cache = tmp_path / "cache"
    res = run_cli("search", "island animal that smiles", "--root", str(notes), "--max-files",
                  "2", "--yes", "--json", "-k", "1", cache=cache)
    assert res.returncode == 0, res.stderr
    assert "is not indexed yet: indexing it first" in res.stderr
    assert json.loads(res.stdout)["results"][0]["path"] == "quokka.md"
    status = json.loads(run_cli("status", "--root", str(notes), "--json", cache=cache).stdout)
    assert status["files"] == 3  # .cache/ and .notes/ are not notes by default
    for word in ("zanzibarite", "marzipanolo"):
        found = run_cli("search", word, "--mode", "keyword", "--json", cache=cache, cwd=notes)
        assert json.loads(found.stdout)["results"] == []
    # A glob naming a dot-folder brings it in; the others stay out.
    res = run_cli("index", str(notes), "--include", "*.md", "--include", ".notes/**",
                  cache=cache)
    assert res.returncode == 0, res.stderr
    assert "4 files" in res.stdout
    found = run_cli("search", "marzipanolo", "--mode", "keyword", "--json",
                    "--include", "*.md", "--include", ".notes/**", cache=cache, cwd=notes)
    assert [h["path"] for h in json.loads(found.stdout)["results"]] == [".notes/private.md"]


def test_a_search_after_edits_updates_just_the_changed_notes(tmp_path: Path) -> None:
    """A search after edits made while nothing ran (holding the index for its own run) looks
    at the notes first, updates the changed ones, finds the edit at once, and leaves nothing
    for a full index to do."""
    notes = _tiny(tmp_path / "notes")
    cache = tmp_path / "cache"
    assert run_cli("index", str(notes), cache=cache).returncode == 0
    (notes / "ferns.md").write_text(
        "# Ferns\n\nTree ferns need shade.\n\n## Repotting\n\nMove a fern to a bigger pot in "
        "spring, when new fronds uncurl.\n", "utf-8")
    (notes / "kiln.md").unlink()
    (notes / "new.md").write_text("# Bread\n\nSourdough needs a lively starter.\n", "utf-8")
    res = run_cli("search", "when should I give my fern a larger container", "--root",
                  str(notes), "--json", "-k", "1", cache=cache)
    assert res.returncode == 0, res.stderr
    assert "updated the index: 3 files" in res.stderr and "2 indexed, 1 removed" in res.stderr
    hit = json.loads(res.stdout)["results"][0]
    assert (hit["path"], hit["title"]) == ("ferns.md", "Repotting")
    res = run_cli("index", str(notes), cache=cache)
    assert res.returncode == 0, res.stderr
    assert "3 files" in res.stdout and "0 indexed, 0 removed" in res.stdout
    assert "repair" not in res.stdout + res.stderr
