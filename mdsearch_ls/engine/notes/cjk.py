"""Chinese, Japanese and Korean text for the keyword index: runs of characters as bigrams.

SQLite's ``unicode61`` tokenizer keeps a run of CJK characters between punctuation as one token,
so a word was found only when it happened to stand alone: 密钥 inside 如何管理密钥 was not, and
most Chinese words have two characters (the ``trigram`` tokenizer needs three). So the keyword
columns hold each run as its overlapping bigrams, then its single characters, and a typed run is
matched the same way: a two-character word is one bigram, a longer run its bigrams OR-ed (BM25
ranks a section holding more of them higher) plus their sequence as a phrase (the exact run
ranks higher still), a single character itself. Latin text is untouched; snippets and what a
person sees are always the note's own text (only the FTS columns hold the expansion).
"""

from __future__ import annotations

import re

_CJK = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
        "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f")
CJK_RUN = re.compile(f"[{_CJK}]+")
"""A run of CJK characters."""

FORMAT = 2
"""The keyword columns' format: 1 kept CJK runs whole; an index of format 1 is converted in place
on its next write open (the FTS rows are rewritten from themselves: no note is re-read and
nothing is embedded again)."""


def has_cjk(text: str) -> bool:
    return CJK_RUN.search(text) is not None


def bigrams(run: str) -> list[str]:
    """The overlapping pairs of a run (the run itself when it is one character)."""
    return [run] if len(run) < 2 else [run[i:i + 2] for i in range(len(run) - 1)]


def expand(text: str) -> str:
    """``text`` as the keyword columns hold it: every CJK run replaced by its bigrams, then its
    characters, each a token of its own."""

    def grams(m: re.Match[str]) -> str:
        run = m.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(bigrams(run)) + " " + " ".join(run) + " "

    return CJK_RUN.sub(grams, text)


def query_terms(run: str) -> list[str]:
    """FTS5 terms for one typed CJK run (unquoted; a phrase has spaces): its bigrams, and for a
    run of three or more characters also their sequence as one phrase."""
    grams = bigrams(run)
    return grams if len(grams) == 1 else [*grams, " ".join(grams)]


def phrase_tokens(tokens: list[str]) -> list[str]:
    """A required phrase's tokens: the Latin ones as given, each CJK run as its bigrams in
    order (so the phrase matches the run where the index holds it)."""
    out: list[str] = []
    for token in tokens:
        if not has_cjk(token):
            out.append(token)
            continue
        pos = 0
        for m in CJK_RUN.finditer(token):
            if m.start() > pos:
                out.append(token[pos:m.start()])
            out.extend(bigrams(m.group(0)))
            pos = m.end()
        if pos < len(token):
            out.append(token[pos:])
    return out
