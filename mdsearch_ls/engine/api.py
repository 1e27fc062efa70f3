"""The engine's public seam: everything a front end may use, and nothing else.

The CLI, the language server and the MCP server import from here only (a test checks it), so the
engine can move its insides without touching them, and a new front end (an HTTP endpoint, an
Obsidian bridge) is a small file over these names:

* open an index: :meth:`Workspace.open` (``write`` | ``read`` | ``read-if-locked``), or keep one
  fresh from a long-running process with :class:`Folders` (the service: several folders, the
  shared model, one rule for changes on disk, merged reads) and its :class:`IndexedFolder`;
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

import importlib

TYPE_CHECKING = False  # not typing's: a plain search asks its server before importing it

# name -> the module that defines it. Loaded on first use (PEP 562): a front end pays only
# for what it touches, so `mdsearch search` on an up-to-date index never imports the
# indexer, the chunker or Chroma, and `--help` imports none of them.
_WHERE: dict[str, str] = {
    "Duplicate": "mdsearch_ls.engine.writing.mentions",
    "DuplicateOf": "mdsearch_ls.engine.writing.mentions",
    "Mention": "mdsearch_ls.engine.writing.mentions",
    "LINK_STYLES": "mdsearch_ls.engine.writing.aids",
    "LinkCandidate": "mdsearch_ls.engine.writing.aids",
    "LinkCompletion": "mdsearch_ls.engine.writing.aids",
    "LinkedRelated": "mdsearch_ls.engine.writing.aids",
    "LinkSuggestion": "mdsearch_ls.engine.writing.aids",
    "LinkTarget": "mdsearch_ls.engine.writing.aids",
    "WritingAids": "mdsearch_ls.engine.writing.aids",
    "Embedder": "mdsearch_ls.engine.embedding",
    "Heading": "mdsearch_ls.engine.notes.chunking",
    "Hit": "mdsearch_ls.engine.search.hits",
    "IndexLockedError": "mdsearch_ls.engine.errors",
    "IndexOpenError": "mdsearch_ls.engine.errors",
    "IndexReadOnlyError": "mdsearch_ls.engine.errors",
    "IndexReport": "mdsearch_ls.engine.index.indexer",
    "IndexState": "mdsearch_ls.engine.index.layout",
    "broad_root_reason": "mdsearch_ls.engine.index.layout",
    "IndexedFolder": "mdsearch_ls.engine.service.folder",
    "MARKDOWN_SUFFIXES": "mdsearch_ls.engine.notes.files",
    "MAX_LIMIT": "mdsearch_ls.engine.search.requests",
    "MdsearchError": "mdsearch_ls.engine.errors",
    "ModelLoadError": "mdsearch_ls.engine.embedding",
    "NotIndexedError": "mdsearch_ls.engine.errors",
    "OpenMode": "mdsearch_ls.engine.index.layout",
    "QueryError": "mdsearch_ls.engine.search.query",
    "Related": "mdsearch_ls.engine.workspace",
    "RelatedRequest": "mdsearch_ls.engine.search.requests",
    "RequestError": "mdsearch_ls.engine.errors",
    "VectorServerError": "mdsearch_ls.engine.errors",
    "STATE_ERROR": "mdsearch_ls.engine.service.folder",
    "STATE_INDEXING": "mdsearch_ls.engine.service.folder",
    "STATE_LOADING": "mdsearch_ls.engine.service.folder",
    "STATE_READY": "mdsearch_ls.engine.service.folder",
    "STATE_STARTING": "mdsearch_ls.engine.service.folder",
    "SearchRequest": "mdsearch_ls.engine.search.requests",
    "SearchResult": "mdsearch_ls.engine.search.hits",
    "Snippet": "mdsearch_ls.engine.search.highlight",
    "Workspace": "mdsearch_ls.engine.workspace",
    "WalkBeside": "mdsearch_ls.engine.index.freshness",
    "count_notes": "mdsearch_ls.engine.index.layout",
    "create_embedder": "mdsearch_ls.engine.embedding",
    "default_index_dir": "mdsearch_ls.engine.index.place",
    "find_index_root": "mdsearch_ls.engine.index.place",
    "has_index": "mdsearch_ls.engine.index.layout",
    "index_dir_of": "mdsearch_ls.engine.index.layout",
    "index_formats": "mdsearch_ls.engine.index.layout",
    "Folders": "mdsearch_ls.engine.service.folders",
    "notes_under": "mdsearch_ls.engine.service.folders",
    "FolderState": "mdsearch_ls.engine.states",
    "IndexPhase": "mdsearch_ls.engine.states",
    "ModelState": "mdsearch_ls.engine.states",
    "Progress": "mdsearch_ls.engine.states",
    "lone_surrogate_field": "mdsearch_ls.engine.notes.decoding",
    "match_spans": "mdsearch_ls.engine.search.highlight",
    "merge_rankings": "mdsearch_ls.engine.search.merging",
    "outline": "mdsearch_ls.engine.notes.chunking",
    "plain_text": "mdsearch_ls.engine.search.preview",
    "query_terms": "mdsearch_ls.engine.search.highlight",
    "snippet": "mdsearch_ls.engine.search.preview",
    "window": "mdsearch_ls.engine.search.highlight",
    "wrap": "mdsearch_ls.engine.search.highlight",
    "PROTOCOL_RESIDENT": "mdsearch_ls.engine.service.resident_rules",
    "private_dir": "mdsearch_ls.engine.service.resident_rules",
    "ranking_settings": "mdsearch_ls.engine.service.resident_rules",
    "resident_socket_path": "mdsearch_ls.engine.service.resident_rules",
    "ask_to_leave": "mdsearch_ls.engine.service.resident_rules",
    "ask_socket": "mdsearch_ls.engine.service.resident_rules",
    "send_socket": "mdsearch_ls.engine.service.resident_rules",
    "background_socket_path": "mdsearch_ls.engine.service.resident_rules",
    "cache_root": "mdsearch_ls.engine.index.place",
    "index_folder": "mdsearch_ls.engine.index.place",
    "indexed_folder": "mdsearch_ls.engine.index.place",
    "socket_file": "mdsearch_ls.engine.service.resident_rules",
    "writer_alive": "mdsearch_ls.engine.index.layout",
    "serve_in_background": "mdsearch_ls.engine.service.background",
    "print_searches_with": "mdsearch_ls.engine.service.resident_rules",
    "IDLE_S": "mdsearch_ls.engine.service.background",
}


if TYPE_CHECKING:
    from typing import Any

    from mdsearch_ls.engine.embedding import Embedder, ModelLoadError, create_embedder
    from mdsearch_ls.engine.errors import (
        IndexLockedError,
        IndexOpenError,
        IndexReadOnlyError,
        MdsearchError,
        NotIndexedError,
        RequestError,
        VectorServerError,
    )
    from mdsearch_ls.engine.index.freshness import WalkBeside
    from mdsearch_ls.engine.index.indexer import IndexReport
    from mdsearch_ls.engine.index.layout import (
        IndexState,
        OpenMode,
        broad_root_reason,
        count_notes,
        has_index,
        index_dir_of,
        index_formats,
        writer_alive,
    )
    from mdsearch_ls.engine.index.place import (
        cache_root,
        default_index_dir,
        find_index_root,
        index_folder,
        indexed_folder,
    )
    from mdsearch_ls.engine.notes.chunking import Heading, outline
    from mdsearch_ls.engine.notes.decoding import lone_surrogate_field
    from mdsearch_ls.engine.notes.files import MARKDOWN_SUFFIXES
    from mdsearch_ls.engine.search.highlight import (
        Snippet,
        match_spans,
        query_terms,
        window,
        wrap,
    )
    from mdsearch_ls.engine.search.hits import Hit, SearchResult
    from mdsearch_ls.engine.search.merging import merge_rankings
    from mdsearch_ls.engine.search.preview import plain_text, snippet
    from mdsearch_ls.engine.search.query import QueryError
    from mdsearch_ls.engine.search.requests import MAX_LIMIT, RelatedRequest, SearchRequest
    from mdsearch_ls.engine.service.background import IDLE_S, serve_in_background
    from mdsearch_ls.engine.service.folder import (
        STATE_ERROR,
        STATE_INDEXING,
        STATE_LOADING,
        STATE_READY,
        STATE_STARTING,
        IndexedFolder,
    )
    from mdsearch_ls.engine.service.folders import Folders, notes_under
    from mdsearch_ls.engine.service.resident_rules import (
        PROTOCOL_RESIDENT,
        ask_socket,
        ask_to_leave,
        background_socket_path,
        print_searches_with,
        private_dir,
        ranking_settings,
        resident_socket_path,
        send_socket,
        socket_file,
    )
    from mdsearch_ls.engine.states import FolderState, IndexPhase, ModelState, Progress
    from mdsearch_ls.engine.workspace import Related, Workspace
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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def is_document(path: str) -> bool:
    """Whether a file name is a document mdsearch can read through a converter (``.pdf``,
    ``.docx``, ``.html``, ``.ipynb``, ``.org``; indexed when ``include_formats`` names it)."""
    from mdsearch_ls.engine.locations import document_format

    return document_format(path) is not None


def is_markdown(path: str) -> bool:
    """Whether a file name is a note mdsearch indexes (by its suffix)."""
    from mdsearch_ls.engine.notes.files import MARKDOWN_SUFFIXES

    return path.lower().endswith(MARKDOWN_SUFFIXES)


__all__ = [
    "IDLE_S",
    "LINK_STYLES",
    "MARKDOWN_SUFFIXES",
    "MAX_LIMIT",
    "PROTOCOL_RESIDENT",
    "STATE_ERROR",
    "STATE_INDEXING",
    "STATE_LOADING",
    "STATE_READY",
    "STATE_STARTING",
    "Duplicate",
    "DuplicateOf",
    "Embedder",
    "FolderState",
    "Folders",
    "Heading",
    "Hit",
    "IndexLockedError",
    "IndexOpenError",
    "IndexPhase",
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
    "ModelState",
    "NotIndexedError",
    "OpenMode",
    "Progress",
    "QueryError",
    "Related",
    "RelatedRequest",
    "RequestError",
    "SearchRequest",
    "SearchResult",
    "Snippet",
    "VectorServerError",
    "WalkBeside",
    "Workspace",
    "WritingAids",
    "ask_socket",
    "ask_to_leave",
    "background_socket_path",
    "broad_root_reason",
    "cache_root",
    "count_notes",
    "create_embedder",
    "default_index_dir",
    "find_index_root",
    "has_index",
    "index_dir_of",
    "index_folder",
    "index_formats",
    "indexed_folder",
    "is_document",
    "is_markdown",
    "lone_surrogate_field",
    "match_spans",
    "merge_rankings",
    "notes_under",
    "outline",
    "plain_text",
    "print_searches_with",
    "private_dir",
    "query_terms",
    "ranking_settings",
    "resident_socket_path",
    "send_socket",
    "serve_in_background",
    "snippet",
    "socket_file",
    "window",
    "wrap",
    "writer_alive",
]
