"""The structure of a note: its block parse, heading outline, front matter and section ranges.

* Structure comes from markdown-it-py's *block* parser only; inline parsing is run on demand
  (heading titles, paragraphs that might hold tags or wikilinks) because full inline parsing of
  every paragraph costs ~3x the block parse.
* All positions are offsets into one normalised string (BOM stripped, CRLF and lone CR turned
  into ``\\n``). Since each original line break becomes exactly one ``\\n``, line numbers equal
  what an editor shows for the original file.
* Only top-level headings (not inside lists or block quotes) open sections: a heading nested in
  a list item has no well-defined line range of its own.
* Obsidian ``%%comments%%`` are blanked (same length, newlines kept) before parsing, so a heading
  or tag inside a comment does not count, yet line numbers do not move.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from mdsearch_ls.engine.notes.obsidian import INLINE_PARSER, blank_spans, comment_spans

# Block-only parser: the core "inline" rule is off so paragraphs keep their raw content and we
# pay for inline parsing only where we need it.
_MD_BLOCK = MarkdownIt("commonmark").use(front_matter_plugin)
_MD_BLOCK.disable("inline")

_CODE_BLOCK_TYPES = frozenset({"fence", "code_block"})
_SPLIT_TAGS_RE = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class Heading:
    """A top-level heading and its place in the note's heading tree: the one tree the outline,
    the sections and chunks, the code lenses and actions, the writing aids and MCP's
    ``read_section`` all read, so they agree on where a section starts and ends."""

    title: str
    level: int
    line: int
    end_line: int
    """Last line of its subtree: up to the next heading of the same or a higher level."""
    selection_end_line: int
    """Last line of the heading itself (a setext heading takes two or more)."""
    section_end_line: int
    """Last non-blank line of its own section, up to the next heading of any level (its own
    last line when the section has no body)."""
    path: tuple[str, ...]
    """The titles from the outermost heading it sits under down to its own."""
    parent: int | None
    """The index in the outline of the heading it sits under; None at the top."""


# --------------------------------------------------------------------------- the parse


def _normalise_newlines(text: str) -> str:
    """One ``\\n`` per original line break, so line numbers match the editor's."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _line_starts(text: str) -> list[int]:
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


def _code_ranges(tokens: list[Token], starts: list[int], length: int) -> list[tuple[int, int]]:
    """Offset ranges of fenced/indented code blocks; Obsidian syntax is literal there."""
    out: list[tuple[int, int]] = []
    for tok in tokens:
        if tok.type in _CODE_BLOCK_TYPES and tok.map:
            a = starts[tok.map[0]]
            b = starts[tok.map[1]] if tok.map[1] < len(starts) else length
            out.append((a, b))
    return out


@dataclass
class Doc:
    """A parsed note with the offset bookkeeping every later step shares."""

    text: str
    lines: list[str]
    starts: list[int]
    """Offset of the first character of each line."""
    tokens: list[Token]
    env: dict[str, Any]
    code: list[tuple[int, int]]
    """Offset ranges of code blocks, sorted."""
    comments: list[tuple[int, int]]
    """Offset ranges of ``%%comments%%``, sorted."""
    front_matter: Token | None


def parse_doc(text: str) -> Doc:
    """Block-parse a note once, with its comments blanked and code blocks located."""
    text = _normalise_newlines(text)
    starts = _line_starts(text)
    env: dict[str, Any] = {}
    tokens = _MD_BLOCK.parse(text, env)
    code = _code_ranges(tokens, starts, len(text))
    literal = code
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        literal = sorted([*code, (0, starts[min(tokens[0].map[1], len(starts) - 1)])])
    comments = comment_spans(text, literal)
    if comments:
        # Re-parse with comments blanked: what is inside a comment is not structure.
        env = {}
        tokens = _MD_BLOCK.parse(blank_spans(text, comments), env)
        code = _code_ranges(tokens, starts, len(text))
    fm = tokens[0] if tokens and tokens[0].type == "front_matter" else None
    return Doc(text, text.split("\n"), starts, tokens, env, code, comments, fm)


# --------------------------------------------------------------------------- headings


