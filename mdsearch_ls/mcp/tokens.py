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

Should the tokenizer be missing (a broken install), the estimate falls back to ``ceil(chars / 4)``
and says so in ``index_status``.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

log = logging.getLogger(__name__)

ESTIMATE_NAME = "all-MiniLM-L6-v2 WordPiece tokens"
FALLBACK_NAME = "characters / 4"


class TokenCounter:
    """Counts and trims text in estimated tokens (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._tok: Any = None
        self._loaded = False
        self._lock = threading.Lock()
        self.name = ESTIMATE_NAME

    def _tokenizer(self) -> Any:
        if self._loaded:
            return self._tok
        with self._lock:
            if not self._loaded:
                try:
                    from mdsearch_model_minilm import MODEL_DIR
                    from tokenizers import Tokenizer

                    path = MODEL_DIR / "tokenizer.json"
                    tok = Tokenizer.from_file(str(path))
                    tok.no_truncation()
                    tok.no_padding()
                    self._tok = tok
                except Exception as exc:  # a broken install: estimate by characters
                    log.warning("token estimate falls back to characters / 4: %s", exc)
                    self.name = FALLBACK_NAME
                self._loaded = True
        return self._tok

    def load(self) -> None:
        """Load the tokenizer now (about 0.1 s) instead of on the first tool call."""
        self._tokenizer()

    def count(self, text: str) -> int:
        if not text:
            return 0
        tok = self._tokenizer()
        if tok is None:
            return math.ceil(len(text) / 4)
        return len(tok.encode(text, add_special_tokens=False).ids)

    def trim(self, text: str, limit: int) -> tuple[str, bool]:
        """The longest prefix of ``text`` within ``limit`` tokens that ends at a line end or,
        failing a late enough one, between two words; ``(text, truncated)``.

        A word is never cut: a single word longer than the whole allowance yields "".
        """
        if limit <= 0:
            return "", bool(text)
        tok = self._tokenizer()
        if tok is None:
            if math.ceil(len(text) / 4) <= limit:
                return text, False
            cut = limit * 4
        else:
            offsets = tok.encode(text, add_special_tokens=False).offsets
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


_counter: TokenCounter | None = None
_counter_lock = threading.Lock()


def counter() -> TokenCounter:
    """The process-wide counter (one tokenizer per process)."""
    global _counter
    with _counter_lock:
        if _counter is None:
            _counter = TokenCounter()
        return _counter


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
