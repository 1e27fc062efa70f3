"""Cutting a long section into overlapping windows that end where a reader would pause.

The model reads at most 256 tokens, and a chunk that stops mid-sentence embeds half a thought,
so a section longer than the chunk size is split at the best boundary in the back half of each
window: a block (paragraph, list item, fence), else a sentence end, else a line break, else
whitespace. A window ends mid-word only when one word is longer than the window.
"""

from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mdsearch_ls.engine.notes.outline import Doc

_SENTENCE_END_RE = re.compile(r"[.!?…][)\"'\]»”’]*(?=\s)|[。！？]")


def block_starts(doc: Doc) -> list[int]:
    """Lines where a block (paragraph, list item, fence, ...) starts, sorted.

    These are the "paragraph" breaks for splitting. They come from the parser, so a list item or
    a fence counts even without a blank line before it.
    """
    return sorted({tok.map[0] for tok in doc.tokens if tok.map and tok.nesting >= 0})


def boundaries(doc: Doc, blocks: list[int], first_line: int, last_line: int) -> list[int]:
    """Offsets of the newline before each block that starts inside (first_line, last_line]."""
    i = bisect.bisect_right(blocks, first_line)
    j = bisect.bisect_right(blocks, last_line)
    return [doc.starts[ln] - 1 for ln in blocks[i:j]]


def split(
    text: str, lo: int, hi: int, size: int, overlap: int, paras: list[int]
) -> list[tuple[int, int]]:
    """Windows over text[lo:hi] of at most ``size`` chars, ending at the best boundary.

    Boundaries in order of preference: block (``paras``, offsets from :func:`boundaries`),
    sentence end, line break, whitespace. A break is only accepted in the back half of the
    window so chunks do not get tiny; below that we fall back to the next kind. Consecutive
    windows share about ``overlap`` characters, starting on a word.
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
