"""How a note's bytes become text: byte-order marks, UTF-8 by default, binary files told apart.

Apart from :mod:`mdsearch_ls.engine.notes.files` (which says which files are notes, and
re-exports these names) because reading one file is the same question for every caller: the
scan, a save, a hover on a note that is not indexed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings


@dataclass(frozen=True)
class ReadResult:
    """The decoded text of a note, or why it was not read."""

    text: str | None
    """Decoded text; ``None`` when the file was skipped."""
    content_hash: str
    """sha256 hex of the raw bytes, so a re-save with no changes re-embeds nothing; ``""``
    when skipped."""
    warning: str | None
    """Human-readable and naming the file by its relative path, for logs and editors."""


def _fmt_mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def _oversize_warning(rel: str, size: int, max_file_bytes: int) -> str:
    return f"skipped {rel}: {_fmt_mb(size)} exceeds max_file_bytes ({_fmt_mb(max_file_bytes)})"


# Byte-order marks, longest first: UTF-32-LE's starts with UTF-16-LE's.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)

# A decoded file with at least this share of replacement characters and control characters is
# binary, whatever its name: random bytes without NUL decode to about half of them, while a
# note in a legacy encoding (Latin-1, cp1252) has a few percent at most.
BINARY_SHARE = 0.3
_BINARY_MIN = 4  # ... and at least this many, so a four-letter note with one bad byte is text
_BAD_CHARS = re.compile("[\ufffd\x00-\x08\x0e-\x1f\x7f-\x9f]")


def _encoding(raw: bytes) -> tuple[str | None, int]:
    """The encoding a byte-order mark declares and the mark's length; ``(None, 0)`` without."""
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            return codec, len(bom)
    return None, 0


def _utf16_without_bom(raw: bytes) -> str | None:
    """``utf-16-le``/``utf-16-be`` when NULs sit at every other byte, as UTF-16 text of Latin
    script saves without a mark (some Windows tools do), that decodes cleanly; else None, and
    a NUL byte keeps meaning a binary file."""
    sample = raw[:4096]
    half = len(sample) // 2
    if half < 2 or len(raw) % 2:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if odd >= 0.4 * half and even <= 0.02 * half:
        codec = "utf-16-le"
    elif even >= 0.4 * half and odd <= 0.02 * half:
        codec = "utf-16-be"
    else:
        return None
    try:
        text = raw.decode(codec)
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text or looks_binary(text) else codec


def looks_binary(text: str) -> bool:
    """Whether decoded text is mostly replacement or control characters (a binary file)."""
    if not text:
        return False
    bad = len(_BAD_CHARS.findall(text))
    return bad >= _BINARY_MIN and bad >= BINARY_SHARE * len(text)


def read_source(
    path: Path,
    rel: str,
    *,
    max_file_bytes: int = Settings.max_file_bytes,
    formats: Sequence[str] = (),
    known_hash: str | None = None,
) -> ReadResult:
    """Read one note as text, turning every problem into a warning rather than an exception.

    One unreadable file must not stop indexing the rest of a vault, so the caller
    only has to log ``warning`` and move on. A byte-order mark decides the encoding
    (UTF-8, UTF-16 or UTF-32, as Windows editors save them); without one the note is
    UTF-8, or UTF-16 when NULs sit at every other byte and it decodes cleanly; any other NUL
    byte means the file is binary whatever its name says. Invalid
    bytes are decoded as U+FFFD so the rest of a note stays searchable, unless the
    result is mostly such characters or control characters: then it is binary too.

    A document of a format ``formats`` names (``include_formats``: a PDF, a notebook...) is
    converted to markdown instead (:mod:`.formats`): every reader gets the same text. With
    ``known_hash`` (the indexed version's), a document whose bytes still hash to it is not
    converted again: its text is ``""`` (a touched PDF costs a hash, not a conversion).
    """
    if formats:
        from mdsearch_ls.engine.notes import formats as documents

        fmt = documents.format_of(rel, formats)
        if fmt is not None:
            return documents.read_document(path, rel, fmt, max_file_bytes=max_file_bytes,
                                           known_hash=known_hash)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > max_file_bytes:
                return ReadResult(None, "", _oversize_warning(rel, size, max_file_bytes))
            raw = fh.read(max_file_bytes + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return ReadResult(None, "", f"skipped {rel}: cannot read ({reason})")
    if len(raw) > max_file_bytes:  # grew between fstat and read
        return ReadResult(None, "", _oversize_warning(rel, len(raw), max_file_bytes))
    codec, skip = _encoding(raw)
    if codec is None and b"\x00" in raw:
        codec = _utf16_without_bom(raw)
        if codec is None:
            return ReadResult(None, "", f"skipped {rel}: contains NUL bytes (binary file?)")
    body = raw[skip:]
    name = "UTF-8" if codec is None else codec.upper()
    warning = None
    try:
        text = body.decode(codec or "utf-8")
    except UnicodeDecodeError as exc:
        text = body.decode(codec or "utf-8", errors="replace")
        warning = (
            f"{rel}: invalid {name} at byte {exc.start + skip}; undecodable bytes replaced "
            f"with U+FFFD"
        )
    if looks_binary(text):
        return ReadResult(
            None, "", f"skipped {rel}: binary file (read as {name}, it is mostly undecodable "
            f"bytes and control characters)"
        )
    if text.startswith("\ufeff"):  # a second mark: some tools write two
        text = text[1:]
    return ReadResult(text, hashlib.sha256(raw).hexdigest(), warning)


def lone_surrogate_field(value: Any, where: str) -> str | None:
    """The dotted path of the first string (or key) in a decoded JSON value that holds a lone
    surrogate, else None. A client that cuts an emoji in two sends half of a UTF-16 pair; the
    tokenizer and SQLite cannot take it, so a protocol refuses it up front, naming the field.
    A proper pair is one character once decoded: any surrogate left is half of one."""
    if isinstance(value, str):
        return where if any("\ud800" <= ch <= "\udfff" for ch in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}.{key}" if where else str(key)
            if lone_surrogate_field(key, inner):
                return inner
            found = lone_surrogate_field(item, inner)
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = lone_surrogate_field(item, f"{where}[{i}]")
            if found:
                return found
    return None
