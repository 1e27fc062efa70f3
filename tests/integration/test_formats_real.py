"""Documents beside the notes on the real model, as people meet them: each format found by a
paraphrase (no word of the query's key terms in common where it could be avoided), the CLI's
text and JSON naming a PDF hit's page, and the MCP server's search and ``read_section`` handing
out the converted section."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from mdsearch_ls.config import DOCUMENT_FORMATS, Settings
from mdsearch_ls.engine.search.requests import SearchRequest
from mdsearch_ls.engine.workspace import Workspace
from tests.documents import crafted_pdf, formats_or_skip, write_documents, write_malformed
from tests.integration.conftest import run_cli

pytestmark = pytest.mark.slow

# query -> (path, section title) of the answer
PARAPHRASES = {
    "leaving the shaped dough in the fridge until morning": (
        "papers/sourdough.pdf", "Page 3"),
    "how much vacation does each employee get": ("handbook.docx", "Holidays"),
    "locating a puncture in a bicycle tube": ("saved/flat-tyre.html", "Finding the hole"),
    "subscribers who quit during their first weeks": ("churn.ipynb", "Customer churn"),
    "when to cut back rose bushes": ("allotment.org", "Roses"),
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    formats_or_skip()
    root = write_documents(tmp_path_factory.mktemp("formats") / "vault")
    write_malformed(root / "bad")
    return root


def test_each_format_is_found_by_a_paraphrase(vault: Path, tmp_path: Path,
                                              real_embedder: object) -> None:
    settings = Settings(include_formats=DOCUMENT_FORMATS)
    with Workspace.open(vault, settings, embedder=real_embedder,
                        index_dir=tmp_path / "idx") as ws:
        report = ws.index()
        assert report.files_skipped == 9  # the malformed set, each named in a warning
        for query, (path, title) in PARAPHRASES.items():
            hits = ws.search(SearchRequest.build(query, k=3, mode="semantic")).hits
            assert (hits[0].path, hits[0].title) == (path, title), (query, hits[:2])
        page = ws.search(SearchRequest.build(next(iter(PARAPHRASES)), k=1)).hits[0]
        assert page.page == 3


def test_the_cli_names_a_pdf_hit_by_its_page(vault: Path, tmp_path: Path) -> None:
    query = "leaving the shaped dough in the fridge until morning"
    cache = tmp_path / "cache"
    first = run_cli("search", query, "--root", str(vault), "--include-formats", "all",
                    "--json", "-k", "2", cache=cache)
    assert first.returncode == 0, first.stderr
    best = json.loads(first.stdout)["results"][0]
    assert (best["path"], best["page"], best["format"]) == ("papers/sourdough.pdf", 3, "pdf")
    assert "bad/scanned.pdf" in first.stderr and "no OCR" in first.stderr
    # Without the flag a command keeps the formats the index was built with ...
    text = run_cli("search", query, "-k", "1", cache=cache, cwd=vault)
    assert text.returncode == 0, text.stderr
    head = text.stdout.splitlines()[0]
    assert head.startswith(" 1. ") and "sourdough.pdf  (page 3, similarity " in head, head
    # ... and "none" turns them off: the documents leave the index, the notes stay.
    off = run_cli("search", query, "--include-formats", "none", "--json", "-k", "5",
                  cache=cache, cwd=vault)
    assert off.returncode == 0, off.stderr
    paths = {h["path"] for h in json.loads(off.stdout)["results"]}
    assert paths and all(p.endswith(".md") for p in paths), paths


def test_mcp_search_and_read_section_hand_out_the_converted_section(
    vault: Path, tmp_path: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
    from mcp_harness import start

    client = start(tmp_path, [vault], "--include-formats", "pdf,docx")
    try:
        client.wait_ready()
        found = client.call("search_markdown", {
            "query": "leaving the shaped dough in the fridge until morning", "limit": 2})
        best = found.structured_content["results"][0]
        assert best["page"] == 3 and best["path"].endswith("papers/sourdough.pdf"), best
        assert "refrigerator overnight" in best["text"]
        section = client.call("read_section", {"path": best["path"],
                                               "start_line": best["start_line"],
                                               "end_line": best["end_line"]})
        assert not section.is_error, section.content
        read = section.structured_content
        assert "refrigerator overnight" in read["text"] and "%PDF" not in read["text"]
        assert read["heading_path"].endswith("Overnight proof (p. 3) > Page 3")
        # A format the server was not told to read is no note to it.
        refused = client.call("read_section", {"path": "churn.ipynb"})
        assert refused.is_error
        # A search at the prompt, not told the formats, asks this server, which holds the index
        # with the ones it was started with, and prints its PDF hit by its page.
        query = "leaving the shaped dough in the fridge until morning"
        through = run_cli("search", query, "-k", "2", cache=tmp_path / "cache", cwd=vault)
        assert through.returncode == 0, through.stderr
        assert "sourdough.pdf  (page 3" in through.stdout
        told = run_cli("search", query, "-k", "2", "--include-formats", "none",
                       cache=tmp_path / "cache", cwd=vault)  # another index than the held one
        assert told.returncode == 2 and "other settings (include_formats)" in told.stderr
    finally:
        client.close()


def test_a_crafted_pdf_is_refused_before_its_pages_are_parsed(tmp_path: Path) -> None:
    """Two crafted PDFs beside a note: 370,000 empty pages in 36 MB (pypdf alone parsed 37 s
    and 425 MB before its own page limit refused it), and 99,000 under a tree that declares one
    (30 s, every page listed and read for text). Each is refused by what it is, in seconds."""
    formats_or_skip()
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# Note\n\nA plain note beside the documents.\n")
    (vault / "huge.pdf").write_bytes(crafted_pdf(370_000))
    (vault / "lying.pdf").write_bytes(crafted_pdf(99_000, declared=1))
    t0 = time.monotonic()
    done = run_cli("index", str(vault), "--include-formats", "pdf", cache=tmp_path / "cache")
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    said = {name: line for line in done.stderr.splitlines()
            for name in ("huge.pdf", "lying.pdf") if f"skipped {name}:" in line}
    assert "370,743 objects" in said.get("huge.pdf", ""), done.stderr
    assert "more than 10,000 pages" in said.get("lying.pdf", ""), done.stderr
    assert took < 30, took  # (67 s before, for the two)
