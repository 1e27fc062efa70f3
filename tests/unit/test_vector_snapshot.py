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


def test_a_snapshot_of_another_state_is_never_used(built: tuple[Path, Path]) -> None:
    root, index = built
    writer = _open(root, index, "write")  # a server that has not closed: no new snapshot yet
    try:
        write_note(root, "n9.md", "# Volcano\n\nLava lamps and volcano eruptions.\n")
        writer.update(["n9.md"])
        with _open(root, index, "read") as ro:
            table = ro.searcher._vector_table()
            assert not isinstance(table.matrix, np.memmap)
            assert ro.hits("volcano eruptions lava", 1, mode="semantic")[0].path == "n9.md"
    finally:
        writer.close()  # now it leaves the new state's snapshot, and drops the old arrays
    assert len(_snapshot_files(index)) == 4
    with _open(root, index, "read") as ro:
        assert isinstance(ro.searcher._vector_table().matrix, np.memmap)
        assert ro.hits("volcano eruptions lava", 1, mode="semantic")[0].path == "n9.md"


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
