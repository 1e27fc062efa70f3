"""The embedding queue of one index run: notes waiting for vectors, the batches that make
them, and the files a run leaves out.

Apart from :mod:`mdsearch_ls.engine.index.indexer` so that the writer's order of steps reads on
its own; the rules of batching are explained on :class:`_Batches`, which is given what it needs
(the manifest, the model, and how to write the notes whose vectors are ready) rather than the
indexer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdsearch_ls.engine.index.report import CancelFn, IndexReport
from mdsearch_ls.engine.locations import ChunkRecord
from mdsearch_ls.engine.notes import files as sources

if TYPE_CHECKING:
    from mdsearch_ls.engine.embedding import Embedder
    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.notes import chunking

log = logging.getLogger(__name__)


# Chunks per embed call, committed together. The size adapts so that one batch takes about
# BATCH_SECONDS whatever the machine, its load or the model: progress moves, and a kill or cancel
# loses about that much work. (The model batches far fewer at a time internally anyway.)
EMBED_BATCH = 16  # the first batch, before any speed is known
MIN_BATCH = 8
MAX_BATCH = 256
BATCH_SECONDS = 1.0
# Notes written to Chroma and the manifest together when no embedding is needed (cache hits).
GROUP_CHUNKS = 128
GROUP_FILES = 64
# A note needing more new vectors than this waits behind the small notes...
BIG_NOTE = 256
# ... unless more than this many of such chunks are waiting: then big and small batches take
# turns, which bounds the texts held in memory.
BIG_BACKLOG = 4096


@dataclass
class _Pending:
    src: sources.SourceFile
    note: chunking.ParsedNote
    content_hash: str
    records: list[ChunkRecord]
    keyword_rows: list[tuple[str, str]]
    old_ids: tuple[str, ...]
    missing: set[str] = field(default_factory=set)  # embed hashes still without a vector


class _Skips:
    """Files a run leaves out; each is reported once per change of the file, not per scan.

    A skipped file has no manifest row, so without this every scan (every CLI ``search``)
    would read it again and repeat its warning. Its mtime and size are remembered instead: the
    same state again is skipped quietly, without reading it.
    """

    def __init__(self, manifest: Manifest, report: IndexReport) -> None:
        self.manifest = manifest
        self.report = report
        self.before = manifest.skipped()
        self.now: set[str] = set()

    def seen(self, rel: str, mtime: float, size: int) -> bool:
        return self.before.get(rel) == (mtime, size)

    def add(self, rel: str, mtime: float, size: int, message: str) -> None:
        self.report.files_skipped += 1
        self.now.add(rel)
        if self.seen(rel, mtime, size):
            log.debug("skipped %s again (unchanged since it was reported)", rel)
            return
        self.report.warnings.append(message)
        self.manifest.set_skipped([(rel, mtime, size, message)])

    def finish(self, paths: Iterable[str] | None = None) -> None:
        """Forget the records of files (among ``paths``, or all) this run did not skip."""
        scope = self.before.keys() if paths is None else set(paths) & self.before.keys()
        self.manifest.set_skipped((), sorted(set(scope) - self.now))


class _Batches:
    """The notes of one run waiting for vectors, and the vectors to make, in batches.

    Each batch is embedded and committed to the vector cache at once; notes whose vectors are
    all there are then written. Chunks of small notes go first; a note with more than
    :data:`BIG_NOTE` new chunks queues behind them (taking turns once over
    :data:`BIG_BACKLOG`), so the rest of a vault is searchable long before one huge note is.
    """

    def __init__(self, manifest: Manifest, embedder: Embedder,
                 write: Callable[[list[_Pending], IndexReport], None], report: IndexReport,
                 progress: Callable[[int], None], cancel: CancelFn | None) -> None:
        self.manifest = manifest
        self.embedder = embedder
        self.write = write
        self.report = report
        self.progress = progress
        self.cancel = cancel
        self.small: deque[tuple[str, str]] = deque()
        self.big: deque[tuple[str, str]] = deque()
        self.waiting: dict[str, list[_Pending]] = {}
        self.ready: list[_Pending] = []
        self.ready_chunks = 0
        self.small_waiting: set[int] = set()  # small notes waiting for vectors (by id)
        self.big_turn = False
        self.size = EMBED_BATCH

    def add(self, p: _Pending) -> None:
        texts: dict[str, str] = {}
        for rec, ch in zip(p.records, p.note.chunks, strict=True):
            texts.setdefault(rec.embed_hash, ch.embed_text)
        cached = self.manifest.vectors(texts)
        new = [h for h in texts if h not in cached and h not in self.waiting]
        p.missing = {h for h in texts if h not in cached}
        for h in p.missing:
            self.waiting.setdefault(h, []).append(p)
        big = len(new) > BIG_NOTE
        (self.big if big else self.small).extend((h, texts[h]) for h in new)
        if p.missing and not big:
            self.small_waiting.add(id(p))
        self.report.vector_cache_hits += len(p.records) - len(new)
        if not p.missing:
            self._mark_ready(p)

    def _mark_ready(self, p: _Pending) -> None:
        self.small_waiting.discard(id(p))
        self.ready.append(p)
        self.ready_chunks += len(p.records)

    def pump(self, *, final: bool = False) -> bool:
        """Embed the batches that are due (all of them with ``final``) and write the notes they
        complete; False once cancelled."""
        while not self.report.cancelled:
            if self.cancel is not None and self.cancel():
                self.report.cancelled = True
                break
            batch = self._next_batch(final)
            if batch is None:
                break
            self._embed(batch)
        if self.ready and (final or self.report.cancelled or len(self.ready) >= GROUP_FILES
                           or self.ready_chunks >= GROUP_CHUNKS):
            self._write()
        return not self.report.cancelled

    def _next_batch(self, final: bool) -> list[tuple[str, str]] | None:
        # A batch of small notes is due when full, or when it holds GROUP_FILES notes (a vault
        # of tiny notes commits as often as one of long ones).
        small_full = len(self.small) >= self.size or (
            bool(self.small) and len(self.small_waiting) >= GROUP_FILES
        )
        big_due = len(self.big) > BIG_BACKLOG
        if big_due and (self.big_turn or not small_full):
            queue = self.big
        elif small_full or (final and self.small):
            queue = self.small
        elif final and self.big:
            queue = self.big
        else:
            return None
        self.big_turn = queue is self.small
        return [queue.popleft() for _ in range(min(self.size, len(queue)))]

    def _embed(self, batch: list[tuple[str, str]]) -> None:
        hashes = [h for h, _ in batch]
        t0 = time.perf_counter()
        vectors = self.embedder.embed_documents([t for _, t in batch])  # type: ignore[attr-defined]
        rate = len(batch) / max(time.perf_counter() - t0, 1e-3)
        self.size = int(min(MAX_BATCH, max(MIN_BATCH, (self.size + rate * BATCH_SECONDS) / 2)))
        # Committed now: from here on a kill cannot cost this batch again.
        self.manifest.put_vectors(dict(zip(hashes, vectors, strict=True)))
        self.report.chunks_embedded += len(batch)
        for h in hashes:
            for p in self.waiting.pop(h, ()):
                p.missing.discard(h)
                if not p.missing:
                    self._mark_ready(p)
        if self.ready:
            self._write()
        else:
            self.progress(0)

    def _write(self) -> None:
        group, self.ready, self.ready_chunks = self.ready, [], 0
        self.write(group, self.report)
        self.progress(len(group))
