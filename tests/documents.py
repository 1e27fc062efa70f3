"""Real documents for the tests of ``include_formats``, written by the libraries people's tools
use: a PDF with an outline by reportlab, a Word file by python-docx, a saved page with scripts
and navigation, a Jupyter notebook with outputs, an Org file; and the malformed set (encrypted,
truncated, garbage, scanned, a zip bomb named ``.docx``, a 50 MB page).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

PAPER_PAGES = [
    # (outline entry, level, text of the page)
    ("Introduction", 0, "Sourdough bread rises because wild yeast and lactic acid bacteria "
     "ferment the flour."),
    ("Method", 0, "We feed the starter twice a day with equal weights of rye flour and water, "
     "kept at 24 degrees."),
    ("Overnight proof", 1, "The shaped loaves rest in the refrigerator overnight; the cold slows "
     "the yeast and the crumb gets more sour."),
    ("Results", 0, "Loaves baked in a preheated cast iron pot rose higher than loaves baked on "
     "a tray."),
]


def formats_or_skip() -> None:
    """The converters are the extra mdsearch-ls[formats]; scripts/test.sh installs it with the
    writers (reportlab, python-docx) and sets MDSEARCH_REQUIRE_FORMATS=1, so a missing install
    fails there instead of skipping."""
    try:
        import docx  # noqa: F401
        import mammoth  # noqa: F401
        import markdownify  # noqa: F401
        import orgparse  # noqa: F401
        import pypdf  # noqa: F401
        import reportlab  # noqa: F401
        import selectolax  # noqa: F401
    except ImportError:
        if os.environ.get("MDSEARCH_REQUIRE_FORMATS"):
            raise
        pytest.skip("the document converters (pip install 'mdsearch-ls[formats]' reportlab "
                    "python-docx) are not installed")


def pdf_bytes(pages: list[tuple[str | None, int, str]], *, title: str = "Baking notes",
              blank: bool = False) -> bytes:
    """A PDF written by reportlab, one page per entry, with an outline entry per page at its
    level (``blank``: pages with a drawn shape and no text, as a scan's are to a text layer)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setTitle(title)
    for i, (entry, level, text) in enumerate(pages):
        key = f"page{i}"
        c.bookmarkPage(key)
        if entry:  # a page without an entry falls under the one before it
            c.addOutlineEntry(entry, key, level=level)
        if blank:
            c.rect(72, 400, 300, 300, fill=1)
        else:
            t = c.beginText(72, 770)
            words, line = text.split(), ""
            for w in words:  # wrap at ~80 characters, as a typeset page is
                if len(line) + len(w) > 80:
                    t.textLine(line)
                    line = ""
                line = f"{line} {w}".strip()
            t.textLine(line)
            c.drawText(t)
        c.showPage()
    c.save()
    return buf.getvalue()


def docx_bytes() -> bytes:
    from docx import Document

    d = Document()
    d.add_heading("Studio handbook", 0)
    d.add_heading("Holidays", 1)
    d.add_paragraph("Everyone gets twenty-five days of paid leave a year, booked in the shared "
                    "calendar two weeks ahead.")
    d.add_heading("Expenses", 1)
    d.add_paragraph("Keep the receipt for anything you buy for the studio and file it within a "
                    "month to be reimbursed.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Fixing a flat tyre</title>
<script>var tracking = "zqxjvkw tracking pixel loaded";</script>
<style>.menu { color: red } /* zqxjvkw style */</style></head>
<body><nav><a href="/">Home</a> <a href="/shop">zqxjvkw shop menu</a></nav>
<main><h1>Fixing a flat tyre</h1>
<h2>Finding the hole</h2><p>Pump the inner tube up and hold it under water: bubbles show where
the puncture is.</p><img src="data:image/png;base64,iVBORw0KGgo=">
<h2>Patching</h2><p>Roughen the rubber, spread the glue, wait a minute, then press the patch
firmly.</p></main>
<footer>zqxjvkw copyright footer</footer><script>console.log("zqxjvkw")</script></body></html>
"""


def notebook_bytes() -> bytes:
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                    "display_name": "Python 3"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": [
                "# Customer churn\n", "\n",
                "Which subscribers cancel in their first month, and why they leave.\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": 1,
             "source": ["cancelled = df[df.months_active < 1]\n",
                        "cancelled.reason.value_counts()"],
             "outputs": [{"output_type": "stream", "name": "stdout",
                          "text": ["zqxjvkw output that must not be indexed\n"]}]},
        ],
    }
    return json.dumps(nb).encode()


ORG = """#+TITLE: Allotment log

* TODO Tomatoes                                                        :veg:
  :PROPERTIES:
  :PLANTED: 2024-04-02
  :END:
Water the tomato plants every morning in July and pinch out the side shoots.
** Pests
Aphids on the leaves: spray with soapy water.
#+BEGIN_SRC python
print("count aphids")
#+END_SRC
* Roses
Prune the roses in March, just above an outward facing bud.
"""


def write_documents(root: Path) -> Path:
    """A small vault: two notes and one document of each format."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes").mkdir(exist_ok=True)
    (root / "notes" / "garden.md").write_text("# Garden\n\nThe compost heap needs turning every "
                                              "two weeks.\n")
    (root / "notes" / "bikes.md").write_text("# Bikes\n\nOil the chain after a wet ride.\n")
    (root / "papers").mkdir(exist_ok=True)
    (root / "papers" / "sourdough.pdf").write_bytes(pdf_bytes(PAPER_PAGES))
    (root / "handbook.docx").write_bytes(docx_bytes())
    (root / "saved").mkdir(exist_ok=True)
    (root / "saved" / "flat-tyre.html").write_text(HTML)
    (root / "churn.ipynb").write_bytes(notebook_bytes())
    (root / "allotment.org").write_text(ORG)
    return root


def zip_bomb() -> bytes:
    """A zip named ``.docx`` whose document.xml unpacks to 60 MB of zeros from ~60 KB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"\0" * 60_000_000)
    return buf.getvalue()


def write_malformed(root: Path) -> dict[str, str]:
    """The bad documents; returns each one's path and a word its warning must hold."""
    from pypdf import PdfReader, PdfWriter

    root.mkdir(parents=True, exist_ok=True)
    good = pdf_bytes(PAPER_PAGES[:2])
    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(good)).pages:
        writer.add_page(page)
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")
    enc = io.BytesIO()
    writer.write(enc)
    (root / "encrypted.pdf").write_bytes(enc.getvalue())
    (root / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (root / "garbage.pdf").write_bytes(os.urandom(5000))
    (root / "scanned.pdf").write_bytes(pdf_bytes(PAPER_PAGES[:3], blank=True))
    (root / "bomb.docx").write_bytes(zip_bomb())
    (root / "truncated.docx").write_bytes(docx_bytes()[:4000])
    (root / "old-word.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 4000)
    with open(root / "huge.html", "wb") as fh:  # 50 MB on paper, sparse on disk
        fh.truncate(50 * 1024 * 1024)
    (root / "broken.ipynb").write_text('{"cells": [ {"cell_type": "markdown", "sour')
    return {
        "encrypted.pdf": "encrypted",
        "truncated.pdf": "truncated",
        "garbage.pdf": "not a PDF",
        "scanned.pdf": "no text",
        "bomb.docx": "zip bomb",
        "truncated.docx": "truncated",
        "old-word.docx": "encrypted",
        "huge.html": "exceeds",
        "broken.ipynb": "invalid JSON",
    }


def crafted_pdf(pages: int, *, declared: int | None = None, fan: int = 500) -> bytes:
    """A PDF of ``pages`` empty pages under a two-level page tree (``fan`` kids a node, under
    pypdf's limit on one array), its root declaring ``declared`` pages (default: the truth):
    ~100 bytes a page, so 370,000 pages are a 36 MB file, as a crafted one would be."""
    out = bytearray(b"%PDF-1.4\n")
    offsets: list[tuple[int, int]] = []

    def obj(num: int, body: bytes) -> None:
        offsets.append((num, len(out)))
        out.extend(b"%d 0 obj\n" % num + body + b"\nendobj\n")

    nodes = (pages + fan - 1) // fan
    first_node, first_page = 3, 3 + nodes
    obj(1, b"<</Type/Catalog/Pages 2 0 R>>")
    obj(2, b"<</Type/Pages/Count %d/Kids[" % (pages if declared is None else declared)
        + b" ".join(b"%d 0 R" % (first_node + k) for k in range(nodes)) + b"]>>")
    for k in range(nodes):
        kids = range(k * fan, min(pages, (k + 1) * fan))
        obj(first_node + k, b"<</Type/Pages/Parent 2 0 R/Count %d/Kids[" % len(kids)
            + b" ".join(b"%d 0 R" % (first_page + i) for i in kids) + b"]>>")
    for i in range(pages):
        obj(first_page + i, b"<</Type/Page/Parent %d 0 R/MediaBox[0 0 9 9]>>"
            % (first_node + i // fan))
    xref, size = len(out), first_page + pages
    out.extend(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    for _num, off in sorted(offsets):
        out.extend(b"%010d 00000 n \n" % off)
    out.extend(b"trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (size, xref))
    return bytes(out)
