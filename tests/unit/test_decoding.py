"""How a note's bytes become text, and how often a file that cannot be a note is reported.

A byte-order mark decides the encoding (Windows editors save UTF-16 with one); a file that
decodes to mostly replacement or control characters is binary whatever its name; and a skipped
file is reported once per change of it, not on every scan (every CLI ``search`` scans).
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.notes.decoding import looks_binary, read_source
from mdsearch_ls.engine.notes.files import scan
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, write_note

NOTE = "---\ntitle: Grüße aus Köln\n---\n# Überblick\n\nDie Straßenbahn fährt um 7 Uhr. 東京 ✓\n"


def no_nul_binary(n: int = 1500, seed: int = 7) -> bytes:
    """Random bytes without a single NUL: what a renamed image or archive can look like."""
    rng = random.Random(seed)
    return bytes(rng.randrange(1, 256) for _ in range(n))


@pytest.mark.parametrize("codec,bom", [
    ("utf-8", b"\xef\xbb\xbf"),
    ("utf-16-le", b"\xff\xfe"),
    ("utf-16-be", b"\xfe\xff"),
    ("utf-32-le", b"\xff\xfe\x00\x00"),
    ("utf-32-be", b"\x00\x00\xfe\xff"),
])
def test_a_byte_order_mark_decides_the_encoding(tmp_path: Path, codec: str, bom: bytes) -> None:
    raw = bom + NOTE.encode(codec)
    path = tmp_path / "n.md"
    path.write_bytes(raw)
    res = read_source(path, "n.md")
    assert res.text == NOTE  # the mark itself is gone, so front matter is recognised
    assert res.warning is None
    assert res.content_hash == hashlib.sha256(raw).hexdigest()


def test_utf16_with_a_broken_tail_keeps_the_text_and_warns(tmp_path: Path) -> None:
    raw = b"\xff\xfe" + "# Notiz\n\nText.\n".encode("utf-16-le") + b"\x41"  # an odd last byte
    path = tmp_path / "n.md"
    path.write_bytes(raw)
    res = read_source(path, "n.md")
    assert res.text is not None and res.text.startswith("# Notiz\n\nText.\n")
    assert res.warning is not None and "n.md" in res.warning and "UTF-16-LE" in res.warning


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_mark_is_read_as_text(tmp_path: Path, codec: str) -> None:
    """Some Windows tools save UTF-16 without a byte-order mark: NULs at every other byte and a
    clean decode say what it is (it was called binary, issue 27)."""
    path = tmp_path / "n.md"
    path.write_bytes(NOTE.encode(codec))
    res = read_source(path, "n.md")
    assert res.text == NOTE and res.warning is None


def test_nul_bytes_that_are_not_utf16_are_still_binary(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_bytes(bytes(range(256)) * 8)  # NULs, but not at every other byte
    assert read_source(path, "n.md").text is None
    path.write_bytes("# Notes\n\n".encode("utf-16-le") + b"\x00\xd8" * 50)  # lone surrogates
    res = read_source(path, "n.md")
    assert res.text is None and "NUL" in (res.warning or "")


def test_a_binary_without_nul_bytes_is_skipped_by_name(tmp_path: Path) -> None:
    raw = no_nul_binary()
    assert b"\x00" not in raw
    path = tmp_path / "attachments" / "photo.md"
    path.parent.mkdir()
    path.write_bytes(raw)
    res = read_source(path, "attachments/photo.md")
    assert res.text is None and res.content_hash == ""
    assert res.warning is not None
    assert "attachments/photo.md" in res.warning and "binary" in res.warning


@pytest.mark.parametrize("raw", [
    "Café crème, déjà vu, naïve façade, Zürich, São Paulo.\n".encode("cp1252") * 20,
    b"caf\xe9",  # one bad byte in a four-letter note
    "Ünïcödé text with a form feed\x0cand tabs\tis text\n".encode() * 10,
])
def test_legacy_encodings_and_few_bad_bytes_stay_text(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "n.md"
    path.write_bytes(raw)
    res = read_source(path, "n.md")
    assert res.text is not None and res.content_hash


def test_looks_binary_threshold() -> None:
    assert looks_binary(no_nul_binary().decode("utf-8", errors="replace"))
    assert looks_binary("\x01\x02\x03\x04 text")
    assert not looks_binary("plain text " * 10 + "\ufffd" * 3)
    assert not looks_binary("")


@pytest.fixture
def odd_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write_note(root, "plain.md", "# Plain\n\nA plain note about gardening tools.\n")
    (root / "windows.md").write_bytes(
        b"\xff\xfe" + "# Windows note\n\nSaved by Notepad as UTF-16 with the word "
        "zanzibar.\n".encode("utf-16-le"))
    (root / "photo.md").write_bytes(no_nul_binary())
    (root / "nul.md").write_bytes(b"# x\x00\x01")
    write_note(root, "huge.md", "x" * 3000)
    return root


def test_a_scan_reports_each_skipped_file_once_per_change(odd_vault: Path, tmp_path: Path) -> None:
    settings = Settings(max_file_bytes=2000)
    with Workspace.open(odd_vault, settings, embedder=FakeEmbedder(),
                        index_dir=tmp_path / "idx") as ws:
        first = ws.index()
        assert set(ws.manifest.files()) == {"plain.md", "windows.md"}
        assert ws.hits("zanzibar", 1, mode="keyword")[0].path == "windows.md"
        named = {name: [w for w in first.warnings if name in w]
                 for name in ("photo.md", "nul.md", "huge.md")}
        assert all(len(w) == 1 for w in named.values()), first.warnings
        assert "binary" in named["photo.md"][0] and "NUL" in named["nul.md"][0]
        assert "max_file_bytes" in named["huge.md"][0]
        assert first.files_skipped == 3
        # Reported once, but always listed where a user looks for a missing note.
        listed = {s["path"]: s["reason"] for s in ws.status()["skipped"]}
        assert set(listed) == {"photo.md", "nul.md", "huge.md"}
        assert "binary" in listed["photo.md"]
        # Every later scan (a CLI search runs one) is quiet about them and reads none of them.
        second = ws.index()
        assert second.warnings == [] and second.files_skipped == 3
        # A change is a new chance, and a new warning if it still is not a note.
        (odd_vault / "photo.md").write_bytes(no_nul_binary(seed=8))
        os.utime(odd_vault / "photo.md", (2e9, 2e9))
        third = ws.index()
        assert len(third.warnings) == 1 and "photo.md" in third.warnings[0]
        # Fixed: indexed, and its record forgotten (breaking it again warns again).
        write_note(odd_vault, "photo.md", "# Photo\n\nNow a real note.\n", mtime=2.1e9)
        assert ws.index().files_indexed == 1
        assert "photo.md" not in ws.manifest.skipped()
        (odd_vault / "nul.md").unlink()  # gone: forgotten too
        ws.index()
        assert set(ws.manifest.skipped()) == {"huge.md"}


def test_a_save_of_a_skipped_file_warns_once_per_change(odd_vault: Path, tmp_path: Path) -> None:
    with Workspace.open(odd_vault, Settings(max_file_bytes=2000),
                        embedder=FakeEmbedder(), index_dir=tmp_path / "idx") as ws:
        ws.index()
        # An editor's save of an unchanged file (the server's update path) stays quiet...
        assert ws.update(["huge.md"]).warnings == []
        # ... a changed one warns, once.
        write_note(odd_vault, "huge.md", "y" * 2500, mtime=2e9)
        assert len(ws.update(["huge.md"]).warnings) == 1
        assert ws.index().warnings == []


def test_scan_without_a_skip_callback_still_warns(odd_vault: Path) -> None:
    warnings: list[str] = []
    found = scan(odd_vault, max_file_bytes=2000, warn=warnings.append)
    assert [f.rel for f in found] == ["nul.md", "photo.md", "plain.md", "windows.md"]
    assert len(warnings) == 1 and "huge.md" in warnings[0]
