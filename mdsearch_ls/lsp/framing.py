"""Stdin for pygls that finds the next frame again after a wrong ``Content-Length``.

pygls reads a header, then exactly ``Content-Length`` bytes. One wrong length used to cost the
next request too, with nothing logged: too long, and the body swallowed the start of the next
frame; too short, and the rest of the body was read as a header line, which hid the next
frame's ``Content-Length``. This stream sits under pygls's reader (``readline`` and ``read``
are all it calls) and puts the bytes back where they belong:

* a body that is not one JSON value ending in ``}`` is parsed up to the end of its first JSON
  value; what follows goes back to be read as the next frame's header (too long);
* a header line holding ``Content-Length:`` after other bytes starts there, and the bytes before
  it, the tail of a cut body, are dropped (too short).

Both are logged. A body that ends in ``}`` takes the fast path (no second parse), so a correct
client pays nothing.
"""

from __future__ import annotations

import json
import logging
from typing import BinaryIO

log = logging.getLogger(__name__)

_MARK = b"Content-Length:"


class ResyncingStdin:
    """``readline``/``read`` over a binary stream, with bytes pushed back on a bad frame."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._pending = b""  # pygls awaits each read before the next: one reader at a time

    def readline(self) -> bytes:
        if self._pending:
            cut = self._pending.find(b"\n")
            if cut >= 0:
                line, self._pending = self._pending[:cut + 1], self._pending[cut + 1:]
            else:
                line, self._pending = self._pending + self._raw.readline(), b""
        else:
            line = self._raw.readline()
        at = line.find(_MARK)
        if at > 0:
            log.warning("dropped %d bytes before a Content-Length header: the message before "
                        "it was longer than its Content-Length said", at)
            line = line[at:]
        return line

    def read(self, n: int) -> bytes:
        data, self._pending = self._pending[:n], self._pending[n:]
        if len(data) < n:
            data += self._raw.read(n - len(data))
        if not data or data.rstrip().endswith(b"}"):
            return data
        end = _first_value_end(data)
        if end is None or not data[end:].strip():
            return data
        log.warning("a message was %d bytes shorter than its Content-Length said; the rest is "
                    "read as the next message", len(data) - end)
        self._pending = data[end:].lstrip(b"\r\n") + self._pending
        return data[:end]


def _first_value_end(data: bytes) -> int | None:
    """The byte offset just past the first JSON value in ``data``, or None if it has none."""
    text = data.decode("utf-8", "surrogateescape")
    try:
        _, end = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return None
    skipped = len(text) - len(text.lstrip())
    return len(text[:skipped + end].encode("utf-8", "surrogateescape"))
