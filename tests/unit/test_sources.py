"""Tests for engine.sources: which files are notes, and how they are read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from mdsearch_ls.engine.notes.decoding import ReadResult, read_source
from mdsearch_ls.engine.notes.files import (
    DEFAULT_EXCLUDES,
    MARKDOWN_SUFFIXES,
    SourceFile,
    SourceFilter,
    relpath,
    scan,
)

needs_symlinks = pytest.mark.skipif(
    not hasattr(os, "symlink") or os.name == "nt", reason="symlinks need POSIX here"
)


def write(root: Path, rel: str, content: str | bytes = "# note\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def rels(root: Path, **kwargs) -> list[str]:
    return [f.rel for f in scan(root, **kwargs)]


def all_files(root: Path) -> list[str]:
    """Every regular file (or file symlink) under root, by relative path, without following
    directory symlinks -- the candidates the agreement check runs accepts() on."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            out.append(Path(dirpath, name).relative_to(root).as_posix())
    return sorted(out)


def test_constants_match_the_interface() -> None:
    assert DEFAULT_EXCLUDES == (".git/", "node_modules/", ".obsidian/", ".trash/")
    assert MARKDOWN_SUFFIXES == (".md", ".markdown")


def test_scan_finds_markdown_recursively_sorted(tmp_path: Path) -> None:
    write(tmp_path, "b.md")
    write(tmp_path, "a/z.md")
    write(tmp_path, "a/deep/er/x.markdown")
    write(tmp_path, "README.MD")
    write(tmp_path, "Notes.Markdown")
    write(tmp_path, "not-a-note.txt")
    write(tmp_path, "image.png", b"\x89PNG")
    write(tmp_path, "md")  # no suffix at all
    assert rels(tmp_path) == sorted(
        ["README.MD", "Notes.Markdown", "a/deep/er/x.markdown", "a/z.md", "b.md"]
    )


def test_source_file_fields(tmp_path: Path) -> None:
    p = write(tmp_path, "dir/n.md", "hello")
    (f,) = scan(tmp_path)
    assert isinstance(f, SourceFile)
    assert f.path == p.absolute()
    assert f.path.is_absolute()
    assert f.rel == "dir/n.md"
    assert f.size == 5
    assert f.mtime == pytest.approx(p.stat().st_mtime)


def test_default_excludes(tmp_path: Path) -> None:
    write(tmp_path, "keep.md")
    for d in (".git", "node_modules", ".obsidian", ".trash", "sub/node_modules", "sub/.git"):
        write(tmp_path, f"{d}/x.md")
    assert rels(tmp_path) == ["keep.md"]
    flt = SourceFilter(tmp_path)
    assert not flt.accepts(".obsidian/x.md")
    assert not flt.accepts("sub/node_modules/pkg/readme.md")
    # A file merely named like an excluded directory is still a note.
    write(tmp_path, "node_modules.md")
    assert flt.accepts("node_modules.md")


def test_include_globs(tmp_path: Path) -> None:
    write(tmp_path, "notes/a.md")
    write(tmp_path, "notes/sub/b.md")
    write(tmp_path, "journal/c.md")
    write(tmp_path, "top.md")
    assert rels(tmp_path, include=["notes/"]) == ["notes/a.md", "notes/sub/b.md"]
    assert rels(tmp_path, include=["notes/*.md"]) == ["notes/a.md"]
    assert rels(tmp_path, include=["/*.md"]) == ["top.md"]
    assert rels(tmp_path, include=["notes/**", "journal/**"]) == [
        "journal/c.md",
        "notes/a.md",
        "notes/sub/b.md",
    ]
    # include never widens past the suffix rule
    write(tmp_path, "notes/data.txt")
    assert "notes/data.txt" not in rels(tmp_path, include=["notes/"])


def test_exclude_globs(tmp_path: Path) -> None:
    write(tmp_path, "a.md")
    write(tmp_path, "drafts/b.md")
    write(tmp_path, "x/drafts/c.md")
    write(tmp_path, "x/d.tmp.md")
    write(tmp_path, "archive/old.md")
    write(tmp_path, "archive/keep.md")
    got = rels(tmp_path, exclude=["drafts/", "*.tmp.md", "/archive/old.md"])
    assert got == ["a.md", "archive/keep.md"]


def test_exclude_negation_cannot_reinclude_inside_excluded_dir(tmp_path: Path) -> None:
    write(tmp_path, "archive/keep.md")
    write(tmp_path, "archive/old.md")
    excl = ["archive/", "!archive/keep.md"]
    assert rels(tmp_path, exclude=excl) == []
    assert not SourceFilter(tmp_path, exclude=excl).accepts("archive/keep.md")


