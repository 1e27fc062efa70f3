"""Links between notes: finding them in a note, writing one, and resolving one to a place.

Two syntaxes are links: Obsidian's ``[[Note#Heading|alias]]`` (and the embed ``![[...]]``), and
markdown's ``[text](relative/path.md#anchor)`` to another note. Neither is a link inside code (a
fenced block or a backtick span), a ``%%comment%%`` or the front matter, exactly as the chunker
reads them, so what a person sees rendered is what counts.

Resolution follows Obsidian's rules, from the index rather than the disk: a wikilink names a note
by its path from the vault root, by its file name (the same folder first, then the shortest
path), or, where Obsidian's plugins do, by its front-matter title or an alias; a markdown link is
a path relative to the note it is in. A ``#Heading`` anchor matches a heading's text or its
GitHub-style slug (``#watering-schedule``), so links written for GitHub or VS Code resolve too.

Everything here is pure (text in, dataclasses out); positions are 0-based lines and code-point
columns, which front ends convert to their protocol's units.
"""

from __future__ import annotations

import bisect
import functools
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from mdsearch_ls.engine.notes.obsidian import WIKILINK_RE, code_spans, in_ranges, wikilink_parts
from mdsearch_ls.engine.notes.outline import Doc, parse_doc

NOTE_SUFFIXES = (".md", ".markdown")

# [text](target "title"): the target may be <in angle brackets>, hold balanced parentheses or
# backslash escapes; an image ![alt](x.png) matches too and is dropped for its suffix.
MD_LINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*"
    r"(<[^<>\n]*>|(?:[^\s()\\]|\\.|\([^\s()]*\))*)"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
# Characters a wikilink's heading part cannot hold (Obsidian replaces them when it links).
_WIKI_UNSAFE = re.compile(r"[\[\]|#^]+")
_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)
_SPACES = re.compile(r"\s+")
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Link:
    """One link as written in a note."""

    kind: str
    """``wiki``, ``embed`` (``![[...]]``) or ``markdown``."""
    target: str
    """The note part as written ('' for a link to a heading of the same note); for a markdown
    link the path, percent-decoded, relative to the linking note's folder."""
    anchor: str
    """The heading (or ``^block``) part, '' when there is none."""
    text: str
    """The alias of a wikilink or the text of a markdown link ('' when there is none)."""
    line: int
    start: int
    """Column of the first character (the ``[`` or the ``!``)."""
    end: int
    """Column just after the last character."""


