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

import importlib
from typing import Any

# Each name is resolved on first use (PEP 562), from the module that defines it: importing every
# engine module up front (numpy, the writing aids, the indexer, Chroma's glue) made a CLI search
# that its holder answers cost 0.46 s of CPU and 44 MB instead of 0.32 s and 31 MB (whole
# processes, medians of 9 pairs run in turn); a front end pays only for what it touches.
_WHERE: dict[str, tuple[str, str]] = {
    "BACKGROUND_ENV": ("mdsearch_ls.engine.service.spawn", "ENV"),
    "BroadRootError": ("mdsearch_ls.engine.errors", "BroadRootError"),
    "Duplicate": ("mdsearch_ls.engine.writing.mentions", "Duplicate"),
    "DuplicateOf": ("mdsearch_ls.engine.writing.mentions", "DuplicateOf"),
    "Embedder": ("mdsearch_ls.engine.embedding", "Embedder"),
    "FolderState": ("mdsearch_ls.engine.states", "FolderState"),
    "Folders": ("mdsearch_ls.engine.service.folders", "Folders"),
    "Heading": ("mdsearch_ls.engine.notes.outline", "Heading"),
    "Hit": ("mdsearch_ls.engine.search.hits", "Hit"),
    "HolderError": ("mdsearch_ls.engine.service.messages", "HolderError"),
    "IDLE_S": ("mdsearch_ls.engine.service.background", "IDLE_S"),
    "IndexLockedError": ("mdsearch_ls.engine.errors", "IndexLockedError"),
    "IndexOpenError": ("mdsearch_ls.engine.errors", "IndexOpenError"),
    "IndexPhase": ("mdsearch_ls.engine.states", "IndexPhase"),
    "IndexReport": ("mdsearch_ls.engine.index.report", "IndexReport"),
    "IndexState": ("mdsearch_ls.engine.index.layout", "IndexState"),
    "IndexedFolder": ("mdsearch_ls.engine.service.folder", "IndexedFolder"),
    "LINK_STYLES": ("mdsearch_ls.engine.writing.aids", "LINK_STYLES"),
    "LinkCandidate": ("mdsearch_ls.engine.writing.aids", "LinkCandidate"),
    "LinkCompletion": ("mdsearch_ls.engine.writing.aids", "LinkCompletion"),
    "LinkSuggestion": ("mdsearch_ls.engine.writing.aids", "LinkSuggestion"),
    "LinkTarget": ("mdsearch_ls.engine.writing.aids", "LinkTarget"),
    "LinkedRelated": ("mdsearch_ls.engine.writing.aids", "LinkedRelated"),
    "MARKDOWN_SUFFIXES": ("mdsearch_ls.engine.notes.files", "MARKDOWN_SUFFIXES"),
    "MAX_LIMIT": ("mdsearch_ls.config", "MAX_LIMIT"),
    "MdsearchError": ("mdsearch_ls.engine.errors", "MdsearchError"),
    "Mention": ("mdsearch_ls.engine.writing.mentions", "Mention"),
    "ModelLoadError": ("mdsearch_ls.engine.embedding", "ModelLoadError"),
    "ModelState": ("mdsearch_ls.engine.states", "ModelState"),
    "NotIndexedError": ("mdsearch_ls.engine.errors", "NotIndexedError"),
    "Progress": ("mdsearch_ls.engine.states", "Progress"),
    "QueryError": ("mdsearch_ls.engine.search.query", "QueryError"),
    "Related": ("mdsearch_ls.engine.search.hits", "Related"),
    "RelatedRequest": ("mdsearch_ls.engine.search.requests", "RelatedRequest"),
    "RequestError": ("mdsearch_ls.engine.errors", "RequestError"),
    "SearchRequest": ("mdsearch_ls.engine.search.requests", "SearchRequest"),
    "SearchResult": ("mdsearch_ls.engine.search.hits", "SearchResult"),
    "Snippet": ("mdsearch_ls.engine.search.highlight", "Snippet"),
    "VectorServerError": ("mdsearch_ls.engine.errors", "VectorServerError"),
    "WritingAids": ("mdsearch_ls.engine.writing.aids", "WritingAids"),
    "background_off": ("mdsearch_ls.engine.service.spawn", "background_off"),
    "broad_root_reason": ("mdsearch_ls.engine.index.layout", "broad_root_reason"),
    "cache_root": ("mdsearch_ls.engine.index.layout", "cache_root"),
    "create_embedder": ("mdsearch_ls.engine.embedding", "create_embedder"),
    "default_index_dir": ("mdsearch_ls.engine.index.layout", "default_index_dir"),
    "document_format": ("mdsearch_ls.engine.locations", "document_format"),
    "find_index_root": ("mdsearch_ls.engine.index.layout", "find_index_root"),
    "has_index": ("mdsearch_ls.engine.index.layout", "has_index"),
    "index_formats": ("mdsearch_ls.engine.index.layout", "index_formats"),
    "not_indexed_reason": ("mdsearch_ls.engine.index.layout", "not_indexed_reason"),
    "heading_at": ("mdsearch_ls.engine.notes.outline", "heading_at"),
    "index_dir_of": ("mdsearch_ls.engine.index.layout", "index_dir_of"),
    "is_note_name": ("mdsearch_ls.engine.notes.files", "is_note_name"),
    "lone_surrogate_field": ("mdsearch_ls.engine.notes.decoding", "lone_surrogate_field"),
    "match_spans": ("mdsearch_ls.engine.search.highlight", "match_spans"),
    "merge_rankings": ("mdsearch_ls.engine.search.merging", "merge_rankings"),
    "outline": ("mdsearch_ls.engine.notes.outline", "outline"),
    "plain_text": ("mdsearch_ls.engine.search.preview", "plain_text"),
    "query_terms": ("mdsearch_ls.engine.search.highlight", "query_terms"),
    "serve_in_background": ("mdsearch_ls.engine.service.background", "serve_in_background"),
    "snippet": ("mdsearch_ls.engine.search.preview", "snippet"),
    "stop_background": ("mdsearch_ls.engine.service.spawn", "stop_background"),
    "window": ("mdsearch_ls.engine.search.highlight", "window"),
    "wrap": ("mdsearch_ls.engine.search.highlight", "wrap"),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def is_document(path: str) -> bool:
    """Whether a file name is a document mdsearch can read through a converter (``.pdf``,
    ``.docx``, ``.html``, ``.ipynb``, ``.org``; indexed when ``include_formats`` names it)."""
    return __getattr__("document_format")(path) is not None


def is_markdown(path: str) -> bool:
    """Whether a file name is a note mdsearch indexes (by its suffix)."""
    return path.lower().endswith(__getattr__("MARKDOWN_SUFFIXES"))


__all__ = [*_WHERE, "is_document", "is_markdown"]
