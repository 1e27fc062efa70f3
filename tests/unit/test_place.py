"""Where indexes live without platformdirs is where platformdirs puts them: a CLI that found
another folder would ask no server and search by itself, and ``mdsearch index`` would build a
second index beside the first."""

from __future__ import annotations

import sys

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
