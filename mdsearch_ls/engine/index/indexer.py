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

Embedding is the slow part, so it goes in batches (about a second of model time each) whose
vectors are committed to the vector cache as soon as they exist: a kill loses at most one batch,
and the next run finds the rest in the cache and embeds nothing twice. A note is written (steps 2
and 3) once all its vectors are there. Notes with many chunks wait behind the small ones, so one
huge note never holds back a vault, and no note gives more than ``max_chunks_per_file`` chunks.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.embed_queue import _Batches, _Pending, _Skips
from mdsearch_ls.engine.index.identity import body_hash, chunk_id, is_document, sha1
from mdsearch_ls.engine.index.layout import FORMATS_META
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.index.report import CancelFn, IndexReport, ProgressFn
from mdsearch_ls.engine.index.vector_store import (
    STORE_CLEAN,
    ChromaStore,
    chunk_metadata,
)
from mdsearch_ls.engine.locations import ChunkRecord, FileRecord, FileUpdate, change_stamp
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.notes.decoding import read_source

if TYPE_CHECKING:
    from mdsearch_ls.engine.notes import chunking

log = logging.getLogger(__name__)


class Indexer:
    """Writes one index. Not thread-safe by design: the owner runs it on one thread."""

    def __init__(self, root: Path, settings: Settings, manifest: Manifest,
                 store: ChromaStore, embedder: object, *,
                 index_dir: Path | None = None) -> None:
        self.root = root
        self.settings = settings
        self.manifest = manifest
        self.store = store
        self.embedder = embedder
        self.filter = sources.SourceFilter(
            root, settings.include, settings.exclude, index_dir=index_dir,
            formats=settings.include_formats,
        )
        self.index_dir = index_dir
        self._store_dirty = False  # the manifest's clean marker was cleared by this writer
        self._settled = True  # every Chroma write so far was followed by its manifest write

    # ---- repair -----------------------------------------------------------------------------

    def _writing_store(self) -> None:
        """Called before every write to Chroma: from here until a clean close, Chroma may be
        ahead of the manifest, so the next open must compare them in full. Both halves of the
        clean-close token are cleared (the collection's matters when it lives on a server that
        another copy of the manifest could meet)."""
        self._settled = False
        if not self._store_dirty:
            self.manifest.set_meta(STORE_CLEAN, "")
            self.store.set_marker("")
            self._store_dirty = True

    def seal_store(self) -> str | None:
        """Before the owner closes the store: write a new clean-close token into the collection
        and return it (None after a write that failed half-way: then the next open compares in
        full). :meth:`mark_store_clean` puts the same token in the manifest once the store has
        closed cleanly."""
        if not self._settled:
            return None
        token = f"{self.manifest.generation} {uuid.uuid4().hex}"
        self.store.set_marker(token)
        return token

    def mark_store_clean(self, token: str) -> None:
        """Record that Chroma holds exactly the manifest's chunks at this generation, so the
        next open can skip the full comparison (which pages through every id in Chroma:
        seconds at 50k chunks)."""
        self.manifest.set_meta(STORE_CLEAN, token)
        self._store_dirty = False

    def _store_known_clean(self) -> bool:
        """Whether Chroma can be trusted to hold the manifest's chunks, cheaply: the manifest
        and the collection carry the same clean-close token, of this generation, and the
        counts agree. A Chroma folder deleted or replaced, a server wiped, restarted on another
        path or restored from a backup, a manifest restored from a backup: each breaks one of
        these, and the open compares id by id and heals from the vector cache."""
        clean = self.manifest.get_meta(STORE_CLEAN)
        if not clean or clean.split()[0] != str(self.manifest.generation):
            return False
        if self.store.marker() != clean:
            return False
        return self.store.count() == self.manifest.counts()[1]

    def reconcile(self, moved: bool = False) -> int:
        """Make Chroma agree with the manifest; returns how many ids were fixed.

        A full comparison only when the last writer did not close cleanly (or Chroma's size
        disagrees): its cost then is the index's size, otherwise two counts. ``moved``: the
        vectors were last kept elsewhere, so filling this store is a move, not damage."""
        import numpy as np

        if not self._store_dirty and self._store_known_clean():
            return 0
        # Moved on purpose (another store than the last holder's): no damage, not counted.
        said, fix = (log.info, "moving the vectors") if moved else (log.warning,
                                                                    "repairing index")
        want = self.manifest.chunk_ids()
        have = self.store.all_ids()
        extra = sorted(have - want)
        missing = sorted(want - have)
        if extra:
            said("%s: %d orphan vectors removed", fix, len(extra))
            self._writing_store()
            self.store.delete(extra)
        if missing:
            records = self.manifest.get_chunks(missing)
            vecs = self.manifest.vectors(r.embed_hash for r in records.values())
            restorable = [r for r in records.values() if r.embed_hash in vecs]
            lost = {r.path for r in records.values() if r.embed_hash not in vecs}
            if restorable:
                said("%s: %d vectors restored", fix, len(restorable))
                files = self.manifest.files_of({r.path for r in restorable})
                self._writing_store()
                self.store.upsert(
                    [r.id for r in restorable],
                    np.stack([vecs[r.embed_hash] for r in restorable]),
                    [chunk_metadata(r, files.get(r.path)) for r in restorable],
                )
            if lost:
                # No cached vector: forget these notes so the next scan re-embeds them.
                log.warning("repairing index: %d notes will be re-embedded", len(lost))
                self.manifest.delete_files(sorted(lost))
        self._settled = True
        return 0 if moved else len(extra) + len(missing)

    def _heal_failed_write(self) -> None:
        """A write failed half-way (a Chroma server gone): compare in full before the next, as
        an open after a crash would (the collection looked up again: a wiped server lost it)."""
        if not self._settled:
            self.store.refresh()
            self.reconcile()

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
            self._writing_store()
            self.store.reset()
            self.manifest.clear()
            self._settled = True
        report.repaired = self.reconcile()
        # What this scan reads, for a later command that does not name the formats (the CLI).
        self.manifest.set_meta(FORMATS_META, ",".join(self.settings.include_formats))
        skips = _Skips(self.manifest, report)
        found = sources.scan(
            self.root,
            include=self.settings.include,
            exclude=self.settings.exclude,
            index_dir=self.index_dir,
            max_file_bytes=self.settings.max_file_bytes,
            warn=report.warnings.append,
            skipped=skips.add,
            formats=self.settings.include_formats,
        )
        # The diff is made on (mtime, size) alone; only the notes that changed or went have
        # their records read: a scan that changes nothing reads no note's record.
        stats = self.manifest.file_stats()
        present = {f.rel for f in found}
        gone = sorted(set(stats) - present)
        todo = [f for f in found if stats.get(f.rel) != (f.ctime, f.size)]
        del stats, present
        known = self.manifest.files_of([*gone, *(f.rel for f in todo)])
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
                progress(done, len(found), report.chunks_embedded + report.vector_cache_hits)

        self._process(todo, known, report, tick, cancel, skips)
        report.chunks_total = self.manifest.counts()[1]
        if not report.cancelled:
            # Not after a cancel: the vectors of a note half embedded are what the next run
            # resumes from.
            skips.finish()
            self.manifest.collect_vectors()
            self.manifest.set_meta("last_full_index", str(time.time()))
        report.seconds = time.perf_counter() - t0
        return report

    # ---- targeted updates -------------------------------------------------------------------

    def update(self, paths: Iterable[str | Path]) -> IndexReport:
        """Reindex exactly these notes (a save, a watcher event); deleted ones are dropped."""
        t0 = time.perf_counter()
        report = IndexReport()
        self._heal_failed_write()
        asked = [p for p in dict.fromkeys(self._rel(p) for p in paths) if p is not None]
        known = self.manifest.files_of(asked)  # what a save costs: its own notes' records
        skips = _Skips(self.manifest, report)
        todo: list[sources.SourceFile] = []
        gone: list[str] = []
        for p in asked:
            abs_path = self.root / p
            if not self.filter.accepts(p) or not abs_path.is_file():
                if p in known:
                    gone.append(p)
                continue
            st = abs_path.stat()
            stamp = change_stamp(st)
            too_big = sources._oversize(p, st.st_size, self.settings.max_file_bytes,
                                        self.settings.include_formats)
            if too_big:
                skips.add(p, stamp, st.st_size, too_big)
                if p in known:
                    gone.append(p)
                continue
            todo.append(sources.SourceFile(abs_path, p, st.st_size, st.st_mtime, stamp))
        if gone:
            self._delete(gone, known)
            report.files_deleted = len(gone)
        report.files_total = len(todo)
        self._process(todo, known, report, lambda n: None, None, skips)
        skips.finish(asked)
        report.chunks_total = self.manifest.counts()[1]
        report.seconds = time.perf_counter() - t0
        return report

    def delete(self, paths: Iterable[str | Path]) -> IndexReport:
        """Drop notes from the index (a delete event); unknown paths are ignored."""
        t0 = time.perf_counter()
        self._heal_failed_write()
        asked = [p for p in dict.fromkeys(self._rel(x) for x in paths) if p]
        known = self.manifest.files_of(asked)
        # A deleted folder arrives as one path: drop every note under it.
        for p in asked:
            if p not in known:
                known.update(self.manifest.files_of(self.manifest.paths_under(p)))
        gone = sorted(known)
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
        self._writing_store()
        self.store.delete(ids)
        self.manifest.delete_files(list(paths))
        self._settled = True

    def _process(
        self,
        todo: Sequence[sources.SourceFile],
        known: dict[str, FileRecord],
        report: IndexReport,
        tick: Callable[[int], None],
        cancel: CancelFn | None,
        skips: _Skips,
    ) -> None:
        # Here, not at the top: a search of an up-to-date index opens the writer but never
        # parses a note, and the parser is a sixth of a search process's start-up.
        from mdsearch_ls.engine.notes import chunking

        batches = _Batches(self.manifest, self.embedder, self._flush, report, tick, cancel)
        cap = self.settings.max_chunks_per_file
        formats = self.settings.include_formats
        if formats:
            # Notes first, then documents, smallest first: converting a long PDF takes seconds,
            # so the notes are embedded and committed before the first document is read.
            todo = sorted(todo, key=lambda s: (d := is_document(s.rel, formats),
                                               s.size if d else 0))
        notes_written = not formats
        for src in todo:
            if cancel and cancel():
                report.cancelled = True
                break
            if not notes_written and is_document(src.rel, formats):
                notes_written = True  # every note searchable before the first conversion
                if not batches.pump(final=True):
                    break
            old = known.get(src.rel)
            if old is None and skips.seen(src.rel, src.ctime, src.size):
                skips.add(src.rel, src.ctime, src.size, "")  # reported when it changed last
                tick(1)
                continue
            read = read_source(
                src.path, src.rel, max_file_bytes=self.settings.max_file_bytes,
                formats=formats, known_hash=old.content_hash if old is not None else None,
            )
            if read.text is None:
                skips.add(src.rel, src.ctime, src.size,
                          read.warning or f"skipped {src.rel}: cannot read it")
                if old is not None:
                    self._delete([src.rel], known)
                tick(1)
                continue
            if read.warning:
                report.warnings.append(read.warning)
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
                skips.add(src.rel, src.ctime, src.size,
                          f"skipped {src.rel}: could not parse it ({exc})")
                tick(1)
                continue
            report.warnings.extend(f"{src.rel}: {w}" for w in note.warnings)
            if len(note.chunks) > cap:
                report.warnings.append(
                    f"{src.rel}: {len(note.chunks):,} chunks, more than max_chunks_per_file "
                    f"({cap:,}); only its first {cap:,} are indexed"
                )
                note = dataclasses.replace(note, chunks=note.chunks[:cap])
            batches.add(self._pending(src, note, read.content_hash, old))
            if not batches.pump():
                break
        batches.pump(final=True)

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
        """Write notes whose vectors are all in the cache: Chroma first, then the manifest."""
        import numpy as np

        hashes: dict[str, str] = {}
        for p in group:
            for rec, ch in zip(p.records, p.note.chunks, strict=True):
                hashes.setdefault(rec.embed_hash, ch.embed_text)
        cached = self.manifest.vectors(hashes)
        missing = [h for h in hashes if h not in cached]
        if missing:  # not expected (the batches cached them all); never write a vector-less note
            vecs = self.embedder.embed_documents([hashes[h] for h in missing])  # type: ignore[attr-defined]
            fresh = dict(zip(missing, vecs, strict=True))
            self.manifest.put_vectors(fresh)
            cached.update(fresh)
            report.chunks_embedded += len(missing)
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
        self._writing_store()
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
        self._settled = True
        report.files_indexed += len(group)
        report.chunks_written += len(ids)

    @staticmethod
    def _file_record(p: _Pending) -> FileRecord:
        return FileRecord(
            path=p.src.rel,
            content_hash=p.content_hash,
            mtime=p.src.mtime,
            size=p.src.size,
            title=p.note.meta.title, aliases=tuple(p.note.meta.aliases),
            tags=tuple(p.note.meta.tags),
            chunk_ids=tuple(r.id for r in p.records), ctime=p.src.ctime,
        )

    def _touch(self, old: FileRecord, src: sources.SourceFile) -> None:
        # Chroma's copy of the mtime first: a crash in between leaves the manifest's old mtime,
        # so the next scan reads the note and touches it again. Only the change stamp moved
        # (a copy, a chmod, an index made before the stamp was kept): Chroma holds no stamp,
        # so it is not written; at 96k chunks a write per note made a holder's first look of
        # such an index take minutes.
        if (src.mtime, src.size) != (old.mtime, old.size):
            moved = dataclasses.replace(old, mtime=src.mtime, size=src.size)
            records = self.manifest.chunks_for(old.path)
            self._writing_store()
            self.store.update_metadata([r.id for r in records],
                                       [chunk_metadata(r, moved) for r in records])
        self.manifest.touch(old.path, src.mtime, src.size, src.ctime)
        self._settled = True
