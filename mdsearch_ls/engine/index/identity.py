"""What a chunk is called: ids and hashes that depend on nothing but its text and place.

Deterministic names are what make a replay idempotent (the same note content always yields the
same ids) and let template sections be told from a note's own words. Apart from the indexer so
that a reader (related sections, a search) can hash a section without importing the writer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mdsearch_ls.engine.notes.formats import format_of

if TYPE_CHECKING:
    from mdsearch_ls.engine.notes import chunking


def is_document(rel: str, formats: Sequence[str]) -> bool:
    """Whether ``rel`` is read through a converter (a PDF, a notebook...) rather than as a note."""
    return format_of(rel, formats) is not None


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
