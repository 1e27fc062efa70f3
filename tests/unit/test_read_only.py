"""A second process reads an index another one writes (the CLI beside an editor's server).

The writer holds the lock and Chroma; the reader opens the manifest only (SQLite is
process-safe, Chroma is not) and answers vector queries exactly from its vectors. Fake embedder,
real SQLite and Chroma on disk.
"""

from __future__ import annotations

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import IndexLockedError, IndexReadOnlyError, NotIndexedError
from mdsearch_ls.engine.workspace import Workspace


@pytest.fixture
def vault(tmp_path, write):
    root = tmp_path / "notes"
    write(root, "fruit.md", "# Fruit\n\nApples and apricots grow in the orchard.\n\n"
                            "## Berries\n\nBlueberries and raspberries ripen in July.\n")
    write(root, "money.md", "# Money\n\nInvoices are paid within thirty days.\n\n"
                            "## Payroll\n\nSalaries go out on the 25th.\n")
    write(root, "ops.md", "# Operations\n\nThe firewall blocks inbound traffic.\n\n"
                          "## Backups\n\nBackups run nightly and are kept for a month.\n")
    return root


@pytest.fixture
def pair(vault, tmp_path, fake_embedder):
    """(writer, reader) on one index dir; the writer holds the lock."""
    index = tmp_path / "index"
    writer = Workspace(vault, Settings(), fake_embedder, index_dir=index)
    writer.index()
    reader = Workspace.open(vault, Settings(), "read", embedder=fake_embedder, index_dir=index)
    yield writer, reader
    reader.close()
    writer.close()


def shape(hits):
    """Hits in rank order; sections tied on score (the fake embedder's zero cosines) may come
    in either order from Chroma and from the exact search, so ties are sorted by name. Keyword
    hits have no similarity: their fused score stands in."""
    out = [(h.path, h.breadcrumb, round(h.explain["fused"] if h.score is None else h.score, 4))
           for h in hits]
    return sorted(out, key=lambda t: (out.index(next(x for x in out if x[2] == t[2])), t))


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
@pytest.mark.parametrize("query", ["apricots orchard", "salaries payroll", "nightly backups",
                                   "tag:nothing backups", 'path:ops.md "inbound traffic"'])
def test_reader_answers_as_the_writer_does(pair, mode, query) -> None:
    writer, reader = pair
    # k=10 is every section of the vault, so no tie is cut off differently
    mine, theirs = reader.hits(query, 10, mode=mode), writer.hits(query, 10, mode=mode)
    assert shape(mine) == shape(theirs)
    if mode != "keyword" and "tag:" not in query:
        assert mine and mine[0].score > 0


def test_reader_related_matches_the_writer(pair) -> None:
    writer, reader = pair
    mine = reader.related_to("fruit.md", 4, k=3, min_score=-1.0)
    theirs = writer.related_to("fruit.md", 4, k=3, min_score=-1.0)
    assert mine.section is not None and mine.section.title == "Berries"
    assert shape(mine.hits) == shape(theirs.hits)
    assert mine.hits and all(h.path != "fruit.md" for h in mine.hits)


def test_reader_sees_what_the_writer_commits(pair, vault, write) -> None:
    writer, reader = pair
    assert reader.hits("kiwi", 3, mode="keyword") == []
    write(vault, "fruit.md", "# Fruit\n\nKiwi vines climb the south wall.\n")
    writer.update(["fruit.md"])
    hits = reader.hits("kiwi", 3, mode="keyword")  # the cache keys on the file's generation
    assert [h.path for h in hits] == ["fruit.md"]
    assert reader.hits("kiwi vines", 3, mode="semantic")[0].path == "fruit.md"


def test_reader_never_writes(pair) -> None:
    _, reader = pair
    assert reader.read_only and reader.status()["read_only"] is True
    assert reader.status()["files"] == 3
    for write_op in (lambda: reader.index(), lambda: reader.update(["fruit.md"]),
                     lambda: reader.delete(["fruit.md"]),
                     lambda: reader.rename([("fruit.md", "f.md")])):
        with pytest.raises(IndexReadOnlyError):
            write_op()


def test_the_lock_still_stops_a_second_writer(pair, vault, tmp_path, fake_embedder) -> None:
    with pytest.raises(IndexLockedError):
        Workspace(vault, Settings(), fake_embedder, index_dir=tmp_path / "index")


def test_reader_needs_an_index(vault, tmp_path, fake_embedder) -> None:
    with pytest.raises(NotIndexedError, match="mdsearch index"):
        Workspace.open(vault, Settings(), "read", embedder=fake_embedder,
                       index_dir=tmp_path / "none")
    assert not (tmp_path / "none").exists()  # and creates nothing
