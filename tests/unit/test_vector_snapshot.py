"""The writer's vector snapshot: readers map it instead of reading every vector from SQLite, and
get exactly the answers the manifest would give; anything not matching the manifest's state is
never used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index import vector_snapshot
from mdsearch_ls.engine.search.requests import RelatedRequest
from mdsearch_ls.engine.search.vectors import PatchedTable, VectorTable
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, write_note

TOPICS = ["backup restore keys", "invoice payment overdue", "hiring interview loop",
          "incident escalation pager", "garden tomatoes watering", "sourdough starter bread"]


def _vault(root: Path) -> Path:
    for i, topic in enumerate(TOPICS):
        write_note(root, f"n{i}.md", f"# {topic.title()}\n\nAll about {topic}.\n\n"
                   f"## More on {topic.split()[0]}\n\n{topic} in detail, {i}.\n")
    write_note(root, "sub/same.md", "# Template\n\nAll about backup restore keys.\n")
    return root


def _open(root: Path, index: Path, mode: str) -> Workspace:
    return Workspace.open(root, Settings(), mode, embedder=FakeEmbedder(),  # type: ignore[arg-type]
                          index_dir=index)


def _answers(ws: Workspace) -> list[list[tuple[str, int, float | None]]]:
    return [[(h.path, h.start_line, h.score) for h in ws.hits(q, 5, mode="semantic")]
            for q in [*TOPICS, "keys", "bread"]]


def _snapshot_files(index: Path) -> list[str]:
    return sorted(p.name for p in index.iterdir() if ".vectors" in p.name or ".ids-" in p.name
                  or ".rows-" in p.name)


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    root, index = _vault(tmp_path / "notes"), tmp_path / "index"
    with _open(root, index, "write") as ws:
        ws.index()
    return root, index


def test_a_reader_maps_the_writers_snapshot_and_ranks_alike(built: tuple[Path, Path]) -> None:
    root, index = built
    assert len(_snapshot_files(index)) == 4  # vectors, ids, rows and the JSON naming them
    with _open(root, index, "read") as ro:
        mapped = _answers(ro)
        table = ro.searcher._vector_table()
        assert isinstance(table.matrix, np.memmap)  # mapped, not read into the process
        related = ro.related(RelatedRequest.build("n0.md", 2))
    (next(index.glob("*.vectors.json"))).unlink()  # no snapshot: read from the manifest
    with _open(root, index, "read") as ro:
        table = ro.searcher._vector_table()
        assert not isinstance(table.matrix, np.memmap)
        assert _answers(ro) == mapped
        again = ro.related(RelatedRequest.build("n0.md", 2))
    assert [(h.path, h.score) for h in again.hits] == [(h.path, h.score) for h in related.hits]
    assert "n0.md" not in {h.path for h in related.hits}


def test_a_snapshot_of_another_state_is_used_only_with_the_journal(
        built: tuple[Path, Path]) -> None:
    """A snapshot of an older state is patched with what the manifest's journal says changed
    since; one of another lineage (a manifest made again), or one the journal no longer
    reaches back to, is never used."""
    root, index = built
    files = _snapshot_files(index)
    writer = _open(root, index, "write")  # a server that has not closed: no new snapshot yet
    try:
        write_note(root, "n9.md", "# Volcano\n\nLava lamps and volcano eruptions.\n")
        writer.update(["n9.md"])
        with _open(root, index, "read") as ro:
            table = ro.searcher._vector_table()
            assert isinstance(table, PatchedTable) and table.mapped
            assert ro.hits("volcano eruptions lava", 1, mode="semantic")[0].path == "n9.md"
        writer.manifest.set_meta("lineage", "another")
        with _open(root, index, "read") as ro:
            assert not isinstance(ro.searcher._vector_table(), PatchedTable)
            assert ro.hits("volcano eruptions lava", 1, mode="semantic")[0].path == "n9.md"
    finally:
        writer.close()  # a new snapshot (the old one's lineage is not this manifest's)
    assert _snapshot_files(index) != files and len(_snapshot_files(index)) == 4
    with _open(root, index, "read") as ro:
        assert isinstance(ro.searcher._vector_table().matrix, np.memmap)
    with _open(root, index, "write") as ws:
        write_note(root, "n8.md", "# Comet\n\nA comet tail of ice.\n")
        ws.update(["n8.md"])
        ws.manifest.prune_journal(ws.manifest.journal_position())  # (as a newer one would)
        with _open(root, index, "read") as ro:
            assert not isinstance(ro.searcher._vector_table(), PatchedTable)
            assert ro.hits("comet tail ice", 1, mode="semantic")[0].path == "n8.md"


def _ties_aside(ranked: list[tuple[object, float | None]]) -> tuple[object, ...]:
    """A ranking as its scores and, above the last score, who holds each: rows of equal score
    are in an order no one promises (the fake embedder gives many a cosine of 0), and which of
    them the cut keeps neither."""
    scores = [s for _, s in ranked]
    last = min((s for s in scores if s is not None), default=None)
    held = {}
    for key, s in ranked:
        if s != last:
            held.setdefault(s, set()).add(key)
    return tuple(scores), tuple(sorted((s, sorted(map(str, k))) for s, k in held.items()))


def _every_answer(ws: Workspace) -> list[object]:
    out: list[object] = []
    for q in [*TOPICS, "keys", "bread"]:
        out.append(_ties_aside([((h.path, h.start_line), h.score)
                                for h in ws.hits(q, 5, mode="semantic")]))
    table = ws.searcher._vector_table()
    for q in [*TOPICS, "keys", "bread", "volcano lava"]:
        qv = ws.embedder.embed_query(q)
        out.append(_ties_aside(table.nearest(qv, 4, None, None)))
        out.append(_ties_aside(table.nearest(qv, 3, {"n1.md", "sub/same.md", "n7.md"}, None)))
    out.append(sorted((p, sorted(table.id_at(int(r)) for r in rows))
                      for p, rows in table.rows_of_path.items()))
    for note in ("n0.md", "n2.md", "n7.md"):
        if (ws.root / note).exists():
            rel = ws.related(RelatedRequest.build(note, 3))
            out.append(_ties_aside([((h.path, h.start_line), h.score) for h in rel.hits]))
    return out


def test_a_patched_snapshot_answers_exactly_as_every_vector_read_again(
        built: tuple[Path, Path]) -> None:
    """After each kind of change (a new note, an edit that changes a section, a deleted note,
    a renamed one), a reader of the old snapshot and the journal ranks exactly as a reader of
    every vector; the writer's close leaves the snapshot as it was (a few changed chunks)."""
    root, index = built
    files = _snapshot_files(index)
    changes = [
        lambda: write_note(root, "n7.md", "# Volcano\n\nLava lamps and volcano eruptions.\n"),
        lambda: write_note(root, "n2.md", "# Hiring\n\nNothing about hiring now: volcano "
                           "lava.\n\n## Loop\n\nInterview loop kept.\n"),
        lambda: (root / "n3.md").unlink(),
        lambda: (root / "n4.md").rename(root / "sub" / "n4-moved.md"),
    ]
    for change in changes:
        change()
        with _open(root, index, "write") as ws:
            ws.index()
        assert _snapshot_files(index) == files  # not written again
        with _open(root, index, "read") as ro:
            assert isinstance(ro.searcher._vector_table(), PatchedTable)
            patched = _every_answer(ro)
        head = next(index.glob("*.vectors.json"))
        saved = head.read_bytes()
        head.unlink()
        with _open(root, index, "read") as ro:
            assert isinstance(ro.searcher._vector_table(), VectorTable)
            assert _every_answer(ro) == patched
        head.write_bytes(saved)


