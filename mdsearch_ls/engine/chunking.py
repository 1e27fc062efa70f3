"""Markdown note -> outline, sections and search chunks.

Everything here is pure (text in, dataclasses out) so the indexer, the LSP
features and the tests can share one notion of "where a section is".

Design notes:

* Structure comes from markdown-it-py's *block* parser only; inline parsing is
  run on demand (heading titles, paragraphs that might hold tags or wikilinks)
  because full inline parsing of every paragraph costs ~3x the block parse.
* All positions are offsets into one normalised string (BOM stripped, CRLF and
  lone CR turned into ``\\n``). Since each original line break becomes exactly
  one ``\\n``, line numbers equal what an editor shows for the original file.
* Only top-level headings (not inside lists or block quotes) open sections:
  a heading nested in a list item has no well-defined line range of its own.
* Obsidian ``%%comments%%`` are blanked (same length, newlines kept) before
  parsing, so a heading or tag inside a comment does not count, yet line
  numbers do not move.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

__all__ = [
    "Chunk",
    "Heading",
    "NoteMeta",
    "ParsedNote",
    "Section",
    "normalize_obsidian",
    "outline",
    "parse_note",
    "section_at_line",
]


@dataclass(frozen=True)
class Heading:
    """A heading for the document outline (LSP documentSymbol)."""

    title: str
    level: int
    line: int
    end_line: int
    selection_end_line: int


@dataclass(frozen=True)
class NoteMeta:
    """Note-level metadata used for filters and for the embedded text."""

    title: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    links: tuple[str, ...]


@dataclass(frozen=True)
class Section:
    """The lines from one heading to the next heading of any level."""

    title: str
    level: int
    breadcrumb: tuple[str, ...]
    start_line: int
    end_line: int
    text: str


@dataclass(frozen=True)
class Chunk:
    """One unit of retrieval: a section, or a window of a long section."""

    ordinal: int
    section: int
    title: str
    breadcrumb: str
    start_line: int
    end_line: int
    text: str
    embed_text: str
    keyword_text: str


@dataclass(frozen=True)
class ParsedNote:
    """Everything the indexer needs from one note, computed in one pass."""

    meta: NoteMeta
    headings: tuple[Heading, ...]
    sections: tuple[Section, ...]
    chunks: tuple[Chunk, ...]
    warnings: tuple[str, ...]


# --------------------------------------------------------------------------- parsers

# Block-only parser: the core "inline" rule is off so paragraphs keep their raw
# content and we pay for inline parsing only where we need it.
_MD_BLOCK = MarkdownIt("commonmark").use(front_matter_plugin)
_MD_BLOCK.disable("inline")
# Inline parser: text_join is off so backslash escapes and entities stay
# separate ``text_special`` tokens, which lets tag detection ignore ``\\#x``.
_MD_INLINE = MarkdownIt("commonmark")
_MD_INLINE.disable("text_join")

_CODE_BLOCK_TYPES = frozenset({"fence", "code_block"})

# Obsidian tag: '#' at start or after whitespace, then letters/digits/_/-/'/'.
_TAG_RE = re.compile(r"(?:(?<=\s)|^)#([\w/-]+)")
_WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]*?)\]\]")
_MD_LINK_RE = re.compile(r"!?\[([^\[\]\n]*)\]\((?:[^()\n]|\([^()\n]*\))*\)")
# ``==highlight==`` (Obsidian) reads as its text; ``a == b`` is not one (no space inside the marks).
_HIGHLIGHT_RE = re.compile(r"(?<![=\\])==(?=[^\s=])([^\n=]*?[^\s=])==(?!=)")
# A block id (``... ^intro-2``) ends a paragraph or list item: an address, not words.
_BLOCK_ID_RE = re.compile(r"[ \t]\^[A-Za-z0-9-]+[ \t]*$", re.MULTILINE)
_CALLOUT_RE = re.compile(r"^([ \t]*(?:>[ \t]*)+)\[!([\w-]+)\][+-]?[ \t]*(.*)$", re.MULTILINE)
_SENTENCE_END_RE = re.compile(r"[.!?…][)\"'\]»”’]*(?=\s)|[。！？]")
_BLANK_LINE_RE = re.compile(r"\n[ \t]*\n")
_SPLIT_TAGS_RE = re.compile(r"[,\s]+")
# A backtick code span: a run of N backticks closed by exactly N, within one paragraph.
_CODE_SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.DOTALL)


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


def _in_ranges(pos: int, ranges: list[tuple[int, int]], keys: list[int]) -> bool:
    i = bisect.bisect_right(keys, pos) - 1
    return i >= 0 and ranges[i][0] <= pos < ranges[i][1]


def _comment_spans(text: str, code: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Obsidian ``%%...%%`` spans outside code blocks; an unclosed one runs to the end."""
    if "%%" not in text:
        return []
    keys = [a for a, _ in code]
    marks: list[int] = []
    pos = text.find("%%")
    while pos != -1:
        if not _in_ranges(pos, code, keys):
            marks.append(pos)
        pos = text.find("%%", pos + 2)
    if marks and "`" in text:
        # ``printf "%%d"`` in a code span is code, not a comment marker.
        spans = [m.span() for m in _CODE_SPAN_RE.finditer(text)]
        span_keys = [a for a, _ in spans]
        marks = [m for m in marks if not _in_ranges(m, spans, span_keys)]
    spans = []
    for i in range(0, len(marks), 2):
        start = marks[i]
        end = marks[i + 1] + 2 if i + 1 < len(marks) else len(text)
        spans.append((start, end))
    return spans


