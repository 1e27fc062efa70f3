"""Sections of other notes related to the section under a cursor: the hover's and the related
view's question, asked of one index.

The section is read from the editor's buffer when there is one, else from disk; its vectors come
from the index's cache when its embedded text is unchanged, else it is embedded on the fly (and
not stored: only the writer stores).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.index.identity import sha1
from mdsearch_ls.engine.notes import chunking
from mdsearch_ls.engine.notes.decoding import read_source
from mdsearch_ls.engine.search.hits import Related
from mdsearch_ls.engine.search.requests import RelatedRequest

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.search.searcher import Searcher


RELATED_MAX_CHUNKS = 8
"""At most this many chunks of the section under the cursor are embedded to describe it, the
ones nearest the cursor. A request on an open document must cost what a small section costs:
a long section of a huge buffer (one heading, hundreds of windows) embedded whole took minutes,
and eight windows around the cursor say what that part of it is about."""


def over_limit(text: str, max_file_bytes: int) -> bool:
    """Whether a buffer is larger than the notes indexing reads (``max_file_bytes`` in UTF-8):
    such a document gets no writing help, as indexing skips it, instead of unbounded work."""
    if len(text) > max_file_bytes:  # a character is at least one byte: no encode needed
        return True
    if len(text) * 4 <= max_file_bytes:  # at most four bytes each: cannot be over
        return False
    return len(text.encode("utf-8", "surrogatepass")) > max_file_bytes


def _nearest(chunks: list[chunking.Chunk], line: int, n: int) -> list[chunking.Chunk]:
    """The ``n`` chunks nearest ``line`` (one holding it first), in note order."""
    if len(chunks) <= n:
        return chunks

    def distance(c: chunking.Chunk) -> int:
        return 0 if c.start_line <= line <= c.end_line else min(abs(c.start_line - line),
                                                                 abs(c.end_line - line))

    keep = sorted(chunks, key=distance)[:n]
    return sorted(keep, key=lambda c: c.ordinal)


def mean_vector(vectors: Sequence[np.ndarray]) -> np.ndarray | None:
    """The normalised centroid of a section's chunk vectors (its "meaning" for related)."""
    if not vectors:
        return None
    v = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def related_sections(
    request: RelatedRequest,
    rel: str,
    *,
    root: Path,
    settings: Settings,
    embedder: Embedder,
    manifest: Manifest,
    searcher: Searcher,
    reading: Callable[[], AbstractContextManager[None]],
) -> Related:
    """Sections of other notes related to the section at ``request.line`` of the note ``rel``.

    ``reading`` guards each read of the index (see ``Workspace._reading``), so a read-only
    index that another process rebuilds is reopened rather than read half-written.
    """
    text = request.text
    if text is not None and over_limit(text, settings.max_file_bytes):
        return Related(None, [])
    if text is None:
        path = root / rel
        if not path.is_file():
            raise RequestError(f"{request.path} does not exist", "path")
        read = read_source(path, rel, max_file_bytes=settings.max_file_bytes,
                                   formats=settings.include_formats)
        if read.text is None:
            return Related(None, [])
        text = read.text
    note = chunking.parse_note(
        text,
        fallback_title=PurePosixPath(rel).stem,
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
    )
    section = chunking.section_at_line(note, request.line)
    if section is None:
        return Related(None, [])
    index = note.sections.index(section)
    own = [c for c in note.chunks if c.section == index]
    texts = [c.embed_text for c in _nearest(own, request.line, RELATED_MAX_CHUNKS)]
    if not texts:
        return Related(section, [])
    hashes = [sha1(t) for t in texts]
    with reading():
        cached = manifest.vectors(hashes)
    missing = [t for t, h in zip(texts, hashes, strict=True) if h not in cached]
    vectors = [cached[h] for h in hashes if h in cached]
    if missing:  # a person waits for these: not behind an index's batch where avoidable
        embed = getattr(embedder, "embed_waited", embedder.embed_documents)
        vectors.extend(np.asarray(v) for v in embed(missing))
    centroid = mean_vector(vectors)
    if centroid is None:
        return Related(section, [])
    min_score = request.min_score
    with reading():
        hits = searcher.related(
            centroid,
            exclude_path=rel,
            k=request.k or settings.hover_max_results,
            min_score=settings.hover_min_score if min_score is None else min_score,
        )
    return Related(section, hits)
