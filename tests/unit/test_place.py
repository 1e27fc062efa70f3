"""Where indexes live without platformdirs is where platformdirs puts them: a CLI that found
another folder would ask no server and search by itself, and ``mdsearch index`` would build a
second index beside the first."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import platformdirs
import pytest

from mdsearch_ls.engine.index import place


@pytest.mark.parametrize(("xdg", "home"), [
    (None, "/home/ada"),
    (None, "/home/ada/"),
    (None, "/"),
    ("", "/home/ada"),
    ("/var/cache/ada", "/home/ada"),
    ("/var/cache/ada/", "/home/ada"),
    ("relative/cache", "/home/ada"),
    ("  ", "/home/ada"),
    (None, "relative-home"),
    ("/var/cache/ada", None),
    (None, None),
])
def test_the_cache_folder_is_platformdirs_own(monkeypatch: pytest.MonkeyPatch, xdg: str | None,
                                              home: str | None) -> None:
    monkeypatch.delenv("MDSEARCH_CACHE_DIR", raising=False)
    for name, value in (("XDG_CACHE_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        expected = platformdirs.user_cache_dir("mdsearch", appauthor=False)
    except RuntimeError:  # no home platformdirs can find: neither may the shortcut
        assert place._xdg_cache_dir() is None
        return
    assert str(place.cache_root()) == str(platformdirs.user_cache_dir("mdsearch",
                                                                       appauthor=False))
    if sys.platform.startswith("linux"):
        # the usual cases take the shortcut; the unusual ones are left to platformdirs
        taken = place._xdg_cache_dir()
        usual = (xdg is None or xdg == "" or xdg.startswith("/")) and (
            (xdg or "").startswith("/") or (home or "").startswith("/"))
        assert (taken is not None) == usual
        if taken is not None:
            assert taken == expected


def test_mdsearch_cache_dir_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", "~/elsewhere")
    monkeypatch.setenv("HOME", "/home/ada")
    assert str(place.cache_root()) == "/home/ada/elsewhere"


NAMES = ["notes", "My Vault", "ünïcödé notes", "a-!b", "--x--", "..", "a__b..c", "!!!", "",
         "日本語のノート", "tab\tand\nnewline", "x" * 60, "mixed-_.Case9 (copy) [2]"]


@pytest.mark.parametrize("name", NAMES)
def test_the_slug_is_the_regular_expressions(name: str) -> None:
    assert place.slug(name) == re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


@pytest.mark.parametrize("name", [n for n in NAMES if n and "/" not in n and n != ".."])
def test_index_folders_keep_their_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        name: str) -> None:
    """The folder of an index is where every earlier release put it (an index built before
    is found, not built again): the rule as it was written with ``re`` and ``pathlib``."""
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / name
    root.mkdir()
    absolute = root.expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", absolute.name).strip("-") or "root"
    digest = hashlib.sha1(str(absolute).encode()).hexdigest()[:12]
    expected = tmp_path / "cache" / "indexes" / f"{slug[:40]}-{digest}"
    assert place.default_index_dir(root) == expected
    assert place.index_folder(str(root)) == str(expected)
    # found from a folder below, once it holds a manifest; not before
    below = root / "sub" / "deeper"
    below.mkdir(parents=True)
    assert place.find_index_root(below) is None
    expected.mkdir(parents=True)
    (expected / "space.sqlite3").write_bytes(b"")
    assert place.find_index_root(below) == absolute
    assert place.indexed_folder(str(below)) == str(absolute)
