"""A damaged index heals itself on the next write open and then equals a clean build.

Each damage is one a user meets (a crash, a sync tool, a full disk, a downgrade): the manifest
truncated or overwritten, another schema version, Chroma's database or its HNSW graph files
damaged or gone, Chroma's graph lagging its log after a kill -9. After it, opening for writing
must succeed, say once what happened, and the next index must hold exactly what a clean build
of the same notes holds (same chunks, keyword rows and Chroma ids). A read open must refuse
with a clear error and change nothing. Fake embedder, real SQLite and real Chroma on disk.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import IndexOpenError
from mdsearch_ls.engine.index.layout import DAMAGED_PREFIX, KEEP_DAMAGED, space_name
from mdsearch_ls.engine.service.folders import Folders
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import REPO, FakeEmbedder, write_note
from tests.index_state import IndexSnapshot, assert_consistent, clean_build, snapshot

SPACE = space_name(Settings())
TOPICS = ["invoices", "payroll", "firewall", "backups", "hiring", "roadmap", "support",
          "releases", "laptops", "contracts", "travel", "budget", "kestrel", "orchard"]


def make_vault(root: Path, notes: int, sections: int) -> Path:
    """Notes of distinct short sections; over Chroma's 1,000-vector graph flush when large."""
    for n in range(notes):
        parts = [f"# Note {n}", ""]
        for s in range(sections):
            a, b = TOPICS[(n + s) % len(TOPICS)], TOPICS[(n * 3 + s) % len(TOPICS)]
            parts += [f"## {a.title()} {s}", "", f"Section {s} of note {n} is about {a} and {b}.",
                      ""]
        write_note(root, f"folder{n % 3}/note{n:02}.md", "\n".join(parts), mtime=1.7e9 + n)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, IndexSnapshot]:
    """A vault of 1,200 chunks, its index (closed) and the snapshot of a clean build."""
    base = tmp_path_factory.mktemp("healing")
    vault = make_vault(base / "vault", notes=24, sections=50)
    index = base / "index"
    clean = clean_build(vault, index, FakeEmbedder())
    assert len(clean.chunks) > 1000  # Chroma has flushed its graph to files at least once
    return vault, index, clean


@pytest.fixture
def index_copy(built, tmp_path: Path) -> Path:
    _, index, _ = built
    copy = tmp_path / "index"
    shutil.copytree(index, copy)
    return copy


def _manifest(idx: Path) -> Path:
    return idx / f"{SPACE}.sqlite3"


def _hnsw_dirs(idx: Path) -> list[Path]:
    return [d for d in (idx / "chroma").iterdir() if d.is_dir()]


def truncate_manifest_to_zero(idx: Path) -> None:
    os.truncate(_manifest(idx), 0)


