"""Obsidian's markdown extensions, read the way a person reads a rendered note: the one reader
of their syntax (the link graph, the snippets and the writing aids use these rules).

``[[Note|alias]]`` reads as "alias", a callout marker is noise, ``==highlight==`` is its text, a
``^block-id`` is an address, and a ``%%comment%%`` is not meant to be read at all; left in, they
skew both the vectors and BM25. Inline ``#tags`` are note metadata (the ``tag:`` filter); where a
wikilink goes is :mod:`~mdsearch_ls.engine.notes.links`'s, from :func:`wikilink_parts`.
Everything here works on the text and on offset ranges the caller computed (code blocks,
comments), so it knows nothing of sections or chunks; the syntax is literal inside code, fenced
or inline, because ``[[`` or ``%%`` there is code.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

# Inline parser: text_join is off so backslash escapes and entities stay separate
# ``text_special`` tokens, which lets tag detection ignore ``\\#x``.
INLINE_PARSER = MarkdownIt("commonmark")
INLINE_PARSER.disable("text_join")

# Obsidian tag: '#' at start or after whitespace, then letters/digits/_/-/'/'.
_TAG_RE = re.compile(r"(?:(?<=\s)|^)#([\w/-]+)")
WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]*?)\]\]")
_MD_LINK_RE = re.compile(r"!?\[([^\[\]\n]*)\]\((?:[^()\n]|\([^()\n]*\))*\)")
# ``==highlight==`` (Obsidian) reads as its text; ``a == b`` is not one (no space inside the marks).
HIGHLIGHT_RE = re.compile(r"(?<![=\\])==(?=[^\s=])([^\n=]*?[^\s=])==(?!=)")
# A block id (``... ^intro-2``) ends a paragraph or list item, or stands on its own line after a
# table, quote or list: an address, not words.
BLOCK_ID_RE = re.compile(r"(?:^|[ \t])\^[A-Za-z0-9-]+[ \t]*$", re.MULTILINE)
# A callout's marker, ``[!warning]`` (``+``/``-``: folded or not), opening a block quote.
CALLOUT_RE = re.compile(r"\[!([\w-]+)\][+-]?[ \t]*")
_CALLOUT_LINE_RE = re.compile(r"^([ \t]*(?:>[ \t]*)+)" + CALLOUT_RE.pattern + "(.*)$", re.MULTILINE)
# A backtick code span: a run of N backticks closed by exactly N, within one paragraph
# (CommonMark: a blank line ends the paragraph, so a lone backtick never pairs across one).
_CODE_SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.DOTALL)
_BLANK_RUN_RE = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")


def code_spans(text: str, a: int = 0, b: int | None = None) -> list[tuple[int, int]]:
    """Offset ranges of backtick code spans in ``text[a:b]`` (bounded by the paragraph, as
    everywhere here): where ``[[``, ``%%`` or a note's name is code, not a link or a mention."""
    if "`" not in text[a:b]:
        return []
    return [m.span() for m in _CODE_SPAN_RE.finditer(text, a, len(text) if b is None else b)]


def in_ranges(pos: int, ranges: list[tuple[int, int]], keys: list[int]) -> bool:
    """Whether ``pos`` falls in one of the sorted, disjoint ``ranges`` (``keys``: their starts)."""
    i = bisect.bisect_right(keys, pos) - 1
    return i >= 0 and ranges[i][0] <= pos < ranges[i][1]


# --------------------------------------------------------------------------- comments


def comment_spans(text: str, literal: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Obsidian ``%%...%%`` spans outside the ``literal`` ranges (code blocks, front matter) and
    outside code spans; an unclosed one runs to the end, as Obsidian hides it."""
    if "%%" not in text:
        return []
    keys = [a for a, _ in literal]
    marks: list[int] = []
    pos = text.find("%%")
    while pos != -1:
        if not in_ranges(pos, literal, keys):
            marks.append(pos)
        pos = text.find("%%", pos + 2)
    if marks and "`" in text:
        # ``printf "%%d"`` in a code span is code, not a comment marker. Spans end with their
        # paragraph: two stray backticks in different paragraphs must not hide a comment.
        spans = [m.span() for m in _CODE_SPAN_RE.finditer(text)]
        span_keys = [a for a, _ in spans]
        marks = [m for m in marks if not in_ranges(m, spans, span_keys)]
    out = []
    for i in range(0, len(marks), 2):
        start = marks[i]
        end = marks[i + 1] + 2 if i + 1 < len(marks) else len(text)
        out.append((start, end))
    return out


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace spans by spaces but keep newlines, so lines do not move."""
    parts = []
    pos = 0
    for a, b in spans:
        parts.append(text[pos:a])
        parts.append(re.sub(r"[^\n]", " ", text[a:b]))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


# --------------------------------------------------------------------------- reading text


def _readable_target(target: str, *, embed: bool) -> str:
    name = target.rstrip("/").rsplit("/", 1)[-1]
    if embed and "." in name:
        name = name.rsplit(".", 1)[0] or name
    elif name.lower().endswith(".md"):
        name = name[:-3]
    return name


def wikilink_parts(inner: str) -> tuple[str, str, str]:
    """What is between a wikilink's brackets (``WIKILINK_RE``'s second group) as its note, its
    anchor (a heading path ``A#B`` or a ``^block``; '' for none) and its alias ('' for none)."""
    target, _, alias = inner.partition("|")
    note, _, anchor = target.partition("#")
    return note.strip(), anchor.strip(), alias.strip()


def _wikilink_sub(m: re.Match[str]) -> str:
    embed = bool(m.group(1))
    note, anchor, alias = wikilink_parts(m.group(2))
    if alias and not (embed and re.fullmatch(r"\d+(x\d+)?", alias)):
        return alias
    parts = []
    if note:
        parts.append(_readable_target(note, embed=embed))
    sub = " ".join(p.strip() for p in anchor.split("#") if p.strip() and not p.startswith("^"))
    if sub:
        parts.append(sub)
    return " ".join(parts)


def _callout_sub(m: re.Match[str]) -> str:
    prefix, kind, title = m.group(1), m.group(2), m.group(3).strip()
    return f"{prefix}{title or kind}"


def normalise_inline(text: str) -> str:
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
        text = WIKILINK_RE.sub(_wikilink_sub, text)
    if "](" in text:
        text = _MD_LINK_RE.sub(lambda m: m.group(1), text)
    if "[!" in text:
        text = _CALLOUT_LINE_RE.sub(_callout_sub, text)
    if "==" in text:
        text = HIGHLIGHT_RE.sub(r"\1", text)
    if "^" in text:
        text = BLOCK_ID_RE.sub("", text)
    return text


def render(
    text: str,
    a: int,
    b: int,
    *,
    comments: list[tuple[int, int]],
    code: list[tuple[int, int]],
) -> str:
    """The reading text of ``text[a:b]``: comments removed, Obsidian syntax outside code
    rewritten, code blocks verbatim. ``comments`` and ``code`` are sorted offset ranges."""
    pieces: list[tuple[int, int]] = []
    pos = a
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
        k = max(bisect.bisect_right(code, (s, s)) - 1, 0)
        for cs, ce in code[k:]:
            if cs >= e:
                break
            if ce <= cur:
                continue
            if cs > cur:
                out.append(normalise_inline(text[cur:cs]))
            out.append(text[max(cs, cur) : min(ce, e)])
            cur = min(ce, e)
        if cur < e:
            out.append(normalise_inline(text[cur:e]))
    result = "".join(out)
    if comments:
        # Removing a comment often leaves runs of blank lines behind.
        result = _BLANK_RUN_RE.sub("\n\n", result)
    return result.strip()


# --------------------------------------------------------------------------- tags


def _tag_text(children: list[Token] | None) -> str:
    """Inline tokens -> text for tag detection; code and escapes become opaque."""
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


def _is_tag(name: str) -> bool:
    return any(not (c.isdigit() or c in "/-") for c in name)


def normalise_tag(tag: str) -> str:
    """``#Project/Alpha`` and ``project/alpha`` are one tag (Obsidian ignores case)."""
    return tag.strip().lstrip("#").strip().lower()


def inline_tags(tokens: list[Token], env: dict[str, Any]) -> list[str]:
    """Inline ``#tags`` of a block-parsed note, in order of appearance.

    Only blocks that may hold one are inline-parsed (the cost is per paragraph); a heading's
    ``#`` is markup, not a tag.
    """
    tags: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.type != "inline" or "#" not in tok.content:
            continue
        if i > 0 and tokens[i - 1].type == "heading_open":
            continue
        parsed = INLINE_PARSER.parseInline(tok.content, dict(env))
        for m in _TAG_RE.finditer(_tag_text(parsed[0].children if parsed else None)):
            name = m.group(1)
            if _is_tag(name):
                tags.append(normalise_tag(name))
    return tags