def _blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace spans by spaces but keep newlines, so lines do not move."""
    parts = []
    pos = 0
    for a, b in spans:
        parts.append(text[pos:a])
        parts.append(re.sub(r"[^\n]", " ", text[a:b]))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


@dataclass
class _Doc:
    """The parsed document with the offset bookkeeping shared by all helpers."""

    text: str
    lines: list[str]
    starts: list[int]
    tokens: list[Token]
    env: dict[str, Any]
    code: list[tuple[int, int]]
    comments: list[tuple[int, int]]
    front_matter: Token | None


def _parse(text: str) -> _Doc:
    text = _normalise_newlines(text)
    starts = _line_starts(text)
    env: dict[str, Any] = {}
    tokens = _MD_BLOCK.parse(text, env)
    code = _code_ranges(tokens, starts, len(text))
    literal = code
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        literal = sorted([*code, (0, starts[min(tokens[0].map[1], len(starts) - 1)])])
    comments = _comment_spans(text, literal)
    if comments:
        # Re-parse with comments blanked: what is inside a comment is not structure.
        env = {}
        tokens = _MD_BLOCK.parse(_blank_spans(text, comments), env)
        code = _code_ranges(tokens, starts, len(text))
    fm = tokens[0] if tokens and tokens[0].type == "front_matter" else None
    return _Doc(text, text.split("\n"), starts, tokens, env, code, comments, fm)


# --------------------------------------------------------------------------- inline text


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


def _tag_text(children: list[Token] | None) -> str:
    """Inline tokens -> text for tag/link detection; code and escapes become opaque."""
    out: list[str] = []
    for tok in children or ():
        t = tok.type
        if t == "text":
            out.append(tok.content)
        elif t in ("softbreak", "hardbreak"):
            out.append("\n")
        elif t == "image":
            out.append(_tag_text(tok.children))
        elif t in ("code_inline", "text_special", "html_inline"):
            out.append("\x00")
    return "".join(out)


def _heading_title(tok: Token, env: dict[str, Any]) -> str:
    content = tok.content
    if not any(c in content for c in "\\&*_`[<!\n"):
        return content  # nothing inline-special: skip the inline parser
    tokens = _MD_INLINE.parseInline(content, dict(env))
    return _plain(tokens[0].children if tokens else None)


def _is_tag(name: str) -> bool:
    return any(not (c.isdigit() or c in "/-") for c in name)


def _normalise_tag(tag: str) -> str:
    return tag.strip().lstrip("#").strip().lower()


# --------------------------------------------------------------------------- headings


@dataclass(frozen=True)
class _RawHeading:
    title: str
    level: int
    line: int
    selection_end_line: int


def _raw_headings(doc: _Doc) -> list[_RawHeading]:
    out: list[_RawHeading] = []
    tokens = doc.tokens
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.level == 0 and tok.map:
            title = _heading_title(tokens[i + 1], doc.env)
            out.append(_RawHeading(title, int(tok.tag[1]), tok.map[0], tok.map[1] - 1))
    return out


def _last_line(doc: _Doc) -> int:
    return len(doc.lines) - 1


def _outline(doc: _Doc, raw: list[_RawHeading]) -> tuple[Heading, ...]:
    last = _last_line(doc)
    result = []
    for i, h in enumerate(raw):
        end = last
        for nxt in raw[i + 1 :]:
            if nxt.level <= h.level:
                end = nxt.line - 1
                break
        result.append(
            Heading(h.title, h.level, h.line, max(end, h.selection_end_line), h.selection_end_line)
        )
    return tuple(result)


def outline(text: str) -> tuple[Heading, ...]:
    """Headings only: no front matter, tags or chunking, so it is cheap per request."""
    doc = _parse(text)
    return _outline(doc, _raw_headings(doc))


# --------------------------------------------------------------------------- front matter


def _as_list(value: Any, *, split_spaces: bool) -> list[str]:
    """Front matter lists may be YAML lists, or one string of comma/space separated items."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        items = []
        for v in value:
            items.extend(_as_list(v, split_spaces=split_spaces))
        return items
    if isinstance(value, dict):
        return []
    s = str(value)
    parts = _SPLIT_TAGS_RE.split(s) if split_spaces else s.split(",")
    return [p.strip() for p in parts if p.strip()]


