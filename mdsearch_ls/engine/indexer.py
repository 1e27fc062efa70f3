"""The single writer of an index: full-scan diff, per-file updates, deletes, renames, repair.

Every change to an index goes through one :class:`Indexer`, one job at a time, so there are no
write races to reason about. The order of writes for a group of files is fixed and makes any crash
repairable:

1. new vectors go into the manifest's vector cache (harmless if orphaned: garbage-collected);
2. Chroma gets the new chunk ids upserted and the old ones deleted;
3. one SQLite transaction replaces the files' manifest rows and keyword rows together.

If the process dies between 2 and 3, Chroma holds ids the manifest does not know and lacks ids it
does; :meth:`Indexer.reconcile` (run on every open) deletes the former and restores the latter
from the vector cache, and the file's old content hash makes the next scan index it again. Chunk
ids are derived from path, ordinal and embedded text, so replaying any step is idempotent.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from mdsearch_ls.config import Settings
from mdsearch_ls.engine import chunking, sources
from mdsearch_ls.engine.manifest import Manifest
from mdsearch_ls.engine.records import ChunkRecord, FileRecord, FileUpdate
from mdsearch_ls.engine.store import ChromaStore, chunk_metadata

log = logging.getLogger(__name__)

# files done, files total, chunks written so far
ProgressFn = Callable[[int, int, int], None]
CancelFn = Callable[[], bool]

# How much to gather before one embed call + one write: big enough for the model to batch well,
# small enough that progress moves and a cancel or crash loses little.
GROUP_CHUNKS = 128
GROUP_FILES = 64


@dataclass
class IndexReport:
    """What one index or update run did; the CLI prints it and the server logs it."""

    files_total: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    files_skipped: int = 0
    chunks_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    vector_cache_hits: int = 0
    repaired: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"{self.files_total} files",
            f"{self.chunks_total} chunks",
            f"{self.files_indexed} indexed",
            f"{self.files_deleted} removed",
            f"{self.chunks_embedded} embedded",
            f"{self.vector_cache_hits} reused",
        ]
        if self.files_skipped:
            parts.append(f"{self.files_skipped} skipped")
        if self.repaired:
            parts.append(f"{self.repaired} repaired")
        text = ", ".join(parts) + f" in {self.seconds:.2f}s"
        return text + (" (cancelled)" if self.cancelled else "")


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_id(path: str, ordinal: int, embed_hash: str) -> str:
    """Deterministic: the same note content always yields the same ids, so replays are no-ops."""
    return sha1(f"{path}\x00{ordinal}\x00{embed_hash}")[:32]


_BODY_WS = re.compile(r"\s+")


def body_hash(chunk: chunking.Chunk) -> str:
    """Hash of a chunk's body without its headings: equal for template sections across notes
    (whitespace and case aside), which is how boilerplate is told from a note's own words."""
    return sha1(_BODY_WS.sub(" ", chunk.body).strip().lower())


@dataclass
class _Pending:
    src: sources.SourceFile
    note: chunking.ParsedNote
    content_hash: str
    records: list[ChunkRecord]
    keyword_rows: list[tuple[str, str]]
    old_ids: tuple[str, ...]


