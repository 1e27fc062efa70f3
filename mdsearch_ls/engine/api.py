"""The engine's public seam: everything a front end may use, and nothing else.

The CLI, the language server and the MCP server import from here only (a test checks it), so
the engine can move its insides without touching them, and a new front end (an HTTP endpoint, an
Obsidian bridge) is a small file over these names:

* keep folders: :class:`Folders` (the service: several folders, the shared model, one rule for
  changes on disk, merged reads) and its :class:`IndexedFolder`, each held by this process or
  asked of the process that holds it, the same calls either way;
* ask them things: :class:`SearchRequest` / :class:`RelatedRequest`, validated when built,
  answered with :class:`SearchResult` (hits, notes, :class:`IndexState`) / :class:`Related`;
* find the notes a command means: :func:`find_index_root` (walk up to the nearest indexed
  folder), :func:`has_index`, :func:`broad_root_reason` (ask before indexing a huge folder);
* help while writing: ``IndexedFolder.writing`` (link completion, where a link goes, related
  sections and whether they are linked, a link to suggest, unlinked mentions, near-duplicates);
* show a hit: :func:`snippet` / :func:`wrap` render a section's markdown as plain text cut
  between words, with the query's words (:func:`query_terms`) marked;
* make the model: :func:`create_embedder` (one per process; folders share it);
* understand failures: the exceptions of :mod:`mdsearch_ls.engine.errors`, whose messages are
  written for people.
"""

from __future__ import annotations

from mdsearch_ls.engine.embedding import Embedder, ModelLoadError, create_embedder
from mdsearch_ls.engine.errors import (
    BroadRootError,
    IndexLockedError,
    IndexOpenError,
    MdsearchError,
    NotIndexedError,
    RequestError,
    VectorServerError,
)
from mdsearch_ls.engine.index.layout import (
    IndexState,
    broad_root_reason,
    cache_root,
    default_index_dir,
    find_index_root,
    has_index,
    index_dir_of,
)
from mdsearch_ls.engine.index.report import IndexReport
from mdsearch_ls.engine.locations import document_format
from mdsearch_ls.engine.notes.chunking import Heading, outline
from mdsearch_ls.engine.notes.decoding import lone_surrogate_field
from mdsearch_ls.engine.notes.files import MARKDOWN_SUFFIXES, is_note_name
from mdsearch_ls.engine.search.highlight import Snippet, match_spans, query_terms, window, wrap
from mdsearch_ls.engine.search.hits import Hit, Related, SearchResult
from mdsearch_ls.engine.search.merging import merge_rankings
from mdsearch_ls.engine.search.preview import plain_text, snippet
from mdsearch_ls.engine.search.query import QueryError
from mdsearch_ls.engine.search.requests import MAX_LIMIT, RelatedRequest, SearchRequest
from mdsearch_ls.engine.service.background import IDLE_S, serve_in_background
from mdsearch_ls.engine.service.folder import IndexedFolder
from mdsearch_ls.engine.service.folders import Folders, notes_under
from mdsearch_ls.engine.service.messages import HolderError
from mdsearch_ls.engine.service.spawn import ENV as BACKGROUND_ENV
from mdsearch_ls.engine.service.spawn import background_off, stop_background
from mdsearch_ls.engine.states import FolderState, IndexPhase, ModelState, Progress
from mdsearch_ls.engine.writing.aids import (
    LINK_STYLES,
    LinkCandidate,
    LinkCompletion,
    LinkedRelated,
    LinkSuggestion,
    LinkTarget,
    WritingAids,
)
from mdsearch_ls.engine.writing.mentions import Duplicate, DuplicateOf, Mention


def is_document(path: str) -> bool:
    """Whether a file name is a document mdsearch can read through a converter (``.pdf``,
    ``.docx``, ``.html``, ``.ipynb``, ``.org``; indexed when ``include_formats`` names it)."""
    return document_format(path) is not None


def is_markdown(path: str) -> bool:
    """Whether a file name is a note mdsearch indexes (by its suffix)."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


__all__ = [
    "BACKGROUND_ENV",
    "IDLE_S",
    "LINK_STYLES",
    "MARKDOWN_SUFFIXES",
    "MAX_LIMIT",
    "BroadRootError",
    "Duplicate",
    "DuplicateOf",
    "Embedder",
    "FolderState",
    "Folders",
    "Heading",
    "Hit",
    "HolderError",
    "IndexLockedError",
    "IndexOpenError",
    "IndexPhase",
    "IndexReport",
    "IndexState",
    "IndexedFolder",
    "LinkCandidate",
    "LinkCompletion",
    "LinkSuggestion",
    "LinkTarget",
    "LinkedRelated",
    "MdsearchError",
    "Mention",
    "ModelLoadError",
    "ModelState",
    "NotIndexedError",
    "Progress",
    "QueryError",
    "Related",
    "RelatedRequest",
    "RequestError",
    "SearchRequest",
    "SearchResult",
    "Snippet",
    "VectorServerError",
    "WritingAids",
    "background_off",
    "broad_root_reason",
    "cache_root",
    "create_embedder",
    "default_index_dir",
    "find_index_root",
    "has_index",
    "index_dir_of",
    "is_document",
    "is_markdown",
    "is_note_name",
    "lone_surrogate_field",
    "match_spans",
    "merge_rankings",
    "notes_under",
    "outline",
    "plain_text",
    "query_terms",
    "serve_in_background",
    "snippet",
    "stop_background",
    "window",
    "wrap",
]