def _front_matter(doc: _Doc, warnings: list[str]) -> dict[str, Any]:
    fm = doc.front_matter
    if fm is None or not fm.content.strip():
        return {}
    try:
        data = yaml.load(fm.content, Loader=_YAML_LOADER)
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


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# --------------------------------------------------------------------------- normalisation


def _readable_target(target: str, *, embed: bool) -> str:
    name = target.rstrip("/").rsplit("/", 1)[-1]
    if embed and "." in name:
        name = name.rsplit(".", 1)[0] or name
    elif name.lower().endswith(".md"):
        name = name[:-3]
    return name


def _wikilink_sub(m: re.Match[str]) -> str:
    embed = bool(m.group(1))
    inner = m.group(2)
    target, bar, alias = inner.partition("|")
    alias = alias.strip()
    if bar and alias and not (embed and re.fullmatch(r"\d+(x\d+)?", alias)):
        return alias
    note, _, sub = target.partition("#")
    parts = []
    if note.strip():
        parts.append(_readable_target(note.strip(), embed=embed))
    sub = " ".join(p.strip() for p in sub.split("#") if p.strip() and not p.startswith("^"))
    if sub:
        parts.append(sub)
    return " ".join(parts)


def _callout_sub(m: re.Match[str]) -> str:
    prefix, kind, title = m.group(1), m.group(2), m.group(3).strip()
    return f"{prefix}{title or kind}"


# A code span (CommonMark: a run of backticks closed by a run of the same length).
_CODE_SPAN_RE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)


