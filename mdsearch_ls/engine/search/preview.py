"""Markdown sections as short plain text for people: terminal snippets, hovers, result details.

A hit's section is markdown (``**bold**``, fenced code, tables, Obsidian wikilinks and
``%%comments%%``); shown raw in a one- or two-line preview it reads as noise, and cut at a fixed
character count it ends mid-word. These functions are pure (text in, text out) so every front end
renders the same way:

* :func:`plain_text`: the section as one line of reading text (markup gone, each code block as
  its first line, the heading left out since front ends show it separately);
* :func:`query_terms` / :func:`match_spans`: where the words of a query occur in that text, for
  highlighting (a light stemmer, so "rotate" marks "rotating", as the keyword index's Porter
  stemmer would match it);
* :func:`snippet`: a window of at most ``limit`` characters, around the part that matches the
  query best, cut between words with an ellipsis;
* :func:`wrap`: that window as at most ``max_lines`` lines of a terminal's width, highlight spans
  carried along.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mdsearch_ls.engine.notes.cjk import CJK_RUN, bigrams, has_cjk
from mdsearch_ls.engine.search.keyword import STOPWORDS

__all__ = [
    "ELLIPSIS",
    "Snippet",
    "match_spans",
    "plain_text",
    "query_terms",
    "snippet",
    "wrap",
]

ELLIPSIS = "…"

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])

_FENCE_LINE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_COMMENT = re.compile(r"%%.*?%%", re.DOTALL)
_WIKILINK = re.compile(r"!?\[\[([^\]|#^]*)(?:[#^]([^\]|]*))?(?:\|([^\]]*))?\]\]")
_HIGHLIGHT = re.compile(r"==(?=\S)(.+?)(?<=\S)==")
_BLOCK_ID = re.compile(r"(?:^|\s)\^[A-Za-z0-9-]+\s*$")
_CALLOUT = re.compile(r"^\[!([A-Za-z-]+)\][+-]?\s*")
_FOOTNOTE_REF = re.compile(r"\[\^[^\]]+\]")
_TAG_HTML = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_ENDS_SENTENCE = (".", "!", "?", ":", ";", "…")

# Words too common to be worth a highlight (every snippet would be red with "the"): the ones the
# keyword index leaves out of OR-ed queries.
_STOPWORDS = STOPWORDS
# Longest first, so "ations" is tried before "s"; the stem must keep at least three letters.
_SUFFIXES = ("ational", "ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly",
             "ers", "er", "s")


# ---- markdown -> one line of text ---------------------------------------------------------------


def _strip_comments(markdown: str) -> str:
    """Drop ``%%comments%%`` (they may span lines), but not inside fenced code."""
    if "%%" not in markdown:
        return markdown
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        m = _FENCE_LINE.match(line)
        if fence is None and m:
            out.append(_COMMENT.sub("", "\n".join(prose)))
            prose = []
            fence = m.group(1)[0] * len(m.group(1))
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence):
                fence = None
        else:
            prose.append(line)
    out.append(_COMMENT.sub("", "\n".join(prose)))
    return "\n".join(out)


def _wikilink(m: re.Match[str]) -> str:
    target, sub, alias = m.group(1), m.group(2), m.group(3)
    if alias:
        return alias
    if m.group(0).startswith("!"):
        return ""  # an embedded image or note: nothing to read in a one-line preview
    return f"{target} > {sub}" if target and sub else (target or sub or "")


def _obsidian(text: str) -> str:
    if "[[" in text:
        text = _WIKILINK.sub(_wikilink, text)
    if "==" in text:
        text = _HIGHLIGHT.sub(r"\1", text)
    if "[^" in text:
        text = _FOOTNOTE_REF.sub("", text)
    if "^" in text:
        text = _BLOCK_ID.sub("", text)
    return text


def _inline(token: Token, children: Sequence[Token] | None = None) -> str:
    parts: list[str] = []
    for child in token.children or () if children is None else children:
        if child.type == "text":
            parts.append(_obsidian(child.content))
        elif child.type == "code_inline":
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)  # the alt text
        # link, emphasis, strong, strikethrough and inline HTML: the markers go, text stays
    return _WS.sub(" ", "".join(parts)).strip()


def _callout(token: Token) -> str | None:
    """``> [!warning] Title`` then body lines: "Title: body" (the kind when there is no title)."""
    children = list(token.children or ())
    if not children or children[0].type != "text" or not _CALLOUT.match(children[0].content):
        return None
    brk = next((i for i, c in enumerate(children) if c.type in ("softbreak", "hardbreak")),
               len(children))
    title = _inline(token, children[:brk])
    m = _CALLOUT.match(title)
    if m:
        title = title[m.end():] or m.group(1).capitalize()
    body = _inline(token, children[brk + 1:])
    if not body:
        return title
    return f"{title} {body}" if title.endswith(_ENDS_SENTENCE) else f"{title}: {body}"


def _first_code_line(content: str) -> str:
    for line in content.split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _blocks(markdown: str, *, drop_heading: bool) -> list[tuple[str, str]]:
    """``(kind, text)`` for each block a reader sees, in order."""
    tokens = _MD.parse(_strip_comments(markdown))
    blocks: list[tuple[str, str]] = []
    first_block = True
    row: list[str] = []
    in_heading = False
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind == "heading_open":
            in_heading = True
        elif kind == "heading_close":
            in_heading = False
        elif kind == "inline":
            text = _inline(tok)
            if in_heading:
                if not (drop_heading and first_block):
                    blocks.append(("heading", text))
                first_block = False
            elif i > 0 and tokens[i - 1].type in ("th_open", "td_open"):
                row.append(text)
            else:
                if blocks and blocks[-1][0] == "quote-start":
                    blocks.pop()
                    text = _callout(tok) or text
                blocks.append(("text", text))
                first_block = False
        elif kind == "blockquote_open":
            blocks.append(("quote-start", ""))
        elif kind in ("fence", "code_block"):
            blocks.append(("code", _first_code_line(tok.content)))
            first_block = False
        elif kind == "tr_close":
            if any(row):
                blocks.append(("row", " | ".join(c for c in row)))
            row = []
            first_block = False
        elif kind == "html_block":
            text = _WS.sub(" ", _TAG_HTML.sub(" ", tok.content)).strip()
            if text:
                blocks.append(("text", text))
            first_block = False
    return [(k, t) for k, t in blocks if t and k != "quote-start"]


def plain_text(markdown: str, *, drop_heading: bool = True) -> str:
    """One line of reading text from a section's markdown.

    Emphasis and link markup go (their words stay), a code block reads as its first line,
    ``[[note|alias]]`` as ``alias``, a table row as its cells; ``%%comments%%`` and embeds are
    dropped. Blocks are separated by a space after a sentence and by `` · `` otherwise, so list
    items and table rows stay apart. ``drop_heading``: leave out a heading that opens the text
    (front ends show the breadcrumb already).
    """
    out = ""
    for _kind, text in _blocks(markdown, drop_heading=drop_heading):
        if not out:
            out = text
        elif out.endswith(_ENDS_SENTENCE):
            out = f"{out} {text}"
        else:
            out = f"{out} · {text}"
    return out


# ---- query words and where they occur -------------------------------------------------------


def _stem(word: str) -> str:
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix == "ies":
                stem += "y"
            return stem[:-1] if stem.endswith("e") and len(stem) > 3 else stem
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def query_terms(text: str, phrases: Iterable[str] = ()) -> tuple[str, ...]:
    """What to highlight for a query: the stems of its content words, then its phrases (as
    typed, lowercased). ``text`` is the free text of the query (filters already taken out)."""
    words = [w for w in _WORD.findall(text) if w.lower() not in _STOPWORDS]
    if not words:  # a query made only of common words still marks them
        words = _WORD.findall(text)
    seen: dict[str, None] = {}
    for w in words:
        if has_cjk(w):  # a CJK run marks each of its bigrams, as keyword search matches them
            for run in CJK_RUN.findall(w):
                for gram in bigrams(run):
                    seen.setdefault(gram)
            w = CJK_RUN.sub("", w)
            if not w:
                continue
        seen.setdefault(_stem(w))
    for p in phrases:
        p = _WS.sub(" ", p).strip().lower()
        if p:
            seen.setdefault(p)
    return tuple(seen)


def match_spans(text: str, terms: Sequence[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of each occurrence of the terms in ``text``, sorted, not overlapping.

    A term without a space is a stem and marks each word having that stem; a term with one is a
    phrase and marks its occurrences (any case).
    """
    if not terms or not text:
        return []
    stems = {t for t in terms if " " not in t and not has_cjk(t)}
    spans: list[tuple[int, int]] = []
    if stems:
        for m in _WORD.finditer(text):
            if _stem(m.group(0)) in stems:
                spans.append(m.span())
    lowered = text.lower()
    for phrase in (t for t in terms if " " in t or has_cjk(t)):  # CJK: no word boundaries
        start = lowered.find(phrase)
        while start >= 0:
            spans.append((start, start + len(phrase)))
            start = lowered.find(phrase, start + len(phrase))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