def test_root_and_nested_gitignore(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "build/\n*.draft.md\n/private.md\n")
    write(tmp_path, "private.md")
    write(tmp_path, "sub/private.md")  # anchored pattern only hits the root
    write(tmp_path, "build/out.md")
    write(tmp_path, "x.draft.md")
    write(tmp_path, "ok.md")
    write(tmp_path, "sub/.gitignore", "secret/\n!important.draft.md\nlocal.md\n")
    write(tmp_path, "sub/secret/s.md")
    write(tmp_path, "sub/local.md")
    write(tmp_path, "sub/important.draft.md")  # re-included by the deeper file
    write(tmp_path, "sub/other.draft.md")
    write(tmp_path, "local.md")  # the nested rule does not reach up
    got = rels(tmp_path)
    assert got == ["local.md", "ok.md", "sub/important.draft.md", "sub/private.md"]
    flt = SourceFilter(tmp_path)
    assert flt.accepts("sub/important.draft.md")
    assert not flt.accepts("sub/other.draft.md")
    assert not flt.accepts("sub/secret/s.md")


def test_gitignore_refresh(tmp_path: Path) -> None:
    write(tmp_path, "a.md")
    flt = SourceFilter(tmp_path)
    assert flt.accepts("a.md")
    write(tmp_path, ".gitignore", "a.md\n")
    flt.refresh()
    assert not flt.accepts("a.md")


def test_index_dir_under_root_excluded(tmp_path: Path) -> None:
    write(tmp_path, "a.md")
    # Not a dot-folder: those are left out by default anyway (see test_dot_folders.py).
    index_dir = tmp_path / "_mdsearch" / "index"
    write(index_dir, "cache.md")
    write(tmp_path, "_mdsearch/other.md")
    assert rels(tmp_path, index_dir=index_dir) == ["_mdsearch/other.md", "a.md"]
    flt = SourceFilter(tmp_path, index_dir=index_dir)
    assert not flt.accepts("_mdsearch/index/cache.md")
    assert flt.accepts("_mdsearch/other.md")


def test_index_dir_outside_root_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, "a.md")
    write(root, "index/b.md")
    assert rels(root, index_dir=tmp_path / "index") == ["a.md", "index/b.md"]


@needs_symlinks
def test_symlink_to_dir_outside_root_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "vault", tmp_path / "outside"
    write(root, "in.md")
    write(outside, "secret.md")
    write(outside, "x.md")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "file-link.md").symlink_to(outside / "x.md")
    assert rels(root) == ["in.md"]
    flt = SourceFilter(root)
    assert not flt.accepts("link/secret.md")
    assert not flt.accepts("file-link.md")


@needs_symlinks
def test_symlink_loop_terminates(tmp_path: Path) -> None:
    write(tmp_path, "a/n.md")
    (tmp_path / "a" / "up").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a" / "self").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "x").symlink_to(tmp_path / "y")
    (tmp_path / "y").symlink_to(tmp_path / "x")  # a pair of links pointing at each other
    assert rels(tmp_path) == ["a/n.md"]


@needs_symlinks
def test_symlinks_inside_root_are_fine(tmp_path: Path) -> None:
    write(tmp_path, "real/n.md", "hi")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real" / "n.md")
    (tmp_path / "z-linkdir").symlink_to(tmp_path / "real", target_is_directory=True)
    write(tmp_path, "other/m.md")
    (tmp_path / "a-linkdir").symlink_to(tmp_path / "other", target_is_directory=True)
    got = rels(tmp_path)
    # The file link is a note of its own; a directory reached twice is indexed once.
    assert "alias.md" in got
    assert "real/n.md" in got
    assert "z-linkdir/n.md" not in got
    assert sum(r.endswith("/m.md") for r in got) == 1
    assert SourceFilter(tmp_path).accepts("alias.md")


@needs_symlinks
def test_root_given_through_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real, "n.md")
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    (f,) = scan(tmp_path / "via")
    assert f.rel == "n.md"
    assert f.path == tmp_path / "via" / "n.md"
    assert SourceFilter(tmp_path / "via").accepts("n.md")


def test_oversize_skipped_with_named_warning(tmp_path: Path) -> None:
    write(tmp_path, "small.md", "x" * 10)
    write(tmp_path, "notes/big.md", "x" * 3_100_000)
    warnings: list[str] = []
    assert rels(tmp_path, warn=warnings.append) == ["small.md"]
    assert warnings == ["skipped notes/big.md: 3.1 MB exceeds max_file_bytes (2.0 MB)"]
    warnings.clear()
    assert rels(tmp_path, max_file_bytes=5, warn=warnings.append) == []
    assert len(warnings) == 2 and all(w.startswith("skipped ") for w in warnings)

    res = read_source(tmp_path / "notes/big.md", "notes/big.md")
    assert res == ReadResult(None, "", res.warning)
    assert res.warning is not None and "notes/big.md" in res.warning


def test_read_source_plain(tmp_path: Path) -> None:
    raw = "# Title\n\nhéllo\n".encode()
    p = write(tmp_path, "n.md", raw)
    res = read_source(p, "n.md")
    assert res.text == "# Title\n\nhéllo\n"
    assert res.content_hash == hashlib.sha256(raw).hexdigest()
    assert res.warning is None


