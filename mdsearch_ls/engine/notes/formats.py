"""Documents kept beside the notes (PDF, Word, HTML, Jupyter notebooks, Org) read as markdown.

A converter turns a file's bytes into markdown whose headings carry the document's structure (a
PDF's outline and pages, a Word or HTML file's headings, a notebook's markdown headings, Org's
``*`` headlines), so the one chunker makes its sections and every layer above (the index,
search, the front ends) meets an ordinary note. Lines of a hit refer to that converted text:
whatever hands a section out reads it through :func:`read_document` again. Only Org keeps the
file's own line numbers (one markdown line per Org line), so an editor opens it at the hit.

Off unless the setting ``include_formats`` names a format (see :func:`format_of`). Each
converter imports its library when it first runs (the extra ``mdsearch-ls[formats]``), so a
search never imports pypdf. A file the converter cannot read (encrypted, truncated, malformed, a
zip bomb, too large, a scanned PDF with no text) becomes a :class:`ReadResult` with a warning
naming it, as a binary ``.md`` does: the run goes on.

Work per file is bounded twice: by the raw size (:func:`raw_limit`, before anything is read)
and by a :class:`Budget` of converted characters and seconds, checked between pages, cells and
elements, past which the rest of the document is left out with a warning (a 500-page PDF
indexes its first pages, and the indexer converts documents after the notes: see
``Indexer._process``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mdsearch_ls.engine.locations import document_format
from mdsearch_ls.engine.notes.decoding import ReadResult

RAW_FACTOR: dict[str, int] = {"pdf": 20, "docx": 20, "ipynb": 20, "html": 5, "org": 1}
"""A document's raw size limit as a multiple of ``max_file_bytes`` (its converted text is held
to ``max_file_bytes`` itself): a PDF's or Word file's bytes are mostly fonts, images and
compression, a notebook's mostly outputs (left out), a saved page's partly scripts and styles;
an Org file is text like a note."""

CONVERT_SECONDS = 30.0
"""Most seconds of conversion per document; the pages or cells not reached are left out."""

EXTRA = "mdsearch-ls[formats]"


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


class ConversionError(Exception):
    """The document cannot be read; the message says why, for a person ("encrypted PDF")."""


@dataclass
class Budget:
    """How much one document may still cost: characters of converted text and a deadline."""

    chars: int
    deadline: float
    used: int = 0
    reason: str = ""

    def take(self, text: str) -> bool:
        """Count ``text``; False (and ``reason`` set) once the document is over its budget. The
        first part always fits the time: a slow first page is still worth indexing."""
        first = self.used == 0
        self.used += len(text)
        if self.used > self.chars:
            self.reason = f"its text passes max_file_bytes ({_size(self.chars)})"
        elif not first and time.monotonic() > self.deadline:
            self.reason = f"converting it took more than {CONVERT_SECONDS:.0f} s"
        return not self.reason


@dataclass
class Converted:
    """A document as markdown, and what a person should know about how it was read."""

    text: str
    notes: list[str] = field(default_factory=list)


Converter = Callable[[bytes, str, Budget], Converted]


def format_of(rel: str, formats: Sequence[str]) -> str | None:
    """The format ``rel`` is read as when ``formats`` (the setting) names it, else None."""
    fmt = document_format(rel) if formats else None
    return fmt if fmt in formats else None


def raw_limit(fmt: str, max_file_bytes: int) -> int:
    return RAW_FACTOR[fmt] * max_file_bytes


def oversize(rel: str, size: int, fmt: str, max_file_bytes: int) -> str | None:
    """The warning for a document over its raw size limit, else None."""
    limit = raw_limit(fmt, max_file_bytes)
    if size <= limit:
        return None
    return (f"skipped {rel}: {_size(size)} exceeds the limit for .{fmt} files "
            f"({_size(limit)}, {RAW_FACTOR[fmt]} x max_file_bytes)")


def _converter(fmt: str) -> Converter:
    if fmt == "pdf":
        from mdsearch_ls.engine.notes.format_pdf import convert_pdf

        return convert_pdf
    if fmt in ("docx", "html"):
        from mdsearch_ls.engine.notes import format_markup

        return format_markup.convert_docx if fmt == "docx" else format_markup.convert_html
    return convert_ipynb if fmt == "ipynb" else convert_org


def read_document(
    path: Path, rel: str, fmt: str, *, max_file_bytes: int, known_hash: str | None = None
) -> ReadResult:
    """Read one document as markdown text, every failure a warning naming the file; ``""``
    without converting when its bytes hash to ``known_hash``."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            too_big = oversize(rel, size, fmt, max_file_bytes)
            if too_big:
                return ReadResult(None, "", too_big)
            raw = fh.read(raw_limit(fmt, max_file_bytes) + 1)
    except OSError as exc:
        return ReadResult(None, "", f"skipped {rel}: cannot read ({exc.strerror or exc})")
    too_big = oversize(rel, len(raw), fmt, max_file_bytes)
    if too_big:
        return ReadResult(None, "", too_big)
    content_hash = hashlib.sha256(raw).hexdigest()
    if known_hash is not None and content_hash == known_hash:
        return ReadResult("", content_hash, None)
    budget = Budget(max_file_bytes, time.monotonic() + CONVERT_SECONDS)
    try:
        out = _converter(fmt)(raw, PurePosixPath(rel).stem, budget)
    except ConversionError as exc:
        return ReadResult(None, "", f"skipped {rel}: {exc}")
    except ImportError as exc:
        return ReadResult(None, "", f"skipped {rel}: reading .{fmt} files needs the extra "
                          f"{EXTRA} (mdsearch install formats): {exc}")
    except (Exception, RecursionError) as exc:  # a library's failure costs this file only
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        return ReadResult(None, "", f"skipped {rel}: not a readable .{fmt} file "
                          f"({type(exc).__name__}{': ' + detail if detail else ''})")
    text = _CONTROL.sub("", out.text)
    if not text.strip():
        return ReadResult(None, "", f"skipped {rel}: no text in it")
    notes = list(out.notes)
    if budget.reason:
        notes.append(f"only part of it is indexed: {budget.reason}")
    warning = f"{rel}: " + "; ".join(notes) if notes else None
    return ReadResult(text, content_hash, warning)


