"""Markdown sections as short plain text for people: a hit's snippet, terminal snippets, hovers,
result details.

A hit's section is markdown (``**bold**``, fenced code, tables, Obsidian wikilinks and
``%%comments%%``); shown raw in a one- or two-line preview it reads as noise, and cut at a fixed
character count it ends mid-word. These functions are pure (text in, text out) and the only
snippet maker (``Hit.snippet`` is :func:`snippet`'s), so every front end shows the same plain
text:

* :func:`plain_text`: the section as one line of reading text (markup gone, each code block as
  its first line, the heading left out since front ends show it separately);
* :func:`query_terms` / :func:`match_spans`: where the words of a query occur in that text, for
  highlighting (a light stemmer, so "rotate" marks "rotating", as the keyword index's Porter
  stemmer would match it);
* :func:`snippet`: a window of at most ``limit`` characters, around the part that matches the
  query best, cut between words with an ellipsis;
* :func:`wrap`: that window as at most ``max_lines`` lines of a terminal's width, highlight spans
  carried along.

Only :func:`plain_text` (and so :func:`snippet`) needs markdown-it; the rest lives in
:mod:`mdsearch_ls.engine.search.highlight`, so a process that marks words or cuts plain text never
imports the parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mdsearch_ls.engine.notes import obsidian
from mdsearch_ls.engine.notes.outline import parse_doc
from mdsearch_ls.engine.search.highlight import Snippet, window

__all__ = ["plain_text", "snippet"]

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])

_FOOTNOTE_REF = re.compile(r"\[\^[^\]]+\]")
_TAG_HTML = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")
_ENDS_SENTENCE = (".", "!", "?", ":", ";", "…")


# ---- markdown -> one line of text ---------------------------------------------------------------


def _parse(markdown: str) -> list[Token]:
    """The markdown's tokens, its ``%%comments%%`` blanked as the index blanks them (not in code,
    an unclosed one to the end)."""
    if "%%" in markdown:
        doc = parse_doc(markdown)
        if doc.comments:
            markdown = obsidian.blank_spans(doc.text, doc.comments)
    return _MD.parse(markdown)


def _wikilink(m: re.Match[str]) -> str:
    note, anchor, alias = obsidian.wikilink_parts(m.group(2))
    if alias:
        return alias
    if m.group(1):
        return ""  # an embedded image or note: nothing to read in a one-line preview
    return f"{note} > {anchor}" if note and anchor else (note or anchor)


def _obsidian(text: str) -> str:
    if "[[" in text:
        text = obsidian.WIKILINK_RE.sub(_wikilink, text)
    if "==" in text:
        text = obsidian.HIGHLIGHT_RE.sub(r"\1", text)
    if "[^" in text:
        text = _FOOTNOTE_REF.sub("", text)
    if "^" in text:
        text = obsidian.BLOCK_ID_RE.sub("", text)
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
    callout = obsidian.CALLOUT_RE
    if not children or children[0].type != "text" or not callout.match(children[0].content):
        return None
    brk = next((i for i, c in enumerate(children) if c.type in ("softbreak", "hardbreak")),
               len(children))
    title = _inline(token, children[:brk])
    m = callout.match(title)
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
    tokens = _parse(markdown)
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


def snippet(markdown: str, terms: Sequence[str] = (), limit: int = 200, *,
            drop_heading: bool = True) -> Snippet:
    """At most ``limit`` characters of a section as plain text, with the query's words marked.

    The window starts at the beginning of the section unless a later part holds more of the
    query's words; a cut (either end) falls between words and shows an ellipsis. A section that
    is a heading alone shows its heading.
    """
    text = plain_text(markdown, drop_heading=drop_heading)
    if not text and drop_heading:
        text = plain_text(markdown, drop_heading=False)
    return window(text, terms, limit)
