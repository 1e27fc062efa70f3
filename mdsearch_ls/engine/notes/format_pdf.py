"""A PDF as markdown: its outline as headings, each page a section under them (pypdf, BSD-3).

Each page with text becomes a ``Page N`` heading one level below the outline entry it falls
under, so the chunker's sections never span two pages and a hit's page is its section's title
(:attr:`Location.page`); an outline entry's heading says its page too
(``Methods (p. 4)``), since a section with nothing but that heading is a chunk of its own. An
edit that changes one page changes that page's chunks only: the others keep their text, so
their vectors come from the cache.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from typing import Any

from mdsearch_ls.engine.notes.formats import Budget, ConversionError, Converted, heading, plain_line

# pypdf logs what it repairs ("EOF marker not found") once per file; the reader's own warning
# names the file and says what was done with it.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# What PDF writers put in the Title field when the author gave none: the file name wins then.
_PLACEHOLDER_TITLE = re.compile(
    r"^(microsoft \w+ - |untitled\b)|\.(docx?|pdf|tex|dvi|odt|pages|indd|pptx?|xlsx?)$",
    re.IGNORECASE)

MAX_OBJECTS = 100_000
"""More objects than this is a crafted PDF (a 1,000-page book has some tens of thousands), refused
before pypdf parses its cross-reference table: a 36 MB file of 370,000 empty pages cost 37 s and
425 MB before pypdf's own page limit refused it."""
MAX_PAGES = 10_000
"""More pages than this is refused too, counted in the page tree before pypdf lists them (its
list of 99,000 pages under a tree that declared one took 27 s); the text of more would pass
``max_file_bytes`` long before the end anyway."""
_SIZE = re.compile(rb"/Size\s+(\d+)")

MAX_OUTLINE_LEVEL = 4
"""Outline entries deeper than this share its level, so a page heading still fits in six."""


def _outline(reader: Any) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by 0-based page: ``(level, title)`` in outline order."""
    by_page: dict[int, list[tuple[int, str]]] = {}

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
                title = str(item.title or "")
            except Exception:  # a broken entry costs that entry
                continue
            if page is not None and page >= 0 and title.strip():
                by_page.setdefault(page, []).append((min(level, MAX_OUTLINE_LEVEL), title))

    try:
        walk(list(reader.outline), 1)
    except Exception:  # a broken outline: the pages alone
        return {}
    return by_page


def _open(raw: bytes) -> Any:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    if not raw.lstrip()[:1024].count(b"%PDF"):
        raise ConversionError("not a PDF (no %PDF header)")
    # counted in the bytes (what the file declares, and its plain objects: 40 ms at 36 MB)
    objects = max([raw.count(b"endobj"), *(int(n) for n in _SIZE.findall(raw))])
    if objects > MAX_OBJECTS:
        raise ConversionError(f"{objects:,} objects, more than a real document has "
                              f"({MAX_OBJECTS:,}): a crafted PDF? not read")
    try:
        reader = PdfReader(io.BytesIO(raw), strict=False)
    except PdfReadError as exc:
        raise ConversionError(f"damaged or truncated PDF ({exc})") from None
    if reader.is_encrypted:
        try:
            ok = reader.decrypt("")  # many PDFs are "encrypted" with no password for reading
        except Exception:
            ok = 0
        if not ok:
            raise ConversionError("encrypted PDF (a password is needed to read it)")
    return reader


def _more_pages_than(reader: Any, limit: int) -> bool:
    """Whether the page tree holds more than ``limit`` pages, counted leaf by leaf (a tree's
    ``/Count`` can lie) and no further than ``limit``. A broken tree is pypdf's to report."""
    todo, seen, pages = [], set(), 0
    with contextlib.suppress(Exception):
        todo.append(reader.trailer["/Root"]["/Pages"])
    while todo and pages <= limit:
        ref = todo.pop()
        if (key := getattr(ref, "idnum", None)) is not None:
            if key in seen:  # a cycle, or a page listed twice
                continue
            seen.add(key)
        try:
            kids = ref.get_object().get("/Kids")
        except Exception:
            continue
        if kids is None:
            pages += 1
        else:
            todo.extend(kids)
    return pages > limit


def convert_pdf(raw: bytes, title: str, budget: Budget) -> Converted:
    """Pages in order under their outline entries; a PDF whose pages hold no text at all (a
    scan) is an error saying so, not an empty note."""
    reader = _open(raw)
    if _more_pages_than(reader, MAX_PAGES):
        raise ConversionError(f"more than {MAX_PAGES:,} pages, more than mdsearch reads; "
                              f"not read")
    try:
        pages = reader.pages
        total = len(pages)
    except Exception as exc:
        raise ConversionError(f"damaged PDF: its pages cannot be listed ({exc})") from None
    outline = _outline(reader)
    out: list[str] = []
    meta_title = ""
    with contextlib.suppress(Exception):
        meta_title = str((reader.metadata or {}).get("/Title") or "").strip()
    if meta_title and not _PLACEHOLDER_TITLE.search(meta_title):
        out += ["---", f"title: {json.dumps(' '.join(meta_title.split()))}", "---", ""]
    depth = 0
    with_text = read = 0
    notes: list[str] = []
    for i in range(total):
        part: list[str] = []
        for level, name in outline.get(i, []):
            part += [heading(level, f"{' '.join(name.split())} (p. {i + 1})"), ""]
            depth = level
        try:
            text = pages[i].extract_text() or ""
        except Exception as exc:  # one bad page costs that page
            notes.append(f"page {i + 1} could not be read ({type(exc).__name__})")
            text = ""
        read += 1
        lines = [plain_line(line) for line in text.split("\n")]
        if any(line.strip() for line in lines):
            with_text += 1
            part += [heading(depth + 1, f"Page {i + 1}"), "", *lines, ""]
        if part and not budget.take("\n".join(part)):
            budget.reason += f" (pages {i + 1}-{total} of {total} left out)"
            break
        out += part
    if with_text == 0:
        if read < total:
            raise ConversionError(f"no text in its first {read} of {total} pages")
        raise ConversionError(f"no text in its {total} pages (a scanned PDF? mdsearch does "
                              f"no OCR)")
    empty = read - with_text
    if empty and with_text < read:
        notes.append(f"{empty} of {read} pages have no text (scanned?)")
    return Converted("\n".join(out), notes)