@dataclass
class NoteText:
    """A note's text and what link features look at: its links, and the ranges where nothing is
    a link or a mention (code, comments, front matter)."""

    doc: Doc
    links: list[tuple[Link, int, int]]
    """Each link with its start and end offsets in ``doc.text``."""
    literal: list[tuple[int, int]]
    """Sorted, disjoint offset ranges of code blocks, code spans, comments and front matter."""

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column) of an offset into ``doc.text``."""
        line = bisect.bisect_right(self.doc.starts, offset) - 1
        return line, offset - self.doc.starts[line]

    def offset(self, line: int, column: int) -> int:
        starts = self.doc.starts
        line = min(max(line, 0), len(starts) - 1)
        return min(starts[line] + max(column, 0), len(self.doc.text))

    def is_literal(self, offset: int) -> bool:
        return in_ranges(offset, self.literal, [a for a, _ in self.literal])

    def link_at(self, line: int, column: int) -> Link | None:
        """The link under a cursor (on any of its characters, or just after its end)."""
        for link, _, _ in self.links:
            if link.line == line and link.start <= column <= link.end:
                return link
        return None


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def literal_ranges(doc: Doc) -> list[tuple[int, int]]:
    """Where Obsidian syntax and prose are not what they seem: code blocks and spans, comments,
    the front matter."""
    text = doc.text
    ranges = [*doc.code, *doc.comments]
    fm = doc.front_matter
    if fm is not None and fm.map:
        ranges.append((0, doc.starts[min(fm.map[1], len(doc.starts) - 1)]))
    if "`" in text:
        # Code spans between the code blocks only: a fence's backticks are not a span's.
        pos = 0
        for a, b in [*sorted(doc.code), (len(text), len(text))]:
            ranges.extend(code_spans(text, pos, a))
            pos = max(pos, b)
    return merge_ranges(ranges)


def read_links(doc: Doc) -> NoteText:
    """Every link of a parsed note, outside code, comments and front matter."""
    text = doc.text
    literal = literal_ranges(doc)
    keys = [a for a, _ in literal]
    found: list[tuple[Link, int, int]] = []
    starts = doc.starts

    def place(a: int, b: int) -> tuple[int, int, int]:
        line = bisect.bisect_right(starts, a) - 1
        return line, a - starts[line], b - starts[line]

    taken: list[tuple[int, int]] = []
    if "[[" in text:
        for m in WIKILINK_RE.finditer(text):
            if in_ranges(m.start(), literal, keys):
                continue
            note, anchor, alias = wikilink_parts(m.group(2))
            line, a, b = place(m.start(), m.end())
            kind = "embed" if m.group(1) else "wiki"
            found.append((Link(kind, note, anchor, alias, line, a, b), m.start(), m.end()))
            taken.append(m.span())
    if "](" in text:
        for m in MD_LINK_RE.finditer(text):
            if in_ranges(m.start(), literal, keys) or any(
                a < m.end() and m.start() < b for a, b in taken
            ):
                continue
            raw = m.group(3)
            if raw.startswith("<") and raw.endswith(">"):
                raw = raw[1:-1]
            path, _, anchor = raw.partition("#")
            path = unquote(_ESCAPE.sub(r"\1", path))
            if _SCHEME.match(path) or (path and not path.lower().endswith(NOTE_SUFFIXES)):
                continue
            if m.group(1) or (not path and not anchor):
                continue
            line, a, b = place(m.start(), m.end())
            found.append((Link("markdown", path, unquote(anchor), m.group(2), line, a, b),
                          m.start(), m.end()))
    found.sort(key=lambda item: item[1])
    return NoteText(doc, found, literal)


@functools.lru_cache(maxsize=16)
def scan(text: str) -> NoteText:
    """:func:`read_links` of a note's text, kept for the last few texts (code lenses, actions
    and completion ask about the same buffer many times)."""
    return read_links(parse_doc(text))


# --------------------------------------------------------------------------- writing links


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and VS Code's markdown preview) gives a heading: lower case, spaces to
    hyphens, punctuation other than ``-`` and ``_`` dropped."""
    return _SLUG_DROP.sub("", heading.strip().lower()).replace(" ", "-")


def wiki_heading(heading: str) -> str:
    """A heading as a wikilink's anchor can hold it (no brackets, bars, ``#`` or ``^``)."""
    return _SPACES.sub(" ", _WIKI_UNSAFE.sub(" ", heading)).strip()


def wikilink(name: str, heading: str | None = None, alias: str | None = None, *,
             embed: bool = False) -> str:
    """``[[name#heading|alias]]``; the alias is left out when it is the name as written (a
    different case stays: the link must read as the words it replaces)."""
    inner = name + (f"#{wiki_heading(heading)}" if heading else "")
    if alias and alias.strip() and alias.strip() != inner:
        inner += "|" + alias.replace("|", " ").replace("]]", " ").strip()
    return ("!" if embed else "") + f"[[{inner}]]"


def relative_target(target: str, source: str, anchor: str | None = None) -> str:
    """The link target of a markdown link from note ``source`` to note ``target`` (both relative
    to the root): a relative path, percent-encoded where a space or parenthesis would end it."""
    rel = posixpath.relpath(target, posixpath.dirname(source) or ".")
    url = quote(rel, safe="/._-~!$&'*+,;=:@")
    return url + (f"#{github_anchor(anchor)}" if anchor else "")


def markdown_link(text: str, target: str, source: str, anchor: str | None = None) -> str:
    """``[text](relative/path.md#anchor)`` from note ``source`` to note ``target``."""
    shown = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return f"[{shown}]({relative_target(target, source, anchor)})"


# --------------------------------------------------------------------------- resolving


def strip_suffix(path: str) -> str:
    low = path.lower()
    for suffix in NOTE_SUFFIXES:
        if low.endswith(suffix):
            return path[: -len(suffix)]
    return path


def _folder(path: str) -> str:
    return posixpath.dirname(path)