def _normalise_inline(text: str) -> str:
    """Obsidian syntax to reading text, outside code spans: ``[[x]]`` in backticks is code."""
    if "`" not in text:
        return _normalise_prose(text)
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN_RE.finditer(text):
        out.append(_normalise_prose(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_normalise_prose(text[pos:]))
    return "".join(out)


def _normalise_prose(text: str) -> str:
    if "[[" in text:
        text = _WIKILINK_RE.sub(_wikilink_sub, text)
    if "](" in text:
        text = _MD_LINK_RE.sub(lambda m: m.group(1), text)
    if "[!" in text:
        text = _CALLOUT_RE.sub(_callout_sub, text)
    if "==" in text:
        text = _HIGHLIGHT_RE.sub(r"\1", text)
    if "^" in text:
        text = _BLOCK_ID_RE.sub("", text)
    return text


def _render(doc: _Doc, a: int, b: int) -> str:
    """Normalised text of doc[a:b]: comments removed, Obsidian syntax outside code rewritten."""
    text = doc.text
    pieces: list[tuple[int, int]] = []
    pos = a
    comments = doc.comments
    first = max(bisect.bisect_right(comments, (a, a)) - 1, 0)
    for s, e in comments[first:]:
        if s >= b:
            break
        if e <= pos or s >= b:
            continue
        if s > pos:
            pieces.append((pos, s))
        pos = max(pos, e)
    if pos < b:
        pieces.append((pos, b))
    out: list[str] = []
    for s, e in pieces:
        cur = s
        code = doc.code
        k = max(bisect.bisect_right(code, (s, s)) - 1, 0)
        for cs, ce in code[k:]:
            if cs >= e:
                break
            if ce <= cur:
                continue
            if cs > cur:
                out.append(_normalise_inline(text[cur:cs]))
            out.append(text[max(cs, cur) : min(ce, e)])
            cur = min(ce, e)
        if cur < e:
            out.append(_normalise_inline(text[cur:e]))
    result = "".join(out)
    if doc.comments:
        # Removing a comment often leaves runs of blank lines behind.
        result = re.sub(r"\n[ \t]*(?:\n[ \t]*)+\n", "\n\n", result)
    return result.strip()


def normalize_obsidian(text: str) -> str:
    """Rewrite Obsidian syntax into the words a reader sees, for embedding and keywords.

    ``[[Note|alias]]`` reads as "alias", a callout marker is noise, and a comment
    is not meant to be read at all; leaving them in skews both the vectors and
    BM25. Code blocks are left verbatim because ``[[`` or ``%%`` there is code.
    """
    doc = _parse(text)
    return _render(doc, 0, len(doc.text))


# --------------------------------------------------------------------------- tags and links


def _inline_tags_and_links(doc: _Doc) -> tuple[list[str], list[str]]:
    tags: list[str] = []
    links: list[str] = []
    tokens = doc.tokens
    for i, tok in enumerate(tokens):
        if tok.type != "inline":
            continue
        content = tok.content
        has_hash = "#" in content
        has_link = "[[" in content
        if not (has_hash or has_link):
            continue
        in_heading = i > 0 and tokens[i - 1].type == "heading_open"
        if in_heading and not has_link:
            continue
        parsed = _MD_INLINE.parseInline(content, dict(doc.env))
        plain = _tag_text(parsed[0].children if parsed else None)
        if has_hash and not in_heading:
            for m in _TAG_RE.finditer(plain):
                name = m.group(1)
                if _is_tag(name):
                    tags.append(_normalise_tag(name))
        if has_link:
            for m in _WIKILINK_RE.finditer(plain):
                target = m.group(2).partition("|")[0].partition("#")[0].strip()
                if target:
                    links.append(target)
    return tags, links


def _dedupe(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class _SectionSpan:
    title: str
    level: int
    breadcrumb: tuple[str, ...]
    start_line: int
    heading_end_line: int  # last line of the heading itself; start_line - 1 for the preamble
    end_line: int


def _trim_end(doc: _Doc, start: int, end: int) -> int:
    lines = doc.lines
    while end > start and not lines[end].strip():
        end -= 1
    return end


def _section_spans(doc: _Doc, raw: list[_RawHeading], note_title: str) -> list[_SectionSpan]:
    lines = doc.lines
    body_start = doc.front_matter.map[1] if doc.front_matter and doc.front_matter.map else 0
    spans: list[_SectionSpan] = []
    first = raw[0].line if raw else len(lines)
    pre_end = _trim_end(doc, body_start, first - 1)
    if pre_end >= body_start and any(lines[j].strip() for j in range(body_start, pre_end + 1)):
        while not lines[body_start].strip():
            body_start += 1
        spans.append(
            _SectionSpan(note_title, 0, (note_title,), body_start, body_start - 1, pre_end)
        )
    stack: list[_RawHeading] = []
    for i, h in enumerate(raw):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        nxt = raw[i + 1].line - 1 if i + 1 < len(raw) else len(lines) - 1
        end = max(_trim_end(doc, h.selection_end_line, nxt), h.selection_end_line)
        spans.append(
            _SectionSpan(
                h.title, h.level, tuple(s.title for s in stack), h.line, h.selection_end_line, end
            )
        )
    return spans


# --------------------------------------------------------------------------- splitting


def _block_starts(doc: _Doc) -> list[int]:
    """Lines where a block (paragraph, list item, fence, ...) starts, sorted.

    These are the "paragraph" breaks for splitting. They come from the parser,
    so a list item or a fence counts even without a blank line before it.
    """
    return sorted({tok.map[0] for tok in doc.tokens if tok.map and tok.nesting >= 0})


def _boundaries(doc: _Doc, blocks: list[int], first_line: int, last_line: int) -> list[int]:
    """Offsets of the newline before each block that starts inside (first_line, last_line]."""
    i = bisect.bisect_right(blocks, first_line)
    j = bisect.bisect_right(blocks, last_line)
    return [doc.starts[ln] - 1 for ln in blocks[i:j]]


def _split(
    text: str, lo: int, hi: int, size: int, overlap: int, paras: list[int]
) -> list[tuple[int, int]]:
    """Windows over text[lo:hi] of at most ``size`` chars, ending at the best boundary.

    Boundaries in order of preference: block (paragraph), sentence end, line
    break, whitespace. A break is only accepted in the back half of the window
    so chunks do not get tiny; below that we fall back to the next kind. A
    window ends mid-word only when one word is longer than ``size``.
    """
    isspace = str.isspace
    spans: list[tuple[int, int]] = []

    def skip_ws(p: int) -> int:
        while p < hi and isspace(text[p]):
            p += 1
        return p

    def rstrip(s: int, e: int) -> int:
        while e > s and isspace(text[e - 1]):
            e -= 1
        return e

    def find_break(s: int, limit: int, floor: int) -> int | None:
        # Candidate e means chunk = text[s:e] with text[e] whitespace.
        for lower in (max(floor, s + size // 2), floor):
            if lower >= limit:
                continue
            i = bisect.bisect_right(paras, limit) - 1
            if i >= 0 and paras[i] > lower:
                return paras[i]
            window = text[lower : limit + 1]
            last = 0
            for m in _SENTENCE_END_RE.finditer(window):
                if m.end() < len(window):
                    last = m.end()
            if last:
                return lower + last
            j = window.rfind("\n")
            if j > 0:
                return lower + j
            for j in range(len(window) - 1, 0, -1):
                if isspace(window[j]) and not isspace(window[j - 1]):
                    return lower + j
        return None

    s = lo
    prev_end = lo
    while s < hi:
        if hi - s <= size:
            e = rstrip(s, hi)
            if e > s:
                spans.append((s, e))
            break
        limit = s + size
        floor = max(skip_ws(s), prev_end)
        e = find_break(s, limit, floor)
        if e is None:
            if not spans and floor > s:
                # Leading blank lines ate the budget of a word that fits on its own:
                # give the heading a chunk of its own rather than cut the word.
                spans.append((s, s))
                s = prev_end = floor
                continue
            if spans and s < prev_end:
                # Only whitespace before the previous end: restart there without overlap.
                s = skip_ws(prev_end)
                continue
            e = limit  # a single word longer than size: the only hard split
        e = rstrip(s, e)
        if e <= s:
            e = limit
        spans.append((s, e))
        prev_end = e
        nxt = e
        if overlap and e < hi and isspace(text[e]):
            p = e - overlap
            if p > s:
                # Move forward to the start of a word so the overlap never starts mid-word.
                while p < e and not isspace(text[p - 1]):
                    p += 1
                nxt = p
        s = skip_ws(nxt)
    return spans


# --------------------------------------------------------------------------- main entry


def _check_settings(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            f"chunk_overlap must be >= 0 and < chunk_size ({chunk_size}), got {chunk_overlap}"
        )


def parse_note(
    text: str, *, fallback_title: str, chunk_size: int = 1000, chunk_overlap: int = 200
) -> ParsedNote:
    """Parse one note into metadata, outline, sections and chunks in a single pass.

    Doing it in one place keeps the line ranges the LSP shows, the sections
    ``related`` looks up and the chunks that are embedded consistent with each
    other. Bad front matter is reported in ``warnings`` rather than raised: one
    malformed note must not stop a vault from indexing.
    """
    _check_settings(chunk_size, chunk_overlap)
    doc = _parse(text)
    warnings: list[str] = []
    fm = _front_matter(doc, warnings)

    title_value = fm.get("title")
    note_title = str(title_value).strip() if title_value not in (None, "") else ""
    if not note_title:
        note_title = fallback_title
    fm_tags = _as_list(fm.get("tags", fm.get("tag")), split_spaces=True)
    aliases = _as_list(fm.get("aliases", fm.get("alias")), split_spaces=False)
    inline_tags, links = _inline_tags_and_links(doc)
    meta = NoteMeta(
        title=note_title,
        tags=_dedupe([_normalise_tag(t) for t in fm_tags] + inline_tags),
        aliases=_dedupe(aliases),
        links=_dedupe(links),
    )

    raw = _raw_headings(doc)
    headings = _outline(doc, raw)
    spans = _section_spans(doc, raw, note_title)

    dtext, starts, lines = doc.text, doc.starts, doc.lines
    sections: list[Section] = []
    chunks: list[Chunk] = []
    same_title = note_title.casefold()
    blocks = _block_starts(doc)

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset) - 1

    for idx, sp in enumerate(spans):
        sec_a = starts[sp.start_line]
        sec_b = starts[sp.end_line] + len(lines[sp.end_line])
        sections.append(
            Section(
                sp.title, sp.level, sp.breadcrumb, sp.start_line, sp.end_line, dtext[sec_a:sec_b]
            )
        )
        crumb = " > ".join(sp.breadcrumb)
        head_line = (
            crumb
            if sp.breadcrumb and sp.breadcrumb[0].casefold() == same_title
            else f"{note_title}\n{crumb}"
        )
        if sp.heading_end_line >= sp.start_line:
            head_end = starts[sp.heading_end_line] + len(lines[sp.heading_end_line])
            body_a = min(head_end + 1, sec_b)
        else:
            head_end = None
            body_a = sec_a
        paras = _boundaries(doc, blocks, sp.heading_end_line + 1, sp.end_line)
        windows = _split(dtext, body_a, sec_b, chunk_size, chunk_overlap, paras)
        if not windows:
            windows = [(body_a, body_a)]
        for k, (a, b) in enumerate(windows):
            if a == b and head_end is None:
                continue
            if k == 0 and head_end is not None:
                shown_a = sec_a
                start_line = sp.start_line
            else:
                shown_a = a
                start_line = line_of(a)
            end_line = max(line_of(b - 1) if b > a else sp.heading_end_line, start_line)
            body = _render(doc, a, b) if b > a else ""
            if not body and k > 0:
                continue  # e.g. a window that is all %%comment%%: nothing to find there
            embed = f"{head_line}\n\n{body}" if body else head_line
            keyword = f"{crumb}\n{body}" if body else crumb
            chunks.append(
                Chunk(
                    ordinal=len(chunks),
                    section=idx,
                    title=sp.title,
                    breadcrumb=crumb,
                    start_line=start_line,
                    end_line=end_line,
                    text=dtext[shown_a:b] if b > a else dtext[sec_a : head_end or sec_a],
                    embed_text=embed,
                    keyword_text=keyword,
                )
            )

    return ParsedNote(meta, headings, tuple(sections), tuple(chunks), tuple(warnings))


def section_at_line(note: ParsedNote, line: int) -> Section | None:
    """The section a cursor on ``line`` belongs to, for hover and ``related``.

    Lines in a gap (trailing blank lines, front matter) map to the nearest
    section before them, or the first one, so a hover never comes back empty
    on a non-empty note.
    """
    sections = note.sections
    if not sections:
        return None
    i = bisect.bisect_right([s.start_line for s in sections], line) - 1
    return sections[max(i, 0)]
