"""Documents beside the notes (``include_formats``): converted to the chunker's sections, pages
on PDF hits, documents after notes, the malformed set skipped by name, and an edit of a PDF
re-embedding only its changed pages. Real files, written by reportlab and python-docx; the fake
embedder (the real model's tests are in tests/integration/test_formats_real.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mdsearch_ls.config import DOCUMENT_FORMATS, SettingError, Settings, settings_from_flags
from mdsearch_ls.engine.notes import formats
from tests.documents import (
    ORG,
    PAPER_PAGES,
    formats_or_skip,
    pdf_bytes,
    write_documents,
    write_malformed,
)

ALL = Settings(include_formats=DOCUMENT_FORMATS)
DOCS = {"papers/sourdough.pdf", "handbook.docx", "saved/flat-tyre.html", "churn.ipynb",
        "allotment.org"}


@pytest.fixture(autouse=True)
def _converters() -> None:
    formats_or_skip()


def test_off_by_default_only_notes_are_indexed(tmp_path: Path, make_workspace) -> None:
    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root)
    ws.index()
    assert set(ws.manifest.files()) == {"notes/garden.md", "notes/bikes.md"}


def test_each_format_becomes_sections(tmp_path: Path, make_workspace) -> None:
    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root, settings=ALL)
    report = ws.index()
    assert set(ws.manifest.files()) == DOCS | {"notes/garden.md", "notes/bikes.md"}
    assert not report.warnings, report.warnings
    pdf = ws.manifest.chunks_for("papers/sourdough.pdf")
    by_page = {c.page: c for c in pdf if c.title.startswith("Page ")}
    assert sorted(by_page) == [1, 2, 3, 4]
    assert "refrigerator overnight" in by_page[3].text
    assert by_page[3].breadcrumb == "Method (p. 2) > Overnight proof (p. 3) > Page 3"
    html = " ".join(c.text for c in ws.manifest.chunks_for("saved/flat-tyre.html"))
    assert "bubbles show" in html and "zqxjvkw" not in html  # scripts, nav, footer gone
    assert "data:image" not in html
    nb = " ".join(c.text for c in ws.manifest.chunks_for("churn.ipynb"))
    assert "value_counts" in nb and "zqxjvkw" not in nb  # code in, outputs out
    docx = {c.title: c.text for c in ws.manifest.chunks_for("handbook.docx")}
    assert "twenty-five days" in docx["Holidays"]
    org = ws.manifest.chunks_for("allotment.org")
    roses = next(c for c in org if c.title == "Roses")
    # Org is converted line for line: a hit's line is the Org file's.
    assert ORG.split("\n")[roses.start_line].startswith("* Roses")
    assert [c.breadcrumb for c in org if c.title == "Pests"] == [
        "Allotment log > Tomatoes > Pests"]


def test_a_search_hit_in_a_pdf_carries_its_page(tmp_path: Path, make_workspace) -> None:
    from mdsearch_ls.engine.search.requests import SearchRequest

    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root, settings=ALL)
    ws.index()
    hits = ws.search(SearchRequest.build("refrigerator overnight crumb sour", k=3)).hits
    top = hits[0]
    assert (top.path, top.page, top.file_lines) == ("papers/sourdough.pdf", 3, False)
    assert top.to_json()["page"] == 3 and top.to_json()["format"] == "pdf"
    note = ws.search(SearchRequest.build("compost heap", k=1)).hits[0]
    assert "page" not in note.to_json() and "format" not in note.to_json()
    # type: names a document format, as it names md.
    only = ws.search(SearchRequest.build("tyre puncture type:html", k=5)).hits
    assert {h.path for h in only} == {"saved/flat-tyre.html"}
    assert {h.path for h in ws.search(SearchRequest.build("flour type:pdf", k=5)).hits} == {
        "papers/sourdough.pdf"}


def test_documents_are_read_after_the_notes_are_committed(
    tmp_path: Path, make_workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root, settings=ALL)
    seen: list[set[str]] = []
    real = formats.read_document

    def spy(path: Path, rel: str, fmt: str, **kw: int):
        seen.append(set(ws.manifest.files()))
        return real(path, rel, fmt, **kw)

    monkeypatch.setattr(formats, "read_document", spy)
    ws.index()
    assert len(seen) == len(DOCS)
    assert all({"notes/garden.md", "notes/bikes.md"} <= s for s in seen)


def test_malformed_documents_are_skipped_by_name(tmp_path: Path, make_workspace) -> None:
    root = write_documents(tmp_path / "vault")
    expected = write_malformed(root / "bad")
    ws = make_workspace(root, settings=ALL)
    report = ws.index()
    assert set(ws.manifest.files()) == DOCS | {"notes/garden.md", "notes/bikes.md"}
    for name, word in expected.items():
        said = [w for w in report.warnings if f"bad/{name}" in w]
        assert len(said) == 1, (name, report.warnings)
        assert word.lower() in said[0].lower(), said
    assert report.files_skipped == len(expected)
    # Remembered: the next run neither reads nor reports them again.
    again = ws.index()
    assert again.warnings == [] and again.files_indexed == 0


def test_an_edit_to_a_pdf_re_embeds_only_its_changed_page(
    tmp_path: Path, make_workspace, fake_embedder, touch_later
) -> None:
    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root, fake_embedder, settings=ALL)
    ws.index()
    before = ws.manifest.chunks_for("papers/sourdough.pdf")
    edited = list(PAPER_PAGES)
    edited[1] = ("Method", 0, "We now feed the starter once a day with wholemeal spelt flour.")
    pdf = root / "papers" / "sourdough.pdf"
    pdf.write_bytes(pdf_bytes(edited))
    touch_later(pdf)
    fake_embedder.reset_counts()
    report = ws.update(["papers/sourdough.pdf"])
    assert report.files_indexed == 1
    assert report.chunks_embedded == 1, report  # page 2's text, nothing else
    after = ws.manifest.chunks_for("papers/sourdough.pdf")
    page2 = next(c for c in after if c.title == "Page 2")
    assert "spelt" in page2.text and page2.page == 2
    assert [c.title for c in after] == [c.title for c in before]
    unchanged = {c.embed_hash for c in before} & {c.embed_hash for c in after}
    assert len(unchanged) == len(after) - 1


def test_a_500_page_pdf_is_cut_at_the_text_limit_with_a_warning(tmp_path: Path) -> None:
    pages = [(f"Chapter {i}", 0, f"Page {i} talks about topic number {i} at some length. " * 6)
             for i in range(500)]
    pdf = tmp_path / "long.pdf"
    pdf.write_bytes(pdf_bytes(pages))
    read = formats.read_document(pdf, "long.pdf", "pdf", max_file_bytes=40_000)
    assert read.text is not None and read.warning is not None
    assert "only part of it is indexed" in read.warning and "left out" in read.warning
    assert len(read.text) <= 40_000 + 2_000
    assert "## Page 1\n" in read.text and "Page 500" not in read.text


def test_the_setting_names_formats(tmp_path: Path) -> None:
    s = settings_from_flags({"include_formats": ["pdf,ipynb", "org"]})
    assert s.include_formats == ("pdf", "ipynb", "org")
    assert settings_from_flags({"include_formats": ["all"]}).include_formats == DOCUMENT_FORMATS
    with pytest.raises(SettingError, match=r"--include-formats.*unknown format 'pfd'"):
        settings_from_flags({"include_formats": ["pfd"]})
    assert dataclasses.replace(Settings()).include_formats == ()


def test_a_plain_search_imports_no_converter() -> None:
    import subprocess
    import sys

    code = ("import sys; from mdsearch_ls.engine.notes import files, formats; "
            "files.SourceFilter('.', formats=('pdf',)).accepts('x.pdf'); "
            "print(sorted(m for m in ('pypdf', 'mammoth', 'markdownify', 'selectolax', "
            "'orgparse') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_reading_a_document_for_a_front_end_gives_the_converted_text(tmp_path: Path) -> None:
    from mdsearch_ls.engine.errors import RequestError
    from mdsearch_ls.engine.notes.files import SourceFilter
    from mdsearch_ls.engine.service.reading import read_checked

    root = write_documents(tmp_path / "vault")
    flt = SourceFilter(root, formats=("pdf",))
    _, text = read_checked(root, "papers/sourdough.pdf", "papers/sourdough.pdf",
                           accepts=flt.accepts, max_file_bytes=2_000_000, formats=("pdf",))
    assert "## Page 1" in text and "wild yeast" in text
    with pytest.raises(RequestError, match="not a markdown note"):
        read_checked(root, "handbook.docx", "handbook.docx", accepts=flt.accepts,
                     max_file_bytes=2_000_000, formats=("pdf",))


async def test_the_language_server_lists_document_hits_but_offers_nothing_inside_them(
    tmp_path: Path, fake_embedder
) -> None:
    from lsprotocol import types

    from mdsearch_ls.lsp.convert import path_to_uri
    from mdsearch_ls.lsp.features import completion, hover, lenses, symbols
    from mdsearch_ls.lsp.workspace_folders import FolderManager

    root = write_documents(tmp_path / "vault")
    manager = FolderManager(embedder=fake_embedder)
    manager.settings = ALL
    try:
        folder = manager.add(root)
        assert folder is not None
        report = await manager.start(folder)
        assert report is not None and "papers/sourdough.pdf" in folder.notes()
        found = await symbols.workspace_symbol(
            manager, types.WorkspaceSymbolParams(query="refrigerator overnight crumb sour"))
        pdf_uri = path_to_uri(root / "papers/sourdough.pdf")
        hit = next(s for s in found if s.location.uri == pdf_uri)
        # Its lines are the converted text's, not the file's: the editor opens it at the top.
        assert hit.location.range.start.line == 0 and hit.name == "Page 3"
        # The editor opened the PDF (its bytes read as text): nothing is offered in it.
        garbage = (root / "papers/sourdough.pdf").read_bytes().decode("latin-1")
        doc = types.TextDocumentIdentifier(uri=pdf_uri)
        at = types.Position(line=3, character=2)
        assert await hover.hover(manager, types.HoverParams(text_document=doc, position=at),
                                 garbage) is None
        assert await completion.completion(
            manager, types.CompletionParams(text_document=doc, position=at), "[[" + garbage
        ) is None
        assert lenses.code_lenses(manager, pdf_uri, garbage) == []
        # A markdown note of the same folder still gets its hover.
        note = types.TextDocumentIdentifier(uri=path_to_uri(root / "notes/garden.md"))
        folder.apply_settings(dataclasses.replace(ALL, hover_min_score=-1.0))
        assert await hover.hover(
            manager, types.HoverParams(text_document=note, position=types.Position(line=2,
                                                                                   character=0)),
            (root / "notes/garden.md").read_text()) is not None
    finally:
        for f in list(manager.folders.values()):
            f.close()


async def test_a_watched_change_of_a_pdf_reindexes_it(
    tmp_path: Path, fake_embedder, touch_later
) -> None:
    from mdsearch_ls.lsp.convert import path_to_uri
    from mdsearch_ls.lsp.features import sync
    from mdsearch_ls.lsp.workspace_folders import FolderManager

    root = write_documents(tmp_path / "vault")
    manager = FolderManager(embedder=fake_embedder)
    manager.settings = Settings(include_formats=("pdf",))
    try:
        folder = manager.add(root)
        assert folder is not None and await manager.start(folder) is not None
        pdf = root / "papers/sourdough.pdf"
        edited = list(PAPER_PAGES)
        edited[3] = ("Results", 0, "A clay baker gave the crispest crust of all the pots.")
        pdf.write_bytes(pdf_bytes(edited))
        touch_later(pdf)
        sync.changed(manager, [path_to_uri(pdf)])
        folder.settled().result(timeout=30)
        _, text = folder.read_note("papers/sourdough.pdf")
        assert "clay baker" in text
        assert "crispest crust" in " ".join(
            c.text for c in folder.ws.manifest.chunks_for("papers/sourdough.pdf"))
        # A format the folder does not read is no change to it.
        assert not manager.service.changed(root / "handbook.docx", True)
    finally:
        for f in list(manager.folders.values()):
            f.close()


def test_a_pdf_past_the_time_limit_keeps_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = tmp_path / "slow.pdf"
    pdf.write_bytes(pdf_bytes(PAPER_PAGES))
    monkeypatch.setattr(formats, "CONVERT_SECONDS", 0.0)
    read = formats.read_document(pdf, "slow.pdf", "pdf", max_file_bytes=2_000_000)
    assert read.text is not None and "wild yeast" in read.text  # page 1
    assert "Page 2" not in read.text
    assert read.warning == ("slow.pdf: only part of it is indexed: converting it took more "
                            "than 0 s (pages 2-4 of 4 left out)")


def test_a_touched_document_is_not_converted_again(
    tmp_path: Path, make_workspace, touch_later, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_documents(tmp_path / "vault")
    ws = make_workspace(root, settings=ALL)
    ws.index()
    calls: list[str] = []
    real = formats._converter
    monkeypatch.setattr(formats, "_converter", lambda fmt: calls.append(fmt) or real(fmt))
    touch_later(root / "papers/sourdough.pdf")  # a checkout, a sync: same bytes, new mtime
    report = ws.index()
    assert calls == [] and report.files_indexed == 0 and report.chunks_embedded == 0
    assert len(ws.manifest.chunks_for("papers/sourdough.pdf")) > 4


def test_a_pdf_titled_by_its_writer_is_titled_by_its_file_name(tmp_path: Path) -> None:
    from mdsearch_ls.engine.notes.chunking import parse_note

    for meta, expected in (("Microsoft Word - draft3.docx", "bread"), ("Bread science",
                                                                         "Bread science")):
        pdf = tmp_path / "bread.pdf"
        pdf.write_bytes(pdf_bytes(PAPER_PAGES[:1], title=meta))
        read = formats.read_document(pdf, "bread.pdf", "pdf", max_file_bytes=2_000_000)
        assert read.text is not None
        note = parse_note(read.text, fallback_title="bread", path="bread.pdf")
        assert note.meta.title == expected