def test_read_source_nul_bytes_skipped(tmp_path: Path) -> None:
    p = write(tmp_path, "bin/blob.md", b"# looks like markdown\x00\x01\x02")
    res = read_source(p, "bin/blob.md")
    assert res.text is None
    assert res.content_hash == ""
    assert res.warning is not None
    assert "bin/blob.md" in res.warning and "NUL" in res.warning


def test_read_source_invalid_utf8_replaced(tmp_path: Path) -> None:
    raw = b"caf\xe9 au lait\n"  # latin-1, not UTF-8
    p = write(tmp_path, "latin.md", raw)
    res = read_source(p, "latin.md")
    assert res.text == "caf\ufffd au lait\n"
    assert res.content_hash == hashlib.sha256(raw).hexdigest()
    assert res.warning is not None and "latin.md" in res.warning and "UTF-8" in res.warning


def test_read_source_strips_bom(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf---\ntitle: x\n---\n"
    res = read_source(write(tmp_path, "bom.md", raw), "bom.md")
    assert res.text == "---\ntitle: x\n---\n"
    assert res.content_hash == hashlib.sha256(raw).hexdigest()


def test_read_source_missing_file_is_a_warning(tmp_path: Path) -> None:
    res = read_source(tmp_path / "gone.md", "gone.md")
    assert res.text is None and res.content_hash == ""
    assert res.warning is not None and "gone.md" in res.warning


def test_read_source_directory_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    res = read_source(tmp_path / "dir.md", "dir.md")
    assert res.text is None and res.warning is not None and "dir.md" in res.warning


def test_read_source_never_writes(tmp_path: Path) -> None:
    p = write(tmp_path, "n.md", b"caf\xe9")
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    read_source(p, "n.md")
    scan(tmp_path)
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["n.md"]


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        scan(tmp_path / "nope")
    f = write(tmp_path, "file.md")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        scan(f)


def test_relpath(tmp_path: Path) -> None:
    assert relpath(tmp_path, tmp_path / "a" / "b.md") == "a/b.md"
    assert relpath(tmp_path, tmp_path / "a" / ".." / "c.md") == "c.md"
    assert relpath(tmp_path / "vault", tmp_path / "other" / "x.md") is None
    assert relpath(tmp_path / "vault", tmp_path / "vault-2" / "x.md") is None
    assert relpath(tmp_path, tmp_path) == ""


@needs_symlinks
def test_relpath_through_symlinked_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    assert relpath(tmp_path / "via", real / "n.md") == "n.md"


@pytest.mark.parametrize("bad", ["", "/etc/passwd.md", "../up.md", "a/../../b.md"])
def test_accepts_rejects_paths_that_are_not_relative(tmp_path: Path, bad: str) -> None:
    assert not SourceFilter(tmp_path).accepts(bad)


def test_accepts_tolerates_backslashes_and_dot(tmp_path: Path) -> None:
    flt = SourceFilter(tmp_path, exclude=["drafts/"])
    assert flt.accepts("./a/b.md")
    assert flt.accepts("a\\b.md")
    assert not flt.accepts("drafts\\x.md")


def test_accepts_works_for_deleted_files(tmp_path: Path) -> None:
    assert SourceFilter(tmp_path).accepts("never/existed.md")


@pytest.mark.parametrize("with_links", [False, True])
def test_scan_and_accepts_agree(tmp_path: Path, with_links: bool) -> None:
    if with_links and (os.name == "nt" or not hasattr(os, "symlink")):
        pytest.skip("symlinks need POSIX here")
    root = tmp_path / "vault"
    for rel in [
        "a.md", "B.MARKDOWN", "c.txt", "notes/d.md", "notes/drafts/e.md", "notes/f.tmp.md",
        ".obsidian/g.md", "node_modules/x/h.md", "sub/i.md", "sub/cache/j.md",
        "sub/k.draft.md", ".idx/l.md", "deep/er/est/m.markdown", "sub/keep.draft.md",
    ]:  # fmt: skip
        write(root, rel)
    write(root, ".gitignore", "*.draft.md\n")
    write(root, "sub/.gitignore", "cache/\n!keep.draft.md\n")
    if with_links:
        write(tmp_path, "outside/o.md")
        (root / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
        (root / "out.md").symlink_to(tmp_path / "outside" / "o.md")
        (root / "in.md").symlink_to(root / "a.md")
    kwargs = {"include": ["notes/", "sub/", "/*.md", "/B.*", "deep/"],
              "exclude": ["drafts/", "*.tmp.md"], "index_dir": root / ".idx"}  # fmt: skip
    scanned = rels(root, **kwargs)
    flt = SourceFilter(root, **kwargs)
    accepted = [r for r in all_files(root) if flt.accepts(r)]
    assert scanned == accepted
    expected = ["B.MARKDOWN", "a.md", "deep/er/est/m.markdown", "notes/d.md", "sub/i.md",
                "sub/keep.draft.md"]  # fmt: skip
    if with_links:
        expected = sorted([*expected, "in.md"])
    assert scanned == expected