def test_more_changes_than_a_patch_takes_write_a_new_snapshot(
        built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root, index = built
    monkeypatch.setattr(vector_snapshot, "patch_limit", lambda rows: 2)
    files = _snapshot_files(index)
    seq = json.loads(next(index.glob("*.vectors.json")).read_text())["journal"]
    for i in range(3):
        write_note(root, f"new{i}.md", f"# New {i}\n\nA new note, {i}.\n")
    with _open(root, index, "write") as ws:
        ws.index()
        assert len(ws.manifest.journal_since(seq, 100) or ()) >= 3
    assert _snapshot_files(index) != files
    assert json.loads(next(index.glob("*.vectors.json")).read_text())["journal"] > seq
    with _open(root, index, "read") as ro:
        assert isinstance(ro.searcher._vector_table(), VectorTable)  # this state's own
        assert ro.manifest.journal_since(seq, 100) is None  # taken in, forgotten


@pytest.mark.parametrize("damage", ["cut", "json", "gone"])
def test_a_damaged_snapshot_costs_only_speed(built: tuple[Path, Path], damage: str) -> None:
    root, index = built
    with _open(root, index, "read") as ro:
        want = _answers(ro)
    head_path = next(index.glob("*.vectors.json"))
    head = json.loads(head_path.read_text())
    if damage == "cut":
        matrix = index / head["matrix"]
        matrix.write_bytes(matrix.read_bytes()[:200])
    elif damage == "json":
        head_path.write_text("{not json", encoding="utf-8")
    else:
        (index / head["ids"]).unlink()
    with _open(root, index, "read") as ro:
        assert not isinstance(ro.searcher._vector_table().matrix, np.memmap)
        assert _answers(ro) == want


def test_filters_and_phrase_ids_on_a_mapped_table(built: tuple[Path, Path]) -> None:
    root, index = built
    with _open(root, index, "read") as ro:
        table = ro.searcher._vector_table()
        assert isinstance(table.matrix, np.memmap)
        q = table.matrix[0]
        ids = set(table.ids[::2])
        got = table.nearest(q, 4, {"n1.md", "sub/same.md"}, ids)
        assert got and all(table.path_at(table.row_of[c]) in {"n1.md", "sub/same.md"}
                           and c in ids for c, _ in got)
        assert table.nearest(q, 3, {"nowhere.md"}, None) == []


def test_the_identity_names_the_state() -> None:
    assert vector_snapshot.identity(3, "1.5") != vector_snapshot.identity(3, "2.5")
    assert vector_snapshot.identity(3, None) == "3:"


def test_a_server_reads_its_snapshot_once_across_saves(built: tuple[Path, Path]) -> None:
    """Each save is a new manifest state, patched onto the same snapshot: a long-running
    writer maps it and sorts its ids once (at 96k chunks reading it again cost every search
    after a save ~50 ms), leaves out exactly the rows the saves touched, and ranks as a reader
    of every vector does."""
    root, index = built
    with _open(root, index, "write") as ws:
        bases = []
        for i in range(3):
            write_note(root, "n1.md", f"# Invoice\n\nInvoice payment overdue, reminder {i}.\n")
            write_note(root, f"new{i}.md", f"# New {i}\n\nVolcano lava, note {i}.\n")
            ws.update(["n1.md", f"new{i}.md"])
            table = ws.searcher._vector_table()
            assert isinstance(table, PatchedTable)
            bases.append(table.base)
            # the snapshot's rows of the edited note, and only those, are left out
            want = [table.base.path_at(r) == "n1.md" for r in range(len(table.base))]
            assert table._dead.tolist() == want and any(want)
            served = _every_answer(ws)
            with _open(root, index, "read") as ro:
                assert _every_answer(ro) == served
        assert bases[0].matrix is bases[1].matrix is bases[2].matrix