# ---- plain text inside markdown -----------------------------------------------------------

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# A line of extracted text that markdown would read as structure: a heading, a setext
# underline, a fence, an HTML block, front matter. Escaped so it stays text in its section.
_MARKDOWN_START = re.compile(r"^(\s{0,3})([#<>|]|`{3}|~{3}|=+\s*$|-+\s*$|[*_]{3,}\s*$|%%)")


def plain_line(line: str) -> str:
    """One line of plain text (a PDF's, an Org body's) safe inside markdown."""
    return _MARKDOWN_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line.rstrip())


def heading(level: int, title: str) -> str:
    """An ATX heading of a title that may hold anything (one line, ``#`` runs kept as text)."""
    text = " ".join(title.split()) or "(untitled)"
    return f"{'#' * max(1, min(level, 6))} {text.rstrip('#').rstrip() or text}"


def fence(code: str, lang: str = "") -> list[str]:
    """A fenced code block longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=2)
    mark = "`" * (longest + 1)
    return [mark + lang, *code.rstrip("\n").split("\n"), mark]


# ---- Jupyter notebooks ----------------------------------------------------------------------


def _source(cell: dict[str, object], key: str = "source") -> str:
    src = cell.get(key, "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def convert_ipynb(raw: bytes, title: str, budget: Budget) -> Converted:
    """Markdown cells as text, code cells as fenced code in the kernel's language; outputs are
    left out (plots, tables of numbers and tracebacks are not what a person searches)."""
    try:
        nb = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConversionError(f"not a Jupyter notebook (invalid JSON: {exc})") from None
    if not isinstance(nb, dict):
        raise ConversionError("not a Jupyter notebook (no cells)")
    cells = nb.get("cells")
    if cells is None and isinstance(nb.get("worksheets"), list):  # nbformat 3
        cells = [c for ws in nb["worksheets"] if isinstance(ws, dict)
                 for c in ws.get("cells", [])]
    if not isinstance(cells, list):
        raise ConversionError("not a Jupyter notebook (no cells)")
    meta = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    lang = ""
    for key in ("kernelspec", "language_info"):
        info = meta.get(key)
        if isinstance(info, dict):
            lang = str(info.get("language") or info.get("name") or lang)
        if lang:
            break
    lang = re.sub(r"[^\w+-]", "", lang)
    out: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        kind = cell.get("cell_type")
        if kind in ("markdown", "heading"):
            text = _source(cell)
            if kind == "heading":  # nbformat 3
                text = heading(int(cell.get("level", 1) or 1), text)
            part = [*text.rstrip("\n").split("\n"), ""]
        elif kind == "code":
            code = _source(cell) or _source(cell, "input")
            if not code.strip():
                continue
            part = [*fence(code, lang), ""]
        else:
            continue
        if not budget.take("\n".join(part)):
            break
        out.extend(part)
    return Converted("\n".join(out))


# ---- Org mode -------------------------------------------------------------------------------

_ORG_BLOCK = re.compile(r"^\s*#\+(begin|end)_(\w+)(?:\s+(\S+))?", re.IGNORECASE)
_ORG_KEYWORD = re.compile(r"^\s*#\+(\w+):\s*(.*)$")
_ORG_COMMENT = re.compile(r"^\s*#(\s|$)")
_ORG_DRAWER = re.compile(r"^\s*:(\w+):\s*$")


def convert_org(raw: bytes, title: str, budget: Budget) -> Converted:
    """Org as markdown line for line, so a hit's lines are the Org file's: orgparse finds the
    headlines (their text without TODO keywords, priorities and tags), ``#+TITLE`` becomes the
    note's title, source and example blocks become fences, keyword lines, comments and drawers
    (``:PROPERTIES:``) become blank lines."""
    import orgparse

    text = raw.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    root = orgparse.loads(text)
    heads: dict[int, tuple[int, str]] = {}
    for node in root[1:]:
        number = getattr(node, "linenumber", None)
        if isinstance(number, int) and 0 < number <= len(lines):
            heads[number - 1] = (node.level, node.heading)
    shift = 0
    for line in lines:  # a #+TITLE before the first headline heads the note: headlines go down
        keyword = _ORG_KEYWORD.match(line)
        if line.startswith("*"):
            break
        if keyword and keyword.group(1).lower() == "title" and keyword.group(2).strip():
            shift = 1
            break
    out: list[str] = []
    in_block = ""
    in_drawer = False
    titled = False
    for i, line in enumerate(lines):
        block = _ORG_BLOCK.match(line)
        if in_block:
            if block and block.group(1).lower() == "end":
                in_block = ""
                out.append("```")
            else:
                out.append(line.replace("```", "'''"))
            continue
        if block and block.group(1).lower() == "begin":
            kind = block.group(2).lower()
            if kind in ("src", "example"):
                in_block = kind
                out.append("```" + re.sub(r"[^\w+-]", "", block.group(3) or ""))
            else:  # quote, center, verse: their text is text
                out.append("")
            continue
        if block:
            out.append("")
            continue
        if i in heads:
            level, name = heads[i]
            out.append(heading(level + shift, name))
            in_drawer = False
            continue
        if in_drawer:
            in_drawer = line.strip().upper() != ":END:"
            out.append("")
            continue
        if _ORG_DRAWER.match(line) and line.strip().upper() != ":END:":
            in_drawer = True
            out.append("")
            continue
        keyword = _ORG_KEYWORD.match(line)
        if keyword:
            is_title = (keyword.group(1).lower() == "title" and shift and not titled
                        and bool(keyword.group(2).strip()) and min(heads, default=i + 1) > i)
            out.append(heading(1, keyword.group(2)) if is_title else "")
            titled = titled or is_title
            continue
        if _ORG_COMMENT.match(line):
            out.append("")
            continue
        out.append(plain_line(line))
    if in_block:
        out.append("```")
    body = "\n".join(out)
    if not budget.take(body):
        raise ConversionError(f"its text passes max_file_bytes ({_size(budget.chars)})")
    return Converted(body)
