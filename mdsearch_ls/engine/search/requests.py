"""Requests front ends make of a workspace, validated once, here, whatever protocol carried them.

The CLI, the language server's commands and ``workspace/symbol``, and the MCP tools all build a
:class:`SearchRequest` or :class:`RelatedRequest` from what they received and let the engine say
what is wrong with it: one set of rules and one wording, instead of a copy per front end. A
request's query is parsed when it is built, before any index is opened or scanned, so a mistyped
filter is reported at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mdsearch_ls.config import MAX_LIMIT, MODES, Settings
from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.search.query import Filters, QueryError, parse_query, structured_filters

MAX_QUERY_CHARS = 10_000


def _limit(value: Any, default: int, name: str = "limit") -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{name}' must be a whole number from 1 to {MAX_LIMIT}, got {value!r}",
                           name)
    if not 1 <= value <= MAX_LIMIT:
        raise RequestError(f"'{name}' must be from 1 to {MAX_LIMIT}, got {value}", name)
    return value


def _score(value: Any, name: str = "min_score") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise RequestError(f"'{name}' must be a number from -1 to 1, got {value!r}", name)
    if not -1.0 <= value <= 1.0:
        raise RequestError(f"'{name}' must be from -1 to 1, got {value}", name)
    return float(value)


def _mode(value: Any) -> str | None:
    if value is None:
        return None
    if value not in MODES:
        raise RequestError(f"'mode' must be one of {', '.join(MODES)}, got {value!r}", "mode")
    return str(value)


def _filters(value: Any) -> Any:
    """Structured filters (``{"tag": ["a"], "path": "x/"}``) through the query grammar's parser,
    so an argument means exactly what the same filter typed inline means."""
    if value is None:
        return Filters()
    if isinstance(value, Filters):
        return value
    if not isinstance(value, Mapping):
        raise RequestError(
            "'filters' must be an object like {\"tag\": \"x\", \"path\": \"notes/\"}", "filters"
        )
    for name, raw in value.items():
        ok = raw is None or isinstance(raw, str) or (
            isinstance(raw, Sequence) and all(isinstance(v, str) for v in raw)
        )
        if not ok:
            raise RequestError(
                f"'filters.{name}' must be text or a list of texts, got {raw!r}", f"filters.{name}"
            )
    try:
        return structured_filters(**{str(k): v for k, v in value.items()})
    except QueryError as exc:
        exc.field = "filters"
        raise


@dataclass(frozen=True)
class SearchRequest:
    """One search: the query exactly as typed, and everything that shapes its answer."""

    query: str
    k: int
    mode: str | None = None
    """None: the workspace's ``mode`` setting."""
    filters: Filters | None = None
    """Filters given as arguments (:class:`~mdsearch_ls.engine.search.query.Filters`), on top of the
    ones typed in the query."""
    min_score: float | None = None
    """Drop hits whose similarity to the query is below this (hits without one are kept)."""
    text: str = ""
    """The free text left once the typed filters are taken out (what is embedded)."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Things a person should know about how the query was read."""

    @classmethod
    def build(
        cls,
        query: Any,
        *,
        k: Any = None,
        mode: Any = None,
        filters: Any = None,
        min_score: Any = None,
        default_k: int = Settings.max_results,
    ) -> SearchRequest:
        """Validate every part; raises :class:`RequestError` naming the part at fault."""
        if not isinstance(query, str):
            raise RequestError(f"'query' must be text, got {type(query).__name__}", "query")
        if len(query) > MAX_QUERY_CHARS:
            raise RequestError(
                f"'query' is too long ({len(query)} characters; at most {MAX_QUERY_CHARS})",
                "query",
            )
        structured = _filters(filters)
        parsed = parse_query(query)  # a QueryError names the field "query"
        return cls(
            query=query,
            k=_limit(k, default_k),
            mode=_mode(mode),
            filters=structured,
            min_score=_score(min_score),
            text=parsed.text,
            notes=parsed.notes,
        )

    @property
    def empty(self) -> bool:
        """Nothing to search for: no text and no required phrase."""
        phrases = getattr(self.filters, "phrases", ()) if self.filters is not None else ()
        return not self.text.strip() and not phrases


@dataclass(frozen=True)
class RelatedRequest:
    """Sections of other notes related to one place in a note."""

    path: str
    """The note: relative to the workspace root, or absolute inside it."""
    line: int
    """0-based line; its section is the one compared."""
    text: str | None = None
    """The editor's current buffer of the note, when it has one (unsaved edits count)."""
    k: int | None = None
    min_score: float | None = None

    @classmethod
    def build(
        cls,
        path: Any,
        line: Any,
        *,
        text: Any = None,
        k: Any = None,
        min_score: Any = None,
    ) -> RelatedRequest:
        if not isinstance(path, str) or not path.strip():
            raise RequestError("'path' must be the path of a note", "path")
        if isinstance(line, bool) or not isinstance(line, int) or line < 0:
            raise RequestError(f"'line' must be a 0-based line number, got {line!r}", "line")
        if text is not None and not isinstance(text, str):
            raise RequestError("'text' must be the note's text", "text")
        return cls(path=path, line=line, text=text,
                   k=None if k is None else _limit(k, 5), min_score=_score(min_score))


__all__ = ["RelatedRequest", "RequestError", "SearchRequest"]
