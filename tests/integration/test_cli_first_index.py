"""A first index only of what was meant: a home folder, / or more than ``max_files`` notes asks
for ``--yes`` (naming the count) before anything is created; dot-folders stay out unless named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    """A search after edits made while nothing ran updates exactly the notes its freshness
    check named (the targeted update, without Chroma), finds the edit at once, and leaves
    nothing for a full index to do but catch Chroma up, quietly."""
    notes = _tiny(tmp_path / "notes")
    cache = tmp_path / "cache"
    assert run_cli("index", str(notes), cache=cache).returncode == 0
    (notes / "ferns.md").write_text(
        "# Ferns\n\nTree ferns need shade.\n\n## Repotting\n\nMove a fern to a bigger pot in "
        "spring, when new fronds uncurl.\n", "utf-8")
    (notes / "kiln.md").unlink()
    (notes / "new.md").write_text("# Bread\n\nSourdough needs a lively starter.\n", "utf-8")
    res = run_cli("search", "when should I give my fern a larger container", "--root",
                  str(notes), "--json", "-k", "1", "--no-resident", cache=cache)
    assert res.returncode == 0, res.stderr
    assert "updated the index: 3 files" in res.stderr and "2 indexed, 1 removed" in res.stderr
    hit = json.loads(res.stdout)["results"][0]
    assert (hit["path"], hit["title"]) == ("ferns.md", "Repotting")
    res = run_cli("index", str(notes), cache=cache)
    assert res.returncode == 0, res.stderr
    assert "3 files" in res.stdout and "0 indexed, 0 removed" in res.stdout
    # the search left Chroma behind (DeferredStore); this catches it up, which is no repair
    assert "repair" not in res.stdout + res.stderr
    assert "nothing had changed" not in res.stdout
    # and now an index run has nothing to do: answered read-only, without Chroma
    res = run_cli("index", str(notes), cache=cache)
    assert res.returncode == 0 and "(nothing had changed)" in res.stdout, res.stderr


# The CLI's own entry, counting the rankings a search makes and the children its look forks.
# WALK=long holds the child's walk until this process has ranked (the walk of a large vault,
# which outlasts the model's load); WALK=short holds this process until the walk is over (a
# small vault's). Either hold gives up after 120 s, so a failure fails rather than hangs.
COUNTED = """
import json, os, select, sys
from mdsearch_ls.engine.index import freshness
from mdsearch_ls.engine.search import searcher
ranked, walks = [], []
rank, seen = searcher.Searcher._search, freshness.WalkBeside.seen
has_ranked, may_rank = os.pipe()

def counted(self, *args, **kwargs):
    ranked.append(1)
    os.write(may_rank, b"r")
    return rank(self, *args, **kwargs)

searcher.Searcher._search = counted
freshness.WalkBeside.seen = lambda self: walks.append(self.pid) or seen(self)
if os.environ["WALK"] == "long":
    send = freshness._walk_and_send

    def held(fd, *args):
        select.select([has_ranked], [], [], 120)
        send(fd, *args)

    freshness._walk_and_send = held
else:
    walking = freshness.WalkBeside.walking

    def over(self):
        select.select([self._fd], [], [], 120)
        return walking(self)

    freshness.WalkBeside.walking = over
from mdsearch_ls.cli import main
code = main(sys.argv[1:])
sys.stderr.write("COUNTED " + json.dumps({"ranked": len(ranked), "walks": walks,
                                          "me": os.getpid()}) + "\\n")
raise SystemExit(code)
"""


def _counted(notes: Path, cache: Path, walk: str, *args: str
             ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "MDSEARCH_BACKGROUND": "off",
           "WALK": walk}
    done = subprocess.run([sys.executable, "-c", COUNTED, "search", *args, "--json",
                           "--no-resident"], cwd=notes, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("COUNTED "))
    counted = json.loads(line.removeprefix("COUNTED "))
    assert len(counted["walks"]) == 1 and counted["walks"][0] not in (None, counted["me"])
    return json.loads(done.stdout)["results"], counted


def test_a_search_ranks_while_its_look_walks_and_keeps_that_answer_only_if_nothing_changed(
        tmp_path: Path) -> None:
    """With nothing holding the index, the walk of every note's stat runs in a child process
    while the search loads the model and, if the walk still runs then, ranks ahead on the
    index as it is: that ranking is the answer when the walk finds nothing changed, and is
    thrown away when it finds an edit. Once the walk is over nothing is ranked ahead."""
    notes = _tiny(tmp_path / "notes")
    cache = tmp_path / "cache"
    assert run_cli("index", str(notes), cache=cache).returncode == 0
    query = "when should I give my fern a larger container"
    as_it_is = run_cli("search", query, "-k", "2", "--json", "--no-update", cache=cache,
                       cwd=notes)
    expected = json.loads(as_it_is.stdout)["results"]
    assert expected[0]["path"] == "ferns.md"
    for walk in ("long", "short"):
        hits, counted = _counted(notes, cache, walk, query, "-k", "2")
        assert hits == expected
        assert counted["ranked"] == 1  # (long: ranked ahead, and that ranking printed)
    for walk, section, rankings in (("long", "Repotting", 2), ("short", "Pruning", 1)):
        (notes / "ferns.md").write_text(
            f"# Ferns\n\nTree ferns need shade.\n\n## {section}\n\nMove a fern to a bigger "
            f"pot in spring, when new fronds uncurl ({walk}).\n", "utf-8")
        hits, counted = _counted(notes, cache, walk, query, "-k", "2")
        assert (hits[0]["path"], hits[0]["title"]) == ("ferns.md", section)
        assert counted["ranked"] == rankings  # long: the ranking ahead was thrown away