class Resolver:
    """Which note a link names, from the notes of one index (paths, titles, aliases)."""

    def __init__(self, names: Mapping[str, Sequence[str]]) -> None:
        """``names``: each note's path and its names (title first, then aliases)."""
        self.paths: dict[str, str] = {}
        self.stems: dict[str, list[str]] = {}
        self.names: dict[str, list[str]] = {}
        for path, own in names.items():
            key = strip_suffix(path).casefold()
            self.paths[key] = path
            self.stems.setdefault(key.rsplit("/", 1)[-1], []).append(path)
            for name in own:
                folded = name.strip().casefold()
                if folded and path not in self.names.get(folded, ()):
                    self.names.setdefault(folded, []).append(path)

    @staticmethod
    def _best(candidates: Sequence[str], source: str) -> str | None:
        """Obsidian's choice among notes of one name: the linking note's folder first, then the
        shortest path."""
        if not candidates:
            return None
        here = _folder(source)
        return min(candidates, key=lambda p: (_folder(p) != here, p.count("/"), len(p), p))

    def resolve(self, link: Link, source: str) -> str | None:
        """The path of the note a link in note ``source`` names; None when no indexed note."""
        target = link.target.strip()
        if not target:
            return source
        if link.kind == "markdown":
            joined = posixpath.normpath(posixpath.join(_folder(source), target.lstrip("/")))
            if target.startswith("/"):
                joined = posixpath.normpath(target.lstrip("/"))
            return self.paths.get(strip_suffix(joined).casefold())
        return self.resolve_name(target, source)

    def resolve_name(self, target: str, source: str) -> str | None:
        """A wikilink's note part: a path from the root, a path from the linking note's folder,
        a file name, a title, an alias."""
        key = strip_suffix(target.replace("\\", "/").strip().lstrip("/")).casefold()
        if not key:
            return None
        if key in self.paths:
            return self.paths[key]
        near = posixpath.normpath(posixpath.join(_folder(source).casefold(), key))
        if near in self.paths:
            return self.paths[near]
        stem = key.rsplit("/", 1)[-1]
        candidates = self.stems.get(stem, [])
        if "/" in key:
            candidates = [p for p in candidates if strip_suffix(p).casefold().endswith("/" + key)]
        found = self._best(candidates, source)
        if found is None and "/" not in key:
            found = self._best(self.names.get(key, []), source)
        return found

    def link_name(self, path: str) -> str:
        """What a wikilink to ``path`` says: the file name when no other note has it, else the
        path without its suffix (Obsidian's "shortest path when possible")."""
        stem = strip_suffix(path).rsplit("/", 1)[-1]
        if len(self.stems.get(stem.casefold(), ())) <= 1:
            return stem
        return strip_suffix(path)


def find_heading(headings: Sequence[tuple[str, int]], anchor: str) -> int | None:
    """The line of the heading an anchor names among ``(title, line)`` pairs: by its text (case
    aside), or by its GitHub slug with the ``-1``, ``-2`` suffixes of repeated headings. Obsidian's
    nested ``A#B`` names its last part."""
    wanted = [p.strip() for p in anchor.split("#") if p.strip()]
    if not wanted or wanted[-1].startswith("^"):
        return None
    name = wanted[-1]
    folded = name.casefold()
    for title, line in headings:
        if title.strip().casefold() == folded or wiki_heading(title).casefold() == folded:
            return line
    slug = github_anchor(name)
    seen: dict[str, int] = {}
    for title, line in headings:
        base = github_anchor(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        if (base if n == 0 else f"{base}-{n}") in (slug, folded):
            return line
    return None


def find_block(lines: Sequence[str], anchor: str) -> int | None:
    """The line ending with a ``^block-id`` an anchor (``#^block-id``) names."""
    block = anchor.rsplit("#", 1)[-1].strip()
    if not block.startswith("^") or len(block) < 2:
        return None
    pattern = re.compile(r"(?:^|\s)" + re.escape(block) + r"\s*$")
    for n, line in enumerate(lines):
        if pattern.search(line):
            return n
    return None


__all__ = [
    "Link",
    "NoteText",
    "Resolver",
    "find_block",
    "find_heading",
    "github_anchor",
    "markdown_link",
    "merge_ranges",
    "read_links",
    "relative_target",
    "scan",
    "wiki_heading",
    "wikilink",
]
