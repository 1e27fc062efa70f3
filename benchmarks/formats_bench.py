"""Documents beside the notes (include_formats): conversion speed per format, and what a 200-page
PDF costs an index beside a 200-section markdown note of the same text.

    python benchmarks/formats_bench.py [--pages 200] [--repeat 3] [--out FILE]

Every document is generated here, from one deterministic text of ``--pages`` parts (about 1,400
characters each, sentences from a fixed vocabulary): a PDF of that many pages with an outline
entry per ten pages (reportlab), a Word file with a heading per part (python-docx), a saved HTML
page with a heading per part and the scripts, styles and navigation of a real site, a Jupyter
notebook with a markdown and a code cell per part, an Org file with a headline per part.

* ``convert``: seconds to read each document into markdown (``read_document``, the best of
  ``--repeat``), as pages per second (PDF) and input KB per second (all);
* ``index``: a first index from nothing, with the bundled model, of a folder holding only the
  200-section markdown note, and of one holding only the 200-page PDF; seconds, chunks and
  chunks embedded; and a re-index after one page (one section) of each changed.

Results: printed, and ``benchmarks/results/formats.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdsearch_ls.config import DOCUMENT_FORMATS, Settings  # noqa: E402
from mdsearch_ls.engine.notes.formats import read_document  # noqa: E402

WORDS = [
    "harbour", "crane", "ledger", "tariff", "pallet", "invoice", "roster", "forklift", "quay",
    "berth", "manifest", "customs", "freight", "tugboat", "dredger", "bollard", "gantry",
    "reefer", "lashing", "stevedore", "warehouse", "container", "schedule", "shipment",
    "carrier", "pilot", "tide", "draught", "vessel", "cargo", "inspection", "permit", "dock",
    "insurance", "claim", "damage", "delay", "weather", "storm", "route", "fuel", "engine",
    "crew", "captain",
]


def parts(n: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sentences = []
        while sum(len(s) for s in sentences) < 1400:
            words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
            sentences.append(" ".join(words).capitalize() + ".")
        out.append((f"Part {i + 1}: {rng.choice(WORDS)} and {rng.choice(WORDS)}",
                    " ".join(sentences)))
    return out


def write_pdf(path: Path, doc: list[tuple[str, str]]) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.documents import pdf_bytes

    pages = [(f"Chapter {i // 10 + 1}" if i % 10 == 0 else None, 0, f"{title}. {text}")
             for i, (title, text) in enumerate(doc)]
    path.write_bytes(pdf_bytes(pages, title="Port operations"))


def write_docx(path: Path, doc: list[tuple[str, str]]) -> None:
    from docx import Document

    d = Document()
    for title, text in doc:
        d.add_heading(title, 1)
        d.add_paragraph(text)
    d.save(str(path))


def write_html(path: Path, doc: list[tuple[str, str]]) -> None:
    chrome = ("<script>" + "var x = 1;" * 2000 + "</script><style>" + ".a{color:red}" * 2000
              + "</style>")
    body = "".join(f"<h2>{t}</h2><p>{x}</p>" for t, x in doc)
    path.write_text(f"<html><head><title>Port operations</title>{chrome}</head><body><nav>"
                    f"<a href='/'>Home</a></nav><main><h1>Port operations</h1>{body}</main>"
                    f"<footer>footer</footer></body></html>")


def write_ipynb(path: Path, doc: list[tuple[str, str]]) -> None:
    cells = []
    for t, x in doc:
        cells.append({"cell_type": "markdown", "metadata": {}, "source": [f"## {t}\n\n{x}\n"]})
        cells.append({"cell_type": "code", "metadata": {}, "execution_count": 1,
                      "source": ["df = load()\n", "df.describe()"],
                      "outputs": [{"output_type": "stream", "name": "stdout",
                                   "text": ["x" * 2000]}]})
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": cells}))


def write_org(path: Path, doc: list[tuple[str, str]]) -> None:
    path.write_text("#+TITLE: Port operations\n\n" + "".join(f"* {t}\n{x}\n\n" for t, x in doc))


def write_md(path: Path, doc: list[tuple[str, str]]) -> None:
    path.write_text("# Port operations\n\n" + "".join(f"## {t}\n\n{x}\n\n" for t, x in doc))


WRITERS = {"pdf": write_pdf, "docx": write_docx, "html": write_html, "ipynb": write_ipynb,
           "org": write_org}


def convert(base: Path, doc: list[tuple[str, str]], repeat: int) -> dict[str, dict]:
    out = {}
    for fmt, writer in WRITERS.items():
        path = base / f"doc.{fmt}"
        writer(path, doc)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            read = read_document(path, path.name, fmt, max_file_bytes=2_000_000)
            best = min(best, time.perf_counter() - t0)
        assert read.text is not None, read.warning
        kb = path.stat().st_size / 1000
        row = {"seconds": round(best, 3), "input_kb": round(kb, 1),
               "kb_per_s": round(kb / best, 1), "markdown_kb": round(len(read.text) / 1000, 1),
               "warning": read.warning}
        if fmt == "pdf":
            row["pages_per_s"] = round(len(doc) / best, 1)
        out[fmt] = row
        print(f"{fmt:6} {best:7.3f} s  {kb:8.1f} KB in  {kb / best:9.1f} KB/s"
              + (f"  {len(doc) / best:6.1f} pages/s" if fmt == "pdf" else ""))
    return out


def index_cost(base: Path, doc: list[tuple[str, str]]) -> dict[str, dict]:
    from mdsearch_ls.engine.embedding import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    settings = Settings(include_formats=DOCUMENT_FORMATS)
    embedder = create_embedder(settings)
    embedder.load()  # type: ignore[attr-defined]
    out = {}
    for name, writer, fname in (("markdown_200_sections", write_md, "ops.md"),
                                ("pdf_200_pages", write_pdf, "ops.pdf")):
        folder = base / name
        folder.mkdir()
        writer(folder / fname, doc)
        with Workspace.open(folder, settings, embedder=embedder,
                            index_dir=base / f"idx-{name}") as ws:
            t0 = time.perf_counter()
            first = ws.index()
            first_s = time.perf_counter() - t0
            edited = list(doc)
            edited[len(doc) // 2] = (doc[len(doc) // 2][0], "This page was rewritten entirely "
                                     "to say that the harbour is closed for repairs.")
            writer(folder / fname, edited)
            st = (folder / fname).stat()
            os.utime(folder / fname, (st.st_atime, st.st_mtime + 5))
            t0 = time.perf_counter()
            again = ws.update([fname])
            again_s = time.perf_counter() - t0
        out[name] = {"first_index_s": round(first_s, 2), "chunks": first.chunks_total,
                     "embedded": first.chunks_embedded, "after_one_edit_s": round(again_s, 2),
                     "embedded_after_edit": again.chunks_embedded,
                     "file_kb": round((folder / fname).stat().st_size / 1000, 1)}
        print(f"{name:22} first index {first_s:6.2f} s, {first.chunks_total} chunks; one part "
              f"edited: {again_s:5.2f} s, {again.chunks_embedded} embedded")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/formats.json")
    args = ap.parse_args()
    doc = parts(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "convert").mkdir()
        results = {
            "pages": args.pages,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_average_before": [round(x, 2) for x in os.getloadavg()]},
            "convert": convert(base / "convert", doc, args.repeat),
            "index": index_cost(base, doc),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
