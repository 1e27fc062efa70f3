"""The token estimate behind every ``max_tokens`` budget, and trimming text to fit one.

An assistant pays for what a tool returns in its own tokenizer, which the server cannot know. The
estimate used here is the bundled model's WordPiece tokenizer (``tokenizer.json`` of
all-MiniLM-L6-v2, run by the ``tokenizers`` library, no torch), counted without special tokens:

* it is a real tokenizer, so text that is dense in tokens costs what it really costs: a URL,
  code, a table rule (``|---|``) or a CJK sentence counts a token per symbol or character, where
  the chars/4 rule of thumb would count a quarter of that and let a "budget" overflow;
* on prose it agrees with chars/4 (the bundled vault: 16,023 WordPiece tokens, 15,653 by chars/4);
* it is already on disk, deterministic and fast (a few ms per note), and its offsets let text be
  cut at a token boundary and then at a word boundary;
* whitespace is free in it (tokens never span whitespace), so counts add up: the tokens of
  ``a + "\\n" + b`` are the tokens of ``a`` plus those of ``b``. Renderings therefore keep
  whitespace plain and never rely on indentation.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _tokenizer() -> Any:
    """The bundled model's tokenizer, loaded once (about 0.1 s: on the start thread, not before
    ``initialize``, which is why it is imported here)."""
    from mdsearch_model_minilm import MODEL_DIR
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


class TokenCounter:
    """Counts and trims text in estimated tokens (see the module docstring). Thread-safe."""

    name = "all-MiniLM-L6-v2 WordPiece tokens"
    """What ``index_status`` says tokens are counted as."""

    def load(self) -> None:
        """Load the tokenizer now instead of on the first tool call."""
        _tokenizer()

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(_tokenizer().encode(text, add_special_tokens=False).ids)

    def trim(self, text: str, limit: int) -> tuple[str, bool]:
        """The longest prefix of ``text`` within ``limit`` tokens that ends at a line end or,
        failing a late enough one, between two words; ``(text, truncated)``.

        A word is never cut: a single word longer than the whole allowance yields "".
        """
        if limit <= 0:
            return "", bool(text)
        offsets = _tokenizer().encode(text, add_special_tokens=False).offsets
        if len(offsets) <= limit:
            return text, False
        # Offsets are character positions in ``text`` (normalisation is undone by them).
        cut = offsets[limit][0]  # the first token that does not fit starts here
        head = text[:cut]
        if cut < len(text) and not text[cut].isspace() and head and not head[-1].isspace():
            # The cut falls inside a word: go back to the whitespace before it.
            space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
            head = head[: space + 1] if space >= 0 else ""
        line_end = head.rfind("\n")
        if line_end >= 0 and line_end >= 0.6 * len(head):
            head = head[:line_end]
        return head.rstrip(), True


_COUNTER = TokenCounter()


def counter() -> TokenCounter:
    """The process-wide counter (one tokenizer per process)."""
    return _COUNTER


def share(needs: list[int], budget: int) -> list[int]:
    """Split ``budget`` over texts needing ``needs`` tokens: equal shares, and what a short
    text does not use goes to the longer ones (water-filling). Never more than a text needs."""
    allot = [0] * len(needs)
    left = max(budget, 0)
    todo = sorted(range(len(needs)), key=lambda i: needs[i])
    while todo:
        fair = left // len(todo)
        i = todo[0]
        if needs[i] <= fair:
            allot[i] = needs[i]
            left -= needs[i]
            todo.pop(0)
            continue
        # Everyone left needs more than a fair share: give each one, the remainder to the
        # best-ranked (lowest index) first.
        extra = left - fair * len(todo)
        for j in sorted(todo):
            allot[j] = fair + (1 if extra > 0 else 0)
            extra -= 1
        break
    return allot
