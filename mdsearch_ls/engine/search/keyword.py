"""Keyword side of search: turn what a person typed into an FTS5 MATCH expression.

The FTS5 table (in the manifest database) uses ``porter unicode61``: punctuation and ``_`` split
tokens, so ``backup.retention_days`` is indexed as ``backup retention days`` and a search for
``retention`` finds it, while the exact identifier still matches as a phrase. Typed queries are
natural language, so terms are OR-ed and BM25 ranks documents that match more and rarer terms
higher; identifiers typed with punctuation also go in as a phrase, which rewards the exact
sequence. For hybrid search, two content words typed next to each other ("working directory",
"group ownership") also go in as a two-word phrase (``pairs=True``), so a section holding them
together outranks one that only has each somewhere; keyword mode does without (see
:func:`build_match`). Quoted phrases are hard requirements.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from mdsearch_ls.engine.notes import cjk

# Words so common in questions that OR-ing them only adds noise to BM25 ("how do I ...").
STOPWORDS = frozenset(
    [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for",
        "from", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on",
        "or", "our", "should", "so", "than", "that", "the", "their", "then", "there",
        "these", "this", "to", "was", "we", "what", "when", "where", "which", "who", "why",
        "will", "with", "you", "your"
    ]
)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_COMPOUND = re.compile(r"[^\s\"]+")


def tokens(text: str) -> list[str]:
    """Tokens the way unicode61 sees them, lowercased."""
    return [t.lower() for t in _TOKEN.findall(text)]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def build_match(text: str, phrases: Sequence[str] = (), *, pairs: bool = False) -> str | None:
    """FTS5 expression: ``text``'s terms (:func:`or_terms`) OR-ed, AND every phrase; None when
    nothing to match."""
    terms = or_terms(text, pairs=pairs)
    required = _required(phrases)
    if not terms and not required:
        return None
    expr = " OR ".join(terms)
    if required:
        req = " AND ".join(required)
        return f"{req} AND ({expr})" if expr else req
    return expr


def or_terms(text: str, *, pairs: bool = False) -> list[str]:
    """The FTS5 phrases a typed query is OR-ed from, each quoted, in order, once each.

    ``pairs`` also ORs in each two adjacent content words as a phrase. Hybrid search asks for
    them: on the nl2bash/tldr set they raised hybrid top-5 / MRR@10 from 0.553 / 0.403 to
    0.567 / 0.406, and the examples vault's top-1 from 0.892 to 0.908 (benchmarks/README.md).
    Keyword mode alone got worse with them (tldr top-5 0.425 -> 0.403, vault top-1 0.800 ->
    0.785), most likely because BM25 alone then counts a common pair's words twice and can
    rank "current directory" over the query's one rare word, where in hybrid the dense side
    outweighs that.
    """
    cjk_terms: list[str] = []
    if cjk.has_cjk(text):  # each CJK run as the index holds it (see engine/notes/cjk.py)
        for run in cjk.CJK_RUN.findall(text):
            cjk_terms.extend(_quote(t) for t in cjk.query_terms(run))
        text = cjk.CJK_RUN.sub(" ", text)
    words = tokens(text)
    content = [w for w in words if w not in STOPWORDS] or words
    terms: list[str] = list(dict.fromkeys([*cjk_terms, *(_quote(w) for w in content)]))
    if pairs:
        # An OR-ed phrase only adds to the score of the sections that hold the pair in order
        # (BM25 sums over the matched terms); it never narrows the match. No pair across a
        # stopword ("copy of files"): the two words are rarely one unit there.
        for a, b in itertools.pairwise(words):
            if a != b and a not in STOPWORDS and b not in STOPWORDS:
                terms.append(_quote(f"{a} {b}"))
    # Identifiers such as Ctrl+Shift+F or ERR_CERT_DATE_INVALID: also match the exact sequence.
    for compound in _COMPOUND.findall(text):
        parts = tokens(compound)
        if len(parts) > 1:
            terms.append(_quote(" ".join(parts)))
    return list(dict.fromkeys(terms))


def _required(phrases: Sequence[str]) -> list[str]:
    """Each phrase as one FTS5 phrase, its CJK runs as the bigrams the index holds."""
    return [_quote(" ".join(cjk.phrase_tokens(tokens(p)))) for p in phrases if tokens(p)]


def phrase_match(phrases: Sequence[str]) -> str | None:
    """An FTS5 expression that every phrase must match (the candidates for an exact phrase)."""
    required = _required(phrases)
    return " AND ".join(required) if required else None
