"""Where a query's words occur in plain text, and a window of that text to show: the half of
rendering a hit that needs no markdown parser.

Apart from :mod:`mdsearch_ls.engine.search.preview` (which turns a section's markdown into the
plain text these functions read, through markdown-it) because a search answered by the server
that holds the index (``mdsearch search`` through its socket) still marks the query's words and
prints ``--format paths`` without importing a markdown parser: its process is over in a few tens
of milliseconds, and markdown-it alone costs about twenty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mdsearch_ls.engine.notes import cjk
from mdsearch_ls.engine.notes.cjk import bigrams, has_cjk
from mdsearch_ls.engine.search.keyword import STOPWORDS

__all__ = [
    "ELLIPSIS",
    "Snippet",
    "match_spans",
    "query_terms",
    "window",
    "wrap",
]

ELLIPSIS = "…"

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

# Words too common to be worth a highlight (every snippet would be red with "the"): the ones the
# keyword index leaves out of OR-ed queries.
_STOPWORDS = STOPWORDS
# Longest first, so "ations" is tried before "s"; the stem must keep at least three letters.
_SUFFIXES = ("ational", "ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly",
             "ers", "er", "s")


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
            for run in cjk.CJK_RUN.findall(w):
                for gram in bigrams(run):
                    seen.setdefault(gram)
            w = cjk.CJK_RUN.sub("", w)
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


def window(text: str, terms: Sequence[str], limit: int) -> Snippet:
    """At most ``limit`` characters of plain ``text`` around the part that holds the most query
    words (its start when that is as good), cut between words, the words' spans carried along."""
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