class Indexer:
    """Writes one index. Not thread-safe by design: the owner runs it on one thread."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        manifest: Manifest,
        store: ChromaStore,
        embedder: object,
        *,
        index_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.settings = settings
        self.manifest = manifest
        self.store = store
        self.embedder = embedder
        self.filter = sources.SourceFilter(
            root, settings.include, settings.exclude, index_dir=index_dir
        )
        self.index_dir = index_dir

    # ---- repair -----------------------------------------------------------------------------

    def reconcile(self) -> int:
        """Make Chroma agree with the manifest; returns how many ids were fixed."""
        want = self.manifest.chunk_ids()
        have = self.store.all_ids()
        extra = sorted(have - want)
        missing = sorted(want - have)
        if extra:
            log.warning("repairing index: %d orphan vectors removed", len(extra))
            self.store.delete(extra)
        if missing:
            records = self.manifest.get_chunks(missing)
            vecs = self.manifest.vectors(r.embed_hash for r in records.values())
            restorable = [r for r in records.values() if r.embed_hash in vecs]
            lost = {r.path for r in records.values() if r.embed_hash not in vecs}
            if restorable:
                log.warning("repairing index: %d vectors restored", len(restorable))
                files = self.manifest.files()
                self.store.upsert(
                    [r.id for r in restorable],
                    np.stack([vecs[r.embed_hash] for r in restorable]),
                    [chunk_metadata(r, files.get(r.path)) for r in restorable],
                )
            if lost:
                # No cached vector: forget these notes so the next scan re-embeds them.
                log.warning("repairing index: %d notes will be re-embedded", len(lost))
                self.manifest.delete_files(sorted(lost))
        return len(extra) + len(missing)

    # ---- full scan --------------------------------------------------------------------------

    def index(
        self,
        progress: ProgressFn | None = None,
        cancel: CancelFn | None = None,
        *,
        rebuild: bool = False,
    ) -> IndexReport:
        """Bring the index in line with the folder: only new or changed notes are embedded."""
        t0 = time.perf_counter()
        report = IndexReport()
        if rebuild:
            self.store.delete(sorted(self.store.all_ids()))
            self.manifest.clear()
        report.repaired = self.reconcile()
        found = sources.scan(
            self.root,
            include=self.settings.include,
            exclude=self.settings.exclude,
            index_dir=self.index_dir,
            max_file_bytes=self.settings.max_file_bytes,
            warn=report.warnings.append,
        )
        known = self.manifest.files()
        present = {f.rel for f in found}
        gone = sorted(set(known) - present)
        todo = [
            f for f in found
            if (k := known.get(f.rel)) is None or k.mtime != f.mtime or k.size != f.size
        ]
        report.files_total = len(found)
        report.files_unchanged = len(found) - len(todo)
        if gone:
            self._delete(gone, known)
            report.files_deleted = len(gone)
        done = report.files_unchanged
        if progress:
            progress(done, len(found), 0)

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, len(found), report.chunks_written)

        self._process(todo, known, report, tick, cancel)
        report.chunks_total = self.manifest.counts()[1]
        self.manifest.gc_vectors()
        report.seconds = time.perf_counter() - t0
        self.manifest.set_meta("last_full_index", str(time.time()))
        return report

    # ---- targeted updates -------------------------------------------------------------------

    def update(self, paths: Iterable[str | Path]) -> IndexReport:
        """Reindex exactly these notes (a save, a watcher event); deleted ones are dropped."""
        t0 = time.perf_counter()
        report = IndexReport()
        known = self.manifest.files()
        todo: list[sources.SourceFile] = []
        gone: list[str] = []
        for p in dict.fromkeys(self._rel(p) for p in paths):
            if p is None:
                continue
            abs_path = self.root / p
            if not self.filter.accepts(p) or not abs_path.is_file():
                if p in known:
                    gone.append(p)
                continue
            st = abs_path.stat()
            if st.st_size > self.settings.max_file_bytes:
                report.warnings.append(
                    f"skipped {p}: {st.st_size / 1e6:.1f} MB exceeds max_file_bytes "
                    f"({self.settings.max_file_bytes / 1e6:.1f} MB)"
                )
                report.files_skipped += 1
                if p in known:
                    gone.append(p)
                continue
            todo.append(sources.SourceFile(abs_path, p, st.st_size, st.st_mtime))
        if gone:
            self._delete(gone, known)
            report.files_deleted = len(gone)
        report.files_total = len(todo)
        self._process(todo, known, report, lambda n: None, None)
        report.chunks_total = self.manifest.counts()[1]
        report.seconds = time.perf_counter() - t0
        return report

    def delete(self, paths: Iterable[str | Path]) -> IndexReport:
        """Drop notes from the index (a delete event); unknown paths are ignored."""
        t0 = time.perf_counter()
        known = self.manifest.files()
        gone = [p for p in dict.fromkeys(self._rel(p) for p in paths) if p and p in known]
        # A deleted folder arrives as one path: drop every note under it.
        for p in list(dict.fromkeys(self._rel(x) for x in paths)):
            if p and p not in known:
                gone.extend(k for k in known if k.startswith(p.rstrip("/") + "/"))
        gone = sorted(set(gone))
        if gone:
            self._delete(gone, known)
        report = IndexReport(files_deleted=len(gone), chunks_total=self.manifest.counts()[1])
        report.seconds = time.perf_counter() - t0
        return report

    def rename(self, pairs: Sequence[tuple[str | Path, str | Path]]) -> IndexReport:
        """A rename is a delete plus an index; vectors of unchanged text come from the cache."""
        olds = [o for o, _ in pairs]
        news = [n for _, n in pairs]
        deleted = self.delete(olds)
        report = self.update(news)
        report.files_deleted += deleted.files_deleted
        return report

    # ---- internals --------------------------------------------------------------------------

    def _rel(self, p: str | Path) -> str | None:
        if isinstance(p, str) and not Path(p).is_absolute():
            return PurePosixPath(p.replace("\\", "/")).as_posix()
        return sources.relpath(self.root, Path(p))

    def _delete(self, paths: Sequence[str], known: dict[str, FileRecord]) -> None:
        ids = [cid for p in paths if p in known for cid in known[p].chunk_ids]
        # Chroma first, then the manifest: a crash in between is repaired by reconcile().
        self.store.delete(ids)
        self.manifest.delete_files(list(paths))

    def _process(
        self,
        todo: Sequence[sources.SourceFile],
        known: dict[str, FileRecord],
        report: IndexReport,
        tick: Callable[[int], None],
        cancel: CancelFn | None,
    ) -> None:
        group: list[_Pending] = []
        pending_chunks = 0
        for src in todo:
            if cancel and cancel():
                report.cancelled = True
                break
            read = sources.read_source(
                src.path, src.rel, max_file_bytes=self.settings.max_file_bytes
            )
            if read.warning:
                report.warnings.append(read.warning)
            old = known.get(src.rel)
            if read.text is None:
                report.files_skipped += 1
                if old is not None:
                    self._delete([src.rel], known)
                tick(1)
                continue
            if old is not None and old.content_hash == read.content_hash:
                # Touched but not changed (a save without edits, a checkout): record the new
                # mtime only, so the next scan does not read it again.
                self._touch(old, src)
                report.files_unchanged += 1
                tick(1)
                continue
            try:
                note = chunking.parse_note(
                    read.text,
                    fallback_title=PurePosixPath(src.rel).stem,
                    path=src.rel,
                    chunk_size=self.settings.chunk_size,
                    chunk_overlap=self.settings.chunk_overlap,
                )
            except Exception as exc:  # a chunker bug must cost one note, not the index
                log.exception("could not chunk %s", src.rel)
                report.warnings.append(f"skipped {src.rel}: could not parse it ({exc})")
                report.files_skipped += 1
                tick(1)
                continue
            report.warnings.extend(f"{src.rel}: {w}" for w in note.warnings)
            group.append(self._pending(src, note, read.content_hash, old))
            pending_chunks += len(note.chunks)
            if pending_chunks >= GROUP_CHUNKS or len(group) >= GROUP_FILES:
                self._flush(group, report)
                tick(len(group))
                group, pending_chunks = [], 0
        if group:
            self._flush(group, report)
            tick(len(group))

    def _pending(
        self,
        src: sources.SourceFile,
        note: chunking.ParsedNote,
        content_hash: str,
        old: FileRecord | None,
    ) -> _Pending:
        records: list[ChunkRecord] = []
        rows: list[tuple[str, str]] = []
        title_extra = " ".join((note.meta.title, *note.meta.aliases))
        for ch in note.chunks:
            eh = sha1(ch.embed_text)
            records.append(
                ChunkRecord(
                    **ch.location_fields(),
                    id=chunk_id(src.rel, ch.ordinal, eh),
                    ordinal=ch.ordinal,
                    section=ch.section,
                    text=ch.text,
                    embed_hash=eh,
                    body_hash=body_hash(ch),
                )
            )
            rows.append((f"{ch.title} {ch.breadcrumb} {title_extra}", ch.keyword_text))
        return _Pending(src, note, content_hash, records, rows, old.chunk_ids if old else ())

    def _flush(self, group: list[_Pending], report: IndexReport) -> None:
        hashes: dict[str, str] = {}
        for p in group:
            for rec, ch in zip(p.records, p.note.chunks, strict=True):
                hashes.setdefault(rec.embed_hash, ch.embed_text)
        cached = self.manifest.vectors(hashes)
        missing = [h for h in hashes if h not in cached]
        total_refs = sum(len(p.records) for p in group)
        if missing:
            vecs = self.embedder.embed_documents([hashes[h] for h in missing])  # type: ignore[attr-defined]
            fresh = dict(zip(missing, vecs, strict=True))
            self.manifest.put_vectors(fresh)
            cached.update(fresh)
        report.chunks_embedded += len(missing)
        report.vector_cache_hits += total_refs - len(missing)
        # 2. Chroma: upsert every chunk of the changed notes (metadata such as line numbers may
        # move without the text changing), then drop ids that no longer exist.
        ids, vecs_out, metas = [], [], []
        new_ids: set[str] = set()
        for p in group:
            file_meta = self._file_record(p)
            for rec in p.records:
                ids.append(rec.id)
                vecs_out.append(cached[rec.embed_hash])
                metas.append(chunk_metadata(rec, file_meta))
                new_ids.add(rec.id)
        if ids:
            self.store.upsert(ids, np.stack(vecs_out), metas)
        stale = sorted({cid for p in group for cid in p.old_ids} - new_ids)
        self.store.delete(stale)
        # 3. The manifest and keyword rows, together.
        self.manifest.apply(
            [FileUpdate(self._file_record(p), tuple(p.records), tuple(p.keyword_rows),
                        tuple((k.kind, k.target, k.anchor, k.line) for k in p.note.links))
             for p in group]
        )
        report.files_indexed += len(group)
        report.chunks_written += len(ids)

    @staticmethod
    def _file_record(p: _Pending) -> FileRecord:
        return FileRecord(
            path=p.src.rel,
            content_hash=p.content_hash,
            mtime=p.src.mtime,
            size=p.src.size,
            title=p.note.meta.title,
            aliases=tuple(p.note.meta.aliases),
            tags=tuple(p.note.meta.tags),
            chunk_ids=tuple(r.id for r in p.records),
        )

    def _touch(self, old: FileRecord, src: sources.SourceFile) -> None:
        self.manifest.touch(old.path, src.mtime, src.size)
