"""CJK keyword search (issue 24): runs of Chinese, Japanese or Korean characters are indexed and
matched as bigrams, so a two-character word inside a longer run is found; Latin text unchanged.
On a real index on disk with the fake embedder; the real model's test is in tests/integration.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.layout import space_name
from mdsearch_ls.engine.notes import cjk
from mdsearch_ls.engine.search.highlight import match_spans, query_terms
from mdsearch_ls.engine.search.keyword import build_match
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, write_note

NOTE = "# 密码安全\n\n如何管理密钥和密码管理器，保护你的账户。\n"


def test_a_run_becomes_bigrams_then_characters_and_latin_stays() -> None:
    assert cjk.expand("管理密钥") == " 管理 理密 密钥 管 理 密 钥 "
    assert cjk.expand("git仓库") == "git 仓库 仓 库 "
    assert cjk.expand("plain English, café") == "plain English, café"
    assert cjk.query_terms("密钥") == ["密钥"]
    assert cjk.query_terms("密码管理器") == ["密码", "码管", "管理", "理器", "密码 码管 管理 理器"]


def test_has_cjk_at_the_edges_of_the_ranges() -> None:
    # Text below U+1100 is answered without the (lazily compiled) pattern; text above it that is
    # not CJK (punctuation, Cyrillic, emoji) still goes through the pattern and says no.
    assert not cjk.has_cjk("") and not cjk.has_cjk("plain English, café")
    assert not cjk.has_cjk("it’s … · “quoted” Привет 🙂")
    assert cjk.has_cjk("\u1100") and cjk.has_cjk("a한b") and cjk.has_cjk("x\U00020000")
    assert not cjk.has_cjk("\u10ff") and not cjk.has_cjk("\u1200")
    assert cjk.CJK_RUN.findall("ab密钥cd한국") == ["密钥", "한국"]


def test_the_match_expression_of_a_cjk_query() -> None:
    assert build_match("密钥") == '"密钥"'
    expr = build_match("密码管理器 backup")
    assert expr is not None and '"密码 码管 管理 理器"' in expr and '"backup"' in expr
    assert build_match("rotate keys") == '"rotate" OR "keys"'


def test_highlights_mark_the_bigrams_inside_a_run() -> None:
    text = "如何管理密钥和密码管理器"
    spans = match_spans(text, query_terms("密钥"))
    assert [text[s:e] for s, e in spans] == ["密钥"]


def _workspace(root: Path, embedder: FakeEmbedder, index: Path) -> Workspace:
    return Workspace.open(root, Settings(), embedder=embedder, index_dir=index)


def test_two_character_words_inside_a_run_are_found(tmp_path: Path) -> None:
    write_note(tmp_path / "v", "安全.md", NOTE)
    write_note(tmp_path / "v", "garden.md", "# Garden\n\nTomatoes need full sun.\n")
    with _workspace(tmp_path / "v", FakeEmbedder(), tmp_path / "idx") as ws:
        ws.index()
        for word in ("密钥", "密码管理器", "账户", "管理", "钥"):
            assert [h.path for h in ws.hits(word, 3, mode="keyword")] == ["安全.md"], word
        assert [h.path for h in ws.hits("tomatoes", 3, mode="keyword")] == ["garden.md"]
        assert ws.hits("密匙", 3, mode="keyword") == []  # a word the note does not hold


def test_an_older_keyword_index_is_converted_without_reembedding(tmp_path: Path) -> None:
    vault, index = tmp_path / "v", tmp_path / "idx"
    write_note(vault, "安全.md", NOTE)
    with _workspace(vault, FakeEmbedder(), index) as ws:
        ws.index()
    # Make it an index of format 1, as an older mdsearch wrote it: runs whole, no format key.
    conn = sqlite3.connect(index / f"{space_name(Settings())}.sqlite3")
    with conn:
        rows = conn.execute("SELECT rowid, title, body FROM chunks_fts").fetchall()
        conn.execute("DELETE FROM chunks_fts")
        for rowid, _title, _body in rows:
            conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                         (rowid, "密码安全", "如何管理密钥和密码管理器，保护你的账户。"))
        conn.execute("DELETE FROM meta WHERE key = 'keywords'")
    conn.close()
    embedder = FakeEmbedder()
    with _workspace(vault, embedder, index) as ws:
        report = ws.index()
        assert report.files_indexed == 0 and embedder.document_calls == 0
        assert [h.path for h in ws.hits("密钥", 3, mode="keyword")] == ["安全.md"]