# ---- a window of the text --------------------------------------------------------------------


@dataclass(frozen=True)
class Snippet:
    """Text to show and the spans of it to highlight (``(start, end)``, sorted)."""

    text: str
    spans: tuple[tuple[int, int], ...] = ()


def _cut_end(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters between two words, ellipsis included."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 1)
    cut = text.rfind(" ", 0, room + 1)
    if cut < room // 2:  # one very long word (a URL): cut inside it rather than show nothing
        cut = room
    return text[:cut].rstrip(" ,;:·-") + ELLIPSIS


def _window_start(text: str, spans: Sequence[tuple[int, int]], terms: Sequence[str],
                  limit: int) -> int:
    """Where the window showing the most distinct query words begins (0 when the start of the
    text shows as many as any other window: the opening of a section reads best)."""
    if not spans:
        return 0
    words = [text[s:e].lower() for s, e in spans]
    keys = [_stem(w) if " " not in w else w for w in words]

    def distinct(lo: int) -> int:
        hi = lo + limit - 2 * len(ELLIPSIS)
        return len({k for (s, e), k in zip(spans, keys, strict=True) if s >= lo and e <= hi})

    best, best_count = 0, distinct(0)
    for s, _e in spans:
        # A little context before the match: back to a sentence start when one is near.
        lo = max(0, s - limit // 5)
        sentence = max(text.rfind(". ", lo, s), text.rfind("· ", lo, s))
        lo = sentence + 2 if sentence >= 0 else lo
        if lo > 0:
            space = text.rfind(" ", 0, lo + 1)
            lo = space + 1 if space >= 0 and lo - space < 20 else lo
        count = distinct(lo)
        if count > best_count:
            best, best_count = lo, count
    if best == 0:
        return 0
    # A match near the end of the section leaves the window half empty: fill it with what comes
    # before, from a sentence start if that still fills most of it, else from a word start.
    room = limit - len(ELLIPSIS)
    if len(text) - best < room:
        lo = max(0, len(text) - room)
        if lo == 0:
            return 0
        sentence = text.find(". ", lo, best)
        if sentence >= 0 and len(text) - (sentence + 2) >= room * 0.6:
            return sentence + 2
        space = text.find(" ", lo, best)
        return space + 1 if space >= 0 else best
    return best


def snippet(markdown: str, terms: Sequence[str] = (), limit: int = 200, *,
            drop_heading: bool = True) -> Snippet:
    """At most ``limit`` characters of a section as plain text, with the query's words marked.

    The window starts at the beginning of the section unless a later part holds more of the
    query's words; a cut (either end) falls between words and shows an ellipsis.
    """
    text = plain_text(markdown, drop_heading=drop_heading)
    if not text and drop_heading:
        text = plain_text(markdown, drop_heading=False)
    return _window(text, terms, limit)


def _window(text: str, terms: Sequence[str], limit: int) -> Snippet:
    limit = max(limit, 8)
    spans = match_spans(text, terms)
    if len(text) <= limit:
        return Snippet(text, tuple(spans))
    start = _window_start(text, spans, terms, limit)
    prefix = ELLIPSIS if start > 0 else ""
    body = _cut_end(text[start:], limit - len(prefix))
    shown = prefix + body
    shift = len(prefix) - start
    end = start + len(body.removesuffix(ELLIPSIS))
    kept = tuple((s + shift, e + shift) for s, e in spans if s >= start and e <= end)
    return Snippet(shown, kept)


def wrap(snip: Snippet, width: int, max_lines: int = 2) -> list[Snippet]:
    """``snip`` as at most ``max_lines`` lines of at most ``width`` characters, broken between
    words; text that does not fit is cut between words with an ellipsis."""
    width = max(width, 8)
    text = snip.text
    lines: list[tuple[int, int]] = []
    pos = 0
    while pos < len(text) and len(lines) < max_lines:
        if len(text) - pos <= width:
            lines.append((pos, len(text)))
            pos = len(text)
            break
        last = len(lines) == max_lines - 1
        if last:
            piece = _cut_end(text[pos:], width)
            body_len = len(piece.removesuffix(ELLIPSIS))
            lines.append((pos, pos + body_len))
            pos = len(text)
            return _slice_lines(snip, lines, ellipsis_last=True)
        cut = text.rfind(" ", pos, pos + width + 1)
        if cut <= pos:
            cut = pos + width
            lines.append((pos, cut))
            pos = cut
        else:
            lines.append((pos, cut))
            pos = cut + 1
    return _slice_lines(snip, lines, ellipsis_last=False)


def _slice_lines(snip: Snippet, lines: list[tuple[int, int]], *,
                 ellipsis_last: bool) -> list[Snippet]:
    out: list[Snippet] = []
    for i, (a, b) in enumerate(lines):
        text = snip.text[a:b].rstrip()
        if ellipsis_last and i == len(lines) - 1:
            text = text.rstrip(" ,;:·-") + ELLIPSIS
        spans = tuple((max(s, a) - a, min(e, b) - a) for s, e in snip.spans
                      if s < b and e > a and min(e, b) - a <= len(text))
        out.append(Snippet(text, spans))
    return out