def truncate_manifest_to_half(idx: Path) -> None:
    os.truncate(_manifest(idx), _manifest(idx).stat().st_size // 2)


def garbage_manifest_header(idx: Path) -> None:
    with open(_manifest(idx), "r+b") as f:
        f.write(b"\x13\x37garbage" * 12)


def garbage_inside_manifest(idx: Path) -> None:
    """Overwrite pages in the middle: SQLite opens it and fails only on some query later."""
    size = _manifest(idx).stat().st_size
    with open(_manifest(idx), "r+b") as f:
        f.seek(size // 3)
        f.write(b"\xff" * 8192)


def manifest_of_another_schema(idx: Path) -> None:
    conn = sqlite3.connect(_manifest(idx))
    with conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    conn.close()


def manifest_missing_a_table(idx: Path) -> None:
    conn = sqlite3.connect(_manifest(idx))
    with conn:
        conn.execute("DROP TABLE vectors")
    conn.close()


def garbage_chroma_sqlite(idx: Path) -> None:
    with open(idx / "chroma" / "chroma.sqlite3", "r+b") as f:
        f.write(os.urandom(4096))


def truncate_chroma_sqlite(idx: Path) -> None:
    path = idx / "chroma" / "chroma.sqlite3"
    os.truncate(path, path.stat().st_size // 2)


def delete_hnsw_files(idx: Path) -> None:
    for d in _hnsw_dirs(idx):
        shutil.rmtree(d)


def damage_hnsw_files(idx: Path) -> None:
    for d in _hnsw_dirs(idx):
        for f in d.iterdir():
            with open(f, "r+b") as fh:
                fh.seek(f.stat().st_size // 3)
                fh.write(os.urandom(min(4096, f.stat().st_size)))


def truncate_hnsw_files(idx: Path) -> None:
    for d in _hnsw_dirs(idx):
        for f in d.iterdir():
            os.truncate(f, f.stat().st_size // 2)


def empty_chroma_folder(idx: Path) -> None:
    shutil.rmtree(idx / "chroma")
    (idx / "chroma").mkdir()


# (damage, the part the heal message names, or None when it is repaired without moving anything)
DAMAGES: list[tuple[Callable[[Path], None], str | None]] = [
    (truncate_manifest_to_zero, "manifest: empty"),
    (truncate_manifest_to_half, "manifest"),
    (garbage_manifest_header, "manifest"),
    (garbage_inside_manifest, "manifest"),
    (manifest_of_another_schema, "manifest"),
    (manifest_missing_a_table, "manifest"),
    (garbage_chroma_sqlite, "vector store"),
    (truncate_chroma_sqlite, "vector store"),
    (delete_hnsw_files, "vector store"),
    (damage_hnsw_files, "vector store"),
    (truncate_hnsw_files, "vector store"),
    (empty_chroma_folder, None),
]
MANIFEST_DAMAGES = [d for d, part in DAMAGES if part and part.startswith("manifest")
                    and d is not truncate_manifest_to_zero]


@pytest.mark.parametrize(("damage", "part"), DAMAGES, ids=[d.__name__ for d, _ in DAMAGES])
def test_write_open_heals_and_the_index_equals_a_clean_build(built, index_copy, damage, part):
    vault, _, clean = built
    damage(index_copy)
    embedder = FakeEmbedder()
    with Workspace.open(vault, Settings(), embedder=embedder,
                        index_dir=index_copy) as ws:
        if part is None:
            assert ws.healed is None and ws.repaired  # restored in place, nothing set aside
        else:
            assert ws.healed is not None and f"({part}" in ws.healed, ws.healed
            assert str(vault) in ws.healed
        report = ws.index()
        assert not report.cancelled
        got = snapshot(ws)
        assert got == clean, got.diff(clean)
        assert_consistent(ws)
        # Chroma's graph answers for every chunk again, not just its tables.
        assert ws.store.probe(ws.manifest.sample_vectors(50)) is None
        assert ws.hits("payroll", 1)[0].path.endswith(".md")
        if part and part.startswith("manifest"):
            assert embedder.documents_embedded > 0  # rebuilt from the notes
        else:
            assert embedder.documents_embedded == 0  # Chroma refilled from the vector cache
    moved = sorted(index_copy.glob(f"{DAMAGED_PREFIX}*"))
    if part is None or part == "manifest: empty":
        assert moved == []
    else:
        assert len(moved) == 1 and any(moved[0].iterdir())
    # Healed for good: the next open finds nothing to heal or repair.
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        assert ws.healed is None and ws.repaired == 0
        assert ws.index().files_indexed == 0


def _seal(idx: Path) -> Path:
    return _manifest(idx).with_name(_manifest(idx).name + ".sealed")


def test_a_clean_close_spares_the_next_writer_its_check_of_every_page(built, index_copy):
    """The writer's open reads every page (0.3 s at 96k chunks, 3 s at 400k) only when the
    file may have changed since a writer's clean close; damage that keeps the file's size and
    time (a bad disk block) is met by the query that reads it, which drops the seal, and the
    writer's next open then finds and heals it."""
    vault, _, _ = built
    _seal(index_copy).unlink()
    with Workspace(vault, Settings(), FakeEmbedder(), index_dir=index_copy) as ws:
        assert ws.manifest.checked == "every page"  # no seal: who knows what happened to it
    assert _seal(index_copy).exists()
    with Workspace(vault, Settings(), FakeEmbedder(), index_dir=index_copy) as ws:
        assert ws.manifest.checked == "header"
        assert "open" in _seal(index_copy).read_text()  # this open may write: no state
    path = _manifest(index_copy)
    st = path.stat()
    garbage_inside_manifest(index_copy)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as a bad block would: no trace
    for head in index_copy.glob("*.vectors.json"):  # vectors read from the manifest too
        head.unlink()
    assert _seal(index_copy).exists()
    with pytest.raises(IndexOpenError, match="damaged") as err, Workspace.open(
            vault, Settings(), embedder=FakeEmbedder(), index_dir=index_copy) as held:
        assert held.manifest.checked == "header"  # the seal trusted: the page not read yet
        for word in TOPICS:
            held.hits(f"{word} section", 5, mode="keyword")
            held.hits(f"{word} section", 5, mode="semantic")
        # A link typed after "[[Note" matches every note's title: the writing aids read the
        # vectors of each one's sections to rank them by the paragraph.
        draft = "# Draft\n\nWhere the invoices and the payroll are kept. [[Note"
        held.writing.complete_link("draft.md", draft, 2, len(draft.split("\n")[2]))
    assert "mdsearch index" in str(err.value)  # it says what heals it
    assert not _seal(index_copy).exists()  # the query that met it dropped the seal
    with Workspace(vault, Settings(), FakeEmbedder(), index_dir=index_copy) as ws:
        assert ws.manifest.checked == "every page" and ws.healed
        assert ws.index().files_total > 0


def test_a_repair_keeps_the_last_few_damaged_folders(built, index_copy):
    """A second repair must not delete the first one's files (issue 22): the newest
    KEEP_DAMAGED are kept, two repairs within one second included; older ones go."""
    vault, _, _ = built
    seen = []
    damages = (garbage_manifest_header, garbage_chroma_sqlite) * 2
    for damage in damages:
        damage(index_copy)
        with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                            index_dir=index_copy) as ws:
            assert ws.healed
            ws.index()
        seen.append(sorted(index_copy.glob(f"{DAMAGED_PREFIX}*")))
    assert [len(s) for s in seen] == [1, 2, 3, KEEP_DAMAGED]
    assert seen[0][0] not in seen[-1]  # the oldest went once there were more than KEEP_DAMAGED
    assert seen[1][-1] in seen[-1] and seen[2][-1] in seen[-1]
    newest = [p for p in seen[-1] if p not in seen[2]]
    assert len(newest) == 1 and (newest[0] / "chroma").is_dir()  # the last damage's files
    assert not (newest[0] / f"{SPACE}.sqlite3").exists()


def test_both_stores_damaged_at_once(built, index_copy):
    vault, _, clean = built
    garbage_manifest_header(index_copy)
    delete_hnsw_files(index_copy)
    garbage_chroma_sqlite(index_copy)
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        assert "manifest" in ws.healed and "vector store" in ws.healed
        ws.index()
        assert snapshot(ws) == clean


def test_a_server_folder_shows_the_heal_message_once(built, index_copy):
    vault, _, _ = built
    garbage_manifest_header(index_copy)
    messages: list[tuple[str, str]] = []
    folders = Folders(Settings(), embedder=FakeEmbedder(), watch=False,
                      on_message=lambda text, level: messages.append((text, level)))
    try:
        folder = folders.add(vault, Settings(index_dir=str(index_copy)))
        assert folder is not None
        report = folder.start_index().result(timeout=120)
        assert report is not None and report.files_indexed == 24
    finally:
        folders.close(timeout=30)
    healed = [m for m in messages if "damaged" in m[0]]
    assert len(healed) == 1 and healed[0][1] == "warning"
    assert "rebuilt from the notes" in healed[0][0]


def test_rebuild_needs_nothing_of_the_old_index(built, index_copy):
    vault, _, clean = built
    garbage_manifest_header(index_copy)
    garbage_chroma_sqlite(index_copy)
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        ws.index(rebuild=True)
        assert snapshot(ws) == clean


def test_a_damaged_index_of_another_space_is_left_to_its_own_open(built, index_copy):
    """Damage to the other settings' manifest does not stop this one from opening."""
    vault, _, _ = built
    other = Settings(chunk_size=300, chunk_overlap=20)
    with Workspace.open(vault, other, embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        ws.index()
        other_manifest = ws.manifest.path
    with open(other_manifest, "r+b") as f:
        f.write(b"garbage" * 20)
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        assert ws.healed is None
    with Workspace.open(vault, other, embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        assert ws.healed and "manifest" in ws.healed


def test_damage_that_cannot_be_set_aside_is_a_clear_error(built, index_copy, monkeypatch):
    vault, _, _ = built
    garbage_manifest_header(index_copy)

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(IndexOpenError, match="could not be set aside") as err:
        Workspace.open(vault, Settings(), embedder=FakeEmbedder(), index_dir=index_copy)
    assert "delete that folder" in str(err.value)
    monkeypatch.undo()
    # The refused open left the lock free: the next one heals.
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index_copy) as ws:
        assert ws.healed


KILL_AFTER_INDEX = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {repo!r})
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.workspace import Workspace
    from tests.conftest import FakeEmbedder
    ws = Workspace.open({vault!r}, Settings(), embedder=FakeEmbedder(),
                        index_dir={index!r})
    ws.index()
    os.kill(os.getpid(), 9)  # Chroma's graph files lag its log now
""")


def test_chroma_graph_lagging_its_log_after_a_kill(built, tmp_path):
    vault, _, clean = built
    index = tmp_path / "killed"
    script = KILL_AFTER_INDEX.format(repo=str(REPO), vault=str(vault), index=str(index))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert proc.returncode == -9, proc.stderr[-2000:]
    embedder = FakeEmbedder()
    with Workspace.open(vault, Settings(), embedder=embedder, index_dir=index) as ws:
        assert ws.healed is None
        assert ws.index().files_indexed == 0
        assert embedder.documents_embedded == 0
        assert snapshot(ws) == clean
        assert ws.store.probe(ws.manifest.sample_vectors(50)) is None
        assert ws.manifest.checked == "every page"  # killed: no clean close, no seal