def _plain(children: list[Token] | None) -> str:
    """Inline tokens -> the text a reader sees (markup dropped, escapes resolved)."""
    out: list[str] = []
    for tok in children or ():
        t = tok.type
        if t in ("text", "text_special", "code_inline", "html_inline"):
            out.append(tok.content)
        elif t in ("softbreak", "hardbreak"):
            out.append("\n")
        elif t == "image":
            out.append(_plain(tok.children))
    return "".join(out)


def _heading_title(tok: Token, env: dict[str, Any]) -> str:
    content = tok.content
    if not any(c in content for c in "\\&*_`[<!\n"):
        return content  # nothing inline-special: skip the inline parser
    tokens = INLINE_PARSER.parseInline(content, dict(env))
    return _plain(tokens[0].children if tokens else None)


def trim_end(lines: list[str], start: int, end: int) -> int:
    """``end`` moved up past blank lines, no further than ``start``."""
    while end > start and not lines[end].strip():
        end -= 1
    return end


def headings(doc: Doc) -> tuple[Heading, ...]:
    """The top-level headings in order, each placed in the tree; a heading nested in a list or
    quote opens no section."""
    found: list[tuple[str, int, int, int]] = []
    tokens = doc.tokens
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.level == 0 and tok.map:
            title = _heading_title(tokens[i + 1], doc.env)
            found.append((title, int(tok.tag[1]), tok.map[0], tok.map[1] - 1))
    last = len(doc.lines) - 1
    ends = [last] * len(found)
    parents: list[int | None] = []
    stack: list[int] = []
    for i, (_, level, line, _) in enumerate(found):
        while stack and found[stack[-1]][1] >= level:
            ends[stack.pop()] = line - 1
        parents.append(stack[-1] if stack else None)
        stack.append(i)
    out: list[Heading] = []
    for i, (title, level, line, head_end) in enumerate(found):
        nxt = found[i + 1][2] - 1 if i + 1 < len(found) else last
        parent = parents[i]
        path = (*out[parent].path, title) if parent is not None else (title,)
        out.append(Heading(title, level, line, max(ends[i], head_end), head_end,
                           trim_end(doc.lines, head_end, nxt), path, parent))
    return tuple(out)


def outline(text: str) -> tuple[Heading, ...]:
    """Headings only: no front matter, tags or chunking, so it is cheap per request."""
    return headings(parse_doc(text))


def heading_at(heads: tuple[Heading, ...], line: int) -> int:
    """The index of the heading whose own section (up to the next heading of any level) holds
    ``line``; -1 before the first heading."""
    return bisect.bisect_right(heads, line, key=lambda h: h.line) - 1


# --------------------------------------------------------------------------- front matter


def as_list(value: Any, *, split_spaces: bool) -> list[str]:
    """Front matter lists may be YAML lists, or one string of comma/space separated items."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        items = []
        for v in value:
            items.extend(as_list(v, split_spaces=split_spaces))
        return items
    if isinstance(value, dict):
        return []
    s = str(value)
    parts = _SPLIT_TAGS_RE.split(s) if split_spaces else s.split(",")
    return [p.strip() for p in parts if p.strip()]


def front_matter(doc: Doc, warnings: list[str]) -> dict[str, Any]:
    """The YAML front matter as a mapping; a problem is a warning, never an exception, so one
    malformed note cannot stop a vault from indexing."""
    fm = doc.front_matter
    if fm is None or not fm.content.strip():
        return {}
    # Imported here, not at the top: PyYAML costs ~12 ms of CPU at import, and the snippet maker
    # (this module's parser) runs in every CLI search, which reads no front matter.
    import yaml

    try:
        data = yaml.load(fm.content, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        warnings.append(f"front matter is not valid YAML{where}: {problem}")
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        warnings.append(f"front matter is not a mapping (got {type(data).__name__}); ignored")
        return {}
    return data


# --------------------------------------------------------------------------- sections


def preamble(doc: Doc, heads: tuple[Heading, ...], note_title: str) -> Heading | None:
    """The text between the front matter and the first heading, when there is any, as a level-0
    section titled after the note (its heading "ends" on the line before it starts)."""
    lines = doc.lines
    start = doc.front_matter.map[1] if doc.front_matter and doc.front_matter.map else 0
    end = trim_end(lines, start, (heads[0].line if heads else len(lines)) - 1)
    if end < start or not any(lines[j].strip() for j in range(start, end + 1)):
        return None
    while not lines[start].strip():
        start += 1
    return Heading(note_title, 0, start, end, start - 1, end, (note_title,), None)
