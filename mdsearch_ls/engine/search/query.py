"""The query grammar: what a person types, split into text to rank by and filters to apply.

Text is searched as typed: ``word:value`` is a filter only when ``word`` is one of
:data:`FILTER_NAMES`, so a CLI command (``obsidian daily:append``), a property
(``[aliases:null]``), a log line (``root:x:0:0``), a URL or a Windows path is text, as people
paste them. A name one typo away from a filter's (``tga:``) is text too, with a note saying so;
only a known filter with a value it cannot use (``modified:last week``) is an error, since
silently searching that as text would answer a different question than the one asked.

Parsing is pure (no index, no model), so a front end can validate a query and report a mistake
before anything is opened or loaded, and the same rules hold for the CLI, the editor and the
structured ``filters`` arguments (which go through the same parser).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.locations import DOCUMENT_SUFFIXES
from mdsearch_ls.engine.notes.obsidian import normalise_tag

FILTER_NAMES = ("path", "tag", "type", "modified")
STRUCTURED_FILTERS = (*FILTER_NAMES, "phrase")
_EXAMPLES = {"path": "finance/", "tag": "project", "type": "md", "modified": ">2025-01-01"}


class QueryError(RequestError):
    """A query a person typed that cannot be run; the message says how to fix it."""

    def __init__(self, message: str, field: str | None = "query") -> None:
        super().__init__(message, field)


@dataclass(frozen=True)
class Filters:
    """Restrictions pushed down into both indexes. Empty means "everything"."""

    paths: tuple[str, ...] = ()
    """Folder prefixes (``finance/``) or globs (``**/2024-*.md``); a note matching any passes."""
    tags: tuple[str, ...] = ()
    """Tags a note must all carry (front matter or inline ``#tag``); ``a`` matches ``a/b`` too."""
    types: tuple[str, ...] = ()
    """File suffixes without the dot: ``md``, ``markdown``."""
    modified_after: float | None = None
    modified_before: float | None = None
    phrases: tuple[str, ...] = ()
    """Exact phrases a section must contain."""

    @property
    def file_level(self) -> bool:
        """Whether any filter decides by note (path, tag, type, date) rather than by section."""
        return bool(
            self.paths or self.tags or self.types
            or self.modified_after is not None or self.modified_before is not None
        )

    def merged(self, other: Filters) -> Filters:
        """Both sets of restrictions at once (filters given as arguments and typed inline)."""
        return Filters(
            paths=self.paths + other.paths,
            tags=self.tags + other.tags,
            types=self.types + other.types,
            modified_after=_max_opt(self.modified_after, other.modified_after),
            modified_before=_min_opt(self.modified_before, other.modified_before),
            phrases=self.phrases + other.phrases,
        )

    def key(self) -> tuple[Any, ...]:
        """A hashable identity for caches."""
        return (self.paths, self.tags, self.types, self.modified_after, self.modified_before,
                self.phrases)


def _max_opt(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


_TOKEN_RE = re.compile(r'(?<!\S)([A-Za-z]+):("[^"]*"|\S+)|"([^"]*)"')
_DATE_RE = re.compile(r"^(>=|<=|>|<|=)?(.+)$")
_REL_RE = re.compile(r"^(\d+)([dwmy])$")


def _parse_when(value: str, name: str) -> tuple[str, float, float]:
    """``>2025-01-01`` -> ('>', start of that day, end of it); ``>7d`` = within the last 7 days."""
    from datetime import datetime, timedelta, timezone  # here: only modified: needs it

    m = _DATE_RE.match(value)
    op, raw = (m.group(1) or "="), m.group(2) if m else value
    rel = _REL_RE.match(raw)
    if rel:
        n, unit = int(rel.group(1)), rel.group(2)
        days = {"d": 1, "w": 7, "m": 30, "y": 365}[unit] * n
        t = (datetime.now(timezone.utc) - timedelta(days=days)).timestamp()
        # "modified:7d" with no operator means "in the last 7 days".
        return (">" if op == "=" else op), t, t
    try:
        day = datetime.strptime(raw, "%Y-%m-%d")
        following = day + timedelta(days=1)
    except ValueError:
        try:
            day = datetime.strptime(raw, "%Y-%m")
        except ValueError:
            raise QueryError(
                f"{name}:{value}: expected a date like >2025-01-01, <2025-06, =2025-03-14 or >7d"
            ) from None
        # A month means the whole month: =2025-06 is June, >2025-06 is from July on.
        following = day.replace(year=day.year + day.month // 12, month=day.month % 12 + 1)
    # Local time: "modified on that day" means the user's day.
    return op, day.timestamp(), following.timestamp()


@dataclass(frozen=True)
class ParsedQuery:
    """A typed query, read: what to rank by, what to restrict to, and what to tell the person."""

    text: str
    """The words to rank by: the query without its filters (quoted phrases stay in it)."""
    filters: Filters
    notes: tuple[str, ...] = ()
    """One line each about how the query was read, for a front end to show beside the hits
    (stderr, a result's detail): e.g. a likely misspelt filter that was searched as text."""


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance with adjacent transpositions (``tga`` is one edit from ``tag``)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            cur.append(d)
        prev2, prev = prev, cur
    return prev[-1]


def near_filter_name(name: str) -> str | None:
    """The filter name ``name`` is one typo away from (``pth`` -> ``path``, ``tags`` -> ``tag``),
    if any. One edit only: two would reach ordinary words (``date`` is two from ``type``)."""
    name = name.lower()
    if len(name) < 2 or name in FILTER_NAMES:
        return None
    return next((n for n in FILTER_NAMES if _edit_distance(name, n) == 1), None)


def parse_query(query: str) -> ParsedQuery:
    """Split ``revenue tag:finance path:reports/ "Q3 2024"`` into text, filters and notes.

    ``name:value`` is a filter only when ``name`` is a filter's name (any case) and no space
    follows the colon, so prose ("note: the VPN"), times (10:30), URLs and any other
    ``key:value`` stay text. A known filter with an unusable value raises :class:`QueryError`
    naming the fix.
    """
    paths: list[str] = []
    tags: list[str] = []
    types: list[str] = []
    after: float | None = None
    before: float | None = None

    phrases: list[str] = []
    notes: dict[str, str] = {}

    def take(m: re.Match[str]) -> str:
        nonlocal after, before
        if m.group(3) is not None:  # a quoted phrase
            if m.group(3).strip():
                phrases.append(m.group(3).strip())
            return " "
        name, value = m.group(1).lower(), m.group(2)
        if name not in FILTER_NAMES or value.startswith("//"):
            # Text as typed (a URL such as https://example.com, a CLI command, a property).
            near = near_filter_name(name)
            if near and value and not value.startswith("//"):
                notes.setdefault(near + name, f"`{m.group(1)}:` is not a filter, searched as "
                                              f"text; did you mean `{near}:`?")
            return m.group(0)
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1]
        if not value:
            raise QueryError(f"filter {name}: needs a value, e.g. {name}:{_EXAMPLES[name]}")
        if name == "path":
            paths.append(value.lstrip("./") if value.startswith("./") else value)
        elif name == "tag":
            tags.append(normalise_tag(value))
        elif name == "type":
            types.append(value.lstrip(".").lower())
        else:
            op, start, end = _parse_when(value, name)
            if op in (">", ">="):
                after = _max_opt(after, end if op == ">" else start)
            elif op in ("<", "<="):
                before = _min_opt(before, start if op == "<" else end)
            else:
                after, before = _max_opt(after, start), _min_opt(before, end)
        return " "

    # One left-to-right scan: a quoted "a:b" is a phrase, and name:"a b" is a filter value.
    rest = _TOKEN_RE.sub(take, query)
    known = ("md", "markdown", *(suffix[1:] for suffix in DOCUMENT_SUFFIXES))
    for t in types:
        if t not in known:
            raise QueryError(f"type:{t}: mdsearch indexes md and markdown files, and pdf, "
                             f"docx, html, ipynb and org documents (include_formats)")
    if "html" in types and "htm" not in types:
        types.append("htm")  # one format, two suffixes
    text = " ".join((rest + " " + " ".join(phrases)).split())
    filters = Filters(tuple(paths), tuple(tags), tuple(types), after, before, tuple(phrases))
    return ParsedQuery(text, filters, tuple(notes.values()))


def structured_filters(**values: str | Sequence[str] | None) -> Filters:
    """Filters given as arguments (``--path``, the ``filters`` object of ``mdsearch.search``).

    Each name of :data:`STRUCTURED_FILTERS` takes one value or a list; values mean exactly
    what they mean typed inline (``path="finance/"`` is ``path:finance/``), because they go
    through the same parser, so the two forms can never drift apart and give the same errors.
    """
    parts: list[str] = []
    phrases: list[str] = []
    for name, raw in values.items():
        if name not in STRUCTURED_FILTERS:
            raise QueryError(
                f"unknown filter {name!r}; valid filters are " + ", ".join(STRUCTURED_FILTERS)
            )
        if raw is None:
            continue
        items = [raw] if isinstance(raw, str) else list(raw)
        for v in items:
            if not isinstance(v, str) or not v.strip():
                raise QueryError(f"filter {name}: expected non-empty text, got {v!r}")
            if '"' in v:
                raise QueryError(f'filter {name}: a value cannot contain a double quote (")')
            if name == "phrase":
                phrases.append(v.strip())
            else:
                parts.append(f'{name}:"{v.strip()}"')
    filters = parse_query(" ".join(parts)).filters
    return replace(filters, phrases=filters.phrases + tuple(phrases))


@dataclass(frozen=True)
class PathMatcher:
    """``path:`` patterns compiled once: prefixes as one ``startswith``, globs as regexes.

    Matching thousands of notes one ``fnmatch`` at a time cost 22 ms at 7,426 notes; this is
    what keeps a path filter under a millisecond (benchmarks/README.md, filters).
    """

    prefixes: tuple[str, ...]
    globs: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, patterns: Sequence[str]) -> PathMatcher:
        """Compile ``path:`` values; ``**/x`` also matches ``x`` at the top (fnmatch's ``*``
        crosses folders, but ``**/`` needs a folder before it)."""
        prefixes: list[str] = []
        globs: list[re.Pattern[str]] = []
        for pat in patterns:
            if any(c in pat for c in "*?["):
                globs.append(re.compile(fnmatch.translate(pat)))
                if pat.startswith("**/"):
                    globs.append(re.compile(fnmatch.translate(pat[3:])))
            else:
                prefixes.append(pat)  # a folder, a note, or the start of a name
        return cls(tuple(prefixes), tuple(globs))

    def __call__(self, path: str) -> bool:
        if self.prefixes and path.startswith(self.prefixes):
            return True
        return any(g.match(path) for g in self.globs)


def path_matches(path: str, pattern: str) -> bool:
    """Folder prefix (``finance/``, ``finance``) or glob (``**/*.md``, ``daily/2024-*``)."""
    return PathMatcher.of((pattern,))(path)
