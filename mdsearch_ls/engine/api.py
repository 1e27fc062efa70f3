"""The engine's public seam: everything a front end may use, and nothing else.

The CLI, the language server and the MCP server import from here only (a test checks it), so the
engine can move its insides without touching them, and a new front end (an HTTP endpoint, an
Obsidian bridge) is a small file over these names:

* open an index: :meth:`Workspace.open` (``write`` | ``read`` | ``read-if-locked``), or keep one
  fresh from a long-running process with :class:`IndexedFolder`;
* ask it things: :class:`SearchRequest` / :class:`RelatedRequest`, validated when built, answered
  with :class:`SearchResult` (hits, notes, :class:`IndexState`) / :class:`Related`;
* find the notes a command means: :func:`find_index_root` (walk up to the nearest indexed
  folder), :func:`has_index`, :func:`count_notes` (ask before indexing a huge folder);
* help while writing: ``Workspace.writing`` / ``IndexedFolder.writing``, a
  :class:`WritingAids` (link completion, where a link goes, related sections and whether they are
  linked, a link to suggest, unlinked mentions, near-duplicates);
* show a hit: :func:`snippet` / :func:`wrap` render a section's markdown (``chunk_texts``) as
  plain text cut between words, with the query's words (:func:`query_terms`) marked;
* make the model: :func:`create_embedder` (one per process; folders share it);
* understand failures: the exceptions of :mod:`mdsearch_ls.engine.errors`, whose messages are
  written for people.
"""

from __future__ import annotations

from mdsearch_ls.engine.chunking import Heading, outline
from mdsearch_ls.engine.embedder import Embedder, ModelLoadError, SentenceTransformerEmbedder
from mdsearch_ls.engine.errors import (
    IndexLockedError,
    IndexOpenError,
    IndexReadOnlyError,
    MdsearchError,
    NotIndexedError,
    RequestError,
)
from mdsearch_ls.engine.folder import (
    STATE_ERROR,
    STATE_INDEXING,
    STATE_LOADING,
    STATE_READY,
    STATE_STARTING,
    IndexedFolder,
    load_in_background,
)
from mdsearch_ls.engine.hygiene import Duplicate, DuplicateOf, Mention
from mdsearch_ls.engine.indexer import IndexReport
from mdsearch_ls.engine.query import QueryError
from mdsearch_ls.engine.render import Snippet, match_spans, plain_text, query_terms, snippet, wrap
from mdsearch_ls.engine.requests import MAX_LIMIT, RelatedRequest, SearchRequest
from mdsearch_ls.engine.search import Hit
from mdsearch_ls.engine.sources import MARKDOWN_SUFFIXES
from mdsearch_ls.engine.workspace import (
    IndexState,
    OpenMode,
    Related,
    SearchResult,
    Workspace,
    count_notes,
    default_index_dir,
    find_index_root,
    has_index,
)
from mdsearch_ls.engine.writing import (
    LINK_STYLES,
    LinkCandidate,
    LinkCompletion,
    LinkedRelated,
    LinkSuggestion,
    LinkTarget,
    WritingAids,
)


def create_embedder(settings: object) -> Embedder:
    """The embedder the settings ask for; load it with ``.load()`` (slow) or on first use."""
    return SentenceTransformerEmbedder(getattr(settings, "model", None))


def is_markdown(path: str) -> bool:
    """Whether a file name is a note mdsearch indexes (by its suffix)."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


__all__ = [
    "LINK_STYLES",
    "MARKDOWN_SUFFIXES",
    "MAX_LIMIT",
    "STATE_ERROR",
    "STATE_INDEXING",
    "STATE_LOADING",
    "STATE_READY",
    "STATE_STARTING",
    "Duplicate",
    "DuplicateOf",
    "Embedder",
    "Heading",
    "Hit",
    "IndexLockedError",
    "IndexOpenError",
    "IndexReadOnlyError",
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
    "NotIndexedError",
    "OpenMode",
    "QueryError",
    "Related",
    "RelatedRequest",
    "RequestError",
    "SearchRequest",
    "SearchResult",
    "Snippet",
    "Workspace",
    "WritingAids",
    "count_notes",
    "create_embedder",
    "default_index_dir",
    "find_index_root",
    "has_index",
    "is_markdown",
    "load_in_background",
    "match_spans",
    "outline",
    "plain_text",
    "query_terms",
    "snippet",
    "wrap",
]
